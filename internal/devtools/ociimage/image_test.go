package ociimage_test

import (
	"bytes"
	"crypto/x509"
	"debug/buildinfo"
	"debug/elf"
	"encoding/pem"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/otelcol-loop/otelcol-loop/internal/devtools/ociimage"
	"github.com/otelcol-loop/otelcol-loop/internal/imagebuild"
)

// wantLabels are the labels and annotations every image of b must carry:
// source, the ocb manifest's version, the commit and its time.
func wantLabels(t *testing.T, root string, rev ociimage.Revision, name string) map[string]string {
	t.Helper()
	im, err := imagebuild.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	dist, err := im.ReadDist(root)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		imagebuild.LabelSource:      imagebuild.Source,
		imagebuild.LabelVersion:     dist.Version,
		imagebuild.LabelRevision:    rev.Commit,
		imagebuild.LabelCreated:     rev.Time.Format(time.RFC3339),
		imagebuild.LabelTitle:       name,
		imagebuild.LabelDescription: dist.Description,
		imagebuild.LabelLicenses:    "Apache-2.0",
	}
}

// TestIndexHoldsEveryPlatform: each image is one OCI index with one
// manifest per platform, annotated like its images.
func TestIndexHoldsEveryPlatform(t *testing.T) {
	root, rev, sum := images(t)
	if got, want := len(sum.Images), len(imagebuild.Images); got != want {
		t.Fatalf("%d images built, want %d", got, want)
	}
	for _, b := range sum.Images {
		t.Run(b.Name, func(t *testing.T) {
			idx := index(t, b)
			mt, err := idx.MediaType()
			if err != nil || mt != types.OCIImageIndex {
				t.Errorf("index media type %q (%v), want %q", mt, err, types.OCIImageIndex)
			}
			m, err := idx.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(m.Annotations, wantLabels(t, root, rev, b.Name)) {
				t.Errorf("index annotations %v, want %v", m.Annotations, wantLabels(t, root, rev, b.Name))
			}
			var got []string
			for _, d := range m.Manifests {
				if d.MediaType != types.OCIManifestSchema1 || d.Platform == nil {
					t.Errorf("manifest %s: media type %q, platform %v", d.Digest, d.MediaType, d.Platform)
					continue
				}
				got = append(got, d.Platform.OS+"/"+d.Platform.Architecture+"/"+d.Platform.Variant)
			}
			var want []string
			for _, p := range imagebuild.Platforms {
				want = append(want, p.OS+"/"+p.Arch+"/"+p.Variant)
			}
			if !slices.Equal(got, want) {
				t.Errorf("platforms %v, want %v", got, want)
			}
		})
	}
}

// TestImageConfigDeclaresUserEntrypointPortsLabels: the config of every
// platform image says what the image declares: non-root user 10001, the
// binary as entrypoint, the baked configuration as default arguments, the
// OTLP and health ports, the OCI labels, the commit time.
func TestImageConfigDeclaresUserEntrypointPortsLabels(t *testing.T) {
	root, rev, sum := images(t)
	for _, b := range sum.Images {
		for _, bp := range b.Platforms {
			t.Run(b.Name+"/"+bp.Platform, func(t *testing.T) {
				p := platformOf(t, bp.Platform)
				img := platformImage(t, index(t, b), p)
				cf, err := img.ConfigFile()
				if err != nil {
					t.Fatal(err)
				}
				c := cf.Config
				checks := []struct {
					what      string
					got, want any
				}{
					{"os", cf.OS, p.OS},
					{"architecture", cf.Architecture, p.Arch},
					{"variant", cf.Variant, p.Variant},
					{"created", cf.Created.UTC(), rev.Time},
					{"user", c.User, "10001"},
					{"entrypoint", c.Entrypoint, []string{"/" + b.Name}},
					{"cmd", c.Cmd, []string{"--config", "/etc/" + b.Name + "/config.yaml"}},
					{"exposed ports", slices.Sorted(maps.Keys(c.ExposedPorts)), []string{"13133/tcp", "4317/tcp", "4318/tcp"}},
					{"labels", c.Labels, wantLabels(t, root, rev, b.Name)},
					{"layers", len(cf.RootFS.DiffIDs), 2},
					{"history", len(cf.History), 2},
				}
				for _, ck := range checks {
					if fmt.Sprint(ck.got) != fmt.Sprint(ck.want) {
						t.Errorf("%s: %v, want %v", ck.what, ck.got, ck.want)
					}
				}
				for i, h := range cf.History {
					if !h.Created.Equal(rev.Time) {
						t.Errorf("history[%d] created %v, want the commit time %v", i, h.Created, rev.Time)
					}
				}
				m, err := img.Manifest()
				if err != nil {
					t.Fatal(err)
				}
				if !maps.Equal(m.Annotations, wantLabels(t, root, rev, b.Name)) {
					t.Errorf("manifest annotations %v", m.Annotations)
				}
				if m.Config.MediaType != types.OCIConfigJSON {
					t.Errorf("config media type %q", m.Config.MediaType)
				}
				for _, l := range m.Layers {
					if l.MediaType != types.OCILayer {
						t.Errorf("layer %s media type %q, want %q", l.Digest, l.MediaType, types.OCILayer)
					}
				}
				// The summary's size is what a pull transfers.
				if size, err := ociimage.ImageSize(img); err != nil || size != bp.Size {
					t.Errorf("size %d (%v), summary says %d", size, err, bp.Size)
				}
			})
		}
	}
}

