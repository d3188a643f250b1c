// Package benchdata generates the benchmark workload of BENCHMARKS.md: a realistic
// mix of GenAI spans (20 % execute_tool spans with 200-byte JSON arguments
// and 500-byte JSON results, the rest chat and invoke_agent spans) spread
// over many sessions (one trace each), as pdata batches.
//
// A Workload keeps a fixed pool of batches and renews it in place between
// rounds (new span ids, later timestamps, the next sessions, fresh
// arguments and results), so a benchmark can run for any b.N without
// holding millions of spans and without replaying span ids the loop_detect
// engine would drop as duplicate deliveries. Renew allocates; call it with
// the benchmark timer stopped.
package benchdata

import (
	"encoding/binary"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Attribute keys, as the OTel GenAI semantic conventions spell them.
const (
	AttrOperationName  = "gen_ai.operation.name"
	AttrProviderName   = "gen_ai.provider.name"
	AttrConversationID = "gen_ai.conversation.id"
	AttrAgentName      = "gen_ai.agent.name"
	AttrRequestModel   = "gen_ai.request.model"
	AttrResponseID     = "gen_ai.response.id"
	AttrInputTokens    = "gen_ai.usage.input_tokens"
	AttrOutputTokens   = "gen_ai.usage.output_tokens"
	AttrToolName       = "gen_ai.tool.name"
	AttrToolType       = "gen_ai.tool.type"
	AttrToolCallID     = "gen_ai.tool.call.id"
	AttrToolCallArgs   = "gen_ai.tool.call.arguments"
	AttrToolCallResult = "gen_ai.tool.call.result"
)

// Mix describes a workload.
type Mix struct {
	// Sessions is the number of distinct sessions (traces).
	Sessions int
	// SpansPerChunk is how many spans of one session one ResourceSpans holds.
	SpansPerChunk int
	// ChunksPerBatch is how many sessions (ResourceSpans) one batch holds.
	ChunksPerBatch int
	// PoolBatches is how many batches the pool keeps.
	PoolBatches int
	// ToolEvery makes every ToolEvery-th span an execute_tool span (5: 20 %);
	// 0 means none.
	ToolEvery int
	// AgentEvery makes every AgentEvery-th non-tool span an invoke_agent
	// span; the others are chat spans.
	AgentEvery int
	// ArgsBytes and ResultBytes are the exact sizes of the tool arguments and results.
	ArgsBytes, ResultBytes int
}

// Realistic is the mix the budgets are measured on: 10,000 sessions, batches of 100 spans (10
// sessions × 10 spans), 20 % execute_tool, 200-byte arguments, 500-byte
// results, a pool of 20,000 spans.
func Realistic() Mix {
	return Mix{Sessions: 10_000, SpansPerChunk: 10, ChunksPerBatch: 10, PoolBatches: 200, ToolEvery: 5, AgentEvery: 9, ArgsBytes: 200, ResultBytes: 500}
}

// NonTool is Realistic without execute_tool spans.
func NonTool() Mix {
	m := Realistic()
	m.ToolEvery = 0
	return m
}

// Workload is a renewable pool of batches.
type Workload struct {
	mix     Mix
	batches []ptrace.Traces
	round   int64
	calls   uint64
	base    time.Time
}

// New builds the pool for round 0.
func New(m Mix) *Workload {
	w := &Workload{mix: m, base: time.Unix(1_750_000_000, 0)}
	w.batches = make([]ptrace.Traces, m.PoolBatches)
	for b := range w.batches {
		td := ptrace.NewTraces()
		for c := 0; c < m.ChunksPerBatch; c++ {
			rs := td.ResourceSpans().AppendEmpty()
			res := rs.Resource().Attributes()
			res.PutStr("service.name", "agent-svc")
			res.PutStr("service.instance.id", "agent-"+strconv.Itoa(c))
			res.PutStr("host.name", "bench-host")
			res.PutInt("process.pid", int64(1000+c))
			res.PutStr("telemetry.sdk.language", "go")
			ss := rs.ScopeSpans().AppendEmpty()
			ss.Scope().SetName("github.com/otelcol-loop/otelcol-loop/cmd/loopagent")
			// Attribute order follows the OTel Go SDK as the load generator
			// uses it: common attributes first, then the operation's own.
			for i := 0; i < m.SpansPerChunk; i++ {
				span := ss.Spans().AppendEmpty()
				switch kindOf(m, i) {
				case kindTool:
					span.SetName("execute_tool")
					span.SetKind(ptrace.SpanKindInternal)
					a := span.Attributes()
					a.PutStr(AttrProviderName, "openai")
					a.PutStr(AttrOperationName, "execute_tool")
					a.PutStr(AttrToolName, "")
					a.PutStr(AttrToolType, "function")
					a.PutStr(AttrToolCallID, "")
					a.PutStr(AttrToolCallArgs, "")
					a.PutStr(AttrToolCallResult, "")
				case kindAgent:
					span.SetName("invoke_agent sub-agent")
					span.SetKind(ptrace.SpanKindInternal)
					a := span.Attributes()
					a.PutStr(AttrProviderName, "openai")
					a.PutStr(AttrOperationName, "invoke_agent")
					a.PutStr(AttrAgentName, "sub-agent")
					a.PutStr(AttrConversationID, "")
				default:
					span.SetName("chat gpt-4.1")
					span.SetKind(ptrace.SpanKindClient)
					a := span.Attributes()
					a.PutStr(AttrProviderName, "openai")
					a.PutStr(AttrOperationName, "chat")
					a.PutStr(AttrRequestModel, "gpt-4.1")
					a.PutStr(AttrResponseID, "chatcmpl-0000000000")
					a.PutInt(AttrInputTokens, 1200)
					a.PutInt(AttrOutputTokens, 180)
					a.PutStr("gen_ai.response.finish_reasons", "tool_calls")
				}
			}
		}
		w.batches[b] = td
	}
	w.fill()
	return w
}

type spanKind uint8

const (
	kindChat spanKind = iota
	kindAgent
	kindTool
)

func kindOf(m Mix, i int) spanKind {
	if m.ToolEvery > 0 && i%m.ToolEvery == m.ToolEvery/2 {
		return kindTool
	}
	if m.AgentEvery > 0 && i%m.AgentEvery == 0 {
		return kindAgent
	}
	return kindChat
}

// Batches returns the pool (valid until the next Renew).
func (w *Workload) Batches() []ptrace.Traces { return w.batches }

// SpansPerBatch is the number of spans in each batch.
func (w *Workload) SpansPerBatch() int { return w.mix.ChunksPerBatch * w.mix.SpansPerChunk }

// ToolSpansPerBatch is the number of execute_tool spans in each batch.
func (w *Workload) ToolSpansPerBatch() int {
	n := 0
	for i := 0; i < w.mix.SpansPerChunk; i++ {
		if kindOf(w.mix, i) == kindTool {
			n++
		}
	}
	return n * w.mix.ChunksPerBatch
}

// Renew rewrites the pool for the next round. It allocates: call it with the
// benchmark timer stopped.
func (w *Workload) Renew() {
	w.round++
	w.fill()
}

// TraceID is session s's trace id.
func TraceID(s int) pcommon.TraceID {
	var t pcommon.TraceID
	binary.BigEndian.PutUint64(t[0:8], 0x10c0de0000000000|uint64(s))
	binary.BigEndian.PutUint64(t[8:16], mix64(uint64(s)+1))
	return t
}

func mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func (w *Workload) fill() {
	m := w.mix
	chunksPerRound := int64(m.PoolBatches * m.ChunksPerBatch)
	for b, td := range w.batches {
		rss := td.ResourceSpans()
		for c := 0; c < rss.Len(); c++ {
			g := w.round*chunksPerRound + int64(b*m.ChunksPerBatch+c) // global chunk number
			sess := int(g % int64(m.Sessions))
			visit := g / int64(m.Sessions)
			tid := TraceID(sess)
			var root pcommon.SpanID
			binary.BigEndian.PutUint64(root[:], mix64(uint64(sess))|1)
			// Each visit of a session is 10 s after the previous one.
			t0 := w.base.Add(time.Duration(visit)*10*time.Second + time.Duration(sess)*time.Microsecond)
			spans := rss.At(c).ScopeSpans().At(0).Spans()
			for i := 0; i < spans.Len(); i++ {
				span := spans.At(i)
				span.Events().RemoveIf(func(ptrace.SpanEvent) bool { return true })
				span.SetTraceID(tid)
				var sid pcommon.SpanID
				binary.BigEndian.PutUint64(sid[:], mix64(uint64(g)<<8|uint64(i))|1)
				span.SetSpanID(sid)
				span.SetParentSpanID(root)
				start := t0.Add(time.Duration(i) * 500 * time.Millisecond)
				span.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
				span.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(300 * time.Millisecond)))
				a := span.Attributes()
				switch kindOf(m, i) {
				case kindTool:
					w.calls++
					tool := Tools[w.calls%uint64(len(Tools))]
					span.SetName("execute_tool " + tool)
					a.PutStr(AttrToolName, tool)
					a.PutStr(AttrToolCallID, "call_"+strconv.FormatUint(mix64(w.calls), 36))
					a.PutStr(AttrToolCallArgs, Args(tool, w.calls, m.ArgsBytes))
					a.PutStr(AttrToolCallResult, Result(w.calls, m.ResultBytes))
				case kindAgent:
					a.PutStr(AttrConversationID, "conv-"+strconv.Itoa(sess))
				}
			}
		}
	}
}

