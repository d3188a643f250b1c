package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/internal/replay"
)

func runSummary(t *testing.T, args ...string) (replay.Summary, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(append([]string{"--summary"}, args...), nil, &out, &errOut), errOut.String())
	var sum replay.Summary
	require.NoError(t, json.Unmarshal(errOut.Bytes(), &sum), errOut.String())
	return sum, out.String()
}

// writeLines writes OTLP JSON requests, one per line, to a temp file.
func writeLines(t *testing.T, docs ...[]byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "recorded.jsonl")
	require.NoError(t, os.WriteFile(p, append(bytes.Join(docs, []byte("\n")), '\n'), 0o600))
	return p
}

func chatSpans(t *testing.T) []byte {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
	for i, name := range []string{"chat gpt-5", "POST /v1/responses", "invoke_agent triage"} {
		s := ss.AppendEmpty()
		s.SetName(name)
		s.SetTraceID(pcommon.TraceID{1})
		s.SetSpanID(pcommon.SpanID{byte(i + 1)})
		s.Attributes().PutStr("gen_ai.operation.name", strings.Fields(name)[0])
	}
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	require.NoError(t, err)
	return b
}

// toolResultsWithoutSession are Claude Code tool_result records whose
// session.id was dropped (e.g. by an attributes processor).
func toolResultsWithoutSession(t *testing.T) []byte {
	ld := plog.NewLogs()
	lrs := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords()
	for i := 0; i < 3; i++ {
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.Timestamp(1_700_000_000_000_000_000 + int64(i)*1e9))
		lr.Body().SetStr("claude_code.tool_result")
		lr.Attributes().PutStr("tool_name", "Bash")
		lr.Attributes().PutStr("tool_input", `{"command":"ls"}`)
	}
	b, err := (&plog.JSONMarshaler{}).MarshalLogs(ld)
	require.NoError(t, err)
	return b
}

// TestSummarySaysWhenNothingWasRecognised: a file without recognisable tool
// calls is no error, and the summary says so in words, naming what was
// looked for, instead of an empty session list.
func TestSummarySaysWhenNothingWasRecognised(t *testing.T) {
	for _, tc := range []struct {
		name    string
		doc     func(*testing.T) []byte
		words   []string
		skipped map[string]int64
	}{
		{
			name:    "spans that are no tool calls",
			doc:     chatSpans,
			words:   []string{"read 3 spans and 0 log records; no tool calls recognised", `"claude_code.tool_result"`, `"gen_ai.operation.name=execute_tool"`, `"Function: *"`},
			skipped: map[string]int64{"not_a_tool_call": 3},
		},
		{
			name:    "tool-call records without a session key",
			doc:     toolResultsWithoutSession,
			words:   []string{"no tool calls recognised", "3 tool-call log records were skipped: no session key (looked for session.id, gen_ai.conversation.id)"},
			skipped: map[string]int64{"no_session_key": 3},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sum, transitions := runSummary(t, writeLines(t, tc.doc(t)))
			require.Empty(t, transitions)
			for _, w := range tc.words {
				require.Contains(t, sum.Message, w)
			}
			require.Equal(t, tc.skipped, sum.Read.Skipped)
			require.Zero(t, sum.Read.ToolCalls)
			require.NotNil(t, sum.Sessions)
			require.Empty(t, sum.Sessions)
		})
	}
}

// TestSummaryListsEverySession: healthy sessions are listed as working
// with their calls, beside the stuck one, across several input files.
func TestSummaryListsEverySession(t *testing.T) {
	healthy := "../../testdata/scenarios/healthy-edit-test/input.jsonl"
	sum, _ := runSummary(t, healthy)
	require.Len(t, sum.Sessions, 1)
	s := sum.Sessions[0]
	require.Equal(t, "working", s.FinalState)
	require.Zero(t, s.Transitions)
	require.Positive(t, s.Calls)
	require.EqualValues(t, s.Calls, sum.Read.ToolCalls)
	require.Equal(t, map[string]int{"working": 1}, sum.States)

	sum, _ = runSummary(t, healthy, filepath.Join(claudeDir, "logs.jsonl"))
	states := map[string]string{}
	for _, s := range sum.Sessions {
		states[s.Session] = s.FinalState
	}
	require.Len(t, states, 2)
	require.Equal(t, "stuck", states[claudeSession])
	require.Equal(t, map[string]int{"working": 1, "stuck": 1}, sum.States)
	require.Equal(t, 1, sum.Kills)
	require.EqualValues(t, 61, sum.Read.LogRecords)
	require.Positive(t, sum.Read.ToolCallsByClient["claude_code"])
	require.Positive(t, sum.Read.ToolCallsByClient["genai_semconv"])
}

