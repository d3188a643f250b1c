package agentcli

import (
	"encoding/json"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

// The conversation a Responses API request carries, as Codex CLI 0.169.0
// sends it (recorded, shortened): a hook's additionalContext is a
// developer message between the call and its output, a blocked call's
// output names the hook's reason.
func TestResponsesConversation(t *testing.T) {
	const prefix = `{"type":"message","role":"developer","content":[{"type":"input_text","text":"<permissions instructions>…"}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"<environment_context>…"}]},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"Find the open issues."}]}`
	tests := []struct {
		name  string
		input string
		want  []ToolResult
		heard int
	}{
		{"no call yet", prefix, nil, -1},
		{"a result", prefix + `,
			{"type":"function_call","name":"exec_command","arguments":"{\"cmd\":\"ls\"}","call_id":"call_0"},
			{"type":"function_call_output","call_id":"call_0","output":"Chunk ID: 1c1e70\nOutput:\nREADME.md\n"}`,
			[]ToolResult{{ID: "call_0", Content: "Chunk ID: 1c1e70\nOutput:\nREADME.md\n"}}, -1},
		{"a nudge before the output it came with", prefix + `,
			{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"call_0"},
			{"type":"function_call_output","call_id":"call_0","output":"one"},
			{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"call_1"},
			{"type":"message","role":"developer","content":[{"type":"input_text","text":"` + webhookbody.NudgeMarker + ` Stop."}]},
			{"type":"function_call_output","call_id":"call_1","output":"two"}`,
			[]ToolResult{{ID: "call_0", Content: "one"}, {ID: "call_1", Content: "two", Context: webhookbody.NudgeMarker + " Stop."}}, 1},
		{"an apply_patch call", prefix + `,
			{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch\n*** Add File: a.go\n+package a\n*** End Patch\n","call_id":"call_0"},
			{"type":"custom_tool_call_output","call_id":"call_0","output":"Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nA a.go\n"}`,
			[]ToolResult{{ID: "call_0", Content: "Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nA a.go\n"}}, -1},
		{"a blocked call", prefix + `,
			{"type":"function_call","name":"exec_command","arguments":"{}","call_id":"call_0"},
			{"type":"function_call_output","call_id":"call_0","output":"Command blocked by PreToolUse hook: ` + webhookbody.BlockedMarker + `: stop. Command: gh issue list"}`,
			[]ToolResult{{ID: "call_0", Content: "Command blocked by PreToolUse hook: " + webhookbody.BlockedMarker + ": stop. Command: gh issue list"}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var req responsesRequest
			if err := json.Unmarshal([]byte(`{"model":"scripted","input":[`+tt.input+`]}`), &req); err != nil {
				t.Fatal(err)
			}
			c := req.conversation()
			if c.Prompt != "Find the open issues." {
				t.Errorf("prompt %q", c.Prompt)
			}
			if len(c.Results) != len(tt.want) {
				t.Fatalf("results %+v, want %+v", c.Results, tt.want)
			}
			for i := range tt.want {
				if c.Results[i] != tt.want[i] {
					t.Errorf("result %d: %+v, want %+v", i, c.Results[i], tt.want[i])
				}
			}
			if got := c.HeardSupervisorAt(); got != tt.heard {
				t.Errorf("heard the supervisor at %d, want %d", got, tt.heard)
			}
		})
	}
}
