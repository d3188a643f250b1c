package replay

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Qwen Code 0.24.4 session records in the shapes a live run wrote
// (cmd/loopreplay/testdata/qwen-code), cut to the fields that matter: the
// prompt, a telemetry record, a call and its result, a failed command, a
// call the PreToolUse hook refused and one cancelled before it ran.
const (
	qwenSID     = "d53435cc-4768-429d-8055-775db9785397"
	qwenBase    = `"sessionId":"` + qwenSID + `","cwd":"/w","version":"0.24.4"`
	qwenPrompt  = `{"uuid":"u1","parentUuid":null,` + qwenBase + `,"timestamp":"2026-12-06T20:15:05.759Z","type":"user","provenance":"real_user","message":{"role":"user","parts":[{"text":"Find the open issues."}]}}`
	qwenSystem  = `{"uuid":"u2","parentUuid":"u1",` + qwenBase + `,"timestamp":"2026-12-06T20:15:11.328Z","type":"system","provenance":"system","subtype":"ui_telemetry","systemPayload":{"uiEvent":{"event.name":"qwen-code.api_response"}}}`
	qwenUse     = `{"uuid":"u3","parentUuid":"u2",` + qwenBase + `,"timestamp":"2026-12-06T20:15:11.334Z","type":"assistant","provenance":"assistant_output","model":"scripted","message":{"role":"model","parts":[{"functionCall":{"id":"toolu_0000","name":"run_shell_command","args":{"command":"ls -la","description":"run ls -la"}}}]}}`
	qwenResult  = `{"uuid":"u4","parentUuid":"u3",` + qwenBase + `,"timestamp":"2026-12-06T20:15:15.187Z","type":"tool_result","provenance":"tool_result","message":{"role":"user","parts":[{"functionResponse":{"id":"toolu_0000","name":"run_shell_command","response":{"output":"Command: ls -la\nOutput: <a & b>\nExit Code: 0"}}}]},"toolCallResult":{"callId":"toolu_0000","status":"success","executionStatus":"success"}}`
	qwenFailUse = `{"uuid":"u5","parentUuid":"u4",` + qwenBase + `,"timestamp":"2026-12-06T20:15:19.102Z","type":"assistant","provenance":"assistant_output","message":{"role":"model","parts":[{"functionCall":{"id":"toolu_0003","name":"run_shell_command","args":{"command":"gh issue list"}}}]}}`
	qwenFail    = `{"uuid":"u6","parentUuid":"u5",` + qwenBase + `,"timestamp":"2026-12-06T20:15:20.5Z","type":"tool_result","provenance":"tool_result","message":{"role":"user","parts":[{"functionResponse":{"id":"toolu_0003","name":"run_shell_command","response":{"error":"Output: gh: command not found\nExit Code: 127"}}}]},"toolCallResult":{"callId":"toolu_0003","status":"error","errorType":"shell_execute_error","executionStatus":"error"}}`
	qwenDenyUse = `{"uuid":"u7","parentUuid":"u6",` + qwenBase + `,"timestamp":"2026-12-06T20:15:30.110Z","type":"assistant","provenance":"assistant_output","message":{"role":"model","parts":[{"functionCall":{"id":"toolu_0008","name":"run_shell_command","args":{"command":"gh issue list"}}}]}}`
	qwenDeny    = `{"uuid":"u8","parentUuid":"u7",` + qwenBase + `,"timestamp":"2026-12-06T20:15:30.214Z","type":"tool_result","provenance":"tool_result","message":{"role":"user","parts":[{"functionResponse":{"id":"toolu_0008","name":"run_shell_command","response":{"error":"Blocked by loopsupervisor"}}}]},"toolCallResult":{"callId":"toolu_0008","status":"error","errorType":"execution_denied","executionStatus":"not_started"}}`
	qwenCancel  = `{"uuid":"u9","parentUuid":"u8",` + qwenBase + `,"timestamp":"2026-12-06T20:15:32.645Z","type":"tool_result","provenance":"tool_result","message":{"role":"user","parts":[{"functionResponse":{"id":"toolu_0008","name":"run_shell_command","response":{"error":"[Operation Cancelled]"}}}]},"toolCallResult":{"callId":"toolu_0008","status":"cancelled","executionStatus":"not_started"}}`
)

