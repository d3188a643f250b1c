package loopdetect

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
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
