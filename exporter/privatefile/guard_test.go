//go:build unix

package privatefile

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// startTraces creates the distribution's file exporter writing to path,
// starts it, writes one span and shuts it down; it returns Start's error.
func startTraces(t *testing.T, path string, edit func(*fileexporter.Config)) error {
	t.Helper()
	f := NewFactory()
	cfg := f.CreateDefaultConfig().(*fileexporter.Config)
	cfg.Path = path
	cfg.Rotation = nil // as a config without a rotation key unmarshals
	if edit != nil {
		edit(cfg)
	}
	e, err := f.CreateTraces(context.Background(), exportertest.NewNopSettings(f.Type()), cfg)
	if err != nil {
		return err
	}
	if err := e.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		require.NoError(t, e.Shutdown(context.Background()))
		return err
	}
	td := ptrace.NewTraces()
	td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("execute_tool bash")
	require.NoError(t, e.ConsumeTraces(context.Background(), td))
	require.NoError(t, e.Shutdown(context.Background()))
	return nil
}

// TestOutputFileIsPrivate: under the loosest umask, the file exporter's
// output ends up mode 0600 whether it was missing, already there with
// another mode, or in a directory create_directory makes; a path that is
// a symbolic link or a directory is refused before anything is written,
// and so is rotation (whose writer makes its files 0644).
//
//nolint:funlen // one table of cases, read top to bottom
func TestOutputFileIsPrivate(t *testing.T) {
	for _, tc := range []struct {
		name string
		// setup prepares dir and returns the exporter's path.
		setup func(t *testing.T, dir string) string
		edit  func(*fileexporter.Config)
		// wantErr is part of Start's error; "" when it starts.
		wantErr string
	}{
		{
			name:  "a new file",
			setup: func(_ *testing.T, dir string) string { return filepath.Join(dir, "traces.jsonl") },
		},
		{
			name: "an existing file others could read",
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "traces.jsonl")
				require.NoError(t, os.WriteFile(p, []byte("old\n"), 0o600))
				require.NoError(t, os.Chmod(p, 0o644))
				return p
			},
		},
		{
			name: "an existing file appended to",
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "traces.jsonl")
				require.NoError(t, os.WriteFile(p, []byte("old\n"), 0o600))
				require.NoError(t, os.Chmod(p, 0o666))
				return p
			},
			edit: func(c *fileexporter.Config) { c.Append = true },
		},
		{
			name:  "a file in a directory the exporter creates",
			setup: func(_ *testing.T, dir string) string { return filepath.Join(dir, "new", "traces.jsonl") },
			edit:  func(c *fileexporter.Config) { c.CreateDirectory = true },
		},
		{
			name:    "rotation",
			setup:   func(_ *testing.T, dir string) string { return filepath.Join(dir, "traces.jsonl") },
			edit:    func(c *fileexporter.Config) { c.Rotation = &fileexporter.Rotation{MaxMegabytes: 1} },
			wantErr: "rotation is not supported",
		},
		{
			name: "a symbolic link",
			setup: func(t *testing.T, dir string) string {
				target := filepath.Join(dir, "elsewhere")
				require.NoError(t, os.WriteFile(target, nil, 0o600))
				p := filepath.Join(dir, "traces.jsonl")
				require.NoError(t, os.Symlink(target, p))
				return p
			},
			wantErr: "is a symbolic link",
		},
		{
			name: "a directory",
			setup: func(t *testing.T, dir string) string {
				p := filepath.Join(dir, "traces.jsonl")
				require.NoError(t, os.Mkdir(p, 0o700))
				return p
			},
			wantErr: "not a regular file",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			syscall.Umask(0)
			dir := t.TempDir()
			path := tc.setup(t, dir)
			err := startTraces(t, path, tc.edit)
			if tc.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.wantErr)
				_, statErr := os.Stat(path)
				if fi, _ := os.Lstat(path); statErr == nil && fi.Mode().IsRegular() {
					b, _ := os.ReadFile(path)
					assert.Empty(t, b, "nothing is written to a refused path")
				}
				return
			}
			require.NoError(t, err)
			fi, err := os.Stat(path)
			require.NoError(t, err)
			assert.Equal(t, fs.FileMode(0o600), fi.Mode().Perm(), "mode of %s", path)
			b, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Contains(t, string(b), "execute_tool bash", "the span was written")
		})
	}
}

// fakeFileInfo is a FileInfo with a given mode and owner.
type fakeFileInfo struct {
	mode fs.FileMode
	uid  uint32
}

func (f fakeFileInfo) Name() string       { return "traces.jsonl" }
func (f fakeFileInfo) Size() int64        { return 0 }
func (f fakeFileInfo) Mode() fs.FileMode  { return f.mode }
func (f fakeFileInfo) ModTime() time.Time { return time.Time{} }
func (f fakeFileInfo) IsDir() bool        { return f.mode.IsDir() }
func (f fakeFileInfo) Sys() any           { return &syscall.Stat_t{Uid: f.uid} }

// TestAnotherUsersFileIsRefused: a file at the path owned by anyone but the
// collector's user — root included, when the collector is not root — is
// refused: its owner reads whatever is written there, whatever its mode.
func TestAnotherUsersFileIsRefused(t *testing.T) {
	const euid = 1000
	for _, tc := range []struct {
		name    string
		fi      fakeFileInfo
		wantErr string
	}{
		{"the collector's own", fakeFileInfo{mode: 0o644, uid: euid}, ""},
		{"another user's", fakeFileInfo{mode: 0o600, uid: 65534}, "owned by uid 65534, not the collector's user (1000)"},
		{"root's", fakeFileInfo{mode: 0o600, uid: 0}, "owned by uid 0"},
		{"a symbolic link of the collector's", fakeFileInfo{mode: fs.ModeSymlink | 0o777, uid: euid}, "is a symbolic link"},
		{"a named pipe", fakeFileInfo{mode: fs.ModeNamedPipe | 0o600, uid: euid}, "not a regular file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkOwned(tc.fi, euid)
			if tc.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
		})
	}
}

// TestFactoryRestrictsTheUmask: creating the factory leaves the umask
// clearing group and others' bits, and keeps a stricter umask stricter.
func TestFactoryRestrictsTheUmask(t *testing.T) {
	for _, tc := range []struct {
		before, want int
	}{
		{0o000, 0o077},
		{0o022, 0o077},
		{0o027, 0o077},
		{0o277, 0o277},
	} {
		syscall.Umask(tc.before)
		NewFactory()
		got := syscall.Umask(0o077)
		assert.Equalf(t, tc.want, got, "umask %04o before", tc.before)
	}
}
