package agentcli

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

// The requests below keep the shape Claude Code 2.1.332, Gemini CLI
// 0.61.0 and Qwen Code 0.24.4 sent with a PreToolUse/PostToolUse (Claude),
// AfterTool (Gemini) or PostToolUseFailure (Qwen) hook that printed
// additionalContext, cut to the fields read here.

func TestConversationReadsHookContext(t *testing.T) {
	tests := []struct {
		name        string
		conv        func(t *testing.T) Conversation
		wantContent []string
		wantContext []string
	}{
		{
			name: "Claude Code: a system message after the result, as a string and as text blocks",
			conv: func(t *testing.T) Conversation {
				return claudeConversation(t, `{"model":"m","messages":[
					{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"hi"}]},
					{"role":"assistant","content":[{"type":"tool_use","id":"toolu_0000","name":"Bash","input":{}}]},
					{"role":"user","content":[{"tool_use_id":"toolu_0000","type":"tool_result","content":"one","is_error":false}]},
					{"role":"system","content":"PreToolUse:Bash hook additional context: A\n\nPostToolUse:Bash hook additional context: B"},
					{"role":"assistant","content":[{"type":"tool_use","id":"toolu_0001","name":"Bash","input":{}}]},
					{"role":"user","content":[{"tool_use_id":"toolu_0001","type":"tool_result","content":"two","is_error":true}]},
					{"role":"system","content":[{"type":"text","text":"PreToolUse:Bash hook additional context: C","cache_control":{"type":"ephemeral"}}]}]}`)
			},
			wantContent: []string{"one", "two"},
			wantContext: []string{"PreToolUse:Bash hook additional context: A\n\nPostToolUse:Bash hook additional context: B", "PreToolUse:Bash hook additional context: C"},
		},
		{
			name: "Claude Code: the system prompt before any result is no hook context",
			conv: func(t *testing.T) Conversation {
				return claudeConversation(t, `{"model":"m","messages":[
					{"role":"user","content":"hi"},
					{"role":"system","content":"# Environment"},
					{"role":"assistant","content":[{"type":"tool_use","id":"toolu_0000","name":"Bash","input":{}}]},
					{"role":"user","content":[{"tool_use_id":"toolu_0000","type":"tool_result","content":"one"}]}]}`)
			},
			wantContent: []string{"one"},
			wantContext: []string{""},
		},
		{
			name: "Claude Code: text after a result in the same user message",
			conv: func(t *testing.T) Conversation {
				return claudeConversation(t, `{"model":"m","messages":[
					{"role":"user","content":"hi"},
					{"role":"user","content":[{"tool_use_id":"t0","type":"tool_result","content":[{"type":"text","text":"out"}]},{"type":"text","text":"note"}]}]}`)
			},
			wantContent: []string{"out"},
			wantContext: []string{"note"},
		},
		{
			name: "Gemini CLI: an AfterTool hook's context inside the output",
			conv: func(t *testing.T) Conversation {
				return geminiConversation(t, `{"contents":[
					{"role":"user","parts":[{"text":"hi"}]},
					{"role":"user","parts":[{"functionResponse":{"id":"toolu_0000","name":"run_shell_command","response":{"output":"<untrusted_context>\nOutput: one\n</untrusted_context>\n\n<hook_context>N</hook_context>"}}}]},
					{"role":"user","parts":[{"functionResponse":{"id":"toolu_0001","name":"run_shell_command","response":{"output":"plain"}}}]},
					{"role":"user","parts":[{"functionResponse":{"id":"toolu_0002","name":"run_shell_command","response":{"error":"Tool execution blocked: Blocked by loopsupervisor: x"}}}]}]}`)
			},
			wantContent: []string{"<untrusted_context>\nOutput: one\n</untrusted_context>", "plain", "Tool execution blocked: Blocked by loopsupervisor: x"},
			wantContext: []string{"N", "", ""},
		},
		{
			name: "Qwen Code: a PostToolUse hook's context appended to the result's text",
			conv: func(t *testing.T) Conversation {
				return chatConversation(t, `{"model":"scripted","messages":[
					{"role":"system","content":"You are Qwen Code"},
					{"role":"user","content":[{"type":"text","text":"<system-reminder>x</system-reminder>"},{"type":"text","text":"hi"}]},
					{"role":"assistant","content":null,"tool_calls":[{"id":"toolu_0000","type":"function","function":{"name":"run_shell_command","arguments":"{}"}}]},
					{"role":"tool","tool_call_id":"toolu_0000","content":[{"type":"text","text":"Command: gh issue list\nExit Code: 127\n\n`+webhookbody.NudgeMarker+` change course"}]},
					{"role":"assistant","content":null,"tool_calls":[{"id":"toolu_0001","type":"function","function":{"name":"run_shell_command","arguments":"{}"}}]},
					{"role":"tool","tool_call_id":"toolu_0001","content":"plain"}]}`)
			},
			wantContent: []string{"Command: gh issue list\nExit Code: 127", "plain"},
			wantContext: []string{webhookbody.NudgeMarker + " change course", ""},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertResults(t, tt.conv(t), tt.wantContent, tt.wantContext)
		})
	}
}

