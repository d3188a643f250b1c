package ociimage_test

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/otelcol-loop/otelcol-loop/internal/devtools/ociimage"
)

// TestRegistryRoundTripByDigest: each index pushed to an in-process
// registry and pulled back by digest is the same, byte for byte: the index,
// each platform's manifest, config and layers.
func TestRegistryRoundTripByDigest(t *testing.T) {
	_, _, sum := images(t)
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	opts := []remote.Option{remote.WithAuth(authn.Anonymous), remote.WithContext(context.Background())}

	for _, b := range sum.Images {
		t.Run(b.Name, func(t *testing.T) {
			local := index(t, b)
			tag, err := name.NewTag(host+"/otelcol-loop/"+b.Name+":"+b.Version, name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			if err := remote.WriteIndex(tag, local, opts...); err != nil {
				t.Fatalf("push: %v", err)
			}
			byDigest, err := name.NewDigest(host+"/otelcol-loop/"+b.Name+"@"+b.Digest, name.Insecure)
			if err != nil {
				t.Fatal(err)
			}
			pulled, err := remote.Index(byDigest, opts...)
			if err != nil {
				t.Fatalf("pull %s: %v", byDigest, err)
			}
			sameBytes(t, "index", local.RawManifest, pulled.RawManifest)
			lm, err := local.IndexManifest()
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range lm.Manifests {
				li, err := local.Image(d.Digest)
				if err != nil {
					t.Fatal(err)
				}
				pi, err := pulled.Image(d.Digest)
				if err != nil {
					t.Fatalf("pulled index lacks %s: %v", d.Digest, err)
				}
				what := d.Platform.OS + "/" + d.Platform.Architecture
				sameBytes(t, what+" manifest", li.RawManifest, pi.RawManifest)
				sameBytes(t, what+" config", li.RawConfigFile, pi.RawConfigFile)
				ll, err := li.Layers()
				if err != nil {
					t.Fatal(err)
				}
				pl, err := pi.Layers()
				if err != nil {
					t.Fatal(err)
				}
				if len(ll) != len(pl) {
					t.Fatalf("%s: %d layers pulled, %d built", what, len(pl), len(ll))
				}
				for i := range ll {
					sameBytes(t, what+" layer", compressed(ll[i]), compressed(pl[i]))
				}
			}
		})
	}
}

func compressed(l v1.Layer) func() ([]byte, error) {
	return func() ([]byte, error) {
		rc, err := l.Compressed()
		if err != nil {
			return nil, err
		}
		defer rc.Close()
		return io.ReadAll(rc)
	}
}

func sameBytes(t *testing.T, what string, built, pulled func() ([]byte, error)) {
	t.Helper()
	b, err := built()
	if err != nil {
		t.Fatalf("%s (built): %v", what, err)
	}
	p, err := pulled()
	if err != nil {
		t.Fatalf("%s (pulled): %v", what, err)
	}
	if len(b) == 0 || !bytes.Equal(b, p) {
		t.Errorf("%s: pulled %d bytes differ from the %d built", what, len(p), len(b))
	}
}

// TestSameCommitSameDigest builds every image a second time, into another
// directory, and compares digests with the first build: the binaries are
// linked again, the layers, configs and indexes made again.
func TestSameCommitSameDigest(t *testing.T) {
	root, rev, first := images(t)
	out := t.TempDir()
	second, err := ociimage.Build(context.Background(), ociimage.Options{Root: root, Out: out, Revision: rev, Logf: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	if len(second.Images) != len(first.Images) {
		t.Fatalf("%d images the second time, %d the first", len(second.Images), len(first.Images))
	}
	for i, a := range first.Images {
		b := second.Images[i]
		if a.Digest != b.Digest {
			t.Errorf("%s: index %s, then %s", a.Name, a.Digest, b.Digest)
		}
		for j, pa := range a.Platforms {
			if pb := b.Platforms[j]; pa.Digest != pb.Digest || pa.Size != pb.Size {
				t.Errorf("%s %s: %s (%d bytes), then %s (%d bytes)", a.Name, pa.Platform, pa.Digest, pa.Size, pb.Digest, pb.Size)
			}
		}
		t.Logf("%s@%s", a.Ref, a.Digest)
	}
}
