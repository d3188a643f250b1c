package imagebuild_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/imagebuild"
)

// TestTarLayerIsCanonical: the layer lists parents before children in path
// order, adds missing parents as root-owned directories, stamps every entry
// with the given time, and gives the same bytes whatever the input order.
func TestTarLayerIsCanonical(t *testing.T) {
	mtime := time.Date(2026, 12, 1, 0, 35, 17, 0, time.UTC)
	a := []imagebuild.File{
		{Path: "/var/lib/x", Mode: 0o755, Dir: true, UID: 10001, GID: 10001},
		{Path: "/bin1", Mode: 0o755, Body: []byte("bin")},
		{Path: "/etc/x/config.yaml", Mode: 0o644, Body: []byte("a: 1\n")},
	}
	b := []imagebuild.File{a[2], a[0], a[1]}
	la, err := imagebuild.TarLayer(a, mtime)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := imagebuild.TarLayer(b, mtime)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(la, lb) {
		t.Errorf("the same files in another order give other bytes")
	}
	type ent struct {
		name string
		uid  int
		dir  bool
	}
	var got []ent
	tr := tar.NewReader(bytes.NewReader(la))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(mtime) || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: time %v, names %q/%q", h.Name, h.ModTime, h.Uname, h.Gname)
		}
		got = append(got, ent{h.Name, h.Uid, h.Typeflag == tar.TypeDir})
	}
	want := []ent{
		{"bin1", 0, false}, {"etc/", 0, true}, {"etc/x/", 0, true}, {"etc/x/config.yaml", 0, false},
		{"var/", 0, true}, {"var/lib/", 0, true}, {"var/lib/x/", 10001, true},
	}
	if len(got) != len(want) {
		t.Fatalf("entries %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("entry %d: %v, want %v", i, got[i], want[i])
		}
	}
}

// TestTarLayerRejectsBadPaths: relative, unclean and repeated paths are
// errors, not silently different layers.
func TestTarLayerRejectsBadPaths(t *testing.T) {
	for name, files := range map[string][]imagebuild.File{
		"relative": {{Path: "etc/passwd"}},
		"unclean":  {{Path: "/etc/../passwd"}},
		"twice":    {{Path: "/a"}, {Path: "/a"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := imagebuild.TarLayer(files, time.Unix(0, 0)); err == nil {
				t.Errorf("TarLayer accepted %v", files)
			}
		})
	}
}
