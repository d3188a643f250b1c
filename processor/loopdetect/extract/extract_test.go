package extract_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// fakeSpan is a map-backed extract.Span for table tests.
type fakeSpan struct {
	name     string
	attrs    map[string]any
	res      map[string]any
	events   []fakeEvent
	errDesc  string
	isErr    bool
	spanID   byte
	parentID byte
}

type fakeEvent struct {
	name  string
	attrs map[string]any
}

func val(v any) extract.Value {
	switch t := v.(type) {
	case string:
		return extract.Value{Kind: extract.KindString, Str: t}
	case int:
		return extract.Value{Kind: extract.KindInt, Int: int64(t)}
	case bool:
		return extract.Value{Kind: extract.KindBool, Bool: t}
	case float64:
		return extract.Value{Kind: extract.KindDouble, Float: t}
	}
	panic("unsupported")
}

func lookup(m map[string]any, k string) (extract.Value, bool) {
	v, ok := m[k]
	if !ok {
		return extract.Value{}, false
	}
	return val(v), true
}

func (s fakeSpan) Name() string                                { return s.name }
func (s fakeSpan) Attr(k string) (extract.Value, bool)         { return lookup(s.attrs, k) }
func (s fakeSpan) ResourceAttr(k string) (extract.Value, bool) { return lookup(s.res, k) }
func (s fakeSpan) TraceID() [16]byte                           { return [16]byte{1} }
func (s fakeSpan) SpanID() [8]byte                             { return [8]byte{s.spanID} }
func (s fakeSpan) ParentSpanID() [8]byte                       { return [8]byte{s.parentID} }
func (s fakeSpan) Start() time.Time                            { return time.Unix(100, 0) }
func (s fakeSpan) End() time.Time                              { return time.Unix(101, 0) }
func (s fakeSpan) Status() (bool, string)                      { return s.isErr, s.errDesc }
func (s fakeSpan) EventCount() int                             { return len(s.events) }
func (s fakeSpan) EventName(i int) string                      { return s.events[i].name }
func (s fakeSpan) EventAttr(i int, k string) (extract.Value, bool) {
	return lookup(s.events[i].attrs, k)
}

func newExtractor() *extract.Extractor {
	return extract.New(extract.DefaultKeys(), canon.NewNormalizer(canon.DefaultNormalizerConfig()))
}

// listedSpan is a fakeSpan that lists its attributes in one pass
// (extract.AttrLister): Extract then reads the sink instead of Attr. Keys of
// even length go in lazily, so both ways of reading a slot are exercised.
type listedSpan struct{ fakeSpan }

func (*listedSpan) ListAttrs(s listedSpan, sink *extract.AttrSink) {
	for k, v := range s.attrs {
		i := sink.Want(k)
		if i < 0 {
			continue
		}
		if len(k)%2 == 0 {
			sink.PutLazy(i)
		} else {
			sink.Put(i, val(v))
		}
		if sink.Want(k) >= 0 {
			panic("a key is wanted once")
		}
	}
}

// run extracts s both ways, per-key lookups (fakeSpan) and one pass
// (listedSpan), and requires the same answer.
func run(t *testing.T, x *extract.Extractor, s fakeSpan) (engine.ToolCall, bool) {
	t.Helper()
	var sc, sc2 extract.Scratch
	var c, c2 engine.ToolCall
	ok, out := extract.Extract(x, s, &sc, &c)
	ok2, out2 := extract.Extract(x, listedSpan{s}, &sc2, &c2)
	require.Equal(t, ok, ok2, "one pass: tool call")
	require.Equal(t, out, out2, "one pass: outcome")
	if ok {
		require.Equal(t, c, c2, "one pass: tool call")
	}
	return c, ok
}

