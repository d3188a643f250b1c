package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/replay"
)

// qwenDir holds session files the real Qwen Code 0.24.4 wrote in
// internal/e2e's TestQwenCodeLoopIsStoppedWithinACall and
// TestQwenCodeHealthySessionsAreNeverBlocked, one run per directory, as
// the CLI wrote them: run with LOOP_E2E_KEEP=1, each run's directory keeps
// home/.qwen/projects/<project>/chats/<session>.jsonl (nothing shortened:
// the CLI writes no system instructions there).
const qwenDir = "testdata/qwen-code"

// TestQwenCodeSessions: `loopreplay ~/.qwen/projects/*/chats/*.jsonl`
// reads Qwen Code's session files as its live telemetry: each figure below
// is what the collector made of the same run's qwen-code.tool spans. The
// loop of a model that ignored the nudge, varying its command, is stuck at
// its 4th run and killed at its 5th; its refused calls are not counted,
// nor the one Qwen Code recorded as cancelled as the kill came (it never
// ran). The one that obeyed is stuck at its 2nd run, then recovers;
// the one that repeated the same call is stuck until Qwen Code's own guard
// ends it; a fix-and-test session is stuck on its re-run, then recovers.
func TestQwenCodeSessions(t *testing.T) {
	tests := []struct {
		dir         string
		wantStuckAt int64 // the session's call (3 lead calls come first)
		wantKills   int
		wantFinal   string
		wantCalls   int // calls in the file
		wantCounted int // calls the collector counted: not the hook's refusals
		wantBlocked int // refusals of the hook in the file
	}{
		{dir: "loop-ignores-the-nudge", wantStuckAt: 7, wantKills: 1, wantFinal: "stuck", wantCalls: 11, wantCounted: 8, wantBlocked: 2},
		{dir: "loop-obeys-the-nudge", wantStuckAt: 5, wantKills: 0, wantFinal: "working", wantCalls: 7, wantCounted: 7, wantBlocked: 0},
		{dir: "loop-repeats-the-same-call", wantStuckAt: 5, wantKills: 0, wantFinal: "stuck", wantCalls: 7, wantCounted: 7, wantBlocked: 0},
		// The same failing test re-run once (stuck on the unchanged
		// result), then the fix and the test.
		{dir: "fix-and-test", wantStuckAt: 8, wantKills: 0, wantFinal: "working", wantCalls: 10, wantCounted: 10, wantBlocked: 0},
	}
	var all []string
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			dir := filepath.Join(qwenDir, tt.dir)
			v := replayOneSession(t, dir, "*.jsonl", replay.FormatQwenSession, "qwen_code", &all)
			b, err := os.ReadFile(v.file)
			require.NoError(t, err)
			require.Equal(t, tt.wantBlocked, strings.Count(string(b), `"errorType":"execution_denied"`))
			require.Equal(t, int64(tt.wantCalls), v.sum.Read.TranscriptCalls)
			require.Equal(t, tt.wantCounted, v.Calls)
			v.requireVerdict(t, tt.wantStuckAt, tt.wantKills, tt.wantFinal)
		})
	}
	_, sum := replayFiles(t, all...)
	require.Len(t, sum.Sessions, len(all))
	require.Contains(t, sum.Message, "4 Qwen Code session files")
}

// A malformed Qwen Code session file exits 2 naming its file and line.
func TestQwenCodeSessionErrorsNameTheLine(t *testing.T) {
	f := filepath.Join(t.TempDir(), "s.jsonl")
	require.NoError(t, os.WriteFile(f, []byte(`{"uuid":"u1","sessionId":"s","timestamp":"2026-12-06T20:15:05.759Z","type":"user","provenance":"real_user"}`+"\n"+
		`{"uuid":"u2","sessionId":"s","timestamp":"2026-12-06T20:15:06Z","type":"assistant","provenance":"assistant_output","message":{"parts":[{"functionCall":{"name":"run_shell_command"}}]}}`+"\n"), 0o644))
	var out, errOut strings.Builder
	require.Equal(t, 2, run([]string{f}, nil, &out, &errOut))
	require.Contains(t, errOut.String(), f+":2: not a Qwen Code session line: a tool call without an id or name")
}
