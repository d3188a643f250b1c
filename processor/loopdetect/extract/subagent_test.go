package extract_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// Claude Code's subagents share the main agent's session.id in its logs;
// each is a session of its own, named by its agent_id as the hook names
// it; Gemini CLI's, by the invoke_agent call their recorded request names.
// Only the client whose key it is reads it.
func TestSubagentCallIsTheSubagentsSession(t *testing.T) {
	keys := extract.DefaultKeys()
	keys.Session = []string{"gen_ai.conversation.id", "session.id"}
	x := extract.New(keys, canon.NewNormalizer(canon.DefaultNormalizerConfig()))
	claude := func(extra map[string]any) fakeSpan {
		attrs := map[string]any{
			"event.name": "tool_result", "tool_name": "Bash", "success": "true", "tool_use_id": "toolu_1",
			"tool_parameters": `{"full_command":"ls -la"}`, "session.id": "s-1",
		}
		for k, v := range extra {
			attrs[k] = v
		}
		return fakeSpan{name: "claude_code.tool_result", attrs: attrs}
	}
	gemini := func(parent string) fakeSpan {
		return fakeSpan{name: "tool_call", attrs: map[string]any{
			"gen_ai.operation.name": "tool_call", "gen_ai.tool.name": "run_shell_command", "gen_ai.conversation.id": "conv-1",
			"gen_ai.input.messages": `{"callId":"run_shell_command__toolu_0001","name":"run_shell_command","args":{"command":"ls -la"},` +
				parent + `"prompt_id":"c4e48f64#0"}`,
		}}
	}
	checkSessions(t, x, []sessionCase{
		{"a main-thread call is the session's", claude(nil), "s-1", "session.id"},
		{"a subagent's call is the subagent's", claude(map[string]any{"agent_id": "a110d80caa687bc2c"}), "a110d80caa687bc2c", "agent_id"},
		{"over the span's conversation id too", claude(map[string]any{"agent_id": "a1", "gen_ai.conversation.id": "conv"}), "a1", "agent_id"},
		{"an empty agent id names no subagent", claude(map[string]any{"agent_id": ""}), "s-1", "session.id"},
		{"a Gemini CLI subagent's call is the invoke_agent call's that started it", gemini(`"parentCallId":"invoke_agent__toolu_0000",`), "invoke_agent__toolu_0000", "gen_ai.input.messages"},
		{"a Gemini CLI main agent's call is the conversation's", gemini(""), "conv-1", "gen_ai.conversation.id"},
		{"an escaped parent call id names no subagent", gemini(`"parentCallId":"a\\u0041",`), "conv-1", "gen_ai.conversation.id"},
		{"a parent call id that is no string names no subagent", gemini(`"parentCallId":7,`), "conv-1", "gen_ai.conversation.id"},
		{"another client's agent_id is not a subagent's", fakeSpan{name: "execute_tool x", attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search", "gen_ai.tool.call.arguments": `{"q":1}`,
			"session.id": "s-2", "agent_id": "planner",
		}}, "s-2", "session.id"},
	})
}

// Qwen Code's subagents' tool spans carry the main agent's session.id and
// the subagent's type as their agent, each subagent's under a span of its
// own: a subagent is the session its span names.
func TestSubagentSpanIsTheSubagentsSession(t *testing.T) {
	keys := extract.DefaultKeys()
	keys.Session = []string{"gen_ai.conversation.id", "session.id"}
	x := extract.New(keys, canon.NewNormalizer(canon.DefaultNormalizerConfig()))
	qwen := func(agent string, parent byte) fakeSpan {
		return fakeSpan{name: "qwen-code.tool", parentID: parent, attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "run_shell_command", "gen_ai.agent.name": agent,
			"gen_ai.tool.call.arguments": `{"command":"ls -la"}`, "session.id": "s-1",
		}}
	}
	checkSessions(t, x, []sessionCase{
		{"the main agent's call is the session's", qwen("qwen-code", 0x2a), "s-1", "session.id"},
		{"a subagent's call is its span's", qwen("general-purpose", 0x2a), "2a00000000000000", "parent_span_id"},
		{"another subagent's is another's", qwen("general-purpose", 0x2b), "2b00000000000000", "parent_span_id"},
		{"a call with no parent span stays in the session", qwen("general-purpose", 0), "s-1", "session.id"},
		{"another span's agent is no subagent", fakeSpan{name: "execute_tool search", parentID: 0x2a, attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search", "gen_ai.agent.name": "planner",
			"gen_ai.tool.call.arguments": `{"q":1}`, "session.id": "s-2",
		}}, "s-2", "session.id"},
	})
}

// sessionCase is a tool span and the session key (and the key it came
// from) its call must get.
type sessionCase struct {
	name             string
	span             fakeSpan
	session, fromKey string
}

func checkSessions(t *testing.T, x *extract.Extractor, cases []sessionCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := run(t, x, tt.span)
			require.True(t, ok)
			assert.Equal(t, tt.session, c.Session)
			assert.Equal(t, tt.fromKey, c.SessionSource)
		})
	}
}
