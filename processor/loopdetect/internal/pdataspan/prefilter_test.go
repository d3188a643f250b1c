package pdataspan

import (
	"bufio"
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// check fails when the prefilter would drop a span Classify takes for a
// tool call, and reports whether Classify took it.
func check(t *testing.T, p *Prefilter, x *extract.Extractor, span ptrace.Span, what string) bool {
	t.Helper()
	_, tool := extract.Classify(x, Span{S: span})
	if tool && !p.Screen(span).MaybeTool {
		t.Errorf("%s: Classify says tool call, the prefilter drops it", what)
	}
	return tool
}

func TestPrefilterNeverDropsAToolSpan(t *testing.T) {
	keys := extract.DefaultKeys()
	x := extract.New(keys, nil)
	p := NewPrefilter(keys)
	type attr struct {
		k string
		v any
	}
	cases := []struct {
		name  string
		span  string
		attrs []attr
		tool  bool
	}{
		{"semconv", "execute_tool", []attr{{"gen_ai.provider.name", "openai"}, {"gen_ai.operation.name", "execute_tool"}}, true},
		{"semconv case", "x", []attr{{"gen_ai.operation.name", "EXECUTE_TOOL"}}, true},
		{"chat", "chat gpt", []attr{{"gen_ai.operation.name", "chat"}}, false},
		{"openinference", "x", []attr{{"openinference.span.kind", "TOOL"}}, true},
		{"traceloop", "x", []attr{{"traceloop.span.kind", "tool"}}, true},
		{"declared operation wins", "ai.toolCall", []attr{{"gen_ai.operation.name", "chat"}, {"traceloop.span.kind", "tool"}}, false},
		{"mcp", "x", []attr{{"mcp.method.name", "tools/call"}}, true},
		{"mcp list", "x", []attr{{"mcp.method.name", "tools/list"}}, false},
		{"name", "ai.toolCall", nil, true},
		{"name prefix", "Function: search", nil, true},
		{"name prefix execute_tool", "execute_tool bash", nil, true},
		{"int value", "x", []attr{{"gen_ai.operation.name", int64(3)}}, false},
		{"bytes value", "x", []attr{{"gen_ai.operation.name", []byte("execute_tool")}}, false},
		{"empty value", "x", []attr{{"gen_ai.operation.name", nil}}, false},
		{"no attributes", "x", nil, false},
	}
	for _, c := range cases {
		span := ptrace.NewSpan()
		span.SetName(c.span)
		for _, a := range c.attrs {
			switch v := a.v.(type) {
			case string:
				span.Attributes().PutStr(a.k, v)
			case int64:
				span.Attributes().PutInt(a.k, v)
			case []byte:
				span.Attributes().PutEmptyBytes(a.k).FromRaw(v)
			case nil:
				span.Attributes().PutEmpty(a.k)
			}
		}
		got := check(t, p, x, span, c.name)
		if got != c.tool {
			t.Errorf("%s: Classify = %v, the case expects %v", c.name, got, c.tool)
		}
		if !c.tool && c.attrs != nil && c.name == "chat" && p.Screen(span).MaybeTool {
			t.Errorf("%s: a chat span should not pass the prefilter", c.name)
		}
	}
	checkGoldenInputs(t, p, x)
}

// checkGoldenInputs checks every span of the golden scenarios and the
// client shapes.
func checkGoldenInputs(t *testing.T, p *Prefilter, x *extract.Extractor) {
	files, _ := filepath.Glob("../../../../testdata/scenarios/*/input.jsonl")
	if len(files) == 0 {
		t.Skip("no golden inputs found")
	}
	var u ptrace.JSONUnmarshaler
	tools := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			td, err := u.UnmarshalTraces(sc.Bytes())
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			for i := 0; i < td.ResourceSpans().Len(); i++ {
				sss := td.ResourceSpans().At(i).ScopeSpans()
				for j := 0; j < sss.Len(); j++ {
					ss := sss.At(j).Spans()
					for k := 0; k < ss.Len(); k++ {
						if check(t, p, x, ss.At(k), f+" "+ss.At(k).Name()) {
							tools++
						}
					}
				}
			}
		}
		fh.Close()
	}
	if tools == 0 {
		t.Fatal("no tool span in the golden inputs")
	}
}

// TestPrefilterUsageIsExtractUsage: the one-pass count is the count
// ExtractUsage reads key by key.
func TestPrefilterUsageIsExtractUsage(t *testing.T) {
	keys := extract.DefaultKeys()
	x := extract.New(keys, nil)
	p := NewPrefilter(keys)
	cases := []struct {
		name  string
		attrs map[string]any
		usage bool
	}{
		{"semconv input and output", map[string]any{"gen_ai.usage.input_tokens": 100, "gen_ai.usage.output_tokens": 20}, true},
		{"older names", map[string]any{"gen_ai.usage.prompt_tokens": 7}, true},
		{"the first listed key wins", map[string]any{"gen_ai.usage.prompt_tokens": 7, "gen_ai.usage.input_tokens": 11}, true},
		{"total only when neither part", map[string]any{"llm.token_count.total": 30, "llm.token_count.prompt": 4}, true},
		{"openinference total", map[string]any{"llm.token_count.total": 30}, true},
		{"vercel", map[string]any{"ai.usage.completionTokens": 3}, true},
		{"numbers as strings", map[string]any{"gen_ai.usage.input_tokens": "12"}, true},
		{"negative is no count", map[string]any{"gen_ai.usage.input_tokens": -5}, false},
		{"a span summing its children", map[string]any{"gen_ai.usage.input_tokens": 100, "gen_ai.operation.name": "invoke_agent"}, false},
		{"no usage", map[string]any{"http.status_code": 200, "gen_ai.request.max_tokens": 512}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			span := ptrace.NewSpan()
			span.SetName("chat")
			if err := span.Attributes().FromRaw(tc.attrs); err != nil {
				t.Fatal(err)
			}
			var sc extract.Scratch
			u, extracted := extract.ExtractUsage(x, Span{S: span}, &sc)
			if extracted != tc.usage {
				t.Fatalf("ExtractUsage = %v, want %v", extracted, tc.usage)
			}
			got, ok := p.Usage(span)
			if ok != extracted || (ok && got != u.Tokens) {
				t.Fatalf("Usage = %d, %v; ExtractUsage = %d, %v", got, ok, u.Tokens, extracted)
			}
		})
	}
}
