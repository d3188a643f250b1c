package ociimage_test

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/otelcol-loop/otelcol-loop/internal/devtools/ociimage"
	"github.com/otelcol-loop/otelcol-loop/internal/imagebuild"
	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// The images under test: $OTELCOL_LOOP_IMAGES (the _build directory `make
// test` fills with `make image` first), else one build of the current
// sources per test process (cold, four cross builds: minutes).
var (
	built struct {
		once sync.Once
		root string
		out  string
		rev  ociimage.Revision
		sum  ociimage.Summary
		tmp  string
		err  error
	}
)

func TestMain(m *testing.M) {
	code := m.Run()
	if built.tmp != "" {
		_ = os.RemoveAll(built.tmp)
	}
	os.Exit(code)
}

func images(t *testing.T) (root string, rev ociimage.Revision, sum ociimage.Summary) {
	t.Helper()
	built.once.Do(func() {
		if built.root, built.err = testproc.RepoRoot(); built.err != nil {
			return
		}
		if built.rev, built.err = ociimage.GitRevision(built.root); built.err != nil {
			return
		}
		if dir := os.Getenv("OTELCOL_LOOP_IMAGES"); dir != "" {
			built.out = dir
			if built.sum, built.err = ociimage.ReadSummary(dir); built.err != nil {
				built.err = fmt.Errorf("$OTELCOL_LOOP_IMAGES=%s: %w (run make image)", dir, built.err)
				return
			}
			if built.sum.Revision != built.rev.Commit || !built.sum.Created.Equal(built.rev.Time) {
				built.err = fmt.Errorf("$OTELCOL_LOOP_IMAGES=%s holds revision %s of %s, the sources are %s of %s (run make image)",
					dir, built.sum.Revision, built.sum.Created, built.rev.Commit, built.rev.Time)
			}
			return
		}
		if built.tmp, built.err = os.MkdirTemp("", "otelcol-loop-images-"); built.err != nil {
			return
		}
		built.out = built.tmp
		built.sum, built.err = ociimage.Build(context.Background(), ociimage.Options{
			Root: built.root, Out: built.out, Revision: built.rev, Logf: t.Logf,
		})
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.root, built.rev, built.sum
}

// index opens the image index b from its OCI layout.
func index(t *testing.T, b ociimage.Built) v1.ImageIndex {
	t.Helper()
	top, err := layout.ImageIndexFromPath(filepath.Join(built.out, b.Layout))
	if err != nil {
		t.Fatal(err)
	}
	m, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 1 {
		t.Fatalf("%s: layout index.json lists %d entries, want 1", b.Layout, len(m.Manifests))
	}
	if got := m.Manifests[0].Annotations[imagebuild.RefName]; got != b.Ref {
		t.Errorf("%s: layout names the index %q, want %q", b.Layout, got, b.Ref)
	}
	if got := m.Manifests[0].Digest.String(); got != b.Digest {
		t.Fatalf("%s: layout holds index %s, the summary says %s", b.Layout, got, b.Digest)
	}
	idx, err := top.ImageIndex(m.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return idx
}

// platformImage returns the image of platform p in idx.
func platformImage(t *testing.T, idx v1.ImageIndex, p imagebuild.Platform) v1.Image {
	t.Helper()
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range m.Manifests {
		if d.Platform != nil && d.Platform.OS == p.OS && d.Platform.Architecture == p.Arch {
			img, err := idx.Image(d.Digest)
			if err != nil {
				t.Fatal(err)
			}
			return img
		}
	}
	t.Fatalf("no %s image in the index", p)
	return nil
}

// entry is one file of an image, as its layer's tar header says.
type entry struct {
	hdr   *tar.Header
	body  []byte
	layer int
}

// files reads every layer of img, in order, keyed by absolute path (a later
// layer's entry replaces an earlier one's, as in a container).
func files(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]entry{}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("layer %d: %v", i, err)
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			out["/"+filepath.Clean(h.Name)] = entry{hdr: h, body: b, layer: i}
		}
		_ = rc.Close()
	}
	return out
}

// platformOf parses "linux/arm64".
func platformOf(t *testing.T, s string) imagebuild.Platform {
	t.Helper()
	for _, p := range imagebuild.Platforms {
		if p.String() == s {
			return p
		}
	}
	t.Fatalf("unknown platform %q", s)
	return imagebuild.Platform{}
}