// Tools are the tool names the workload uses.
var Tools = []string{"read_file", "bash", "grep", "web_search", "edit_file", "run_tests"}

// Args returns n-byte JSON arguments for call number call: a few meaningful
// members that change from call to call, a volatile request id the
// normalizer drops, and padding.
func Args(tool string, call uint64, n int) string {
	var b strings.Builder
	b.Grow(n)
	b.WriteString(`{"path":"src/pkg`)
	b.WriteString(strconv.FormatUint(call%97, 10))
	b.WriteString(`/file_`)
	b.WriteString(strconv.FormatUint(call, 10))
	b.WriteString(`.go","offset":`)
	b.WriteString(strconv.FormatUint(call%4096, 10))
	b.WriteString(`,"limit":200,"recursive":false,"request_id":"req-`)
	b.WriteString(strconv.FormatUint(mix64(call), 16))
	b.WriteString(`","options":{"tool":"`)
	b.WriteString(tool)
	b.WriteString(`","encoding":"utf-8"},"note":"`)
	return pad(&b, n, `"}`)
}

// Result returns an n-byte JSON result for call number call, with a status,
// nested file list, a volatile duration and padding text.
func Result(call uint64, n int) string {
	var b strings.Builder
	b.Grow(n)
	b.WriteString(`{"status":"ok","exit_code":0,"duration_ms":`)
	b.WriteString(strconv.FormatUint(call%997, 10))
	b.WriteString(`,"files":[{"path":"src/a.go","lines":`)
	b.WriteString(strconv.FormatUint(call%5000, 10))
	b.WriteString(`},{"path":"src/b.go","lines":120}],"matches":[1,2,3,`)
	b.WriteString(strconv.FormatUint(call, 10))
	b.WriteString(`],"truncated":false,"stdout":"`)
	return pad(&b, n, `"}`)
}