// TestExtractOnePassKeyShapes: an empty key (never found), a key of 64
// bytes or more, and more keys than the one-pass path holds read the same
// both ways.
func TestExtractOnePassKeyShapes(t *testing.T) {
	long := strings.Repeat("k", 70)
	attrs := map[string]any{
		"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "bash",
		"gen_ai.tool.call.arguments": `{"command":"ls"}`, long: "fp", "": "empty", "extra.7": "x",
	}
	k := extract.DefaultKeys()
	k.Fingerprint = long
	k.CallID = append([]string{""}, k.CallID...)
	c, ok := run(t, extract.New(k, canon.NewNormalizer(canon.DefaultNormalizerConfig())), fakeSpan{name: "execute_tool bash", attrs: attrs})
	require.True(t, ok)
	assert.Equal(t, engine.FingerprintAttribute, c.FingerprintSource)
	// fakeSpan's Attr finds the key "" (the pdata and SDK adapters' never
	// do): the one pass must answer as Attr does.
	assert.Equal(t, "empty", c.CallID)

	for i := 0; i < 70; i++ {
		k.Agent = append(k.Agent, "extra."+strconv.Itoa(i))
	}
	c, ok = run(t, extract.New(k, canon.NewNormalizer(canon.DefaultNormalizerConfig())), fakeSpan{name: "execute_tool bash", attrs: attrs})
	require.True(t, ok)
	assert.Equal(t, "x", c.Agent)
}

func TestExtractOnePassNoAlloc(t *testing.T) {
	x := newExtractor()
	s := listedSpan{fakeSpan{name: "execute_tool bash", attrs: map[string]any{
		"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "bash", "gen_ai.tool.call.id": "c1",
		"gen_ai.tool.call.arguments": `{"command":"ls"}`, "gen_ai.tool.call.result": "ok",
	}}}
	var sc extract.Scratch
	var c engine.ToolCall
	allocs := testing.AllocsPerRun(100, func() {
		extract.Extract(x, s, &sc, &c)
	})
	assert.Zero(t, allocs)
	assert.Equal(t, "bash", c.Tool)
	assert.Equal(t, "c1", c.CallID)
}

// want is the subset of ToolCall facts a shape must produce.
type want struct {
	tool     bool
	client   string
	name     string
	args     engine.ArgsQuality
	fpSrc    engine.FingerprintSource
	failed   bool
	class    string
	callID   string
	terminal bool
}

