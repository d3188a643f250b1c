package extract

import (
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

func TestDropLinesRemovesOnlyTheNamedLines(t *testing.T) {
	drop := []string{"Process Group PGID: ", "Background PIDs: ", "<hook_context>"}
	tests := []struct{ name, raw, want string }{
		{"Gemini CLI's shell output", `"Output: {\"status\":\"in_progress\"}\nExit Code: 0\nProcess Group PGID: 18202"`, `"Output: {\"status\":\"in_progress\"}\nExit Code: 0"`},
		{"a line in the middle", `"a\nBackground PIDs: 7\nb"`, `"a\nb"`},
		{"the first line", `"Process Group PGID: 1\nb"`, `"b"`},
		{"an escaped backslash before n is no line end", `"a\\nProcess Group PGID: 1"`, `"a\\nProcess Group PGID: 1"`},
		{"a hook's context and the blank line before it", `"<untrusted_context>\nOutput: x\n</untrusted_context>\n\n<hook_context>try again</hook_context>"`, `"<untrusted_context>\nOutput: x\n</untrusted_context>"`},
		{"blank lines kept inside", `"a\n\nb\nProcess Group PGID: 1"`, `"a\n\nb"`},
		{"nothing to drop: unchanged", `"a\n\nb\n"`, `"a\n\nb\n"`},
		{"not a string: unchanged", `{"output":"Process Group PGID: 1"}`, `{"output":"Process Group PGID: 1"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := dropLines(tt.raw, drop); got != tt.want {
				t.Errorf("dropLines(%s) = %s, want %s", tt.raw, got, tt.want)
			}
		})
	}
}

// A result with no line to drop, nearly every one, is returned as it is
// without a copy: reading a tool span allocates nothing.
func TestDropLinesAllocatesNothingWhenNothingGoes(t *testing.T) {
	drop := []string{"Chunk ID: ", "Wall time: "}
	json, text := `"Output: a\nExit Code: 0\nb"`, "Output: a\nExit Code: 0\nb\n"
	if n := testing.AllocsPerRun(100, func() {
		if dropLines(json, drop) != json || dropTextLines(text, drop) != text {
			t.Fatal("changed a result with no line to drop")
		}
	}); n != 0 {
		t.Errorf("%v allocations a result with no line to drop, want 0", n)
	}
	if got, want := dropTextLines("Chunk ID: 7\nout\nWall time: 1s\nend", drop), "out\nend"; got != want {
		t.Errorf("dropTextLines = %q, want %q", got, want)
	}
}

func TestDropNudgeLeavesTheToolsOwnResult(t *testing.T) {
	const nudge = webhookbody.NudgeMarker + ` You called \"bash\" 5 times; try something else.`
	tests := []struct{ name, raw, want string }{
		{"OpenCode's ai.toolCall.result", `{"title":"gh issue list","metadata":{"output":"gh: command not found\n","exit":127},"output":"gh: command not found\n\n\n` + nudge + `"}`,
			`{"title":"gh issue list","metadata":{"output":"gh: command not found\n","exit":127},"output":"gh: command not found\n"}`},
		{"a JSON string", `"out\n\n` + nudge + `"`, `"out"`},
		{"plain text", "out\n\n" + webhookbody.NudgeMarker + ` say "stop"`, "out"},
		{"no nudge: unchanged", `{"output":"loopsupervisor: other"}`, `{"output":"loopsupervisor: other"}`},
	}
	for _, tt := range tests {
		if got := dropNudge(tt.raw); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
}
