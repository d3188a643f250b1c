package sessions

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

const testdata = "../../../cmd/loopreplay/testdata"

// TestGenerateWritesNewSessionsAtTheirTimes: each copy is a session of its
// own (no id of a recorded session is left), starting at its own time,
// laid out as its CLI keeps it, the kinds mixed as asked.
func TestGenerateWritesNewSessionsAtTheirTimes(t *testing.T) {
	dir := t.TempDir()
	start := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	files, err := Generate(dir, Options{Testdata: testdata, Sessions: 40, Spacing: 20 * time.Minute, Start: start, NoisyEvery: 4})
	require.NoError(t, err)
	require.Len(t, files, 40)
	kinds := map[Kind]int{}
	noisy := 0
	recorded := recordedIDs(t)
	for i, f := range files {
		kinds[f.Kind]++
		b, err := os.ReadFile(f.Path)
		require.NoError(t, err)
		if hasSubagents(f.Path) {
			require.Greater(t, f.Bytes, int64(len(b)), "its subagents' transcripts count")
		} else {
			require.EqualValues(t, len(b), f.Bytes, f.Path)
		}
		if f.Noisy {
			noisy++
			require.True(t, strings.HasPrefix(string(b), ShellNoise))
		}
		for _, id := range uuidRE.FindAllString(string(b), -1) {
			require.NotContains(t, recorded, id, "%s keeps a recorded session's id", f.Path)
		}
		first, ok := earliest(b)
		require.True(t, ok)
		require.Equal(t, start.Add(time.Duration(i)*20*time.Minute), first, f.Path)
		switch f.Kind {
		case ClaudeSession:
			require.Regexp(t, `/claude/projects/-home-dev-project-\d\d/[0-9a-f-]{36}\.jsonl$`, f.Path)
		case GeminiSession:
			require.Regexp(t, `/gemini/tmp/project-\d\d/chats/session-\d{4}-\d\d-\d\dT\d\d-\d\d-[0-9a-f]{8}\.jsonl$`, f.Path)
		}
	}
	require.Equal(t, map[Kind]int{ClaudeSession: 10, StreamJSON: 16, GeminiSession: 10, OTLP: 4}, kinds)
	require.Equal(t, 4, noisy)
}

func hasSubagents(path string) bool {
	_, err := os.Stat(filepath.Join(strings.TrimSuffix(path, ".jsonl"), "subagents"))
	return err == nil
}

// recordedIDs are the session ids of the recorded sessions.
func recordedIDs(t *testing.T) map[string]bool {
	ids := map[string]bool{}
	files, err := filepath.Glob(filepath.Join(testdata, "transcripts", "*", "*-*-*-*-*.jsonl.gz"))
	require.NoError(t, err)
	re := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	for _, f := range files {
		ids[re.FindString(filepath.Base(f))] = true
	}
	require.NotEmpty(t, ids)
	return ids
}
