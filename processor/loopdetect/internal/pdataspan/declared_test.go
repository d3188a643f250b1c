package pdataspan

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// Screen says Declared only of a span extract.Extract takes for a
// declared tool call, and extract.ExtractDeclared then reads it exactly as
// Extract does.
func TestExtractDeclaredReadsWhatExtractReadsForScreenedSpans(t *testing.T) {
	keys := extract.DefaultKeys()
	p := NewPrefilter(keys)
	x := extract.New(keys, canon.NewNormalizer(canon.DefaultNormalizerConfig()))
	cases := []struct {
		name     string
		span     string
		attrs    map[string]any
		declared bool
	}{
		{"tool span named by the semantic conventions", "execute_tool read_file", map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file",
			"gen_ai.tool.call.arguments": `{"path":"a.go"}`, "gen_ai.tool.call.result": `{"ok":true}`,
		}, true},
		{"tool span classified by its attributes", "step", map[string]any{
			"gen_ai.operation.name": "EXECUTE_TOOL", "openinference.span.kind": "TOOL", "tool.name": "grep",
			"input.value": `{"q":"x"}`, "output.value": "__REDACTED__",
		}, true},
		{"tool span with a client hint and a failure", "running tool", map[string]any{
			"gen_ai.operation.name": "execute_tool", "logfire.msg": "running tool: bash", "error.type": "timeout",
			"gen_ai.tool.call.result": "Fix the errors and try again.", "loopdetect.retry.attempt": 2,
		}, true},
		{"chat span", "chat", map[string]any{"gen_ai.operation.name": "chat"}, false},
		{"undeclared tool span", "ai.toolCall", map[string]any{"ai.toolCall.name": "grep"}, false},
		{"operation declared as a number", "execute_tool grep", map[string]any{"gen_ai.operation.name": 3}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			span := ptrace.NewSpan()
			span.SetName(tc.span)
			span.SetTraceID(pcommon.TraceID{1})
			span.SetSpanID(pcommon.SpanID{2})
			if err := span.Attributes().FromRaw(tc.attrs); err != nil {
				t.Fatal(err)
			}
			declared := p.Screen(span).Declared
			if declared != tc.declared {
				t.Fatalf("declared = %v, want %v", declared, tc.declared)
			}
			if !declared {
				return
			}
			res := pcommon.NewMap()
			var sc1, sc2 extract.Scratch
			var want, got engine.ToolCall
			okWant, outWant := extract.Extract(x, Span{S: span, Res: res}, &sc1, &want)
			okGot, outGot := extract.ExtractDeclared(x, Span{S: span, Res: res}, &sc2, &got)
			if okGot != okWant || outGot != outWant || got != want {
				t.Errorf("ExtractDeclared = %v %+v %+v, Extract = %v %+v %+v", okGot, outGot, got, okWant, outWant, want)
			}
		})
	}
}
