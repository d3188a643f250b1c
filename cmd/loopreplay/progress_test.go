package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/replay"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

// TestProgressIsShownOnATerminalAfterASecond: the line is drawn only on a
// terminal, only once the run has lasted a second, and at most every
// 100 ms.
func TestProgressIsShownOnATerminalAfterASecond(t *testing.T) {
	for _, tc := range []struct {
		name     string
		terminal bool
		// elapsed is the run's time so far; sinceDrawn the time since the
		// line was last drawn (0: never).
		elapsed, sinceDrawn time.Duration
		want                bool
	}{
		{"not a terminal, a long run", false, time.Hour, 0, false},
		{"a terminal, half a second in", true, 500 * time.Millisecond, 0, false},
		{"a terminal, just under a second in", true, time.Second - time.Nanosecond, 0, false},
		{"a terminal, a second in", true, time.Second, 0, true},
		{"a terminal, drawn 50 ms ago", true, 2 * time.Second, 50 * time.Millisecond, false},
		{"a terminal, drawn 100 ms ago", true, 2 * time.Second, 100 * time.Millisecond, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
			p := &progressLine{terminal: tc.terminal, now: clock.now, start: clock.now()}
			clock.advance(tc.elapsed)
			if tc.sinceDrawn > 0 {
				p.drawn, p.shown = clock.now().Add(-tc.sinceDrawn), true
			}
			require.Equal(t, tc.want, p.due(clock.now()))
		})
	}
}

// TestProgressLine: drawn in place once due, never twice within 100 ms,
// cleared before a note and at the end; nothing at all off a terminal.
func TestProgressLine(t *testing.T) {
	pr := replay.Progress{Phase: replay.PhaseReplaying, Files: 3, Total: 10, Bytes: 3 << 20, TotalBytes: 10 << 20, Current: "a.jsonl"}
	for _, terminal := range []bool{false, true} {
		var w bytes.Buffer
		clock := &fakeClock{t: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
		p := &progressLine{w: &w, terminal: terminal, now: clock.now, start: clock.now()}
		p.update(pr)
		clock.advance(1200 * time.Millisecond)
		p.update(pr)
		clock.advance(50 * time.Millisecond)
		p.update(pr)
		p.note("loopreplay: skipped b.jsonl: empty")
		clock.advance(100 * time.Millisecond)
		p.update(pr)
		p.clear()
		if !terminal {
			require.Equal(t, "loopreplay: skipped b.jsonl: empty\n", w.String())
			continue
		}
		line := "\r\x1b[Kloopreplay: replaying 3/10 files, 3.0/10.0 MB: a.jsonl"
		require.Equal(t, line+"\r\x1b[Kloopreplay: skipped b.jsonl: empty\n"+line+"\r\x1b[K", w.String())
	}
}

func TestProgressTextFitsTheLine(t *testing.T) {
	long := "/home/dev/.claude/projects/-home-dev-src-a-very-long-project-name-indeed/" + strings.Repeat("0123456789", 5) + ".jsonl"
	got := progressText(replay.Progress{Phase: replay.PhaseReading, Files: 12, Total: 1000, Bytes: 5 << 20, TotalBytes: 200 << 20, Current: long})
	require.Len(t, []rune(got), progressWidth)
	require.True(t, strings.HasPrefix(got, "loopreplay: reading 12/1000 files, 5.0/200.0 MB: …"), got)
	require.True(t, strings.HasSuffix(got, "0123456789.jsonl"), got)
}

// TestProgressIsNeverShownOffATerminal: buffers, files, pipes and the
// null device are no terminal; a pseudo-terminal is one.
func TestProgressIsNeverShownOffATerminal(t *testing.T) {
	require.False(t, isTerminal(&bytes.Buffer{}))
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr.txt"))
	require.NoError(t, err)
	defer f.Close()
	require.False(t, isTerminal(f))
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	require.False(t, isTerminal(w))
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	require.NoError(t, err)
	defer null.Close()
	require.False(t, isTerminal(null))

	// A run of the real command on a pipe prints no progress.
	var out bytes.Buffer
	code := run([]string{"--summary", filepath.Join(corpusDir, "loop-identical-call", streamFile)}, nil, &out, w)
	require.Equal(t, 0, code)
	require.NoError(t, w.Close())
	b := make([]byte, 1<<20)
	n, _ := r.Read(b)
	require.NotContains(t, string(b[:n]), "\r")
	require.True(t, strings.HasPrefix(string(b[:n]), "{"))
}
