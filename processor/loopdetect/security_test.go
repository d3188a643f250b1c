package loopdetect

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/metadatatest"
)

// TestZeroTraceIDSpansAreSkippedAndCounted: spans with an all-zero trace id
// and no session attribute would all share one session, so five agents
// making one identical call each would read as one agent looping (and the
// last of them would be killed). They are skipped and counted as
// degraded{kind=no_session}, as on the logs input.
func TestZeroTraceIDSpansAreSkippedAndCounted(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	d, sink := newTestDetector(t, tt, func(c *Config) { c.EventTime = true })
	ctx := context.Background()
	const senders = 6
	for i := 0; i < senders; i++ {
		td := toolTraces(0, uint64(i), base.Add(time.Duration(i)*time.Second), "bash", `{"c":"ls"}`, "same", nil)
		td.ResourceSpans().At(0).Resource().Attributes().PutStr("service.instance.id", fmt.Sprintf("agent-%d", i))
		td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).SetTraceID(pcommon.NewTraceIDEmpty())
		require.NoError(t, d.ConsumeTraces(ctx, td))
	}
	require.NoError(t, d.Shutdown(ctx))
	require.Equal(t, senders, sink.SpanCount(), "skipped spans are still forwarded")
	require.Empty(t, events(t, sink.AllTraces()), "no verdict from merged senders")
	metadatatest.AssertEqualLoopdetectDegraded(t, tt, []metricdata.DataPoint[int64]{
		{Value: senders, Attributes: attribute.NewSet(attribute.String("kind", "no_session"))},
	}, metricdatatest.IgnoreTimestamp())
}

// TestZeroTraceIDWithSessionAttributeIsObserved: a configured session key
// makes the trace id irrelevant, so such spans still count.
func TestZeroTraceIDWithSessionAttributeIsObserved(t *testing.T) {
	d, sink := newTestDetector(t, nil, func(c *Config) { c.EventTime = true; c.Session.Keys = []string{"session.id"} })
	ctx := context.Background()
	for i := 0; i < 6; i++ {
		td := toolTraces(0, uint64(i), base.Add(time.Duration(i)*time.Second), "bash", `{"c":"ls"}`, "same", map[string]any{"session.id": "s-1"})
		require.NoError(t, d.ConsumeTraces(ctx, td))
	}
	require.NoError(t, d.Shutdown(ctx))
	evs := events(t, sink.AllTraces())
	require.NotEmpty(t, evs)
	require.Equal(t, "s-1", evs[0].Session)
}
