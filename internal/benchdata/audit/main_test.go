package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/benchdata/sessions"
)

// TestReportSaysWhatWasMeasured: the figures are the runs' (median wall
// and CPU time, largest peak RSS), and the sentence on memory follows
// the ratio measured, whichever way it went.
func TestReportSaysWhatWasMeasured(t *testing.T) {
	h := &history{took: time.Second}
	for range 10 {
		h.files = append(h.files, sessions.File{Kind: sessions.StreamJSON, Bytes: 1 << 20})
	}
	runs := func(rssMB ...int64) []run {
		var rs []run
		for i, m := range rssMB {
			rs = append(rs, run{wall: time.Duration(i+1) * time.Second, cpu: time.Duration(i+1) * 500 * time.Millisecond, rss: m << 20})
		}
		return rs
	}
	for _, tc := range []struct {
		name      string
		small     []run
		all       []run
		want, not string
		peak      string
	}{
		{"flat", runs(20, 19, 21), runs(22, 23, 21), "memory does not grow with the number of files", "does not stream", "23.0 MB"},
		{"growing", runs(20, 20, 20), runs(60, 61, 59), "memory grows with the number of files: the audit does not stream as it should", "does not grow", "61.0 MB"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			audits := []*audit{
				{files: 1, bytes: 1 << 20, runs: tc.small}, {files: 10, bytes: 10 << 20, runs: tc.all},
				{files: 1, bytes: 1 << 20, page: true, runs: tc.small}, {files: 10, bytes: 10 << 20, page: true, runs: tc.all},
			}
			got := report(h, audits, "bin/loopreplay")
			require.Contains(t, got, tc.want)
			require.NotContains(t, got, tc.not)
			// Median wall 2 s and CPU 1 s; the largest RSS.
			require.Contains(t, got, "| `--summary` | 10 | 10.0 | 2.00 s | 5 | 5.0 | 1.00 s | 10 | 10.0 | "+tc.peak+" |")
		})
	}
}

// TestCheckSaysWhatTheAuditMissed: a run counts only when every file
// given was read as the format it was written in, every copy a session
// of its own, the noisy files read in part and none skipped.
func TestCheckSaysWhatTheAuditMissed(t *testing.T) {
	given := []sessions.File{
		{Kind: sessions.CodexSession}, {Kind: sessions.CodexSession},
		{Kind: sessions.OpenCodeExport}, {Kind: sessions.StreamJSON, Noisy: true},
	}
	for _, tc := range []struct {
		name, sum, want string
	}{
		{"all read", `{"read":{"files_by_format":{"codex_cli_session":2,"opencode_export":1,"claude_code_stream_json":1},"read_in_part":[{}]},
			"sessions":[{},{},{},{}]}`, ""},
		{"two copies merged", `{"message":"m","read":{"files_by_format":{"codex_cli_session":2,"opencode_export":1,"claude_code_stream_json":1},"read_in_part":[{}]},
			"sessions":[{},{},{},{"parent_session":"s"}]}`, "3 sessions of 4: m"},
		{"read as another format", `{"message":"m","read":{"files_by_format":{"codex_cli_session":2,"otlp_json":1,"claude_code_stream_json":1},"read_in_part":[{}]},
			"sessions":[{},{},{},{}]}`, "read 0 opencode_export files of 1: m"},
		{"a file skipped", `{"message":"m","read":{"files_by_format":{"codex_cli_session":1,"opencode_export":1,"claude_code_stream_json":1},"read_in_part":[{}],"skipped_files":[{}]},
			"sessions":[{},{},{}]}`, "1 files skipped: m"},
		{"the noisy file read whole", `{"read":{"files_by_format":{"codex_cli_session":2,"opencode_export":1,"claude_code_stream_json":1}},
			"sessions":[{},{},{},{}]}`, "0 files read in part, want the 1 written so"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sum summary
			require.NoError(t, json.Unmarshal([]byte(tc.sum), &sum))
			err := check(&sum, given)
			if tc.want == "" {
				require.NoError(t, err)
			} else {
				require.EqualError(t, err, tc.want)
			}
		})
	}
}
