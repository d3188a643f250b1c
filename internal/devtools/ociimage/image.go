// Package ociimage assembles the images internal/imagebuild declares into
// OCI image indexes (`make image`): layouts, docker tarballs and a summary
// of their digests.
package ociimage

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/otelcol-loop/otelcol-loop/internal/imagebuild"
)

// Revision is the commit the images are built from.
type Revision struct {
	// Commit is the commit id, with "-dirty" appended when tracked files
	// differ from it.
	Commit string
	// Time is the commit time (or $SOURCE_DATE_EPOCH when set): the
	// creation time of the images and the time of every file in them.
	Time time.Time
}

// GitRevision reads the revision of the repository at root.
func GitRevision(root string) (Revision, error) {
	out, err := exec.Command("git", "-C", root, "log", "-1", "--format=%H %ct").Output()
	if err != nil {
		return Revision{}, fmt.Errorf("reading the commit (git log): %w", err)
	}
	commit, ct, ok := strings.Cut(strings.TrimSpace(string(out)), " ")
	if !ok {
		return Revision{}, fmt.Errorf("git log printed %q", out)
	}
	secs, err := strconv.ParseInt(ct, 10, 64)
	if err != nil {
		return Revision{}, fmt.Errorf("commit time %q: %w", ct, err)
	}
	if sde := os.Getenv("SOURCE_DATE_EPOCH"); sde != "" {
		if secs, err = strconv.ParseInt(sde, 10, 64); err != nil {
			return Revision{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", sde, err)
		}
	}
	// Exit status 1 means tracked files differ from the commit.
	if err := exec.Command("git", "-C", root, "diff", "--quiet", "HEAD", "--").Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			return Revision{}, fmt.Errorf("git diff: %w", err)
		}
		commit += "-dirty"
	}
	return Revision{Commit: commit, Time: time.Unix(secs, 0).UTC()}, nil
}

// Options say what Build builds and where.
type Options struct {
	// Root is the repository root.
	Root string
	// Out is the output directory (the repository's _build/): binaries in
	// bin/<os>_<arch>/, OCI layouts in oci/<image>/, docker-loadable
	// tarballs in docker/, and the summary images.json.
	Out string
	// Repository prefixes the image names (default DefaultRepository).
	Repository string
	// Revision labels the images and fixes their timestamps.
	Revision Revision
	// Images to build (default Images).
	Images []imagebuild.Image
	// Logf, when set, is told each step and how long it took.
	Logf func(format string, args ...any)
}

// Summary is what Build wrote, also saved as images.json in Out.
type Summary struct {
	Revision string    `json:"revision"`
	Created  time.Time `json:"created"`
	Images   []Built   `json:"images"`
}

// Built is one image index.
type Built struct {
	Name string `json:"name"`
	// Ref is repository/name:version.
	Ref     string `json:"ref"`
	Version string `json:"version"`
	// Digest is the image index's digest: what `name@digest` pulls.
	Digest string `json:"digest"`
	// Layout is the OCI layout directory, relative to Out.
	Layout    string          `json:"layout"`
	Platforms []BuiltPlatform `json:"platforms"`
}

// BuiltPlatform is one platform's image of an index.
type BuiltPlatform struct {
	Platform string `json:"platform"`
	// Digest is the platform image manifest's digest.
	Digest string `json:"digest"`
	// Size is the compressed size: manifest, config and layers.
	Size int64 `json:"size"`
	// Binary is the cross-compiled binary (relative to Out).
	Binary string `json:"binary"`
	// Tarball is the `docker load` tarball (relative to Out).
	Tarball string `json:"tarball"`
}

// SummaryFile is the name of the summary in Out.
const SummaryFile = "images.json"

// ReadSummary reads the summary a build left in out.
func ReadSummary(out string) (Summary, error) {
	var s Summary
	b, err := os.ReadFile(filepath.Join(out, SummaryFile))
	if err != nil {
		return s, err
	}
	if err := json.Unmarshal(b, &s); err != nil {
		return s, fmt.Errorf("%s: %w", SummaryFile, err)
	}
	return s, nil
}

// Build cross-compiles every image's binary for every platform and writes
// the image indexes, their OCI layouts and docker tarballs under o.Out.
func Build(ctx context.Context, o Options) (Summary, error) {
	if o.Repository == "" {
		o.Repository = imagebuild.DefaultRepository
	}
	if o.Images == nil {
		o.Images = imagebuild.Images
	}
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	sum := Summary{Revision: o.Revision.Commit, Created: o.Revision.Time}

	base, err := layer(imagebuild.BaseFiles(), o.Revision.Time)
	if err != nil {
		return sum, fmt.Errorf("base layer: %w", err)
	}
	for _, im := range o.Images {
		dist, err := im.ReadDist(o.Root)
		if err != nil {
			return sum, err
		}
		config, err := os.ReadFile(filepath.Join(o.Root, im.Config))
		if err != nil {
			return sum, fmt.Errorf("the configuration baked into %s: %w", im.Name, err)
		}
		ref := strings.TrimSuffix(o.Repository, "/") + "/" + im.Name + ":" + dist.Version
		tag, err := name.NewTag(ref)
		if err != nil {
			return sum, fmt.Errorf("image name %q: %w", ref, err)
		}
		labels := map[string]string{
			imagebuild.LabelSource:      imagebuild.Source,
			imagebuild.LabelVersion:     dist.Version,
			imagebuild.LabelRevision:    o.Revision.Commit,
			imagebuild.LabelCreated:     o.Revision.Time.Format(time.RFC3339),
			imagebuild.LabelTitle:       im.Name,
			imagebuild.LabelDescription: dist.Description,
			imagebuild.LabelLicenses:    "Apache-2.0",
		}
		built := Built{Name: im.Name, Ref: ref, Version: dist.Version, Layout: filepath.Join("oci", im.Name)}
		idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
		for _, p := range imagebuild.Platforms {
			img, bp, err := buildPlatform(ctx, o, im, p, base, config, labels, tag, logf)
			if err != nil {
				return sum, err
			}
			built.Platforms = append(built.Platforms, bp)
			idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
				Platform: &v1.Platform{OS: p.OS, Architecture: p.Arch, Variant: p.Variant},
			}})
		}
		idx = mutate.Annotations(idx, labels).(v1.ImageIndex)
		d, err := idx.Digest()
		if err != nil {
			return sum, err
		}
		built.Digest = d.String()
		if err := writeLayout(filepath.Join(o.Out, built.Layout), idx, ref); err != nil {
			return sum, fmt.Errorf("%s: OCI layout: %w", im.Name, err)
		}
		logf("%s %s", ref, built.Digest)
		sum.Images = append(sum.Images, built)
	}
	b, err := json.MarshalIndent(sum, "", "  ")
	if err != nil {
		return sum, err
	}
	return sum, os.WriteFile(filepath.Join(o.Out, SummaryFile), append(b, '\n'), 0o644)
}

