// Package replaytest holds what the tests of loopreplay's page share: the
// page's unit tests in internal/replay and its browser tests in
// internal/devtools, a module of its own so that the browser driver stays
// out of this one's requirements.
package replaytest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/internal/replay"
	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// The inputs the page tests replay, relative to the repository root: the
// 1,972-call incident's scenario and a Claude Code session's logs.
const (
	Incident   = "testdata/scenarios/s000-bash-loop"
	ClaudeLogs = "cmd/loopreplay/testdata/claude-code/logs.jsonl"
)

// Path is rel under the repository root.
func Path(t testing.TB, rel string) string {
	t.Helper()
	root, err := testproc.RepoRoot()
	require.NoError(t, err)
	return filepath.Join(root, rel)
}

// Replay replays inputs (paths under the repository root) with the
// default config, as loopreplay does.
func Replay(t testing.TB, inputs ...string) (*replay.Summary, *replay.Result) {
	t.Helper()
	in := &replay.Input{}
	for _, p := range inputs {
		f, err := os.Open(Path(t, p))
		require.NoError(t, err)
		require.NoError(t, in.Add(f, p))
		require.NoError(t, f.Close())
	}
	cfg, err := replay.Config(nil)
	require.NoError(t, err)
	res, err := replay.Run(context.Background(), cfg, in.Batches)
	require.NoError(t, err)
	sum := replay.Summarize(cfg, in, res)
	return &sum, res
}

// WritePage writes p as a page file in the test's temporary directory and
// returns its path.
func WritePage(t testing.TB, p *replay.Page) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "replay.html")
	var b bytes.Buffer
	require.NoError(t, replay.WritePage(&b, p))
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o600))
	return path
}

// GoldenKill is the kill line of a scenario's golden transitions (dir
// under the repository root).
func GoldenKill(t testing.TB, dir string) replay.Line {
	t.Helper()
	f, err := os.Open(Path(t, filepath.Join(dir, "transitions.golden.jsonl")))
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l replay.Line
		require.NoError(t, json.Unmarshal(sc.Bytes(), &l))
		if l.Kill {
			return l
		}
	}
	t.Fatalf("%s: no kill in the golden transitions", dir)
	return replay.Line{}
}

// SessionCalls is the number of calls the summary counts for session key,
// -1 when it has no such session.
func SessionCalls(sum *replay.Summary, key string) int {
	for _, ss := range sum.Sessions {
		if ss.Session == key {
			return ss.Calls
		}
	}
	return -1
}

// LargePage lays out sessions × calls synthetic calls: every tenth session
// loops from its middle and is killed five calls later.
func LargePage(sessions, calls int) *replay.Page {
	res := &replay.Result{}
	t0 := time.Date(2026, 11, 28, 21, 0, 0, 0, time.UTC)
	for s := 0; s < sessions; s++ {
		key := fmt.Sprintf("session-%03d", s)
		loops := s%10 == 0
		for i := 0; i < calls; i++ {
			sig := uint64(s*calls + i + 1)
			if loops && i >= calls/2 {
				sig = 7
			}
			res.Calls = append(res.Calls, replay.Call{
				Session: key, Client: "genai_semconv", Tool: []string{"read_file", "grep", "bash", "edit"}[i%4],
				SpanID: fmt.Sprintf("%016x", sig), Start: t0.Add(time.Duration(i) * 9 * time.Second),
				Signature: sig, Fingerprint: sig, Counted: true,
			})
		}
		if loops {
			for seq, tr := range []struct {
				to   string
				call int64
				kill bool
			}{{"stuck", int64(calls/2 + 2), false}, {"stuck", int64(calls/2 + 5), true}} {
				res.Events = append(res.Events, loopevent.Event{
					ID: fmt.Sprintf("ld_%s_%d", key, seq+1), Sequence: int64(seq + 1), Session: key,
					From: "working", To: tr.to, Reason: "frequent_identical", Period: 1, Repetitions: 5,
					CallIndex: tr.call, Kill: tr.kill, Explanation: "loop detected: same tool call x5 of last 10",
					Signatures: []string{"3f2a9c"}, Fingerprint: "77b1e0",
				})
			}
		}
	}
	sum := replay.Summary{Message: "synthetic", Read: replay.ReadSummary{ToolCalls: int64(sessions * calls)}}
	return replay.PageOf([]string{"synthetic"}, &sum, res)
}
