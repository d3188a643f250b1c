package extract_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// TestExtractPolls: the extractor reads a poll's job from the shapes the
// coding agents send, and leaves every other call without one.
func TestExtractPolls(t *testing.T) {
	const (
		poll    = "sleep 30 && gh run view 4242 --json status,conclusion"
		pending = `{"conclusion":"","status":"in_progress"}`
	)
	for _, tc := range []struct {
		name  string
		span  fakeSpan
		state engine.JobState
		poll  bool
	}{
		{"GenAI execute_tool span", fakeSpan{name: "execute_tool Bash", attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "Bash",
			"gen_ai.tool.call.arguments": `{"command":"` + poll + `"}`, "gen_ai.tool.call.result": pending,
		}}, engine.JobPending, true},
		{"Claude Code transcript record", fakeSpan{name: "claude_code.tool_result", attrs: map[string]any{
			"tool_name": "Bash", "tool_input": `{"command":"` + poll + `","description":"Wait, then check CI"}`,
			"tool_response": pending, "success": "true",
		}}, engine.JobPending, true},
		{"Claude Code traces beta: the command as text, the output in an event", fakeSpan{name: "claude_code.tool",
			attrs:  map[string]any{"gen_ai.tool.name": "Bash", "full_command": poll},
			events: []fakeEvent{{name: "tool.output", attrs: map[string]any{"output": pending}}},
		}, engine.JobPending, true},
		{"Claude Code logs: no result", fakeSpan{name: "claude_code.tool_result", attrs: map[string]any{
			"tool_name": "Bash", "tool_input": `{"command":"` + poll + `"}`, "success": "true",
		}}, engine.JobUnknown, true},
		{"a failed poll", fakeSpan{name: "claude_code.tool_result", attrs: map[string]any{
			"tool_name": "Bash", "tool_input": `{"command":"` + poll + `"}`, "tool_response": pending, "success": "false",
		}}, engine.JobUnknown, true},
		{"no wait in the command", fakeSpan{name: "execute_tool Bash", attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "Bash",
			"gen_ai.tool.call.arguments": `{"command":"gh run view 4242 --json status,conclusion"}`, "gen_ai.tool.call.result": pending,
		}}, engine.JobUnknown, false},
		{"another tool", fakeSpan{name: "execute_tool read_file", attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file",
			"gen_ai.tool.call.arguments": `{"command":"` + poll + `"}`, "gen_ai.tool.call.result": pending,
		}}, engine.JobUnknown, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, ok := run(t, newExtractor(), tc.span)
			require.True(t, ok)
			require.Equal(t, tc.poll, c.Wait.Owner != 0, "%+v", c.Wait)
			require.Equal(t, tc.state, c.Wait.State)
			if tc.poll {
				require.Equal(t, "gh run view", c.Wait.Label)
			}
		})
	}
}

// TestExtractPollsFollowConfig: the extractor reads polls as the
// processor's implicit_wait says (Keys.Waits): off, it reads none.
func TestExtractPollsFollowConfig(t *testing.T) {
	span := fakeSpan{name: "execute_tool Bash", attrs: map[string]any{
		"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "Bash",
		"gen_ai.tool.call.arguments": `{"command":"sleep 30 && gh run view 1"}`, "gen_ai.tool.call.result": `{"status":"queued"}`,
	}}
	keys := extract.DefaultKeys()
	keys.Waits.Enabled = false
	c, ok := run(t, extract.New(keys, canon.NewNormalizer(canon.DefaultNormalizerConfig())), span)
	require.True(t, ok)
	require.Zero(t, c.Wait)
}
