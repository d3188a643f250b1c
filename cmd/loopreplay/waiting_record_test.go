package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/agentcli"
)

// waitingRecordEnv, set to any value, re-records the waiting transcripts
// with the real Claude Code CLI ($CLAUDE_CODE_BIN) into waitingDir; then
// run TestWaitingTranscripts with -update to write their verdicts. The
// sleeping session takes about four minutes: its waits are real.
const waitingRecordEnv = "LOOPREPLAY_RECORD_WAITING"

const waitingDir = "testdata/waiting"

// ciRunPolls is how many times the recorded CI run answers in progress
// before it succeeds.
const ciRunPolls = 6

// waitingSession is one recorded CI-polling session: the agent pushes,
// then polls `gh run view` until the run completes, with or without a
// wait in the command.
type waitingSession struct {
	name, poll string
}

var waitingSessions = []waitingSession{
	{name: "ci-poll-sleep", poll: "sleep 30 && gh run view 4242 --json status,conclusion"},
	{name: "ci-poll-no-sleep", poll: "gh run view 4242 --json status,conclusion"},
}

// fakeGH is the gh the sessions run: `gh run view 4242` answers in
// progress ciRunPolls times, then success (its count kept in a file
// beside it); `gh pr merge` merges.
const fakeGH = `#!/bin/sh
count="$(dirname "$0")/run-4242.count"
case "$1 $2" in
"run view")
	n=$(cat "$count" 2>/dev/null || echo 0)
	n=$((n + 1))
	echo "$n" > "$count"
	if [ "$n" -le %d ]; then
		echo '{"conclusion":"","status":"in_progress"}'
	else
		echo '{"conclusion":"success","status":"completed"}'
	fi
	;;
"pr merge")
	echo "✓ Squashed and merged pull request #12 (Fix the flaky checkout test)"
	;;
*)
	echo "gh: unknown command $1 $2" >&2
	exit 1
	;;
esac
`

// TestRecordWaitingTranscripts runs each waiting session's script with the
// real CLI on a scripted local model in a fresh copy of shopRepo, with a
// fake gh on its PATH, and keeps what the CLI wrote: its session
// transcript (gzip-compressed) and its stream-json output.
func TestRecordWaitingTranscripts(t *testing.T) {
	if os.Getenv(waitingRecordEnv) == "" {
		t.Skip("set " + waitingRecordEnv + " to re-record the waiting transcripts with the real CLI")
	}
	bin := agentcli.ClaudeBin(t)
	root := filepath.Join(os.TempDir(), "loopreplay-waiting")
	for _, s := range waitingSessions {
		t.Run(s.name, func(t *testing.T) { recordWaiting(t, bin, root, s) })
	}
}

func recordWaiting(t *testing.T, bin, root string, s waitingSession) {
	dir := filepath.Join(root, s.name)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	p := agentcli.NewClaudeProject(t, dir, "")
	writeShopRepo(t, p.Dir)
	tools := filepath.Join(dir, "bin")
	if err := writeFile(filepath.Join(tools, "gh"), []byte(strings.Replace(fakeGH, "%d", strconv.Itoa(ciRunPolls), 1))); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(tools, "gh"), 0o755); err != nil {
		t.Fatal(err)
	}
	sc := (&script{}).add(
		agentcli.Bash("git commit --allow-empty -qm 'Fix the flaky checkout test' && git log --oneline -1"),
	).poll(agentcli.Bash(s.poll), ciRunPolls+3, func(r string) bool { return strings.Contains(r, `"completed"`) }).add(
		agentcli.Bash("gh pr merge 12 --squash"),
	)
	srv := agentcli.Start(t, sc)
	args := agentcli.ClaudeArgs(bin, "Commit the fix for the flaky checkout test, wait for CI run 4242 to pass, then merge PR 12.")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = p.Dir
	cmd.Env = p.Env(srv, "")
	for i, kv := range cmd.Env {
		if strings.HasPrefix(kv, "PATH=") {
			cmd.Env[i] = "PATH=" + tools + string(os.PathListSeparator) + strings.TrimPrefix(kv, "PATH=")
		}
	}
	// With background tasks on, the CLI refuses a leading sleep of 25 s or
	// more ("use Monitor or run_in_background"); users who turn them off
	// poll this way.
	cmd.Env = append(cmd.Env, "CLAUDE_CODE_DISABLE_BACKGROUND_TASKS=1",
		"GIT_AUTHOR_NAME=dev", "GIT_AUTHOR_EMAIL=dev@example.com", "GIT_COMMITTER_NAME=dev", "GIT_COMMITTER_EMAIL=dev@example.com")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stream, err := cmd.Output()
	if err != nil {
		t.Fatalf("claude: %v\n%s", err, stderr.String())
	}
	out := filepath.Join(waitingDir, s.name)
	if err := os.RemoveAll(out); err != nil {
		t.Fatal(err)
	}
	writeGzip(t, filepath.Join(out, streamFile), stream)
	projects := filepath.Join(p.Home, ".claude", "projects")
	err = filepath.WalkDir(projects, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".jsonl") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		writeGzip(t, filepath.Join(out, filepath.Base(path)+".gz"), b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d model turns", s.name, len(srv.Exchanges()))
}