// clientShapes are the span shapes of the clients and frameworks the
// default keys recognise, each with what Extract must read from it.
var clientShapes = []struct {
	name string
	span fakeSpan
	want want
}{
	{
		name: "genai semconv with content",
		span: fakeSpan{name: "execute_tool search", attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search", "gen_ai.tool.call.id": "call_1",
			"gen_ai.tool.call.arguments": `{"q":"x"}`, "gen_ai.tool.call.result": `{"hits":1}`,
		}},
		want: want{tool: true, client: "genai_semconv", name: "search", args: engine.ArgsJSON, fpSrc: engine.FingerprintResult, callID: "call_1"},
	},
	{
		name: "genai semconv without opt-in content",
		span: fakeSpan{name: "execute_tool search", attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
		}},
		want: want{tool: true, client: "genai_semconv", name: "search", args: engine.ArgsAbsent, fpSrc: engine.FingerprintMissing},
	},
	{
		name: "not a tool span",
		span: fakeSpan{name: "chat gpt-4o", attrs: map[string]any{"gen_ai.operation.name": "chat"}},
		want: want{tool: false},
	},
	{
		name: "google adk with content, error.type on failure",
		span: fakeSpan{name: "execute_tool get_order", isErr: true, attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_order", "gen_ai.tool.call.id": "adk-1",
			"gcp.vertex.agent.llm_request": "{}", "gcp.vertex.agent.tool_call_args": `{"id": 7}`,
			"gcp.vertex.agent.tool_response": `{"error": "not found"}`, "error.type": "NotFoundError",
		}},
		want: want{tool: true, client: "google_adk", name: "get_order", args: engine.ArgsJSON, fpSrc: engine.FingerprintError, failed: true, class: "NotFoundError", callID: "adk-1"},
	},
	{
		name: "google adk with capture off: {} means not recorded",
		span: fakeSpan{name: "execute_tool get_order", attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_order", "gen_ai.tool.call.id": "<not specified>",
			"gcp.vertex.agent.llm_request": "{}", "gcp.vertex.agent.tool_call_args": "{}", "gcp.vertex.agent.tool_response": "{}",
		}},
		want: want{tool: true, client: "google_adk", name: "get_order", args: engine.ArgsAbsent, fpSrc: engine.FingerprintMissing},
	},
	{
		name: "google adk merged tools are skipped",
		span: fakeSpan{name: "execute_tool (merged tools)", attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "(merged tools)",
		}},
		want: want{tool: false},
	},
	{
		name: "openai agents via openinference, error-as-result",
		span: fakeSpan{name: "fetch_page", attrs: map[string]any{
			"openinference.span.kind": "TOOL", "tool.name": "fetch_page", "input.value": `{"url":"https://a"}`,
			"output.value": "An error occurred while running the tool. Please try again. Error: boom",
		}},
		want: want{tool: true, client: "openinference", name: "fetch_page", args: engine.ArgsJSON, fpSrc: engine.FingerprintError, failed: true, class: "retry_requested"},
	},
	{
		name: "openinference hide_inputs redaction",
		span: fakeSpan{name: "fetch_page", attrs: map[string]any{
			"openinference.span.kind": "TOOL", "tool.name": "fetch_page", "input.value": "__REDACTED__", "output.value": "__REDACTED__",
		}},
		want: want{tool: true, client: "openinference", name: "fetch_page", args: engine.ArgsAbsent, fpSrc: engine.FingerprintMissing},
	},
	{
		name: "openai agents via logfire (Function: {name})",
		span: fakeSpan{name: "Function: {name}", attrs: map[string]any{
			"name": "get_weather", "input": `{"city":"Paris"}`, "output": "sunny", "gen_ai.system": "openai",
			"logfire.msg": "Function: get_weather",
		}},
		want: want{tool: true, client: "openai_agents_logfire", name: "get_weather", args: engine.ArgsJSON, fpSrc: engine.FingerprintResult},
	},
	{
		name: "traceloop langgraph tool",
		span: fakeSpan{name: "tavily_search.tool", attrs: map[string]any{
			"traceloop.span.kind": "tool", "traceloop.entity.name": "tavily_search",
			"traceloop.entity.input":  `{"input_str":"{'query': 'x'}","tags":["seq:step:3"],"metadata":{"langgraph_step":3},"inputs":{"query":"x"},"kwargs":{"name":"tavily_search"}}`,
			"traceloop.entity.output": `{"output":{"lc":1,"type":"constructor","id":["langchain","schema","messages","ToolMessage"],"kwargs":{"content":"r","tool_call_id":"c1","status":"success"}},"kwargs":{"name":"tavily_search"}}`,
		}},
		want: want{tool: true, client: "traceloop", name: "tavily_search", args: engine.ArgsJSON, fpSrc: engine.FingerprintResult},
	},
	{
		name: "strands legacy events, tool status error",
		span: fakeSpan{name: "execute_tool http_get", attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.system": "strands-agents", "gen_ai.tool.name": "http_get",
			"gen_ai.tool.call.id": "tooluse_1", "gen_ai.tool.status": "error",
		}, events: []fakeEvent{
			{name: "gen_ai.tool.message", attrs: map[string]any{"role": "tool", "content": `{"url":"https://a"}`, "id": "tooluse_1"}},
			{name: "gen_ai.choice", attrs: map[string]any{"message": `[{"text":"Error: 503"}]`, "id": "tooluse_1"}},
		}},
		want: want{tool: true, client: "strands", name: "http_get", args: engine.ArgsJSON, fpSrc: engine.FingerprintError, failed: true, class: "error", callID: "tooluse_1"},
	},
	{
		name: "strands latest conventions (operation.details events)",
		span: fakeSpan{name: "execute_tool http_get", attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.provider.name": "strands-agents", "gen_ai.tool.name": "http_get",
			"gen_ai.tool.status": "success",
		}, events: []fakeEvent{
			{name: "gen_ai.client.inference.operation.details", attrs: map[string]any{"gen_ai.input.messages": `[{"role":"tool","parts":[{"type":"tool_call","name":"http_get","id":"t1","arguments":{"url":"https://a"}}]}]`}},
			{name: "gen_ai.client.inference.operation.details", attrs: map[string]any{"gen_ai.output.messages": `[{"role":"tool","parts":[{"type":"tool_call_response","id":"t1","response":[{"text":"ok"}]}]}]`}},
		}},
		want: want{tool: true, client: "strands", name: "http_get", args: engine.ArgsJSON, fpSrc: engine.FingerprintResult},
	},
	{
		name: "pydantic ai retry prompt as result with status ERROR",
		span: fakeSpan{name: "execute_tool get_user", isErr: true, attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_user", "gen_ai.tool.call.id": "pyd_1",
			"gen_ai.tool.call.arguments": `{"id":-1}`, "gen_ai.tool.call.result": "id must be positive\n\nFix the errors and try again.",
			"logfire.msg": "running tool: get_user",
		}, events: []fakeEvent{{name: "exception", attrs: map[string]any{"exception.type": "pydantic_ai.exceptions.ToolRetryError"}}}},
		want: want{tool: true, client: "pydantic_ai", name: "get_user", args: engine.ArgsJSON, fpSrc: engine.FingerprintError, failed: true, class: "pydantic_ai.exceptions.ToolRetryError", callID: "pyd_1"},
	},
	{
		name: "pydantic ai output tool (final_result) is not an action",
		span: fakeSpan{name: "execute_tool final_result", attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "final_result",
			"logfire.msg": "running output function: final_result",
		}},
		want: want{tool: false},
	},
	{
		name: "pydantic ai instrumentation v2 (running tool, tool_arguments)",
		span: fakeSpan{name: "running tool", attrs: map[string]any{
			"gen_ai.tool.name": "get_user", "tool_arguments": `{"id":1}`, "tool_response": `{"name":"a"}`,
			"logfire.msg": "running tool: get_user",
		}},
		want: want{tool: true, client: "pydantic_ai", name: "get_user", args: engine.ArgsJSON, fpSrc: engine.FingerprintResult},
	},
	{
		name: "crewai via openinference, repeated input refused",
		span: fakeSpan{name: "search_docs.run", attrs: map[string]any{
			"openinference.span.kind": "TOOL", "tool.name": "search_docs", "tool.agent_role": "Researcher",
			"input.value":  `{"query":"otel"}`,
			"output.value": "I tried reusing the same input, I must stop using this action input. I'll try something else instead.\n\n",
		}},
		want: want{tool: true, client: "crewai", name: "search_docs", args: engine.ArgsJSON, fpSrc: engine.FingerprintError, failed: true, class: "retry_requested"},
	},
	{
		name: "mcp client span",
		span: fakeSpan{name: "tools/call get_weather", attrs: map[string]any{
			"mcp.method.name": "tools/call", "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
			"gen_ai.tool.call.id": "call_9", "jsonrpc.request.id": "3",
		}},
		want: want{tool: true, client: "mcp", name: "get_weather", args: engine.ArgsAbsent, callID: "call_9"},
	},
	{
		name: "vercel ai sdk ai.toolCall",
		span: fakeSpan{name: "ai.toolCall", attrs: map[string]any{
			"operation.name": "ai.toolCall", "ai.operationId": "ai.toolCall", "ai.toolCall.name": "weather",
			"ai.toolCall.id": "call_v1", "ai.toolCall.args": `{"city":"Oslo"}`, "ai.toolCall.result": `{"temp":3}`,
		}},
		want: want{tool: true, client: "vercel_ai", name: "weather", args: engine.ArgsJSON, fpSrc: engine.FingerprintResult, callID: "call_v1"},
	},
	{
		name: "gemini cli tool_call span with traces enabled",
		span: fakeSpan{name: "tool_call", attrs: map[string]any{
			"gen_ai.operation.name": "tool_call", "gen_ai.agent.name": "gemini-cli", "gen_ai.tool.name": "run_shell_command",
			"gen_ai.tool.call_id": "run_shell_command__1", "gen_ai.conversation.id": "s-1",
			"gen_ai.input.messages":  `{"callId":"run_shell_command__1","name":"run_shell_command","args":{"command":"gh issue list"},"prompt_id":"s-1"}`,
			"gen_ai.output.messages": `{"status":"success","response":{"callId":"run_shell_command__1","responseParts":[{"functionResponse":{"id":"run_shell_command__1","name":"run_shell_command","response":{"output":"gh: command not found\\nProcess Group PGID: 4242"}}}]}}`,
		}},
		want: want{tool: true, client: "gemini_cli", name: "run_shell_command", args: engine.ArgsJSON, fpSrc: engine.FingerprintResult, callID: "run_shell_command__1"},
	},
	{
		name: "gemini cli tool_call span without traces: name only",
		span: fakeSpan{name: "tool_call", attrs: map[string]any{
			"gen_ai.operation.name": "tool_call", "gen_ai.tool.name": "read_file", "gen_ai.tool.call_id": "read_file__2",
		}},
		want: want{tool: true, client: "gemini_cli", name: "read_file", args: engine.ArgsAbsent, fpSrc: engine.FingerprintMissing, callID: "read_file__2"},
	},
	{
		name: "gemini cli tool_call span with a truncated request",
		span: fakeSpan{name: "tool_call", attrs: map[string]any{
			"gen_ai.operation.name": "tool_call", "gen_ai.tool.name": "write_file",
			"gen_ai.input.messages": `{"callId":"write_file__3","name":"write_file","args":{"content":"aaaa...[TRUNCATED: original length 20000]`,
		}},
		want: want{tool: true, client: "gemini_cli", name: "write_file", args: engine.ArgsAbsent, fpSrc: engine.FingerprintMissing},
	},
	{
		name: "gemini cli schedule_tool_calls span is no tool call",
		span: fakeSpan{name: "schedule_tool_calls", attrs: map[string]any{"gen_ai.operation.name": "schedule_tool_calls"}},
		want: want{tool: false},
	},
	{
		name: "qwen code qwen-code.tool span with sensitive attributes",
		span: fakeSpan{name: "qwen-code.tool", attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.agent.name": "qwen-code", "gen_ai.tool.name": "run_shell_command",
			"gen_ai.tool.call.id": "toolu_0001", "session.id": "s-1", "success": true,
			"gen_ai.tool.call.arguments": `{"command":"ls -la","description":"run ls -la"}`,
			"gen_ai.tool.call.result":    `{"output":"Command: ls -la\nDirectory: (root)\nOutput: total 12\nExit Code: 0"}`,
		}},
		want: want{tool: true, client: "qwen_code", name: "run_shell_command", args: engine.ArgsJSON, fpSrc: engine.FingerprintResult, callID: "toolu_0001"},
	},
	{
		name: "qwen code failed command: error class, no result",
		span: fakeSpan{name: "qwen-code.tool", isErr: true, errDesc: "Tool execution failed", attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.agent.name": "qwen-code", "gen_ai.tool.name": "run_shell_command",
			"gen_ai.tool.call.id": "toolu_0004", "tool.failure_kind": "tool_error", "error.type": "tool_error", "success": false,
			"gen_ai.tool.call.arguments": `{"command":"gh issue list"}`,
		}},
		want: want{tool: true, client: "qwen_code", name: "run_shell_command", args: engine.ArgsJSON, fpSrc: engine.FingerprintError, failed: true, class: "tool_error", callID: "toolu_0004"},
	},
	{
		name: "qwen code call refused by its PreToolUse hook is not an action",
		span: fakeSpan{name: "qwen-code.tool", isErr: true, errDesc: "Tool execution failed", attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.agent.name": "qwen-code", "gen_ai.tool.name": "run_shell_command",
			"gen_ai.tool.call.id": "toolu_0008", "tool.failure_kind": "pre_hook_blocked", "error.type": "pre_hook_blocked", "success": false,
		}},
		want: want{tool: false},
	},
	{
		name: "claude code tool_result log event",
		span: fakeSpan{name: "claude_code.tool_result", attrs: map[string]any{
			"event.name": "tool_result", "tool_name": "Bash", "success": "false", "tool_use_id": "toolu_1",
			"tool_parameters": `{"bash_command":"npm","full_command":"npm test","description":"Run tests"}`,
			"session.id":      "s-1",
		}},
		want: want{tool: true, client: "claude_code", name: "Bash", args: engine.ArgsJSON, fpSrc: engine.FingerprintError, failed: true, class: "error", callID: "toolu_1"},
	},
}