func TestReadQwen(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return v
	}
	ls := TranscriptCall{Session: qwenSID, ID: "toolu_0000", Tool: "run_shell_command", Input: []byte(`{"command":"ls -la","description":"run ls -la"}`),
		Result: "Command: ls -la\nOutput: <a & b>\nExit Code: 0", HasResult: true, Start: at("2026-12-06T20:15:11.334Z"), End: at("2026-12-06T20:15:15.187Z"),
		Version: "0.24.4", Source: "f:3", Client: clientQwen, Status: qwenOK}
	gh := func(id, start, end, status, result, src string) TranscriptCall {
		return TranscriptCall{Session: qwenSID, ID: id, Tool: "run_shell_command", Input: []byte(`{"command":"gh issue list"}`),
			Result: result, HasResult: true, IsError: true, Start: at(start), End: at(end), Version: "0.24.4", Source: src, Client: clientQwen, Status: status}
	}
	failed := gh("toolu_0003", "2026-12-06T20:15:19.102Z", "2026-12-06T20:15:20.5Z", qwenFailed, "Output: gh: command not found\nExit Code: 127", "f:1")
	for _, tc := range []struct {
		name  string
		lines []string
		want  []TranscriptCall
	}{
		{"a call and its result; prompt and telemetry hold none", []string{qwenPrompt, qwenSystem, qwenUse, qwenResult}, []TranscriptCall{ls}},
		{"a command that failed", []string{qwenFailUse, qwenFail}, []TranscriptCall{failed}},
		{"a call the PreToolUse hook refused", []string{qwenDenyUse, qwenDeny},
			[]TranscriptCall{gh("toolu_0008", "2026-12-06T20:15:30.110Z", "2026-12-06T20:15:30.214Z", qwenBlocked, "Blocked by loopsupervisor", "f:1")}},
		{"a call cancelled before it ran", []string{qwenDenyUse, qwenCancel},
			[]TranscriptCall{gh("toolu_0008", "2026-12-06T20:15:30.110Z", "2026-12-06T20:15:32.645Z", qwenCancelled, "[Operation Cancelled]", "f:1")}},
		{"a call on another branch of the uuid chain is kept once", []string{qwenFailUse, qwenFail, strings.Replace(qwenFailUse, `"u5"`, `"u5b"`, 1)}, []TranscriptCall{failed}},
		{"a call whose result the file does not hold", []string{qwenUse}, []TranscriptCall{func() TranscriptCall {
			c := ls
			c.Source, c.Result, c.HasResult, c.Status, c.End = "f:1", "", false, "", c.Start
			return c
		}()}},
		{"a result whose call went before the file", []string{qwenResult}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, err := readQwen([]byte(strings.Join(tc.lines, "\n")), "f")
			require.NoError(t, err)
			require.Equal(t, tc.want, calls)
		})
	}
	for _, tc := range []struct{ name, input, want string }{
		{"not JSON", qwenPrompt + "\n{not json\n", "f:2: not a Qwen Code session line"},
		{"bad timestamp", qwenPrompt + "\n" + strings.Replace(qwenUse, "2026-12-06T20:15:11.334Z", "later", 1), "f:2: not a Qwen Code session line: timestamp"},
		{"a call without an id", qwenPrompt + "\n" + strings.Replace(qwenUse, `"id":"toolu_0000",`, "", 1), "f:2: not a Qwen Code session line: a tool call without an id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{}
			require.ErrorContains(t, in.Add(strings.NewReader(tc.input), "f"), tc.want)
		})
	}
}

// A Qwen Code session is told by its first record, whatever its type, and
// no other format's file reads as one: Claude Code's transcript lines have
// a uuid and sessionId too, but no provenance.
func TestQwenFormatIsDetected(t *testing.T) {
	for _, tc := range []struct {
		name, first, want string
	}{
		{"a prompt first", qwenPrompt, FormatQwenSession},
		{"a system record first", qwenSystem, FormatQwenSession},
		{"Claude Code's session line", sessionUse, FormatClaudeSession},
		{"Claude Code's stream-json", streamInit, FormatClaudeStreamJSON},
		{"Gemini CLI's metadata", geminiMeta, FormatGeminiSession},
		{"Codex CLI's session_meta", `{"timestamp":"2026-12-06T18:16:54.832Z","type":"session_meta","payload":{"id":"s"}}`, FormatCodexSession},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{}
			require.NoError(t, in.Add(strings.NewReader(tc.first+"\n"), "f"))
			require.Equal(t, map[string]int{tc.want: 1}, in.Formats)
		})
	}
}

