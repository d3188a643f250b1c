package replay

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

const openCodeRecorded = "../../cmd/loopreplay/testdata/opencode"

// liveSpans are the ai.toolCall spans a recorded run sent the collector,
// by call id.
func liveSpans(t *testing.T, file string) map[string]ptrace.Span {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	spans := map[string]ptrace.Span{}
	var u ptrace.JSONUnmarshaler
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		td, err := u.UnmarshalTraces(line)
		require.NoError(t, err)
		forEachSpan(td, func(sp ptrace.Span) {
			id, _ := sp.Attributes().Get("ai.toolCall.id")
			spans[id.Str()] = sp
		})
	}
	return spans
}

// attrText is a span attribute's text, "(none)" when it has none.
func attrText(sp ptrace.Span, key string) string {
	v, ok := sp.Attributes().Get(key)
	if !ok {
		return "(none)"
	}
	return v.AsString()
}

func forEachSpan(td ptrace.Traces, f func(ptrace.Span)) {
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		sss := td.ResourceSpans().At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			for k := 0; k < sss.At(j).Spans().Len(); k++ {
				f(sss.At(j).Spans().At(k))
			}
		}
	}
}

// Every call of the recorded OpenCode sessions is replayed as the span the
// live CLI sent in the same run: the same tool, arguments and session, the
// same result JSON, and a refused call with the same error. The export holds calls
// the live export lost to the kill: one the plugin refused after it, and
// one still pending (not replayed).
func TestOpenCodeSpanIsTheLiveSpan(t *testing.T) {
	tests := []struct {
		dir                 string
		calls, live, failed int
	}{
		{dir: "loop-ignores-the-nudge", calls: 10, live: 9, failed: 2},
		{dir: "loop-obeys-the-nudge", calls: 7, live: 7},
		// Its 2 grep calls failed: OpenCode found no ripgrep to run.
		{dir: "coding-session", calls: 40, live: 40, failed: 2},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			files, err := filepath.Glob(filepath.Join(openCodeRecorded, tt.dir, "ses_*.json"))
			require.NoError(t, err)
			require.Len(t, files, 1)
			data, err := os.ReadFile(files[0])
			require.NoError(t, err)
			calls, err := readOpenCode(data, files[0])
			require.NoError(t, err)
			require.Len(t, calls, tt.calls)
			live := liveSpans(t, filepath.Join(openCodeRecorded, tt.dir, "live-tool-calls.otlp.jsonl"))
			require.Len(t, live, tt.live)
			failed, compared := 0, 0
			for i := range calls {
				c := &calls[i]
				require.Equal(t, sessionFromName(files[0]), c.Session, "the file is named after its session")
				if c.IsError {
					failed++
				}
				want, ok := live[c.ID]
				if !ok {
					continue
				}
				compared++
				var got ptrace.Span
				forEachSpan(openCodeSpan(c), func(sp ptrace.Span) { got = sp })
				for _, k := range []string{"ai.toolCall.name", "ai.toolCall.args", "session.id"} {
					require.Equal(t, attrText(want, k), attrText(got, k), "%s of %s", k, c.ID)
				}
				if w := attrText(want, "ai.toolCall.result"); w != "(none)" {
					// The live keys come in the tool's order, which the
					// file does not keep; the result's digest ignores it.
					require.JSONEq(t, w, attrText(got, "ai.toolCall.result"), c.ID)
				} else {
					require.Equal(t, w, attrText(got, "ai.toolCall.result"), c.ID)
				}
				require.Equal(t, want.Status().Code(), got.Status().Code(), c.ID)
				require.Equal(t, want.Status().Message(), got.Status().Message(), c.ID)
			}
			require.Equal(t, tt.failed, failed)
			require.Equal(t, tt.live, compared)
		})
	}
}

