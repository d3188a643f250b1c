package imagebuild

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/pem"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// File is one entry of an image layer.
type File struct {
	// Path is absolute ("/etc/passwd").
	Path string
	// Mode holds the permission bits (and the sticky bit for /tmp).
	Mode int64
	// UID and GID own the entry; 0 unless it must be writable by User.
	UID, GID int
	// Dir marks a directory; Body is then empty.
	Dir  bool
	Body []byte
}

// Passwd is /etc/passwd of the images: root (which owns the files) and the
// user the images run as, with no login shell.
func Passwd() []byte {
	return fmt.Appendf(nil, "root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:/:/sbin/nologin\n", UserName, User, User, UserName)
}

// Group is /etc/group of the images.
func Group() []byte {
	return fmt.Appendf(nil, "root:x:0:\n%s:x:%d:\n", UserName, User)
}

// CACerts returns the PEM bundle baked in at CACertsPath: the Mozilla NSS
// roots of golang.org/x/crypto/x509roots/fallback, at the version go.mod
// pins (so the bundle, like everything else in the image, is decided by the
// commit, not by the building machine). Roots the NSS store trusts only with
// a constraint a PEM file cannot carry (distrust after a date) are left out;
// skipped says how many.
func CACerts() (pemBundle []byte, n, skipped int) {
	var buf bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			skipped++
			continue
		}
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
		n++
	}
	return buf.Bytes(), n, skipped
}

// BaseFiles are the files every image shares (one layer, the same digest in
// both images and on both platforms): passwd and group for User, the CA
// bundle, and a world-writable /tmp.
func BaseFiles() []File {
	certs, _, _ := CACerts()
	return []File{
		{Path: "/etc/passwd", Mode: 0o644, Body: Passwd()},
		{Path: "/etc/group", Mode: 0o644, Body: Group()},
		{Path: CACertsPath, Mode: 0o644, Body: certs},
		{Path: "/tmp", Mode: 0o1777, Dir: true},
	}
}

// AppFiles are the image's own files: the binary, the default
// configuration and the data directory owned by User.
func (im Image) AppFiles(binary, config []byte) []File {
	fs := []File{
		{Path: im.BinaryPath(), Mode: 0o755, Body: binary},
		{Path: im.ConfigPath(), Mode: 0o644, Body: config},
	}
	if im.DataDir != "" {
		fs = append(fs, File{Path: im.DataDir, Mode: 0o755, Dir: true, UID: User, GID: User})
	}
	return fs
}

// WriteFiles writes files under dir, as they would be unpacked from a
// layer (owners aside: COPY --chown sets those in the Dockerfile).
func WriteFiles(dir string, files []File) error {
	for _, f := range files {
		p := filepath.Join(dir, filepath.FromSlash(f.Path))
		mode := os.FileMode(f.Mode & 0o777)
		if f.Mode&0o1000 != 0 {
			mode |= os.ModeSticky
		}
		if f.Dir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		} else {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, f.Body, mode); err != nil {
				return err
			}
		}
		// Chmod, not the mode given above: the umask must not narrow it.
		if err := os.Chmod(p, mode); err != nil {
			return err
		}
	}
	return nil
}

// TarLayer writes files as an uncompressed layer tar: entries sorted by
// path, each missing parent directory added (root-owned, 0755), every
// modification time set to mtime and no user or group names, so the bytes
// depend on nothing but the arguments.
func TarLayer(files []File, mtime time.Time) ([]byte, error) {
	byPath := map[string]File{}
	for _, f := range files {
		if !path.IsAbs(f.Path) || path.Clean(f.Path) != f.Path {
			return nil, fmt.Errorf("layer path %q is not absolute and clean", f.Path)
		}
		if _, dup := byPath[f.Path]; dup {
			return nil, fmt.Errorf("layer path %q given twice", f.Path)
		}
		byPath[f.Path] = f
		for d := path.Dir(f.Path); d != "/"; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = File{Path: d, Mode: 0o755, Dir: true}
			}
		}
	}
	paths := make([]string, 0, len(byPath))
	for p := range byPath {
		paths = append(paths, p)
	}
	sort.Strings(paths)

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime = mtime.UTC().Truncate(time.Second)
	for _, p := range paths {
		f := byPath[p]
		h := &tar.Header{
			Name:    strings.TrimPrefix(p, "/"),
			Mode:    f.Mode,
			Uid:     f.UID,
			Gid:     f.GID,
			ModTime: mtime,
			Format:  tar.FormatPAX,
		}
		if f.Dir {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.Body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Gzip compresses a layer with a header that carries no name and no time,
// at the default level of the standard library's compress/gzip (whose
// output is fixed for given input and level).
func Gzip(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
