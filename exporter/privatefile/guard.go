package privatefile // import "github.com/otelcol-loop/otelcol-loop/exporter/privatefile"

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"go.uber.org/zap"
)

// privateMode is the mode of the exporter's output file.
const privateMode fs.FileMode = 0o600

// guard makes one exporter's output file private around its start.
type guard struct {
	path    string
	grouped bool
	logger  *zap.Logger
}

// start checks an existing file (refused unless the collector's user owns
// a regular file there, which is then made 0600), creates a missing one
// 0600 when its directory exists, runs the contrib exporter's start, and
// checks the file it opened.
func (g guard) start(startInner func() error) error {
	if g.grouped || g.path == "" {
		return startInner()
	}
	if err := g.prepare(); err != nil {
		return err
	}
	if err := startInner(); err != nil {
		return err
	}
	// The contrib exporter opens the path without O_EXCL: check that what
	// it opened is still the collector's file, and private.
	return g.check()
}

// prepare is the check before the contrib exporter opens the path.
func (g guard) prepare() error {
	_, err := os.Lstat(g.path)
	if errors.Is(err, fs.ErrNotExist) {
		// Created here, 0600 and exclusively, so nobody else's file at the
		// path can be opened in its place. A missing directory is left to
		// the exporter's create_directory (the file is then created under
		// the umask and checked after start).
		f, err := os.OpenFile(g.path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, privateMode)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("file: path %s: %w", g.path, err)
		}
		return f.Close()
	}
	if err != nil {
		return fmt.Errorf("file: path %s: %w", g.path, err)
	}
	return g.check()
}

// check refuses a path that is not a regular file of the collector's user
// and makes one that is mode 0600.
func (g guard) check() error {
	fi, err := os.Lstat(g.path)
	if err != nil {
		return fmt.Errorf("file: path %s: %w", g.path, err)
	}
	if err := checkOwned(fi, os.Geteuid()); err != nil {
		return fmt.Errorf("file: path %s: %w", g.path, err)
	}
	if perm := fi.Mode().Perm(); perm != privateMode {
		if err := os.Chmod(g.path, privateMode); err != nil {
			return fmt.Errorf("file: path %s: making it private (mode %04o): %w", g.path, perm, err)
		}
		g.logger.Warn("file: output file made private", zap.String("path", g.path),
			zap.String("was", fmt.Sprintf("%04o", perm)), zap.String("now", fmt.Sprintf("%04o", privateMode)))
	}
	return nil
}

// checkOwned refuses anything but a regular file owned by euid: a symbolic
// link may point anywhere, and another user's file stays readable by its
// owner whatever mode the collector gives it.
func checkOwned(fi fs.FileInfo, euid int) error {
	if fi.Mode()&fs.ModeSymlink != 0 {
		return errors.New("is a symbolic link: point path at the file itself")
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("not a regular file (%s)", fi.Mode())
	}
	if uid, ok := fileOwner(fi); ok && int(uid) != euid {
		return fmt.Errorf("owned by uid %d, not the collector's user (%d): its owner can read what is written there; remove it or choose another path", uid, euid)
	}
	return nil
}
