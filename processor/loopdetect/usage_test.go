package loopdetect

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
)

// llmTraces builds one batch with one chat span reporting token usage.
func llmTraces(trace byte, seq uint64, start time.Time, in, out int64) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "agent")
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetTraceID(pcommon.TraceID{trace})
	s.SetSpanID(pcommon.SpanID{trace, byte(seq >> 16), byte(seq >> 8), byte(seq), 2})
	s.SetName("chat gpt-5")
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Second)))
	s.Attributes().PutStr("gen_ai.operation.name", "chat")
	s.Attributes().PutInt("gen_ai.usage.input_tokens", in)
	s.Attributes().PutInt("gen_ai.usage.output_tokens", out)
	return td
}

// The tokens an agent's LLM spans report reach the transition events, the
// loop_tokens metric, and, with kill.max_loop_tokens, a kill.
func TestLoopTokensReachEventsMetricsAndKill(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	d, sink := newTestDetector(t, tt, func(c *Config) {
		c.Kill.Reasons = nil
		c.Kill.AfterLoopCalls = 0
		c.Kill.MaxLoopTokens = 5000
	})
	ctx := context.Background()
	at := base
	for i := uint64(1); i <= 6; i++ {
		require.NoError(t, d.ConsumeTraces(ctx, llmTraces(7, i, at, 900, 100)))
		at = at.Add(2 * time.Second)
		require.NoError(t, d.ConsumeTraces(ctx, toolTraces(7, i, at, "read_file", `{"path":"a"}`, "same", nil)))
		at = at.Add(2 * time.Second)
	}
	evs := events(t, sink.AllTraces())
	require.NotEmpty(t, evs)
	stuck := evs[0]
	assert.Equal(t, "stuck", stuck.To)
	assert.False(t, stuck.Kill)
	// Counted from the session's first tool call on: the model call before
	// it had no session yet.
	assert.Equal(t, int64(1000), stuck.TokensTotal)
	assert.Equal(t, int64(1000), stuck.TokensLoop)

	var kill *int
	for i := range evs {
		if evs[i].Kill {
			kill = &i
		}
	}
	require.NotNil(t, kill, "kill.max_loop_tokens never killed; events: %+v", evs)
	assert.Equal(t, int64(5000), evs[*kill].TokensLoop, "killed at the model call that reached 5,000 loop tokens")

	m, err := tt.GetMetric("otelcol_loopdetect_loop_tokens")
	require.NoError(t, err)
	sum := m.Data.(metricdata.Sum[int64])
	require.Len(t, sum.DataPoints, 1)
	assert.Equal(t, int64(1000), sum.DataPoints[0].Value, "tokens burned up to the detection")
}

// usageSpan is one span of a usage case: a tool call (the session's
// repeated one when loop is set, else a distinct one), or a span with attrs
// in their order.
type usageSpan struct {
	tool, loop bool
	attrs      [][2]any
}

// model is a span of attributes k1, v1, k2, v2, ... in that order.
func model(kvs ...any) usageSpan {
	s := usageSpan{}
	for i := 0; i+1 < len(kvs); i += 2 {
		s.attrs = append(s.attrs, [2]any{kvs[i], kvs[i+1]})
	}
	return s
}

// usageBatches builds the case's batches of trace 9, each batch one
// resource and scope as an agent's exporter sends them: each span gets its
// own span id and a later time.
func usageBatches(t *testing.T, batches [][]usageSpan) []ptrace.Traces {
	t.Helper()
	var out []ptrace.Traces
	at, seq := base, uint64(0)
	for _, b := range batches {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "agent")
		spans := rs.ScopeSpans().AppendEmpty().Spans()
		for _, u := range b {
			seq++
			at = at.Add(time.Second)
			s := spans.AppendEmpty()
			s.SetTraceID(pcommon.TraceID{9})
			s.SetSpanID(pcommon.SpanID{9, byte(seq >> 16), byte(seq >> 8), byte(seq), 3})
			s.SetStartTimestamp(pcommon.NewTimestampFromTime(at))
			s.SetEndTimestamp(pcommon.NewTimestampFromTime(at.Add(time.Second)))
			a := s.Attributes()
			if u.tool {
				args := `{"path":"a"}`
				if !u.loop {
					args = fmt.Sprintf(`{"path":"f%d"}`, seq)
				}
				s.SetName("execute_tool read_file")
				a.PutStr("gen_ai.operation.name", "execute_tool")
				a.PutStr("gen_ai.tool.name", "read_file")
				a.PutStr("gen_ai.tool.call.arguments", args)
				a.PutStr("gen_ai.tool.call.result", "same")
				continue
			}
			s.SetName("llm")
			for _, kv := range u.attrs {
				require.NoError(t, a.PutEmpty(kv[0].(string)).FromRaw(kv[1]))
			}
		}
		out = append(out, td)
	}
	return out
}