// A session file cut short in its last line (the CLI killed mid-write)
// reads whole but for that line, which is noted.
func TestReadQwenTruncatedLine(t *testing.T) {
	data := qwenPrompt + "\n" + qwenUse + "\n" + qwenResult + "\n" + qwenFailUse[:len(qwenFailUse)/2]
	in := &Input{}
	require.NoError(t, in.Add(strings.NewReader(data), "f"))
	require.Equal(t, map[string]int{FormatQwenSession: 1}, in.Formats)
	require.Len(t, in.Transcript, 1)
	require.Equal(t, "toolu_0000", in.Transcript[0].ID)
	require.Len(t, in.Cleanings, 1)
}

// Each call of a recorded session is replayed as the qwen-code.tool span
// the live CLI exported for it in the same run (internal/e2e): the
// arguments and the result as the CLI wrote them, a failed command with
// its error status and no result, the hook's refusals and the cancelled
// call without arguments.
func TestQwenSpanIsTheLiveSpan(t *testing.T) {
	files, err := filepath.Glob("../../cmd/loopreplay/testdata/qwen-code/loop-ignores-the-nudge/*.jsonl")
	require.NoError(t, err)
	require.Len(t, files, 1)
	data, err := os.ReadFile(files[0])
	require.NoError(t, err)
	calls, err := readQwen(data, files[0])
	require.NoError(t, err)
	require.Len(t, calls, 11)
	tests := []struct {
		call, args, result, failure, status string
		success                             bool
	}{
		{call: "toolu_0000", args: `{"command":"ls -la","description":"run ls -la"}`, success: true,
			result: `{"output":"Command: ls -la\nDirectory: (root)\nOutput: total 12\ndrwxr-xr-x 3 root root 4096 Dec  6 20:14 .\ndrwx------ 4 root root 4096 Dec  6 20:14 ..\ndrwxr-xr-x 2 root root 4096 Dec  6 20:14 .qwen\nError: (none)\nExit Code: 0\nSignal: (none)\nProcess Group PGID: (none)"}`},
		{call: "toolu_0002", args: `{"content":"issues to look at\n","file_path":"/tmp/loop-e2e-run-1013987468/project/notes.md"}`, success: true,
			result: `{"output":"Successfully created and wrote to new file: /tmp/loop-e2e-run-1013987468/project/notes.md."}`},
		{call: "toolu_0003", args: `{"command":"date '+run %s.%N' >> loop-runs; gh issue list","description":"run date '+run %s.%N' >> loop-runs; gh issue list"}`,
			failure: "tool_error", status: "Tool execution failed"},
		{call: "toolu_0008", failure: "pre_hook_blocked", status: "Tool execution blocked by hook"},
		{call: "toolu_0010", failure: "cancelled"},
	}
	for _, tt := range tests {
		t.Run(tt.call, func(t *testing.T) {
			var c *TranscriptCall
			for i := range calls {
				if calls[i].ID == tt.call {
					c = &calls[i]
				}
			}
			require.NotNil(t, c)
			rs := qwenSpan(c).ResourceSpans().At(0)
			sp := rs.ScopeSpans().At(0).Spans().At(0)
			require.Equal(t, "qwen-code.tool", sp.Name())
			require.Equal(t, map[string]any{"service.name": "qwen-code", "service.version": "0.24.4"}, rs.Resource().Attributes().AsRaw())
			a := sp.Attributes().AsRaw()
			require.Equal(t, qwenSID, a["session.id"])
			require.Equal(t, "qwen-code", a["gen_ai.agent.name"])
			require.Equal(t, "execute_tool", a["gen_ai.operation.name"])
			require.Equal(t, tt.call, a["gen_ai.tool.call.id"])
			require.Equal(t, tt.success, a["success"])
			get := func(k string) string { s, _ := a[k].(string); return s }
			require.Equal(t, tt.args, get("gen_ai.tool.call.arguments"))
			require.Equal(t, tt.result, get("gen_ai.tool.call.result"))
			require.Equal(t, tt.failure, get("tool.failure_kind"))
			require.Equal(t, tt.status, sp.Status().Message())
			require.Equal(t, tt.status != "", sp.Status().Code() == ptrace.StatusCodeError)
		})
	}
}