func TestExtractClientShapes(t *testing.T) {
	x := newExtractor()
	for _, tt := range clientShapes {
		t.Run(tt.name, func(t *testing.T) {
			c, ok := run(t, x, tt.span)
			require.Equal(t, tt.want.tool, ok)
			if !ok {
				return
			}
			assert.Equal(t, tt.want.client, c.Client, "client")
			assert.Equal(t, tt.want.name, c.Tool, "tool name")
			assert.Equal(t, tt.want.args, c.Args, "argument quality")
			assert.Equal(t, tt.want.fpSrc, c.FingerprintSource, "fingerprint source")
			assert.Equal(t, tt.want.failed, c.Failed, "failed")
			assert.Equal(t, tt.want.class, c.ErrorClass, "error class")
			assert.Equal(t, tt.want.callID, c.CallID, "call id")
			assert.Equal(t, tt.want.terminal, c.Terminal, "terminal")
		})
	}
}

// TestExtractSameAction checks shapes whose only differences are volatile:
// the signatures (and, where given, fingerprints) must be equal.
func TestExtractSameAction(t *testing.T) {
	x := newExtractor()
	traceloop := func(step int, callID string) fakeSpan {
		return fakeSpan{name: "tavily_search.tool", attrs: map[string]any{
			"traceloop.span.kind": "tool", "traceloop.entity.name": "tavily_search",
			"traceloop.entity.input": `{"input_str":"{'query': 'x'}","tags":["seq:step:` + string(rune('0'+step)) + `"],"metadata":{"langgraph_step":` +
				string(rune('0'+step)) + `,"checkpoint_ns":"tools:` + callID + `"},"inputs":{"query":"x"},"kwargs":{"name":"tavily_search"}}`,
			"traceloop.entity.output": `{"output":{"lc":1,"type":"constructor","id":["langchain","schema","messages","ToolMessage"],"kwargs":{"content":"r","tool_call_id":"` +
				callID + `","status":"success"}},"kwargs":{"name":"tavily_search"}}`,
		}}
	}
	strandsLatest := func(id string) fakeSpan {
		return fakeSpan{name: "execute_tool http_get", attrs: map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "http_get",
		}, events: []fakeEvent{
			{name: "gen_ai.client.inference.operation.details", attrs: map[string]any{"gen_ai.input.messages": `[{"role":"tool","parts":[{"type":"tool_call","name":"http_get","id":"` + id + `","arguments":{"url":"https://a"}}]}]`}},
			{name: "gen_ai.client.inference.operation.details", attrs: map[string]any{"gen_ai.output.messages": `[{"role":"tool","parts":[{"type":"tool_call_response","id":"` + id + `","response":[{"text":"ok"}]}]}]`}},
		}}
	}
	traceloopArgs := func(kw string) fakeSpan {
		return fakeSpan{name: "lookup.tool", attrs: map[string]any{
			"traceloop.span.kind": "tool", "traceloop.entity.name": "lookup",
			"traceloop.entity.input": `{"args": [], "kwargs": {"sku": "A1"` + kw + `}}`,
		}}
	}
	pairs := []struct {
		name string
		a, b fakeSpan
		fp   bool
	}{
		{"traceloop langgraph: only langgraph_step, tags and ids change", traceloop(1, "c1"), traceloop(2, "c2"), false},
		{"strands latest: only the tool use id changes", strandsLatest("t1"), strandsLatest("t2"), true},
		{"traceloop decorator {args,kwargs} with a run id", traceloopArgs(`, "run_id": "r1"`), traceloopArgs(`, "run_id": "r2"`), false},
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			a, ok := run(t, x, p.a)
			require.True(t, ok)
			b, ok := run(t, x, p.b)
			require.True(t, ok)
			assert.Equal(t, a.Signature, b.Signature, "signature")
			assert.Equal(t, engine.ArgsJSON, a.Args)
			if p.fp {
				assert.Equal(t, a.Fingerprint, b.Fingerprint, "fingerprint")
			}
		})
	}
	// The traceloop ToolMessage result is unwrapped down to its content: the
	// "status": "success" of the message is no terminal state.
	c, _ := run(t, x, traceloop(1, "c1"))
	assert.False(t, c.Terminal)
	c2, _ := run(t, x, traceloop(2, "c9"))
	assert.Equal(t, c.Fingerprint, c2.Fingerprint)
}

