package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/replay"
)

// TestGeminiSessions: session files the real Gemini CLI wrote
// (TestRecordGeminiSessions) replay to their golden transitions; the
// healthy one is never stuck, the loops are, and `loopreplay
// ~/.gemini/tmp/*/chats/*.jsonl --summary` names each with its file.
func TestGeminiSessions(t *testing.T) {
	ents, err := os.ReadDir(geminiDir)
	require.NoError(t, err)
	var all []string
	for _, e := range ents {
		files, err := filepath.Glob(filepath.Join(geminiDir, e.Name(), "session-*.jsonl"))
		require.NoError(t, err)
		require.Len(t, files, 1, e.Name())
		all = append(all, files[0])
		t.Run(e.Name(), func(t *testing.T) {
			out, sum := replayFiles(t, files[0])
			checkOrUpdate(t, filepath.Join(geminiDir, e.Name(), "transitions.golden.jsonl"), []byte(out))
			require.Equal(t, map[string]int{replay.FormatGeminiSession: 1}, sum.Read.Files)
			require.Len(t, sum.Sessions, 1)
			s := sum.Sessions[0]
			require.Equal(t, "gemini_cli", s.Client)
			require.Equal(t, files[0], s.Transcript)
			// The file is named after the session's id.
			require.Contains(t, filepath.Base(files[0]), s.Session[:8])
			v := verdictsOf(t, out, sum)[s.Session]
			if strings.HasPrefix(e.Name(), "loop-") {
				require.Positive(t, v.StuckAtCall, "loop never caught")
				return
			}
			require.Zero(t, v.Stuck, "a healthy session was stuck:\n%s", out)
			require.Zero(t, v.Kills)
		})
	}
	require.GreaterOrEqual(t, len(all), 2)
	_, sum := replayFiles(t, all...)
	require.Len(t, sum.Sessions, len(all))
	require.Contains(t, sum.Message, "Gemini CLI session files")
}

// A malformed Gemini CLI session file exits 2 naming its file and line.
func TestGeminiSessionErrorsNameTheLine(t *testing.T) {
	f := filepath.Join(t.TempDir(), "session-x.jsonl")
	require.NoError(t, os.WriteFile(f, []byte(`{"sessionId":"s","projectHash":"p","kind":"main"}`+"\n"+`{"id":"m","type":"gemini","toolCalls":[{"id":"c"`+"\n"), 0o644))
	var out, errOut strings.Builder
	require.Equal(t, 2, run([]string{f}, nil, &out, &errOut))
	require.Contains(t, errOut.String(), f+":2: not a Gemini CLI session line")
}
