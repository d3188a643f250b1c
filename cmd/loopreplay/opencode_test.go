package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/replay"
)

// TestOpenCodeSessions: `opencode export <session>` documents of real
// OpenCode 1.18.33 runs (internal/e2e's, recorded by
// TestRecordOpenCodeSessions, kept whole: no system prompt is in an
// export) replay as OpenCode's live telemetry did in the same run: the
// loop of a model that ignored the nudge is stuck at its 2nd run and
// killed at its 5th, the one that obeyed is stuck at its 2nd run and
// recovers when it changes course, 40 calls of coding are never stuck.
// Replaying the run's live ai.toolCall spans gives the same verdicts.
func TestOpenCodeSessions(t *testing.T) {
	tests := []struct {
		dir         string
		wantStuckAt int64 // the session's call (3 lead calls come first)
		wantKills   int
		wantFinal   string
		wantCalls   int
		wantLive    int // calls in the live spans: the kill cut their export short
		// wantBlocked counts the plugin's refusals in the file: the e2e
		// test saw 3, the 3rd carrying the kill out before OpenCode
		// wrote more than a pending part (not replayed).
		wantBlocked int
	}{
		{dir: "loop-ignores-the-nudge", wantStuckAt: 5, wantKills: 1, wantFinal: "stuck", wantCalls: 10, wantLive: 9, wantBlocked: 2},
		{dir: "loop-obeys-the-nudge", wantStuckAt: 5, wantKills: 0, wantFinal: "working", wantCalls: 7, wantLive: 7},
		{dir: "coding-session", wantFinal: "working", wantCalls: 40, wantLive: 40},
	}
	var all []string
	for _, tt := range tests {
		files, err := filepath.Glob(filepath.Join(openCodeDir, tt.dir, "ses_*.json"))
		require.NoError(t, err)
		require.Len(t, files, 1, tt.dir)
		all = append(all, files[0])
		t.Run(tt.dir, func(t *testing.T) {
			b, err := os.ReadFile(files[0])
			require.NoError(t, err)
			require.Equal(t, tt.wantBlocked, strings.Count(string(b), `"error": "Blocked by loopsupervisor`))
			out, sum := replayFiles(t, files[0])
			require.Equal(t, map[string]int{replay.FormatOpenCodeExport: 1}, sum.Read.Files)
			require.Equal(t, map[string]int64{"vercel_ai": int64(tt.wantCalls)}, sum.Read.ToolCallsByClient)
			require.Len(t, sum.Sessions, 1)
			s := sum.Sessions[0]
			require.Equal(t, "vercel_ai", s.Client)
			require.Equal(t, files[0], s.Transcript)
			v := verdictsOf(t, out, sum)[s.Session]
			require.Equal(t, tt.wantStuckAt, v.StuckAtCall, out)
			require.Equal(t, tt.wantKills, v.Kills, out)
			require.Equal(t, tt.wantFinal, v.FinalState, out)

			liveOut, liveSum := replayFiles(t, filepath.Join(openCodeDir, tt.dir, openCodeLiveFile))
			require.Len(t, liveSum.Sessions, 1)
			require.Equal(t, tt.wantLive, liveSum.Sessions[0].Calls)
			lv := verdictsOf(t, liveOut, liveSum)[liveSum.Sessions[0].Session]
			require.Equal(t, []any{lv.StuckAtCall, lv.Stuck, lv.Kills, lv.FinalState}, []any{v.StuckAtCall, v.Stuck, v.Kills, v.FinalState},
				"the file's verdict is not the live telemetry's\nfile:\n%s\nlive:\n%s", out, liveOut)
		})
	}
	_, sum := replayFiles(t, all...)
	require.Len(t, sum.Sessions, len(all))
	require.Contains(t, sum.Message, "3 OpenCode session exports")

	// A config that reads session.id names each session by its id.
	_, sum = replayFiles(t, append([]string{"--config", "../../config/replay.yaml"}, all...)...)
	require.Len(t, sum.Sessions, len(all))
	for _, s := range sum.Sessions {
		require.Equal(t, filepath.Join(filepath.Dir(s.Transcript), s.Session+".json"), s.Transcript)
	}
}

// An audit skips an export cut short, saying so, and reads the rest.
func TestOpenCodeCutShortIsSkipped(t *testing.T) {
	good, err := filepath.Glob(filepath.Join(openCodeDir, "loop-obeys-the-nudge", "ses_*.json"))
	require.NoError(t, err)
	require.Len(t, good, 1)
	b, err := os.ReadFile(good[0])
	require.NoError(t, err)
	cut := filepath.Join(t.TempDir(), "ses_cut.json")
	require.NoError(t, os.WriteFile(cut, b[:len(b)/2], 0o644))
	alone := runCommand(good[0])
	require.Equal(t, 0, alone.code, alone.errOut)
	got := runCommand(cut, good[0])
	require.Equal(t, 3, got.code, got.errOut)
	require.Equal(t, alone.out, got.out)
	require.True(t, strings.HasPrefix(got.errOut, "loopreplay: skipped "+cut+": "+cut+":"), got.errOut)
	require.Contains(t, got.errOut, "an OpenCode session export cut short (not complete JSON)")
}
