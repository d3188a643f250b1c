package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// envRunSupervisor makes the test binary run the supervisor's main (a real
// process the test can kill -9).
const envRunSupervisor = "LOOPSUPERVISOR_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(envRunSupervisor) == "1" {
		main()
	}
	os.Exit(m.Run())
}

// A supervisor killed with SIGKILL takes its agent down within a second.
func TestAgentDoesNotOutliveItsSupervisor(t *testing.T) {
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets")
	require.NoError(t, os.WriteFile(secrets, []byte(testSecret+"\n"), 0o600))
	self, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(self, "--listen", "127.0.0.1:0", "--secrets-file", secrets, "--",
		"/bin/sh", "-c", `echo $$ > "$1/pid"; exec sleep 300`, "agent", dir)
	cmd.Env = append(os.Environ(), envRunSupervisor+"=1")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	pid, err := strconv.Atoi(strings.TrimSpace(waitFile(t, filepath.Join(dir, "pid"), 10*time.Second)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	require.True(t, alive(pid))

	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	deadline := time.Now().Add(time.Second)
	for alive(pid) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.False(t, alive(pid), "the agent outlived its supervisor by more than a second")
}