// assertResults checks each result's content and the hook context that
// followed it, in order.
func assertResults(t *testing.T, c Conversation, wantContent, wantContext []string) {
	t.Helper()
	if len(c.Results) != len(wantContent) {
		t.Fatalf("got %d results, want %d: %+v", len(c.Results), len(wantContent), c.Results)
	}
	for i, r := range c.Results {
		if r.Content != wantContent[i] || r.Context != wantContext[i] {
			t.Errorf("result %d: content %q context %q, want %q and %q", i, r.Content, r.Context, wantContent[i], wantContext[i])
		}
	}
}

func claudeConversation(t *testing.T, body string) Conversation {
	t.Helper()
	var r messagesRequest
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	return r.conversation()
}

func geminiConversation(t *testing.T, body string) Conversation {
	t.Helper()
	var r geminiRequest
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	return r.conversation()
}

func chatConversation(t *testing.T, body string) Conversation {
	t.Helper()
	var r chatRequest
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatal(err)
	}
	return r.conversation(nil)
}

// The chat completions server answers the agent's requests (those that
// declare tools) from the model, streamed as Qwen Code asks, and the
// CLI's side questions with a plain text.
func TestOpenAIServerAnswersToolCalls(t *testing.T) {
	srv := StartOpenAI(t, Script("done", Shell("gh issue list")))
	post := func(body string) string {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	const tools = `"tools":[{"type":"function","function":{"name":"run_shell_command"}}]`
	got := post(`{"model":"scripted","stream":true,` + tools + `,"messages":[{"role":"user","content":"hi"}]}`)
	for _, want := range []string{`"tool_calls":[{`, `"name":"run_shell_command"`, `\"command\":\"gh issue list\"`, `"finish_reason":"tool_calls"`, "data: [DONE]"} {
		if !strings.Contains(got, want) {
			t.Errorf("streamed answer lacks %s:\n%s", want, got)
		}
	}
	got = post(`{"model":"scripted",` + tools + `,"messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"toolu_0000","content":"x"}]}`)
	if !strings.Contains(got, `"content":"done"`) || !strings.Contains(got, `"object":"chat.completion"`) {
		t.Errorf("want the script's end as one chat.completion, got %s", got)
	}
	post(`{"model":"scripted","messages":[{"role":"user","content":"a title for this session"}]}`)
	if n := len(srv.Exchanges()); n != 2 {
		t.Errorf("the model answered %d requests, want 2 (a side question without tools is not the agent's)", n)
	}
}

// Qwen Code's file tools refuse a relative path: the project's model
// makes a script's paths absolute, and leaves the script's own turns be.
func TestQwenProjectModelMakesPathsAbsolute(t *testing.T) {
	p := QwenProject{Dir: "/w/project"}
	write := Call("write_file", map[string]any{"file_path": "notes.md", "content": "x"})
	m := p.Model(Script("done", write, Shell("ls")))
	if got := m.Next(Conversation{}).Tool.Input["file_path"]; got != "/w/project/notes.md" {
		t.Errorf("file_path %v, want /w/project/notes.md", got)
	}
	if write.Tool.Input["file_path"] != "notes.md" {
		t.Errorf("the script's turn was changed: %v", write.Tool.Input)
	}
	if got := m.Next(Conversation{Results: []ToolResult{{}}}).Tool.Input["command"]; got != "ls" {
		t.Errorf("command %v, want ls", got)
	}
}

func TestLoopObeysTheSupervisorsWord(t *testing.T) {
	lead := []Turn{Bash("ls")}
	loop := Bash("gh issue list")
	then := Bash("echo fixed")
	nudge := webhookbody.NudgeMarker + " try something else"
	tests := []struct {
		name    string
		obeys   bool
		results []ToolResult
		want    Turn
	}{
		{"the lead comes first", true, nil, lead[0]},
		{"no word yet: repeat", true, []ToolResult{{Content: "ls"}, {Content: "gh: not found"}}, loop},
		{"a nudge with a result: change course", true, []ToolResult{{Content: "ls"}, {Content: "gh: not found", Context: "PreToolUse:Bash hook additional context: " + nudge}}, then},
		{"a blocked call: change course", true, []ToolResult{{Content: "ls"}, {Content: webhookbody.BlockedMarker + ": x", IsError: true}}, then},
		{"after the change: done", true, []ToolResult{{Content: "ls"}, {Content: "x", Context: nudge}, {Content: "fixed"}}, Done("changed course after the loop warning")},
		{"an ignoring model repeats after a nudge", false, []ToolResult{{Content: "ls"}, {Content: "x", Context: nudge}}, loop},
		{"an ignoring model gives up at MaxRepeats", false, []ToolResult{{Content: "ls"}, {Content: "x"}, {Content: "x"}, {Content: "x"}}, Done("gave up")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Loop{Lead: lead, Repeat: loop, Obeys: tt.obeys, Then: []Turn{then}, MaxRepeats: 3}
			got := m.Next(Conversation{Results: tt.results})
			if gotJSON, wantJSON := turnJSON(got), turnJSON(tt.want); gotJSON != wantJSON {
				t.Errorf("got %s, want %s", gotJSON, wantJSON)
			}
		})
	}
}

