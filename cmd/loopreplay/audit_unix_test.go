//go:build unix

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAuditSkipsAnUnreadableFile: a file its user may not read is one
// line on stderr, and the others are audited (run as the user nobody
// when the tests run as root, whom a file's mode does not bind).
func TestAuditSkipsAnUnreadableFile(t *testing.T) {
	readable := filepath.Join(corpusDir, "loop-identical-call", streamFile)
	loop := gunzipFile(t, filepath.Join(corpusDir, "loop-search-read-oscillation", streamFile))
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl.gz")
	b, err := os.ReadFile(readable)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(good, b, 0o644))
	secret := filepath.Join(dir, "secret.jsonl")
	require.NoError(t, os.WriteFile(secret, loop, 0o000))
	var got commandRun
	if os.Geteuid() == 0 {
		got = runUnprivileged(t, dir, secret, good)
	} else {
		got = runCommand(secret, good)
	}
	require.Equal(t, 3, got.code, got.errOut)
	require.Equal(t, "loopreplay: skipped "+secret+": permission denied\n", got.errOut)
	require.Equal(t, runCommand(readable).out, got.out)
}

// runUnprivileged runs loopreplay as the user nobody, whom a file's mode
// binds (root reads any file): the test binary, copied where nobody may
// run it, in the directory dir, which nobody may read.
func runUnprivileged(t *testing.T, dir string, args ...string) commandRun {
	t.Helper()
	self, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(dir, "loopreplay.test")
	b, err := os.ReadFile(self)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, b, 0o755))
	for d := dir; d != filepath.Dir(d); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		if fi.Mode().Perm()&0o005 != 0o005 {
			require.NoError(t, os.Chmod(d, fi.Mode().Perm()|0o005))
		}
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	var exit *exec.ExitError
	if err := cmd.Run(); err != nil && !errors.As(err, &exit) {
		require.NoError(t, err)
	}
	return commandRun{cmd.ProcessState.ExitCode(), out.String(), errOut.String()}
}
