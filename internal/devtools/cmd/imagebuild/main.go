// Command imagebuild builds the otelcol-loop and otelcol-loop-gateway OCI
// images without a container daemon (`make image`): see packages
// internal/imagebuild and internal/devtools/ociimage. It prints each image's reference, index digest and
// per-platform sizes. With -rootfs DIR it only writes the files every image
// shares (passwd, group, the CA bundle, /tmp) under DIR: the Dockerfile's
// base stage, so both builds ship the same files.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/devtools/ociimage"
	"github.com/otelcol-loop/otelcol-loop/internal/imagebuild"
)

func main() {
	root := flag.String("root", ".", "repository root")
	out := flag.String("out", "_build", "output directory")
	repo := flag.String("repository", imagebuild.DefaultRepository, "registry and namespace the images are named under")
	rootfs := flag.String("rootfs", "", "only write the shared base files under this directory")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("imagebuild: ")
	if *rootfs != "" {
		if err := imagebuild.WriteFiles(*rootfs, imagebuild.BaseFiles()); err != nil {
			log.Fatal(err)
		}
		return
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *root, *out, *repo); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, root, out, repo string) error {
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	if out, err = filepath.Abs(out); err != nil {
		return err
	}
	rev, err := ociimage.GitRevision(root)
	if err != nil {
		return err
	}
	start := time.Now()
	sum, err := ociimage.Build(ctx, ociimage.Options{
		Root: root, Out: out, Repository: repo, Revision: rev, Logf: log.Printf,
	})
	if err != nil {
		return err
	}
	fmt.Printf("revision %s, created %s, built in %s\n", sum.Revision, sum.Created.Format(time.RFC3339), time.Since(start).Round(time.Second))
	for _, b := range sum.Images {
		fmt.Printf("%s@%s  (OCI layout %s)\n", b.Ref, b.Digest, filepath.Join(out, b.Layout))
		for _, p := range b.Platforms {
			fmt.Printf("  %-12s %s  %5.1f MB  docker load -i %s\n", p.Platform, p.Digest, float64(p.Size)/1e6, filepath.Join(out, p.Tarball))
		}
	}
	return nil
}
