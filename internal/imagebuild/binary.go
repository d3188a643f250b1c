package imagebuild

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// GoBuildFlags are the flags every image binary is built with, besides -o:
// paths trimmed, no VCS stamp (the revision is an image label instead, so a
// dirty tree and a clean one of the same sources give the same binary), and
// symbol tables left out. The Dockerfile uses the same flags (a test checks).
var GoBuildFlags = []string{"-trimpath", "-buildvcs=false", "-ldflags=-s -w"}

// GoBuildEnv is the environment of a cross build for p, on top of the
// caller's: static (no cgo, so no libc in a scratch image), and the
// architecture levels pinned to Go's defaults, so that a GOAMD64 or GOARM64
// set on the building machine cannot change the binary.
func GoBuildEnv(p Platform) []string {
	return []string{
		"CGO_ENABLED=0",
		"GOOS=" + p.OS,
		"GOARCH=" + p.Arch,
		"GOAMD64=v1",
		"GOARM64=v8.0",
		// GOFLAGS from the environment could add flags the digest does not
		// know about; the flags above are all there is.
		"GOFLAGS=",
	}
}

// BuildBinary cross-compiles the image's binary for p from its module under
// root into out.
func BuildBinary(ctx context.Context, root string, im Image, p Platform, out string) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	args := append([]string{"build"}, GoBuildFlags...)
	args = append(args, "-o", out, ".")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(root, im.ModuleDir)
	cmd.Env = append(os.Environ(), GoBuildEnv(p)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s (%s, in %s): %w\n%s", strings.Join(args, " "), p, im.ModuleDir, err, b)
	}
	return nil
}
