package pdataspan

import (
	"fmt"
	"strings"
	"testing"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// kv is one attribute; spans are built from ordered lists of them, since
// the usage read's pass depends on where the keys stand.
type kv struct {
	k string
	v any
}

func orderedSpan(t *testing.T, name string, attrs []kv) ptrace.Span {
	t.Helper()
	span := ptrace.NewSpan()
	span.SetName(name)
	a := span.Attributes()
	for _, x := range attrs {
		switch v := x.v.(type) {
		case string:
			a.PutStr(x.k, v)
		case int:
			a.PutInt(x.k, int64(v))
		case int64:
			a.PutInt(x.k, v)
		case float64:
			a.PutDouble(x.k, v)
		case bool:
			a.PutBool(x.k, v)
		case []byte:
			a.PutEmptyBytes(x.k).FromRaw(v)
		default:
			t.Fatalf("attribute %s: unsupported %T", x.k, v)
		}
	}
	return span
}

// screenedUsage is what the processor reads of a span: the screen, then
// the usage read after it unless the screen rules it out.
func screenedUsage(p *Prefilter, span ptrace.Span) (int64, bool, Screening) {
	sc := p.Screen(span)
	if sc.MaybeTool {
		// The processor extracts the span; one that is no call after all
		// has its usage read from the start.
		n, ok := p.UsageAfter(span, Screening{})
		return n, ok, sc
	}
	if sc.NoUsage {
		return 0, false, sc
	}
	n, ok := p.UsageAfter(span, sc)
	return n, ok, sc
}

// checkUsage compares the screened read with extract.ExtractUsage (the
// key-by-key reference) and with the count the case expects (0: none).
func checkUsage(t *testing.T, keys extract.Keys, span ptrace.Span, want int64) {
	t.Helper()
	p := NewPrefilter(keys)
	var sc extract.Scratch
	ref, refOK := extract.ExtractUsage(extract.New(keys, nil), Span{S: span}, &sc)
	if refOK != (want > 0) || refOK && ref.Tokens != want {
		t.Fatalf("ExtractUsage = %d, %v; the case expects %d", ref.Tokens, refOK, want)
	}
	got, ok, screened := screenedUsage(p, span)
	if ok != refOK || got != ref.Tokens && ok {
		t.Errorf("screen %+v then usage = %d, %v; ExtractUsage = %d, %v", screened, got, ok, ref.Tokens, refOK)
	}
	if n, ok := p.Usage(span); ok != refOK || ok && n != ref.Tokens {
		t.Errorf("Usage = %d, %v; ExtractUsage = %d, %v", n, ok, ref.Tokens, refOK)
	}
}

// Every token key of every convention the defaults list is read, before
// or after the declared operation, with or without one, among other
// GenAI attributes whose keys have the same lengths; a usage_skip key
// before or after it voids the count.
func TestUsageIsReadUnderEveryKeyWhereverItStands(t *testing.T) {
	keys := extract.DefaultKeys()
	op := kv{"gen_ai.operation.name", "chat"}
	before := []kv{{"gen_ai.provider.name", "openai"}, {"gen_ai.request.model", "gpt-4.1"}, {"gen_ai.response.id", "r-1"}}
	after := []kv{{"gen_ai.response.finish_reasons", "stop"}, {"gen_ai.request.max_tokens", 512}, {"gen_ai.conversation.id", "c-1"}}
	layouts := []struct {
		name  string
		attrs func(usage kv) []kv
		want  func(n int64) int64
	}{
		{"after the operation", func(u kv) []kv { return cat(before, []kv{op, u}, after) }, same},
		{"before the operation", func(u kv) []kv { return cat(before, []kv{u, op}, after) }, same},
		{"first, the operation last", func(u kv) []kv { return cat([]kv{u}, before, after, []kv{op}) }, same},
		{"no declared operation", func(u kv) []kv { return cat(before, []kv{u}, after) }, same},
		{"a usage_skip key before it", func(u kv) []kv { return cat([]kv{{"openinference.span.kind", "AGENT"}}, before, []kv{op, u}) }, none},
		{"a usage_skip key after it", func(u kv) []kv { return cat(before, []kv{op, u}, after, []kv{{"ai.operationId", "ai.streamText"}}) }, none},
		{"a usage_skip operation", func(u kv) []kv { return cat(before, []kv{u, {"gen_ai.operation.name", "invoke_agent"}}, after) }, none},
		{"usage_skip keys that do not match", func(u kv) []kv {
			return cat([]kv{{"openinference.span.kind", "LLM"}}, before, []kv{op, u, {"ai.operationId", "ai.generateText.doGenerate"}})
		}, same},
	}
	lists := map[string][]string{"input": keys.InputTokens, "output": keys.OutputTokens, "total": keys.TotalTokens}
	for list, ks := range lists {
		for _, key := range ks {
			for _, l := range layouts {
				t.Run(fmt.Sprintf("%s/%s/%s", list, key, l.name), func(t *testing.T) {
					checkUsage(t, keys, orderedSpan(t, "chat", l.attrs(kv{key, 321})), l.want(321))
				})
			}
		}
	}
}

func same(n int64) int64 { return n }
func none(int64) int64   { return 0 }

func cat(lists ...[]kv) []kv {
	var out []kv
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// Each convention's pair of keys as its instrumentation sends them, the
// first listed key of a kind winning over a later one in either order,
// the total read only without either part, and the count's forms.
func TestUsageConventionsAndForms(t *testing.T) {
	keys := extract.DefaultKeys()
	for _, tc := range []struct {
		name  string
		attrs []kv
		want  int64
	}{
		{"semconv", []kv{{"gen_ai.operation.name", "chat"}, {"gen_ai.usage.input_tokens", 1200}, {"gen_ai.usage.output_tokens", 180}}, 1380},
		{"semconv before 1.27", []kv{{"gen_ai.operation.name", "chat"}, {"gen_ai.usage.prompt_tokens", 70}, {"gen_ai.usage.completion_tokens", 7}}, 77},
		{"openinference", []kv{{"openinference.span.kind", "LLM"}, {"llm.token_count.prompt", 40}, {"llm.token_count.completion", 2}, {"llm.token_count.total", 42}}, 42},
		{"openinference total only", []kv{{"openinference.span.kind", "LLM"}, {"llm.token_count.total", 30}}, 30},
		{"vercel v5", []kv{{"ai.operationId", "ai.generateText.doGenerate"}, {"ai.usage.inputTokens", 11}, {"ai.usage.outputTokens", 4}}, 15},
		{"vercel v4", []kv{{"ai.operationId", "ai.streamText.doStream"}, {"ai.usage.promptTokens", 9}, {"ai.usage.completionTokens", 1}}, 10},
		{"vercel outer span", []kv{{"ai.operationId", "ai.generateText"}, {"ai.usage.promptTokens", 9}}, 0},
		{"first listed wins, listed one first", []kv{{"gen_ai.usage.input_tokens", 11}, {"gen_ai.usage.prompt_tokens", 7}}, 11},
		{"first listed wins, listed one last", []kv{{"gen_ai.usage.prompt_tokens", 7}, {"llm.token_count.prompt", 5}, {"gen_ai.usage.input_tokens", 11}}, 11},
		{"an invalid first listed count gives way", []kv{{"gen_ai.usage.input_tokens", "n/a"}, {"gen_ai.usage.prompt_tokens", 7}}, 7},
		{"total ignored beside a part", []kv{{"gen_ai.usage.total_tokens", 99}, {"gen_ai.usage.output_tokens", 3}}, 3},
		{"double", []kv{{"gen_ai.usage.input_tokens", 12.0}}, 12},
		{"string", []kv{{"gen_ai.usage.input_tokens", " 12 "}}, 12},
		{"bounded", []kv{{"gen_ai.usage.input_tokens", int64(1) << 40}}, 1 << 32},
		{"negative", []kv{{"gen_ai.usage.input_tokens", -5}}, 0},
		{"zero", []kv{{"gen_ai.usage.input_tokens", 0}, {"gen_ai.usage.output_tokens", 0}}, 0},
		{"a bool is no count", []kv{{"gen_ai.usage.input_tokens", true}}, 0},
		{"a usage_skip operation in other case", []kv{{"gen_ai.operation.name", "INVOKE_AGENT"}, {"gen_ai.usage.input_tokens", 5}}, 0},
		{"operation not a string", []kv{{"gen_ai.operation.name", 3}, {"gen_ai.usage.input_tokens", 5}}, 5},
		{"keys that share the usage keys' lengths and ends", []kv{{"gen_ai.usage.input_tokens_x", 1}, {"gen_ai.usage.input_tokenz", 2}, {"gen_ai.request.max_tokens", 3}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkUsage(t, keys, orderedSpan(t, "llm", tc.attrs), tc.want)
		})
	}
}

// Keys the slots do not index — shorter than eight bytes, 64 bytes or
// longer, two keys of one length in one slot — are read as the others.
func TestUsageKeysOutsideTheSlots(t *testing.T) {
	long := "vendor.usage." + strings.Repeat("x", 60) + ".input"
	keys := extract.DefaultKeys()
	keys.InputTokens = []string{"in", long, "abcdefgh_one_x"}
	keys.OutputTokens = []string{"abcdefgh_two_x", "out"}
	keys.TotalTokens = []string{"sum"}
	keys.UsageSkip = append(keys.UsageSkip, extract.Match{Key: "kind", Value: "agent"}, extract.Match{Key: long + ".kind", Value: "agent"})
	p := NewPrefilter(keys)
	if !p.table.rare {
		t.Fatal("short and long keys should take the table's look-up path")
	}
	if a, b := slotBit("abcdefgh_one_x"), slotBit("abcdefgh_two_x"); a != b {
		t.Fatalf("the case needs two keys of one slot: %d, %d", a, b)
	}
	for _, tc := range []struct {
		name  string
		attrs []kv
		want  int64
	}{
		{"short keys", []kv{{"gen_ai.operation.name", "chat"}, {"in", 3}, {"out", 4}}, 7},
		{"long key", []kv{{long, 5}, {"gen_ai.operation.name", "chat"}}, 5},
		{"one slot, both keys", []kv{{"abcdefgh_two_x", 2}, {"abcdefgh_one_x", 1}}, 3},
		{"one slot, a third key", []kv{{"abcdefgh_thr_x", 2}, {"abcdefgh_one_x", 1}}, 1},
		{"short total", []kv{{"sum", 9}}, 9},
		{"short usage_skip key", []kv{{"in", 3}, {"kind", "AGENT"}}, 0},
		{"long usage_skip key", []kv{{long + ".kind", "agent"}, {"in", 3}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkUsage(t, keys, orderedSpan(t, "llm", tc.attrs), tc.want)
		})
	}
}

// More usage_skip keys than the pass's seen set has bits are looked up
// after the pass, as before the table.
func TestUsageSkipBeyondTheSeenSet(t *testing.T) {
	keys := extract.DefaultKeys()
	for i := range 70 {
		keys.UsageSkip = append(keys.UsageSkip, extract.Match{Key: fmt.Sprintf("skip.key.%02d", i), Value: "yes"})
	}
	if p := NewPrefilter(keys); !p.skipLookup {
		t.Fatal("70 usage_skip keys should be looked up")
	}
	checkUsage(t, keys, orderedSpan(t, "llm", []kv{{"gen_ai.usage.input_tokens", 8}, {"skip.key.69", "no"}}), 8)
	checkUsage(t, keys, orderedSpan(t, "llm", []kv{{"gen_ai.usage.input_tokens", 8}, {"skip.key.69", "YES"}}), 0)
	checkUsage(t, keys, orderedSpan(t, "llm", []kv{{"gen_ai.operation.name", "invoke_agent"}, {"gen_ai.usage.input_tokens", 8}}), 0)
}

// A span that declares no GenAI operation and carries no token key — an
// HTTP or database span — is screened as one whose usage is not read, so
// the processor spends no usage read on it; with a token key it is read.
func TestNonGenAISpanCostsNoUsageRead(t *testing.T) {
	p := NewPrefilter(extract.DefaultKeys())
	for _, tc := range []struct {
		name    string
		attrs   []kv
		noUsage bool
	}{
		{"http client", []kv{{"http.request.method", "GET"}, {"url.full", "https://example.com/"}, {"http.response.status_code", 200}}, true},
		{"database", []kv{{"db.system.name", "postgresql"}, {"db.query.text", "select 1"}, {"server.port", 5432}}, true},
		{"no attributes", nil, true},
		{"keys of the usage keys' lengths", []kv{{"gen_ai.request.max_tokens", 512}, {"messaging.destination.name", "q"}}, true},
		{"an undeclared model span", []kv{{"llm.model_name", "m"}, {"llm.token_count.total", 30}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sc := p.Screen(orderedSpan(t, "GET /", tc.attrs))
			if sc.MaybeTool || sc.NoUsage != tc.noUsage {
				t.Errorf("Screen = %+v, want no usage read %v", sc, tc.noUsage)
			}
		})
	}
}

// The integer fast path is extract.TokenCount.
func TestTokenCountIsExtractTokenCount(t *testing.T) {
	span := ptrace.NewSpan()
	a := span.Attributes()
	for i, n := range []int64{-1 << 62, -1, 0, 1, 1 << 31, 1<<32 - 1, 1 << 32, 1<<32 + 1, 1 << 53, 1<<53 + 1, 1<<63 - 1} {
		a.PutInt(fmt.Sprint(i), n)
	}
	for k, v := range a.All() {
		got, ok := tokenCount(v)
		want, wantOK := extract.TokenCount(Value(v))
		if got != want || ok != wantOK {
			t.Errorf("%s = %d: tokenCount %d, %v; TokenCount %d, %v", k, v.Int(), got, ok, want, wantOK)
		}
	}
}
