package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/replay"
)

// codexDir holds session (rollout) files the real Codex CLI 0.169.0 wrote
// in internal/e2e's TestCodexCLILoopIsStoppedWithinACall, one run per
// directory; only the long instructions the CLI writes first are shortened.
const codexDir = "testdata/codex-cli"

// TestCodexSessions: `loopreplay $CODEX_HOME/sessions/**/rollout-*.jsonl`
// reads Codex CLI's session files as its live telemetry: the loop of a
// model that ignored the nudge is stuck and killed at its 5th run; the one
// that obeyed is stuck at its 2nd, then recovers; a fix-and-test session
// recovers too.
func TestCodexSessions(t *testing.T) {
	tests := []struct {
		dir         string
		wantStuckAt int64 // the session's call (3 lead calls come first)
		wantKills   int
		wantFinal   string
		wantCalls   int
		wantBlocked int // refusals of the hook in the file: the 3rd blocked call carried the kill out before its output was written
	}{
		{dir: "loop-ignores-the-nudge", wantStuckAt: 5, wantKills: 1, wantFinal: "stuck", wantCalls: 11, wantBlocked: 2},
		{dir: "loop-obeys-the-nudge", wantStuckAt: 5, wantKills: 0, wantFinal: "working", wantCalls: 7, wantBlocked: 0},
		// Files written with apply_patch, the test re-run once with the
		// same failure (stuck on the unchanged result), then fixed.
		{dir: "fix-and-test-with-apply-patch", wantStuckAt: 8, wantKills: 0, wantFinal: "working", wantCalls: 10, wantBlocked: 0},
	}
	var all []string
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			dir := filepath.Join(codexDir, tt.dir)
			v := replayOneSession(t, dir, "rollout-*.jsonl", replay.FormatCodexSession, "codex_cli", &all)
			b, err := os.ReadFile(v.file)
			require.NoError(t, err)
			require.Equal(t, tt.wantBlocked, strings.Count(string(b), `"output":"Command blocked by PreToolUse hook: Blocked by loopsupervisor`))
			require.Equal(t, tt.wantCalls, v.Calls)
			v.requireVerdict(t, tt.wantStuckAt, tt.wantKills, tt.wantFinal)
		})
	}
	_, sum := replayFiles(t, all...)
	require.Len(t, sum.Sessions, len(all))
	require.Contains(t, sum.Message, "3 Codex CLI session files")
}

// A malformed Codex CLI session file exits 2 naming its file and line.
func TestCodexSessionErrorsNameTheLine(t *testing.T) {
	f := filepath.Join(t.TempDir(), "rollout-x.jsonl")
	require.NoError(t, os.WriteFile(f, []byte(`{"timestamp":"2026-12-06T18:16:54.832Z","type":"session_meta","payload":{"id":"s"}}`+"\n"+`{"timestamp":"2026-12-06T18:16:55Z","type":"response_item","payload":{"type":"function_call","name":"exec_command"}}`+"\n"), 0o644))
	var out, errOut strings.Builder
	require.Equal(t, 2, run([]string{f}, nil, &out, &errOut))
	require.Contains(t, errOut.String(), f+":2: a tool call without a call_id or name")
}
