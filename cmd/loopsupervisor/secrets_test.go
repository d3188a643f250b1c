//go:build unix

package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSecretsInEnvironmentAreRefusedUnlessAllowed: an agent running as the
// supervisor's user can read /proc/<supervisor pid>/environ, so a secret in
// the supervisor's own environment is refused unless --allow-env-secrets.
func TestSecretsInEnvironmentAreRefusedUnlessAllowed(t *testing.T) {
	t.Setenv(envSecrets, testSecret)
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"--listen", "127.0.0.1:0", "--", "true"}, io.Discard, &stderr)
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, stderr.String(), "--secrets-file")
	assert.NotContains(t, stderr.String(), testSecret[6:])

	code = run(context.Background(), []string{"--allow-env-secrets", "--listen", "127.0.0.1:0", "--", "true"}, io.Discard, io.Discard)
	assert.Equal(t, 0, code, "allowed explicitly: the agent runs")
}

func TestSecretsFileMustBePrivate(t *testing.T) {
	t.Setenv(envSecrets, "")
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		mode os.FileMode
		ok   bool
	}{
		{"owner only", 0o600, true},
		{"owner read only", 0o400, true},
		{"group readable", 0o640, false},
		{"world readable", 0o644, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			require.NoError(t, os.WriteFile(p, []byte(testSecret+"\n"), 0o600))
			require.NoError(t, os.Chmod(p, tc.mode))
			var stderr bytes.Buffer
			code := run(context.Background(), []string{"--secrets-file", p, "--listen", "127.0.0.1:0", "--", "true"}, io.Discard, &stderr)
			if tc.ok {
				assert.Equal(t, 0, code, stderr.String())
				return
			}
			assert.Equal(t, exitUsage, code)
			assert.Contains(t, stderr.String(), "--secrets-file")
			assert.Contains(t, stderr.String(), "0600")
		})
	}
}

// TestAgentUserCannotReadTheSecret runs the agent as another user: it can
// read neither the secrets file nor the supervisor's /proc entries, and a
// kill still stops it. Without the privilege to switch users the flag is
// an error, never silently ignored.
func TestAgentUserCannotReadTheSecret(t *testing.T) {
	nobody, err := user.Lookup("nobody")
	require.NoError(t, err)
	if os.Geteuid() != 0 {
		var stderr bytes.Buffer
		secrets := filepath.Join(t.TempDir(), "secrets")
		require.NoError(t, os.WriteFile(secrets, []byte(testSecret+"\n"), 0o600))
		code := run(context.Background(), []string{"--secrets-file", secrets, "--agent-user", "nobody", "--listen", "127.0.0.1:0", "--", "true"}, io.Discard, &stderr)
		assert.Equal(t, exitInternal, code)
		assert.Contains(t, stderr.String(), "starting agent")
		return
	}
	dir, out := t.TempDir(), t.TempDir() // dir: the supervisor's (0700); out: the agent's
	// Only the secrets file's own mode keeps it from the agent: the
	// directories are open to every user.
	require.NoError(t, os.Chmod(filepath.Dir(out), 0o755))
	require.NoError(t, os.Chmod(dir, 0o755))
	require.NoError(t, os.Chmod(out, 0o777))
	secrets := filepath.Join(dir, "secrets")
	require.NoError(t, os.WriteFile(secrets, []byte(testSecret+"\n"), 0o600))
	const inst = "inst-agent-user-test"
	probe := `id -u > "$2/uid.tmp"
{ cat "$1"; tr '\0' '\n' < /proc/$PPID/environ; tr '\0' '\n' < /proc/$PPID/cmdline; } > "$2/read" 2>&1
echo "$$" > "$2/pid.tmp"
mv "$2/uid.tmp" "$2/uid"; mv "$2/pid.tmp" "$2/pid"
exec sleep 300`
	addr := filepath.Join(dir, "addr")
	args := []string{"--secrets-file", secrets, "--agent-user", "nobody", "--listen", "127.0.0.1:0", "--addr-file", addr,
		"--instance-id-file", idFile(t, inst), "--grace", "2s", "--result-file", filepath.Join(dir, "result"),
		"--", "/bin/sh", "-c", probe, "agent", secrets, out}
	done := make(chan int, 1)
	go func() { done <- run(context.Background(), args, io.Discard, io.Discard) }()
	h := &harness{t: t, dir: dir, done: done, url: "http://" + waitFile(t, addr, 5*time.Second) + "/kill"}

	assert.Equal(t, nobody.Uid, waitFile(t, filepath.Join(out, "uid"), 5*time.Second))
	pid, err := strconv.Atoi(waitFile(t, filepath.Join(out, "pid"), 5*time.Second))
	require.NoError(t, err)
	read, err := os.ReadFile(filepath.Join(out, "read"))
	require.NoError(t, err)
	assert.NotContains(t, string(read), testSecret[6:], "the agent read the signing secret")
	assert.Contains(t, string(read), "ermission denied", "the probe ran and was refused")

	code, res := h.send(killSpec{id: "ld_u_1", instance: inst, pid: int64(pid)})
	require.Equal(t, 200, code)
	require.Equal(t, "killed", res)
	select {
	case exit := <-done:
		assert.Equal(t, exitKilled, exit)
	case <-time.After(10 * time.Second):
		t.Fatal("supervisor did not finish")
	}
	assert.False(t, alive(pid))
}