// Export documents in the shapes OpenCode 1.18.33 writes: a bash call
// that ran, one the plugin refused, one still running when the session
// ended, and one pending (its input not yet parsed).
const (
	openCodeHead = `{
  "info": {"id": "ses_1", "version": "1.18.33", "time": {"created": 1796588179724}},
  "messages": [
    {"info": {"role": "user", "id": "msg_1"}, "parts": [{"type": "text", "text": "go"}]},
    {"info": {"role": "assistant", "id": "msg_2"}, "parts": [
      {"type": "step-start"},
`
	openCodeRan = `      {"type": "tool", "tool": "bash", "callID": "call_0", "state": {"status": "completed",
        "input": {"command": "ls <x>", "description": "run ls"},
        "output": "a\u2028b <&>\n", "metadata": {"output": "a\u2028b <&>\n", "exit": 0, "truncated": false},
        "title": "ls", "time": {"start": 1796588208856, "end": 1796588211793}}}`
	openCodeRefused = `      {"type": "tool", "tool": "bash", "callID": "call_1", "state": {"status": "error",
        "input": {"command": "gh issue list"}, "error": "Blocked by loopsupervisor: stop",
        "time": {"start": 1796588212000, "end": 1796588212010}}}`
	openCodeRunning = `      {"type": "tool", "tool": "read", "callID": "call_2", "state": {"status": "running",
        "input": {"filePath": "a"}, "time": {"start": 1796588213000}}}`
	openCodePending = `      {"type": "tool", "tool": "bash", "callID": "call_3", "state": {"status": "pending", "input": {}, "raw": ""}}`
	openCodeTail    = `
    ]}
  ]
}
`
)

func TestReadOpenCode(t *testing.T) {
	ms := func(v int64) time.Time { return time.UnixMilli(v).UTC() }
	doc := openCodeHead + strings.Join([]string{openCodeRan, openCodeRefused, openCodeRunning, openCodePending}, ",\n") + openCodeTail
	calls, err := readOpenCode([]byte(doc), "f")
	require.NoError(t, err)
	require.Equal(t, []TranscriptCall{
		{Session: "ses_1", ID: "call_0", Tool: "bash", Input: json.RawMessage(`{"command":"ls <x>","description":"run ls"}`),
			Result:    `{"title":"ls","metadata":{"output":"a\u2028b <&>\n","exit":0,"truncated":false},"output":"a\u2028b <&>\n"}`,
			HasResult: true, Start: ms(1796588208856), End: ms(1796588211793), Version: "1.18.33", Source: "f:7", Client: clientOpenCode, Status: "completed"},
		{Session: "ses_1", ID: "call_1", Tool: "bash", Input: json.RawMessage(`{"command":"gh issue list"}`),
			Result: "Blocked by loopsupervisor: stop", HasResult: true, IsError: true,
			Start: ms(1796588212000), End: ms(1796588212010), Version: "1.18.33", Source: "f:11", Client: clientOpenCode, Status: "error"},
		{Session: "ses_1", ID: "call_2", Tool: "read", Input: json.RawMessage(`{"filePath":"a"}`),
			Start: ms(1796588213000), End: ms(1796588213000), Version: "1.18.33", Source: "f:14", Client: clientOpenCode, Status: "running"},
	}, calls)
}

// An export is told from the other formats by its first value, and theirs
// are not taken for one.
func TestOpenCodeDetection(t *testing.T) {
	doc := openCodeHead + openCodeRan + openCodeTail
	tests := []struct{ name, data, want string }{
		{"an opencode export", doc, FormatOpenCodeExport},
		{"compact, one line", `{"info":{"id":"ses_1"},"messages":[]}`, FormatOpenCodeExport},
		{"no messages", `{"info":{"id":"ses_1"}}`, ""},
		{"an info without an id", `{"info":{"title":"x"},"messages":[]}`, ""},
		{"OTLP JSON", `{"resourceSpans":[]}`, ""},
		{"a Claude Code line", sessionUse, FormatClaudeSession},
		{"Gemini CLI metadata", geminiMeta, FormatGeminiSession},
		{"a Codex CLI rollout", `{"timestamp":"2026-12-06T18:16:54.832Z","type":"session_meta","payload":{"id":"s"}}`, FormatCodexSession},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if sf := formatOf([]byte(tt.data)); sf != nil {
				_, got, _ = sf.read([]byte(tt.data), "f")
			}
			require.Equal(t, tt.want, got)
		})
	}
}

// A bad export is an error naming the file and line, one cut short too.
func TestOpenCodeErrors(t *testing.T) {
	doc := openCodeHead + openCodeRan + openCodeTail
	tests := []struct{ name, data, want string }{
		{"messages not a list", `{"info":{"id":"ses_1"},` + "\n" + `"messages":{}}`, "f:2: not an OpenCode session export"},
		{"a tool part without a callID", openCodeHead + `{"type":"tool","tool":"bash","state":{"status":"completed"}}` + openCodeTail, "f: a tool part without a callID or tool"},
		{"cut short", doc[:len(doc)/2], "f:7: an OpenCode session export cut short (not complete JSON)"},
		{"cut short after its first key", `{"info"`, "f:1: an OpenCode session export cut short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := &Input{}
			require.ErrorContains(t, in.Add(strings.NewReader(tt.data), "f"), tt.want)
			require.Zero(t, in.Formats[FormatOpenCodeExport])
		})
	}
}