// pad fills b with text so that b plus tail is n bytes long (or closes it
// at once when it is already longer).
func pad(b *strings.Builder, n int, tail string) string {
	const text = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor "
	for b.Len()+len(tail) < n {
		k := min(len(text), n-len(tail)-b.Len())
		b.WriteString(text[:k])
	}
	b.WriteString(tail)
	return b.String()
}

// searchLines are source lines a grep-like tool returns, as JSON string
// content: some with the escapes real results carry (quotes, tabs,
// newlines, backslashes, non-ASCII as \u escapes).
var searchLines = []string{
	`func (h *canonHasher) object(depth int) (uint64, error) {`,
	`\tif err != nil {\n\t\treturn err\n\t}`,
	`// The caf\u00e9 menu lists r\u00e9sum\u00e9 templates`,
	`\tpattern := regexp.MustCompile(\"^[a-z]+\\\\.go$\")`,
	`    assert.Equal(t, \"expected\", got)`,
	`const defaultTimeout = 30 * time.Second`,
	`\tlog.Printf(\"na\u00efve retry #%d\\n\", attempt)`,
	`import { readFile } from \"node:fs/promises\";`,
}

// SearchResult returns an n-byte JSON result of a grep/search tool for
// call number call: status members, a volatile request id and timestamp,
// and an array of match objects (path, line, column, text with escapes,
// booleans, nested submatch and context objects) grown to the size, then
// summary statistics. Structure, not one padding string, fills it: it is
// the document a canonicalizer's per-byte cost is measured on. Documents
// shorter than the fixed members are returned whole.
func SearchResult(call uint64, n int) string {
	var b strings.Builder
	b.Grow(n + 256)
	b.WriteString(`{"status":"ok","request_id":"req-`)
	b.WriteString(strconv.FormatUint(mix64(call)&0xffffffff, 16))
	b.WriteString(`","matches":[`)
	tail := `],"cursor":"`
	if n >= 1024 {
		tail = `],"timestamp":"2025-06-15T12:` + strconv.FormatUint(10+call%50, 10) +
			`:07.123Z","stats":{"files":` + strconv.FormatUint(100+call%900, 10) +
			`,"elapsed_ms":12.5,"truncated":false},"cursor":"`
	}
	const end = `"}`
	var m strings.Builder
	for i := uint64(0); ; i++ {
		m.Reset()
		if i > 0 {
			m.WriteByte(',')
		}
		searchMatch(&m, call, i)
		if b.Len()+m.Len()+len(tail)+len(end) > n {
			break
		}
		b.WriteString(m.String())
	}
	b.WriteString(tail)
	// The cursor takes up what is left: less than one match.
	return pad(&b, n, end)
}