// TestFailedCallResultIsFailureEvidence: a failed call's recorded result
// is part of its failure evidence beside the class and the status text, so
// an error that moves in the tool's output is a new failure, and one that
// only changes ids there is the same.
func TestFailedCallResultIsFailureEvidence(t *testing.T) {
	x := newExtractor()
	failed := func(desc, result string) fakeSpan {
		attrs := map[string]any{
			"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "apply_edit", "error.type": "SyntaxError",
			"gen_ai.tool.call.arguments": `{"path": "app.py"}`,
		}
		if result != "" {
			attrs["gen_ai.tool.call.result"] = result
		}
		return fakeSpan{name: "execute_tool apply_edit", attrs: attrs, isErr: true, errDesc: desc}
	}
	tests := []struct {
		name string
		a, b fakeSpan
		same bool
	}{
		{"the error line moves in the result", failed("SyntaxError: tool failed", "invalid syntax (line 10)"), failed("SyntaxError: tool failed", "invalid syntax (line 20)"), false},
		{"only a request id changes in the result", failed("SyntaxError: tool failed", "invalid syntax (line 10), request 41"), failed("SyntaxError: tool failed", "invalid syntax (line 10), request 97"), true},
		{"a result without a status text is the error text", failed("", "invalid syntax (line 10)"), failed("", "invalid syntax (line 20)"), false},
		{"no result: the status text decides", failed("SyntaxError: tool failed", ""), failed("SyntaxError: tool failed", ""), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, ok := run(t, x, tt.a)
			require.True(t, ok)
			b, ok := run(t, x, tt.b)
			require.True(t, ok)
			require.True(t, a.Failed && b.Failed)
			assert.Equal(t, engine.FingerprintError, a.FingerprintSource)
			assert.Equal(t, tt.same, a.Fingerprint == b.Fingerprint, "same fingerprint")
		})
	}
}