// TestReadsMixedAndPrettyPrintedRequests: traces and logs requests in one
// file, pretty-printed or one per line, replay like the same requests in
// separate files.
func TestReadsMixedAndPrettyPrintedRequests(t *testing.T) {
	logs, err := os.ReadFile(filepath.Join(claudeDir, "logs.jsonl"))
	require.NoError(t, err)
	traces, err := os.ReadFile("../../testdata/scenarios/s000-bash-loop/input.jsonl")
	require.NoError(t, err)
	var separate, errOut bytes.Buffer
	tracesFile, logsFile := writeLines(t, bytes.TrimSpace(traces)), writeLines(t, bytes.TrimSpace(logs))
	require.Equal(t, 0, run([]string{tracesFile, logsFile}, nil, &separate, &errOut), errOut.String())

	// Pretty-print every other request, as a person saving them by hand would.
	var mixed bytes.Buffer
	all := append(append(bytes.TrimSpace(traces), '\n'), bytes.TrimSpace(logs)...)
	for i, line := range bytes.Split(all, []byte("\n")) {
		if i%2 == 1 {
			require.NoError(t, json.Indent(&mixed, line, "", "  "))
		} else {
			mixed.Write(line)
		}
		mixed.WriteByte('\n')
	}
	var got bytes.Buffer
	require.Equal(t, 0, run([]string{"-"}, &mixed, &got, &errOut), errOut.String())
	require.Equal(t, separate.String(), got.String())
	require.Equal(t, 4, strings.Count(got.String(), "\n"), got.String())
}

// TestBadLogsInputNamesFileAndLine: a broken request in a logs recording
// stops the replay with exit 2 and the place to look.
func TestBadLogsInputNamesFileAndLine(t *testing.T) {
	logs, err := os.ReadFile(filepath.Join(claudeDir, "logs.jsonl"))
	require.NoError(t, err)
	lines := bytes.SplitN(logs, []byte("\n"), 3)
	for name, tc := range map[string]struct {
		doc  []byte
		want string
	}{
		"truncated request": {append(append(lines[0], '\n'), lines[1][:len(lines[1])/2]...), ":2: not OTLP JSON"},
		"not OTLP":          {append(append(lines[0], '\n'), `{"resource": {}}`...), ":2: not an OTLP JSON traces or logs request"},
		"bad field":         {append(append(lines[0], '\n'), `{"resourceLogs": [{"scopeLogs": 7}]}`...), ":2: not an OTLP JSON logs request"},
	} {
		t.Run(name, func(t *testing.T) {
			p := writeLines(t, tc.doc)
			var out, errOut bytes.Buffer
			require.Equal(t, 2, run([]string{p}, nil, &out, &errOut))
			require.Contains(t, errOut.String(), p+tc.want)
		})
	}
}

// TestHTMLPageIsWritten: --html writes the page beside the usual output;
// a page that cannot be written is exit 2 naming the path.
func TestHTMLPageIsWritten(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "run.html")
	in := filepath.Join(claudeDir, "logs.jsonl")
	var out, errOut bytes.Buffer
	require.Equal(t, 0, run([]string{"--html", page, in}, nil, &out, &errOut), errOut.String())
	require.Contains(t, out.String(), `"kill":true`)
	b, err := os.ReadFile(page)
	require.NoError(t, err)
	require.Contains(t, string(b), `id="loopreplay-data"`)
	require.Contains(t, string(b), claudeSession)
	require.Contains(t, string(b), "loop detected: same tool call x5 of last 10")

	missing := filepath.Join(dir, "no", "such", "dir", "run.html")
	errOut.Reset()
	require.Equal(t, 2, run([]string{"--html", missing, in}, nil, &out, &errOut))
	require.Contains(t, errOut.String(), missing)
}

// TestInterleavedTraceSessionsStayApart: sessions keyed by trace id, their
// calls interleaved, are two rows of five calls: one stuck, one working.
func TestInterleavedTraceSessionsStayApart(t *testing.T) {
	sum, _ := runSummary(t, "../../testdata/scenarios/interleaved-sessions/input.jsonl")
	require.Len(t, sum.Sessions, 2)
	got := map[string]int{}
	for _, s := range sum.Sessions {
		require.Equal(t, 5, s.Calls, s.Session)
		got[s.FinalState]++
	}
	require.Equal(t, map[string]int{"stuck": 1, "working": 1}, got)
}
