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
		for _, id := range append(uuidRE.FindAllString(string(b), -1), openCodeIDRE.FindAllString(string(b), -1)...) {
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
		case CodexSession:
			at := start.Add(time.Duration(i) * 20 * time.Minute)
			require.Regexp(t, `/codex/sessions/`+at.Format(`2006/01/02/rollout-2006-01-02T15-04-05`)+`-[0-9a-f-]{36}\.jsonl$`, f.Path)
		case QwenSession:
			require.Regexp(t, `/qwen/projects/-home-dev-project-\d\d/chats/[0-9a-f-]{36}\.jsonl$`, f.Path)
		case OpenCodeExport:
			require.Regexp(t, `/opencode/ses_[0-9a-f]{12}[0-9A-Za-z]{14}\.json$`, f.Path)
		}
		// The session's id, the file's name.
		if k := f.Kind; k == ClaudeSession || k == CodexSession || k == QwenSession || k == OpenCodeExport {
			id := strings.TrimSuffix(filepath.Base(f.Path), filepath.Ext(f.Path))
			id = id[max(0, len(id)-36):]
			if k == OpenCodeExport {
				id = strings.TrimSuffix(filepath.Base(f.Path), ".json")
			}
			require.Contains(t, string(b), `"`+id+`"`, f.Path)
		}
	}
	require.Equal(t, map[Kind]int{ClaudeSession: 12, StreamJSON: 10, GeminiSession: 6, OTLP: 2, CodexSession: 4, QwenSession: 4, OpenCodeExport: 2}, kinds)
	require.Equal(t, 2, noisy)
}

func hasSubagents(path string) bool {
	_, err := os.Stat(filepath.Join(strings.TrimSuffix(path, ".jsonl"), "subagents"))
	return err == nil
}

// recordedIDs are the session ids of the recorded sessions (their files'
// names), and every id of OpenCode's exports.
func recordedIDs(t *testing.T) map[string]bool {
	ids := map[string]bool{}
	re := regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	for _, pat := range []string{"transcripts/*/*-*-*-*-*.jsonl.gz", "codex-cli/*/rollout-*.jsonl", "qwen-code/*/*-*-*-*-*.jsonl"} {
		files, err := filepath.Glob(filepath.Join(testdata, pat))
		require.NoError(t, err)
		require.NotEmpty(t, files, pat)
		for _, f := range files {
			ids[re.FindString(filepath.Base(f))] = true
		}
	}
	files, err := filepath.Glob(filepath.Join(testdata, "opencode", "*", "ses_*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		for _, id := range regexp.MustCompile(`\b(?:ses|msg|prt)_[0-9A-Za-z]{20,}`).FindAllString(string(b), -1) {
			ids[id] = true
		}
	}
	return ids
}