func turnJSON(t Turn) string {
	b, _ := json.Marshal(t)
	return string(b)
}

func TestDelegatingAnswersEachConversationByItsPrompt(t *testing.T) {
	delegate := Call("task", map[string]any{"prompt": "[sub-7] list the issues"})
	m := Delegating{Main: Script("done", delegate), Sub: Loop{Repeat: Bash("gh issue list"), MaxRepeats: 9}, Marker: "[sub-7]"}
	tests := []struct {
		name string
		c    Conversation
		want Turn
	}{
		{"the main agent delegates", Conversation{Prompt: "Find the open issues."}, delegate},
		{"the main agent ends after the subagent's report", Conversation{Prompt: "Find the open issues.", Results: []ToolResult{{Content: "report"}}}, Done("done")},
		{"the subagent's conversation is the subagent's model's", Conversation{Prompt: "[sub-7] list the issues"}, Bash("gh issue list")},
		{"the subagent's marker may sit inside its prompt", Conversation{Prompt: "Context.\n[sub-7] list the issues", Results: []ToolResult{{Content: "x"}}}, Bash("gh issue list")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, want := turnJSON(m.Next(tt.c)), turnJSON(tt.want); got != want {
				t.Errorf("got %s, want %s", got, want)
			}
		})
	}
}

// A Gemini CLI conversation's prompt is its first user text, before any
// function response: a subagent's is the prompt its invoke_agent call gave.
func TestGeminiConversationReadsThePrompt(t *testing.T) {
	c := geminiConversation(t, `{"contents":[
		{"role":"user","parts":[{"text":"[subagent] Survey the tests."}]},
		{"role":"model","parts":[{"functionCall":{"name":"run_shell_command","args":{"command":"ls"}}}]},
		{"role":"user","parts":[{"functionResponse":{"id":"c1","name":"run_shell_command","response":{"output":"a b"}}},{"text":"a later note"}]}]}`)
	if c.Prompt != "[subagent] Survey the tests." || len(c.Results) != 1 {
		t.Errorf("prompt %q, %d results", c.Prompt, len(c.Results))
	}
}