// The tokens of a tracked session's model spans all reach the engine,
// whatever convention reports them, wherever the usage keys stand against
// the declared operation, in one batch or across several, between tool
// calls; the model spans before the first tool call, the spans a
// usage_skip rule names and the spans without usage add nothing. Each case
// ends with the same tool call repeated until the session is stuck: the
// stuck transition carries the session's token total.
func TestTrackedSessionsCountEveryModelSpansUsage(t *testing.T) {
	tool := usageSpan{tool: true}
	semconv := model("gen_ai.provider.name", "openai", "gen_ai.operation.name", "chat", "gen_ai.usage.input_tokens", 100, "gen_ai.usage.output_tokens", 20)
	usageFirst := model("gen_ai.usage.input_tokens", 100, "gen_ai.usage.output_tokens", 20, "gen_ai.operation.name", "chat")
	older := model("gen_ai.operation.name", "text_completion", "gen_ai.usage.prompt_tokens", 7, "gen_ai.usage.completion_tokens", 3)
	openinference := model("openinference.span.kind", "LLM", "llm.token_count.prompt", 40, "llm.token_count.completion", 2, "llm.token_count.total", 42)
	oiTotal := model("llm.token_count.total", 30, "openinference.span.kind", "LLM")
	vercel5 := model("ai.operationId", "ai.generateText.doGenerate", "ai.usage.inputTokens", 11, "ai.usage.outputTokens", 4)
	vercel4 := model("ai.usage.promptTokens", 9, "ai.usage.completionTokens", 1, "ai.operationId", "ai.streamText.doStream")
	agent := model("gen_ai.operation.name", "invoke_agent", "gen_ai.usage.input_tokens", 1000)
	vercelOuter := model("ai.usage.promptTokens", 1000, "ai.operationId", "ai.generateText")
	oiChain := model("openinference.span.kind", "CHAIN", "llm.token_count.total", 1000)
	http := model("http.request.method", "GET", "http.response.status_code", 200)
	for _, tc := range []struct {
		name    string
		batches [][]usageSpan
		want    int64
	}{
		{"semconv, one batch", [][]usageSpan{{tool, semconv, semconv}}, 240},
		{"usage keys before the operation", [][]usageSpan{{tool, usageFirst, semconv}}, 240},
		{"every convention", [][]usageSpan{{tool, semconv, older, openinference, oiTotal, vercel5, vercel4}}, 120 + 10 + 42 + 30 + 15 + 10},
		{"across batches", [][]usageSpan{{tool, semconv}, {usageFirst}, {older, openinference}, {vercel5}}, 120 + 120 + 10 + 42 + 15},
		{"between tool calls", [][]usageSpan{{tool, semconv, tool, usageFirst, tool}, {openinference, tool, vercel4}}, 120 + 120 + 42 + 10},
		{"before the first tool call", [][]usageSpan{{semconv, older}, {usageFirst, tool, oiTotal}}, 30},
		{"usage_skip spans", [][]usageSpan{{tool, agent, vercelOuter, oiChain, semconv}}, 120},
		{"spans without usage", [][]usageSpan{{tool, http, model("gen_ai.operation.name", "chat"), http, semconv}}, 120},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, sink := newTestDetector(t, nil, func(c *Config) {
				c.Kill.Reasons = nil
				c.Kill.AfterLoopCalls = 0
			})
			loop := make([]usageSpan, 8)
			for i := range loop {
				loop[i] = usageSpan{tool: true, loop: true}
			}
			for _, td := range usageBatches(t, append(tc.batches, loop)) {
				require.NoError(t, d.ConsumeTraces(context.Background(), td))
			}
			var stuck *loopevent.Event
			evs := events(t, sink.AllTraces())
			for i := range evs {
				if evs[i].To == "stuck" {
					stuck = &evs[i]
					break
				}
			}
			require.NotNil(t, stuck, "the repeated call never made the session stuck: %+v", evs)
			assert.Equal(t, tc.want, stuck.TokensTotal)
		})
	}
}
