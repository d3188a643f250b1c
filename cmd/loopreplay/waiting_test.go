package main

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestWaitingTranscripts replays the Claude Code sessions the real CLI
// wrote while polling a CI run (TestRecordWaitingTranscripts). With a
// wait in each poll, `sleep 30 && gh run view 4242 --json
// status,conclusion` answering in progress six times (30 s apart, really)
// and then success, the session is waiting under an implicit lease and
// never stuck or killed. Its twin, the same polls back to back without
// the sleep, is stuck at the 2nd poll (unchanged_result) and killed at the
// 5th (frequent_identical), as before.
func TestWaitingTranscripts(t *testing.T) {
	for _, tc := range []struct {
		name string
		// stuckAtCall is the call the session is first stuck at (0: never);
		// the first call is the commit, so poll n is call n+1.
		stuckAtCall int64
		kills       int
		waiting     bool
		final       string
	}{
		{name: "ci-poll-sleep", waiting: true, final: "working"},
		{name: "ci-poll-no-sleep", stuckAtCall: 3, kills: 1, final: "stuck"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(waitingDir, tc.name)
			file := waitingTranscript(t, dir)
			out, sum := replayFiles(t, file)
			checkOrUpdate(t, filepath.Join(dir, "transitions.golden.jsonl"), []byte(out))
			sout, _ := replayFiles(t, filepath.Join(dir, streamFile))
			require.Equal(t, sortedLines(t, out), sortedLines(t, sout), "stream-json and session transcript disagree")

			require.Len(t, sum.Sessions, 1)
			s := sum.Sessions[0]
			require.Equal(t, ciRunPolls+3, s.Calls, "the commit, the polls and the merge")
			require.Equal(t, tc.stuckAtCall, s.StuckAtCall)
			require.Equal(t, tc.kills, s.Kills)
			require.Equal(t, tc.final, s.FinalState)
			lines := sortedLines(t, out)
			waited := false
			for _, l := range lines {
				if tc.waiting {
					require.NotEqual(t, "stuck", l.To, "a waiting poll was stuck:\n%s", out)
				}
				if l.To == "waiting" {
					waited = true
					require.Equal(t, "implicit_lease", l.Reason)
					require.Equal(t, int64(3), l.CallIndex, "waiting from the 2nd poll")
				}
				if l.Kill {
					require.Equal(t, "frequent_identical", l.Reason)
					require.Equal(t, int64(6), l.CallIndex, "killed at the 5th poll")
				}
			}
			require.Equal(t, tc.waiting, waited, "transitions:\n%s", out)
			if tc.waiting {
				require.GreaterOrEqual(t, pollGap(t, file), 30*time.Second, "the recorded waits are real")
			}
		})
	}
}

// waitingTranscript is the session transcript of a waiting session: the
// one <session id>.jsonl.gz beside the stream-json output.
func waitingTranscript(t *testing.T, dir string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.jsonl.gz"))
	require.NoError(t, err)
	var files []string
	for _, f := range m {
		if filepath.Base(f) != streamFile {
			files = append(files, f)
		}
	}
	require.Len(t, files, 1, "%s: want one session transcript", dir)
	return files[0]
}

// pollGap is the shortest time between two consecutive `gh run view`
// calls of a transcript, as the CLI stamped them.
func pollGap(t *testing.T, file string) time.Duration {
	t.Helper()
	f, err := os.Open(file)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	var at []time.Time
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var line struct {
			Timestamp time.Time `json:"timestamp"`
			Message   struct {
				Content json.RawMessage `json:"content"`
			} `json:"message"`
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		var blocks []struct {
			Type  string `json:"type"`
			Input struct {
				Command string `json:"command"`
			} `json:"input"`
		}
		if json.Unmarshal(line.Message.Content, &blocks) != nil {
			continue
		}
		for _, b := range blocks {
			if b.Type == "tool_use" && strings.Contains(b.Input.Command, "gh run view") {
				at = append(at, line.Timestamp)
			}
		}
	}
	require.NoError(t, sc.Err())
	require.Len(t, at, ciRunPolls+1)
	gap := time.Duration(1<<63 - 1)
	for i := 1; i < len(at); i++ {
		gap = min(gap, at[i].Sub(at[i-1]))
	}
	return gap
}