// searchMatch writes match number i of call's search result; every other
// match carries submatch offsets, every fourth a nested context object.
func searchMatch(b *strings.Builder, call, i uint64) {
	r := mix64(call<<20 | i)
	b.WriteString(`{"path":"src/pkg`)
	b.WriteString(strconv.FormatUint(r%37, 10))
	b.WriteString(`/file_`)
	b.WriteString(strconv.FormatUint(r>>8%500, 10))
	b.WriteString(`.go","line":`)
	b.WriteString(strconv.FormatUint(1+r>>16%2000, 10))
	b.WriteString(`,"column":`)
	b.WriteString(strconv.FormatUint(1+r>>28%80, 10))
	b.WriteString(`,"text":"`)
	b.WriteString(searchLines[r>>32%uint64(len(searchLines))])
	b.WriteByte('"')
	if i%2 == 1 {
		b.WriteString(`,"binary":false,"submatches":[{"start":`)
		b.WriteString(strconv.FormatUint(r>>40%40, 10))
		b.WriteString(`,"end":`)
		b.WriteString(strconv.FormatUint(40+r>>48%40, 10))
		b.WriteString(`}]`)
	}
	if i%4 == 3 {
		b.WriteString(`,"context":{"before":"`)
		b.WriteString(searchLines[(r>>36+1)%uint64(len(searchLines))])
		b.WriteString(`","after":null,"lines":2}`)
	}
	b.WriteByte('}')
}

// sourceLines are the lines of the file FileRead returns: Go source with
// the tabs, quotes and backslashes that JSON escapes.
var sourceLines = []string{
	"package engine",
	"",
	"import (",
	"\t\"strings\"",
	"\t\"unicode/utf8\"",
	")",
	"",
	"// hashString hashes a string value with its surrounding whitespace trimmed.",
	"func hashString(s string) uint64 {",
	"\tif n := len(s); n > 0 && (s[0] <= ' ' || s[n-1] <= ' ') {",
	"\t\ts = strings.TrimSpace(s)",
	"\t}",
	"\treturn strHash(s) ^ tagString",
	"}",
	"",
	"func quote(s string) string {",
	"\treturn \"\\\"\" + strings.ReplaceAll(s, \"\\\\\", \"\\\\\\\\\") + \"\\\"\"",
	"}",
	"",
	"\tfor i := 0; i < len(s); i++ {",
	"\t\tif s[i] >= utf8.RuneSelf {",
	"\t\t\treturn fmt.Errorf(\"line %d: non-ASCII byte %#x\", line, s[i])",
	"\t\t}",
	"\t}",
}

// FileRead returns an n-byte JSON result of a file-reading tool for call
// number call: a path and the file's content as one string of several
// escaped lines (\n, \t, \", \\), the document where a canonicalizer
// decodes a long string. Documents shorter than the fixed members are
// returned whole.
func FileRead(call uint64, n int) string {
	var b strings.Builder
	b.Grow(n + 256)
	b.WriteString(`{"path":"src/pkg`)
	b.WriteString(strconv.FormatUint(call%37, 10))
	b.WriteString(`/file_`)
	b.WriteString(strconv.FormatUint(call%500, 10))
	b.WriteString(`.go","content":"`)
	tail := `","lines":` + strconv.Itoa(n/40) + `,"truncated":false}`
	for i := mix64(call) % uint64(len(sourceLines)); ; i++ {
		line := sourceLines[i%uint64(len(sourceLines))]
		q := strconv.Quote(line + "\n")
		q = q[1 : len(q)-1]
		if b.Len()+len(q)+len(tail) > n {
			break
		}
		b.WriteString(q)
	}
	// Spaces, not an escape cut in half, fill what is left.
	for b.Len()+len(tail) < n {
		b.WriteByte(' ')
	}
	b.WriteString(tail)
	return b.String()
}
