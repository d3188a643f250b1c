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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/cmd/loopsupervisor/internal/webhook"
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

// The last blocked repeat sets off the kill of the agent's process group,
// the hook process included; the hook still prints the block, or the CLI
// would read a failed hook, fail open and run the very call the kill is
// for (seen with Gemini CLI: one more run of the loop after the kill).
func TestHookPrintsTheBlockThatKillsItsAgent(t *testing.T) {
	self, err := os.Executable()
	require.NoError(t, err)
	const sess = "s"
	hookPID := make(chan int, 1)
	var signalled bool
	b := newHookBook(1, func(webhook.Message) {
		signalled = syscall.Kill(<-hookPID, syscall.SIGTERM) == nil
	}, func(string, ...any) {})
	const input = `{"command":"gh issue list","description":"list issues"}` // claudeInput's
	held(t, b, sess, "Bash", input)
	require.Equal(t, decisionBlock, b.decide(call(sess, "Bash", input), t0).Decision)

	cmd := exec.Command(self, "hook", "--format", "claude")
	cmd.Env = append(os.Environ(), envRunSupervisor+"=1", envHookURL+"="+hookServer(t, b, "tok"), envHookToken+"=tok")
	cmd.Stdin = strings.NewReader(claudeInput(sess, "gh issue list"))
	var out strings.Builder
	cmd.Stdout = &out
	require.NoError(t, cmd.Start())
	hookPID <- cmd.Process.Pid
	err = cmd.Wait()

	require.True(t, signalled, "the kill was carried out at the blocked repeat")
	require.NoError(t, err, "the hook outlived the kill it set off")
	assert.Contains(t, out.String(), `"permissionDecision":"deny"`)
}
