package replay

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/benchdata/sessions"
	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
)

const loopreplayTestdata = "../../cmd/loopreplay/testdata"

// auditFiles audits inputs with the default config, keeping the notes.
func auditFiles(t *testing.T, inputs []string) (*AuditResult, []loopevent.Event, []string) {
	t.Helper()
	cfg, err := Config(nil)
	require.NoError(t, err)
	var events []loopevent.Event
	var notes []string
	res, err := Audit(context.Background(), cfg, inputs, AuditOptions{
		Events: func(evs []loopevent.Event) error { events = append(events, evs...); return nil },
		Note:   func(l string) { notes = append(notes, l) },
	})
	require.NoError(t, err)
	return res, events, notes
}

// TestAuditMatchesReplayingEverythingAtOnce: the audit, a file at a time,
// makes the same transitions in the same order, and the same summary, as
// one replay of every call of every file read first and ordered by start:
// Claude Code sessions with their subagents, stream-json output and
// Gemini CLI sessions, given in no order of time.
func TestAuditMatchesReplayingEverythingAtOnce(t *testing.T) {
	var inputs []string
	for _, pat := range []string{"transcripts/*/*-*-*-*-*.jsonl.gz", "transcripts/loop-*/stream-json.jsonl.gz", "gemini-cli/*/session-*.jsonl"} {
		m, err := filepath.Glob(filepath.Join(loopreplayTestdata, pat))
		require.NoError(t, err)
		require.NotEmpty(t, m, pat)
		inputs = append(inputs, m...)
	}
	in := &Input{}
	for _, f := range inputs {
		require.NoError(t, in.AddFile(f))
	}
	cfg, err := Config(nil)
	require.NoError(t, err)
	want, err := Run(context.Background(), cfg, in.All())
	require.NoError(t, err)
	require.NotEmpty(t, want.Events)

	got, events, notes := auditFiles(t, inputs)
	require.Empty(t, notes)
	require.Equal(t, len(inputs), got.Read)
	require.Equal(t, want.Events, events)
	require.Equal(t, Summarize(cfg, in, want), got.Summary)
}

// TestAuditHoldsOnlyTheFilesOfOneTime: a history of sessions that followed
// one another is held a file at a time, however many there are; sessions
// that ran at once are held together, as they must be to share a clock.
func TestAuditHoldsOnlyTheFilesOfOneTime(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sessions int
		// spacing is the time between session starts; the recorded
		// sessions last two to four minutes.
		spacing time.Duration
		maxOpen int
	}{
		{"20 sessions, 20 minutes apart", 20, 20 * time.Minute, 1},
		{"60 sessions, 20 minutes apart", 60, 20 * time.Minute, 1},
		// All but one: the first Codex CLI session's calls end 3 s after
		// the start, before the OpenCode session's first (23 s after its
		// creation, where its copy starts) and the file is let go.
		{"20 sessions at once", 20, 0, 19},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files, err := sessions.Generate(t.TempDir(), sessions.Options{Testdata: loopreplayTestdata, Sessions: tc.sessions, Spacing: tc.spacing})
			require.NoError(t, err)
			var inputs []string
			for _, f := range files {
				inputs = append(inputs, f.Path)
			}
			res, _, notes := auditFiles(t, inputs)
			require.Empty(t, notes)
			require.Equal(t, tc.sessions, res.Read)
			require.Equal(t, tc.maxOpen, res.MaxOpen)
		})
	}
}