func TestClassifyNoAllocForNonToolSpans(t *testing.T) {
	x := newExtractor()
	s := fakeSpan{name: "chat gpt-4o", attrs: map[string]any{"gen_ai.operation.name": "chat"}}
	var sc extract.Scratch
	var c engine.ToolCall
	allocs := testing.AllocsPerRun(100, func() {
		extract.Extract(x, s, &sc, &c)
	})
	assert.Zero(t, allocs)
}

// TestSupervisorInstanceIDWins: an agent that overwrites the environment's
// service.instance.id with its own (OpenCode 1.18.33's AI SDK spans) still
// names the supervisor's id, which it keeps in loopsupervisor.instance.id.
func TestSupervisorInstanceIDWins(t *testing.T) {
	x := newExtractor()
	span := func(res map[string]any) fakeSpan {
		return fakeSpan{name: "ai.toolCall", res: res, attrs: map[string]any{
			"ai.toolCall.name": "bash", "ai.toolCall.args": `{"command":"ls"}`, "session.id": "ses_1",
		}}
	}
	c, ok := run(t, x, span(map[string]any{"service.instance.id": "cd28f853", extract.SupervisorInstanceAttr: "sup-id"}))
	require.True(t, ok)
	assert.Equal(t, "sup-id", c.Target.ServiceInstanceID)
	c, ok = run(t, x, span(map[string]any{"service.instance.id": "cd28f853"}))
	require.True(t, ok)
	assert.Equal(t, "cd28f853", c.Target.ServiceInstanceID, "without the supervisor's copy, the resource's own id")
}