// buildPlatform cross-compiles im's binary for p, assembles its image and
// writes its docker tarball under o.Out.
func buildPlatform(ctx context.Context, o Options, im imagebuild.Image, p imagebuild.Platform, base v1.Layer, config []byte, labels map[string]string, tag name.Tag, logf func(string, ...any)) (v1.Image, BuiltPlatform, error) {
	bin := filepath.Join("bin", p.OS+"_"+p.Arch, im.Name)
	start := time.Now()
	if err := imagebuild.BuildBinary(ctx, o.Root, im, p, filepath.Join(o.Out, bin)); err != nil {
		return nil, BuiltPlatform{}, err
	}
	logf("built %s for %s in %s", im.Name, p, time.Since(start).Round(100*time.Millisecond))
	binary, err := os.ReadFile(filepath.Join(o.Out, bin))
	if err != nil {
		return nil, BuiltPlatform{}, err
	}
	img, err := platformImage(im, p, base, binary, config, labels, o.Revision.Time)
	if err != nil {
		return nil, BuiltPlatform{}, fmt.Errorf("%s %s: %w", im.Name, p, err)
	}
	tarPath := filepath.Join("docker", im.Name+"-"+p.OS+"-"+p.Arch+".tar")
	if err := writeTarball(filepath.Join(o.Out, tarPath), tag, img); err != nil {
		return nil, BuiltPlatform{}, fmt.Errorf("%s %s: %w", im.Name, p, err)
	}
	d, err := img.Digest()
	if err != nil {
		return nil, BuiltPlatform{}, err
	}
	size, err := ImageSize(img)
	if err != nil {
		return nil, BuiltPlatform{}, err
	}
	return img, BuiltPlatform{Platform: p.String(), Digest: d.String(), Size: size, Binary: bin, Tarball: tarPath}, nil
}

// layer makes a gzip OCI layer of files.
func layer(files []imagebuild.File, mtime time.Time) (v1.Layer, error) {
	raw, err := imagebuild.TarLayer(files, mtime)
	if err != nil {
		return nil, err
	}
	gz, err := imagebuild.Gzip(raw)
	if err != nil {
		return nil, err
	}
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
}

// platformImage assembles one platform's image: the shared base layer, then
// the binary and configuration, then the configuration file with every
// declared value.
func platformImage(im imagebuild.Image, p imagebuild.Platform, base v1.Layer, binary, config []byte, labels map[string]string, created time.Time) (v1.Image, error) {
	app, err := layer(im.AppFiles(binary, config), created)
	if err != nil {
		return nil, err
	}
	at := v1.Time{Time: created}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{
			Created: at, CreatedBy: "imagebuild: /etc/passwd, /etc/group (user " + strconv.Itoa(imagebuild.User) + "), " + imagebuild.CACertsPath + ", /tmp",
		}},
		mutate.Addendum{Layer: app, MediaType: types.OCILayer, History: v1.History{
			Created: at, CreatedBy: "imagebuild: " + im.BinaryPath() + ", " + im.ConfigPath() + dataDirNote(im),
		}},
	)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Arch, p.Variant
	cf.Created = at
	exposed := map[string]struct{}{}
	for _, port := range im.ExposedPorts() {
		exposed[port] = struct{}{}
	}
	cf.Config = v1.Config{
		User:         strconv.Itoa(imagebuild.User),
		Entrypoint:   im.Entrypoint(),
		Cmd:          im.Cmd(),
		ExposedPorts: exposed,
		Labels:       labels,
		WorkingDir:   "/",
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return nil, err
	}
	return mutate.Annotations(img, labels).(v1.Image), nil
}

func dataDirNote(im imagebuild.Image) string {
	if im.DataDir == "" {
		return ""
	}
	return ", " + im.DataDir + " (owned by " + strconv.Itoa(imagebuild.User) + ")"
}

// ImageSize is the compressed size of an image: manifest, config and layers.
func ImageSize(img v1.Image) (int64, error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	n := int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		n += l.Size
	}
	return n, nil
}

func writeTarball(path string, tag name.Tag, img v1.Image) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return tarball.WriteToFile(path, tag, img)
}

// writeLayout replaces dir with an OCI layout holding idx, named ref.
func writeLayout(dir string, idx v1.ImageIndex, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	top := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: idx, Descriptor: v1.Descriptor{
		Annotations: map[string]string{imagebuild.RefName: ref},
	}})
	_, err := layout.Write(dir, top)
	return err
}