// TestImageFiles: the layers hold passwd and group entries for the user, a
// CA bundle that parses, the binary (root-owned, executable), the baked
// configuration byte for byte, the data directory owned by the user, and
// every timestamp is the commit time.
func TestImageFiles(t *testing.T) {
	root, rev, sum := images(t)
	_, nCerts, _ := imagebuild.CACerts()
	for _, b := range sum.Images {
		im, err := imagebuild.Lookup(b.Name)
		if err != nil {
			t.Fatal(err)
		}
		wantConfig, err := os.ReadFile(filepath.Join(root, im.Config))
		if err != nil {
			t.Fatal(err)
		}
		for _, bp := range b.Platforms {
			t.Run(b.Name+"/"+bp.Platform, func(t *testing.T) {
				fs := files(t, platformImage(t, index(t, b), platformOf(t, bp.Platform)))
				get := func(p string) entry {
					t.Helper()
					e, ok := fs[p]
					if !ok {
						t.Fatalf("%s missing from the image", p)
					}
					return e
				}
				if !strings.Contains(string(get("/etc/passwd").body), ":x:10001:10001:") {
					t.Errorf("/etc/passwd has no entry for 10001:\n%s", get("/etc/passwd").body)
				}
				if !strings.Contains(string(get("/etc/group").body), ":x:10001:") {
					t.Errorf("/etc/group has no group 10001:\n%s", get("/etc/group").body)
				}
				certs := get("/etc/ssl/certs/ca-certificates.crt").body
				n := 0
				for rest := certs; ; {
					var blk *pem.Block
					if blk, rest = pem.Decode(rest); blk == nil {
						if len(bytes.TrimSpace(rest)) != 0 {
							t.Errorf("CA bundle: %d bytes after the last certificate", len(rest))
						}
						break
					}
					if _, err := x509.ParseCertificate(blk.Bytes); err != nil {
						t.Errorf("CA bundle certificate %d: %v", n, err)
					}
					n++
				}
				// The NSS store holds well over a hundred roots; a bundle much
				// smaller than that would fail TLS to common endpoints.
				if n != nCerts || n < 100 {
					t.Errorf("CA bundle holds %d certificates, want %d (and at least 100)", n, nCerts)
				}
				bin := get(im.BinaryPath())
				if bin.hdr.Mode != 0o755 || bin.hdr.Uid != 0 || bin.layer != 1 {
					t.Errorf("%s: mode %o uid %d layer %d, want 755, root, the app layer", im.BinaryPath(), bin.hdr.Mode, bin.hdr.Uid, bin.layer)
				}
				if cfg := get(im.ConfigPath()); !bytes.Equal(cfg.body, wantConfig) {
					t.Errorf("%s differs from %s", im.ConfigPath(), im.Config)
				}
				if im.DataDir != "" {
					d := get(im.DataDir)
					if !d.hdr.FileInfo().IsDir() || d.hdr.Uid != imagebuild.User || d.hdr.Gid != imagebuild.User {
						t.Errorf("%s: dir %v owner %d:%d, want a directory owned by %d", im.DataDir, d.hdr.FileInfo().IsDir(), d.hdr.Uid, d.hdr.Gid, imagebuild.User)
					}
				}
				for p, e := range fs {
					if !e.hdr.ModTime.Equal(rev.Time) {
						t.Errorf("%s: time %v, want the commit time %v", p, e.hdr.ModTime, rev.Time)
					}
					if e.hdr.Uid != 0 && p != im.DataDir {
						t.Errorf("%s owned by %d: only %s may belong to the user", p, e.hdr.Uid, im.DataDir)
					}
				}
			})
		}
	}
}

// TestBinaryIsStaticForItsPlatform: the binary taken from each platform's
// layer is an ELF for that architecture, static (no interpreter), built
// without cgo and with trimmed paths, and names no directory of this
// machine.
func TestBinaryIsStaticForItsPlatform(t *testing.T) {
	root, _, sum := images(t)
	machine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for _, b := range sum.Images {
		im, err := imagebuild.Lookup(b.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, bp := range b.Platforms {
			t.Run(b.Name+"/"+bp.Platform, func(t *testing.T) {
				p := platformOf(t, bp.Platform)
				bin := files(t, platformImage(t, index(t, b), p))[im.BinaryPath()].body
				f, err := elf.NewFile(bytes.NewReader(bin))
				if err != nil {
					t.Fatalf("%s is not ELF: %v", im.BinaryPath(), err)
				}
				if want, ok := machine[p.Arch]; !ok || f.Machine != want {
					t.Errorf("ELF machine %v, want %v", f.Machine, want)
				}
				for _, prog := range f.Progs {
					if prog.Type == elf.PT_INTERP {
						t.Errorf("dynamically linked (PT_INTERP): a scratch image has no loader")
					}
				}
				info, err := buildinfo.Read(bytes.NewReader(bin))
				if err != nil {
					t.Fatal(err)
				}
				settings := map[string]string{}
				for _, s := range info.Settings {
					settings[s.Key] = s.Value
				}
				for k, want := range map[string]string{"GOOS": p.OS, "GOARCH": p.Arch, "CGO_ENABLED": "0", "-trimpath": "true"} {
					if settings[k] != want {
						t.Errorf("build setting %s=%q, want %q", k, settings[k], want)
					}
				}
				if _, vcs := settings["vcs.revision"]; vcs {
					t.Errorf("binary carries a VCS stamp; the revision belongs in the label only")
				}
				if bytes.Contains(bin, []byte(root)) {
					t.Errorf("binary contains the repository path %s", root)
				}
				if !strings.HasSuffix(info.Path, "/"+b.Name) {
					t.Errorf("binary main package %q is not %s's", info.Path, b.Name)
				}
			})
		}
	}
}