// TestAuditReadsEachCopyAsItsOriginal: a generated history of each kind,
// every recorded session of it copied twice and the copies all run at
// once, is audited as a session per copy (no two merged: each one's id is
// its own) whose verdict is its original's, audited alone.
func TestAuditReadsEachCopyAsItsOriginal(t *testing.T) {
	for _, tc := range []struct {
		kind sessions.Kind
		// recorded is how many sessions of the kind cmd/loopreplay/testdata holds.
		recorded int
	}{
		{sessions.GeminiSession, 3},
		{sessions.CodexSession, 3},
		{sessions.QwenSession, 4},
		{sessions.OpenCodeExport, 3},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			var mix [len(sessions.DefaultMix)]int
			mix[tc.kind] = 1
			files, err := sessions.Generate(t.TempDir(), sessions.Options{Testdata: loopreplayTestdata, Sessions: 2 * tc.recorded, Mix: mix})
			require.NoError(t, err)
			var inputs []string
			from := map[string]string{}
			for _, f := range files {
				require.Equal(t, tc.kind, f.Kind)
				inputs = append(inputs, f.Path)
				from[f.Path] = f.From
			}
			require.Len(t, slices.Compact(slices.Sorted(maps.Values(from))), tc.recorded)
			res, _, notes := auditFiles(t, inputs)
			require.Empty(t, notes)
			require.Equal(t, len(files), res.Read)
			require.Equal(t, map[string]int{tc.kind.String(): len(files)}, res.Summary.Read.Files)
			require.Len(t, res.Summary.Sessions, len(files), "a session per copy")
			ids := map[string]bool{}
			originals := map[string]SessionSummary{}
			for _, got := range res.Summary.Sessions {
				require.False(t, ids[got.Session], "%s twice", got.Session)
				ids[got.Session] = true
				orig, ok := originals[from[got.Transcript]]
				if !ok {
					alone, _, notes := auditFiles(t, []string{from[got.Transcript]})
					require.Empty(t, notes)
					require.Len(t, alone.Summary.Sessions, 1)
					orig = alone.Summary.Sessions[0]
					originals[from[got.Transcript]] = orig
				}
				require.NotEqual(t, orig.Session, got.Session)
				orig.Session, orig.Transcript = got.Session, got.Transcript
				require.Equal(t, orig, got, "%s, a copy of %s", got.Transcript, from[got.Transcript])
			}
		})
	}
}

// TestAuditSaysWhenATimestampLookWasWrong: a call whose line has no
// timestamp of its own, though its input has one, starts at a time made
// up before the file's timestamps: the first pass's look misses it, and
// the audit says so rather than replay it out of order unannounced.
func TestAuditSaysWhenATimestampLookWasWrong(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "old.jsonl")
	use := `{"type":"assistant","session_id":"s9","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"date","note":{"timestamp":"2026-12-02T03:00:00Z"}}}]}}`
	res := `{"type":"user","session_id":"s9","timestamp":"2026-12-02T03:42:29.495Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}}`
	require.NoError(t, os.WriteFile(f, []byte(use+"\n"+res+"\n"), 0o644))
	_, _, notes := auditFiles(t, []string{f})
	require.Len(t, notes, 1)
	require.Contains(t, notes[0], f+": its first call (2000-01-01T00:00:01Z) is earlier than its timestamps said")
}

func TestEarliestTimestamp(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return v
	}
	for _, tc := range []struct {
		name, data string
		read       func([]byte) (time.Time, bool)
		want       time.Time
		ok         bool
	}{
		{"a session transcript", sessionUse + "\n" + sessionResult + "\n", claudeEarliest, at("2026-12-02T03:42:28.736Z"), true},
		{"an earlier line without calls", sessionResult + "\n" + sessionUse, claudeEarliest, at("2026-12-02T03:42:28.736Z"), true},
		{"a tool_use line without a timestamp", streamInit + "\n" + streamUse + "\n" + sessionResult, claudeEarliest, time.Time{}, false},
		{"no timestamps", streamInit + "\n", claudeEarliest, time.Time{}, false},
		{"a Gemini CLI session", geminiMeta + "\n" + geminiUse + "\n" + geminiFail, geminiEarliest, at("2026-12-02T04:43:22.466Z"), true},
		{"a Gemini CLI call without a timestamp", geminiMeta + "\n" + `{"id":"m","type":"gemini","toolCalls":[{"id":"c","name":"glob"}]}`, geminiEarliest, time.Time{}, false},
		{"the older one-document .json", "{\n" + strings.TrimPrefix(geminiMeta, "{"), geminiEarliest, time.Time{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.read([]byte(tc.data))
			require.Equal(t, tc.ok, ok)
			require.True(t, tc.want.Equal(got), "got %s", got)
		})
	}
}
