package pdataspan

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// lookupSpan is a Span that does not list its attributes: extract reads
// it with Attr, key by key.
type lookupSpan struct{ Span }

// A span's attributes read in one pass (ListAttrs) extract as their
// look-ups do, with the resource shared between spans or read for each.
func TestOnePassExtractsAsLookups(t *testing.T) {
	x := extract.New(extract.DefaultKeys(), canon.NewNormalizer(canon.DefaultNormalizerConfig()))
	resources := []map[string]any{
		{},
		{"service.name": "svc", "service.instance.id": "i-1", "host.name": "h", "process.pid": int64(42), "gen_ai.agent.name": "planner"},
		{"process.pid": "  7 ", "gen_ai.agent.id": "a-9", "host.name": map[string]any{"nested": true}},
		{"service.name": int64(3), "process.pid": 1.5, "gen_ai.agent.name": []any{"x"}, "gen_ai.agent.id": "second"},
	}
	spans := []map[string]any{
		{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "read_file", "gen_ai.tool.call.arguments": `{"p":1}`},
		{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "bash", "gen_ai.agent.name": "own", "gen_ai.tool.call.result": `{"ok":true}`},
		{"gen_ai.operation.name": "execute_tool", "tool.name": "grep", "gen_ai.agent.id": "own-id", "error.type": "timeout"},
	}
	for ri, res := range resources {
		rm := pcommon.NewMap()
		if err := rm.FromRaw(res); err != nil {
			t.Fatal(err)
		}
		var shared extract.Scratch
		shared.ShareResource()
		for si, attrs := range spans {
			span := ptrace.NewSpan()
			span.SetName("execute_tool x")
			span.SetTraceID([16]byte{byte(ri), 1})
			if err := span.Attributes().FromRaw(attrs); err != nil {
				t.Fatal(err)
			}
			var want, got extract.Scratch
			var cw, c, cs engine.ToolCall
			okW, outW := extract.Extract(x, lookupSpan{Span{S: span, Res: rm}}, &want, &cw)
			ok, out := extract.Extract(x, Span{S: span, Res: rm}, &got, &c)
			okS, outS := extract.Extract(x, Span{S: span, Res: rm}, &shared, &cs)
			if ok != okW || out != outW || c != cw {
				t.Errorf("resource %d, span %d: one pass %v %+v %+v, look-ups %v %+v %+v", ri, si, ok, out, c, okW, outW, cw)
			}
			if okS != okW || outS != outW || cs != cw {
				t.Errorf("resource %d, span %d, shared: one pass %v %+v %+v, look-ups %v %+v %+v", ri, si, okS, outS, cs, okW, outW, cw)
			}
		}
	}
}
