package pdataspan

import (
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// Screen's NoUsage is exact: it is said only of a span Usage reports
// nothing for.
func TestScreenSkipsUsageOnlyWhereUsageReportsNothing(t *testing.T) {
	keys := extract.DefaultKeys()
	p := NewPrefilter(keys)
	usage := map[string]any{"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20}
	cases := []struct {
		name    string
		attrs   map[string]any
		noUsage bool
	}{
		{"agent span", map[string]any{"gen_ai.operation.name": "invoke_agent"}, true},
		{"agent span, other case", map[string]any{"gen_ai.operation.name": "INVOKE_AGENT"}, true},
		{"agent span with a Kelvin sign", map[string]any{"gen_ai.operation.name": "invo\u212ae_agent"}, true},
		{"tool span, other case", map[string]any{"gen_ai.operation.name": "Execute_Tool"}, false},
		{"chat span", map[string]any{"gen_ai.operation.name": "chat"}, false},
		{"tool span", map[string]any{"gen_ai.operation.name": "execute_tool"}, false},
		{"undeclared", map[string]any{}, false},
		{"declared as a number", map[string]any{"gen_ai.operation.name": 3}, false},
		{"skipped by another key only", map[string]any{"gen_ai.operation.name": "chat", "openinference.span.kind": "AGENT"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			span := ptrace.NewSpan()
			span.SetName("x")
			if err := span.Attributes().FromRaw(tc.attrs); err != nil {
				t.Fatal(err)
			}
			for k, v := range usage {
				span.Attributes().PutInt(k, int64(v.(int)))
			}
			noUsage := p.Screen(span).NoUsage
			if noUsage != tc.noUsage {
				t.Errorf("noUsage = %v, want %v", noUsage, tc.noUsage)
			}
			if _, counted := p.Usage(span); noUsage && counted {
				t.Error("noUsage said of a span whose usage counts")
			}
		})
	}
}

// Usage reads the usage_skip keys in its one pass as Lookup reads them:
// configured keys of any length, several matches on one key.
func TestUsageSkipInTheOnePassIsTheLookup(t *testing.T) {
	long := "a.usage.skip.key.longer.than.sixty-four.bytes.to.take.the.lookup.path"
	for _, tc := range []struct {
		name  string
		skip  []extract.Match
		attrs map[string]any
		want  bool
	}{
		{"value match", []extract.Match{{Key: "ai.operationId", Value: "ai.generateText"}}, map[string]any{"ai.operationId": "AI.GENERATETEXT"}, false},
		{"second match on the key", []extract.Match{{Key: "k", Value: "a"}, {Key: "k", Value: "b"}}, map[string]any{"k": "b"}, false},
		{"no match", []extract.Match{{Key: "k", Value: "a"}}, map[string]any{"k": "c"}, true},
		{"prefix", []extract.Match{{Key: "k", Prefix: "sum"}}, map[string]any{"k": "summary"}, false},
		{"presence", []extract.Match{{Key: "k"}}, map[string]any{"k": 1}, false},
		{"number rendered as text", []extract.Match{{Key: "k", Value: "7"}}, map[string]any{"k": 7}, false},
		{"empty key is never found", []extract.Match{{Key: ""}}, map[string]any{"": "x"}, true},
		{"long key", []extract.Match{{Key: long, Value: "x"}}, map[string]any{long: "x"}, false},
		{"long key, no match", []extract.Match{{Key: long, Value: "x"}}, map[string]any{long: "y"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys := extract.DefaultKeys()
			keys.UsageSkip = tc.skip
			x := extract.New(keys, nil)
			p := NewPrefilter(keys)
			span := ptrace.NewSpan()
			if err := span.Attributes().FromRaw(tc.attrs); err != nil {
				t.Fatal(err)
			}
			span.Attributes().PutInt("gen_ai.usage.input_tokens", 10)
			var sc extract.Scratch
			_, want := extract.ExtractUsage(x, Span{S: span}, &sc)
			if want != tc.want {
				t.Fatalf("ExtractUsage counts = %v, the case expects %v", want, tc.want)
			}
			if _, got := p.Usage(span); got != want {
				t.Errorf("Usage counts = %v, ExtractUsage %v", got, want)
			}
		})
	}
}

// Screen settles an operation by its length only where no match of that
// length exists: its answers are the matches', read value by value, for
// operations of every length, spellings that fold, prefix matches and
// values configured both as a tool call and as a usage skip (the tool call
// wins, also when a spelling is answered from the table of configured
// spellings).
func TestScreenSettlesByLengthAsByValue(t *testing.T) {
	keys := extract.DefaultKeys()
	op := keys.ToolCall[0].Key
	long := "an.operation.name.longer.than.thirty-two.bytes"
	keys.ToolCall = append(keys.ToolCall, extract.Match{Key: op, Value: long})
	keys.UsageSkip = append(keys.UsageSkip, extract.Match{Key: op, Prefix: "agent."}, extract.Match{Key: op, Value: "t\u017fk"},
		extract.Match{Key: op, Value: "Execute_Tool"}, extract.Match{Key: op, Value: long})
	p := NewPrefilter(keys)
	for _, value := range []string{
		"chat", "execute_tool", "EXECUTE_TOOL", "invoke_agent", "Invoke_Agent", "invo\u212ae_agent",
		"invoke_agen", "agent.run", "agent.", "agent", "task", "TASK", "t\u017fk", "", long, "AN.OPERATION.NAME.LONGER.THAN.THIRTY-TWO.BYTES",
		long + "!", "agent." + long, "Execute_Tool",
	} {
		tool, skip := false, false
		for _, m := range keys.ToolCall {
			if m.Key == op && extract.EqualFold(value, m.Value) {
				tool = true
			}
		}
		for _, m := range keys.UsageSkip {
			if m.Key == op && m.MatchesString(value) {
				skip = true
			}
		}
		span := ptrace.NewSpan()
		span.Attributes().PutStr(op, value)
		got := p.Screen(span)
		if got.MaybeTool != tool || got.NoUsage != (skip && !tool) {
			t.Errorf("%q: Screen = %+v, want tool %v, usage skipped %v", value, got, tool, skip && !tool)
		}
	}
}
