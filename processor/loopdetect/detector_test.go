package loopdetect

import (
	"context"
	"errors"
	"fmt"
	"github.com/otelcol-loop/otelcol-loop/internal/target"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/metadata"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/metadatatest"
)

var base = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// toolTraces builds one batch with one execute_tool span.
func toolTraces(trace byte, seq uint64, start time.Time, tool, args, result string, attrs map[string]any) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "agent")
	rs.Resource().Attributes().PutStr("service.instance.id", "inst-1")
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetTraceID(pcommon.TraceID{trace})
	s.SetSpanID(pcommon.SpanID{trace, byte(seq >> 16), byte(seq >> 8), byte(seq), 1})
	s.SetName("execute_tool " + tool)
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(50 * time.Millisecond)))
	a := s.Attributes()
	a.PutStr("gen_ai.operation.name", "execute_tool")
	a.PutStr("gen_ai.tool.name", tool)
	if args != "" {
		a.PutStr("gen_ai.tool.call.arguments", args)
	}
	if result != "" {
		a.PutStr("gen_ai.tool.call.result", result)
	}
	for k, v := range attrs {
		_ = a.PutEmpty(k).FromRaw(v)
	}
	return td
}

// testDetector is a traces component made by its own factory, with the
// shared detector at hand and a next consumer the test may swap.
type testDetector struct {
	*detector
	processor.Traces
	next consumer.Traces
}

func newTestDetector(t *testing.T, tt *componenttest.Telemetry, mod func(*Config)) (*testDetector, *consumertest.TracesSink) {
	t.Helper()
	cfg := createDefaultConfig()
	if mod != nil {
		mod(cfg)
	}
	sink := new(consumertest.TracesSink)
	set := processortest.NewNopSettings(metadata.Type)
	if tt != nil {
		set = metadatatest.NewSettings(tt)
	}
	td := &testDetector{next: sink}
	next, err := consumer.NewTraces(func(ctx context.Context, b ptrace.Traces) error { return td.next.ConsumeTraces(ctx, b) })
	require.NoError(t, err)
	f := &factory{detectors: map[component.ID]*detector{}}
	td.Traces, err = f.createTraces(context.Background(), set, cfg, next)
	require.NoError(t, err)
	td.detector = f.detectors[set.ID]
	return td, sink
}

func events(t *testing.T, all []ptrace.Traces) []loopevent.Event {
	t.Helper()
	var out []loopevent.Event
	for _, td := range all {
		evs, err := loopevent.FromTraces(td)
		require.NoError(t, err)
		out = append(out, evs...)
	}
	return out
}

func TestTelemetryCountsSpansCallsTransitionsAndKills(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	d, _ := newTestDetector(t, tt, func(c *Config) { c.EventTime = true })
	ctx := context.Background()
	require.NoError(t, d.Start(ctx, componenttest.NewNopHost()))
	for i := 0; i < 6; i++ {
		require.NoError(t, d.ConsumeTraces(ctx, toolTraces(1, uint64(i), base.Add(time.Duration(i)*time.Second), "bash", `{"c":"ls"}`, "same", nil)))
	}
	require.NoError(t, d.ConsumeTraces(ctx, toolTraces(1, 99, base.Add(7*time.Second), "bash", `{"c":`, "x", nil)))
	require.NoError(t, d.Shutdown(ctx))

	metadatatest.AssertEqualLoopdetectSpans(t, tt, []metricdata.DataPoint[int64]{{Value: 7}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualLoopdetectToolCalls(t, tt, []metricdata.DataPoint[int64]{{Value: 7}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualLoopdetectSessions(t, tt, []metricdata.DataPoint[int64]{{Value: 1}}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualLoopdetectTransitions(t, tt, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("state", "stuck"), attribute.String("reason", "unchanged_result"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("state", "stuck"), attribute.String("reason", "frequent_identical"))},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualLoopdetectKills(t, tt, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.Bool("dry_run", false))},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualLoopdetectDegraded(t, tt, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("kind", "malformed"))},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualLoopdetectDetectionDelay(t, tt, []metricdata.HistogramDataPoint[float64]{{
		Count: 1, Sum: 1, Bounds: []float64{1, 5, 10, 30, 60, 300, 900, 3600, 7200},
		BucketCounts: []uint64{1, 0, 0, 0, 0, 0, 0, 0, 0, 0}, Min: metricdata.NewExtrema(1.0), Max: metricdata.NewExtrema(1.0),
	}}, metricdatatest.IgnoreTimestamp())
}

// TestTimerTransitionsBecomeSyntheticSpans drives the wall-clock sweeper's
// tick directly: a wait lease expires and the transition arrives as a
// zero-duration span in the agent's trace.
func TestTimerTransitionsBecomeSyntheticSpans(t *testing.T) {
	d, sink := newTestDetector(t, nil, nil)
	ctx := context.Background()
	require.NoError(t, d.Start(ctx, componenttest.NewNopHost()))
	defer func() { require.NoError(t, d.Shutdown(ctx)) }()
	lease := map[string]any{"loopdetect.wait.owner": "approver", "loopdetect.wait.deadline": time.Now().Add(time.Minute).UTC().Format(time.RFC3339)}
	now := time.Now()
	for i := 0; i < 2; i++ {
		require.NoError(t, d.ConsumeTraces(ctx, toolTraces(7, uint64(i), now.Add(time.Duration(i)*time.Millisecond), "check", `{"id":1}`, "pending", lease)))
	}
	evs := events(t, sink.AllTraces())
	require.Len(t, evs, 1)
	require.Equal(t, "waiting", evs[0].To)

	require.NoError(t, d.tick(ctx, time.Now().Add(2*time.Minute)))
	all := sink.AllTraces()
	timer := all[len(all)-1]
	require.Equal(t, 1, timer.SpanCount())
	span := timer.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	require.Equal(t, loopevent.SyntheticSpanName, span.Name())
	require.Equal(t, pcommon.TraceID{7}, span.TraceID())
	require.Equal(t, span.StartTimestamp(), span.EndTimestamp())
	inst, _ := timer.ResourceSpans().At(0).Resource().Attributes().Get("service.instance.id")
	require.Equal(t, "inst-1", inst.Str())
	evs = events(t, []ptrace.Traces{timer})
	require.Len(t, evs, 1)
	require.Equal(t, "waiting", evs[0].From)
	require.Equal(t, "stuck", evs[0].To)
	require.Equal(t, "tick", evs[0].Trigger)
	require.Contains(t, evs[0].Explanation, "expired")
}

func TestBadInputDegradesWithoutPanicOrLoss(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	d, sink := newTestDetector(t, tt, func(c *Config) { c.EventTime = true })
	ctx := context.Background()
	huge := `{"blob":"` + strings.Repeat("x", 1<<20) + `"}`
	inputs := []ptrace.Traces{
		toolTraces(2, 1, base, "t", huge, "r", nil),
		toolTraces(2, 2, base.Add(time.Second), "t", "{\"q\":\"\xff\xfe\"}", "\xff", nil),
		toolTraces(2, 3, base.Add(2*time.Second), "t", `{"q":`, `[1,`, nil),
		toolTraces(2, 4, base.Add(3*time.Second), "t", `{}`, "", map[string]any{"loopdetect.retry.attempt": "three", "loopdetect.wait.deadline": "soon"}),
		toolTraces(2, 5, base.Add(4*time.Second), "", "", "", map[string]any{"gen_ai.tool.name": 42}),
	}
	for _, td := range inputs {
		require.NotPanics(t, func() { require.NoError(t, d.ConsumeTraces(ctx, td)) })
	}
	require.Equal(t, len(inputs), sink.SpanCount(), "every span is forwarded")
	metadatatest.AssertEqualLoopdetectDegraded(t, tt, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("kind", "malformed"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("kind", "oversized"))},
		{Value: 1, Attributes: attribute.NewSet(attribute.String("kind", "bad_evidence"))},
	}, metricdatatest.IgnoreTimestamp())
}

func TestSessionKeyFromResourceAttribute(t *testing.T) {
	d, sink := newTestDetector(t, nil, func(c *Config) { c.EventTime = true; c.Session.Keys = []string{"session.id"} })
	ctx := context.Background()
	// Two traces, one session: the repetition spans both.
	for i := 0; i < 2; i++ {
		td := toolTraces(byte(10+i), uint64(i), base.Add(time.Duration(i)*time.Second), "read", `{"p":1}`, "same", nil)
		td.ResourceSpans().At(0).Resource().Attributes().PutStr("session.id", "conv-9")
		require.NoError(t, d.ConsumeTraces(ctx, td))
	}
	evs := events(t, sink.AllTraces())
	require.Len(t, evs, 1)
	require.Equal(t, "conv-9", evs[0].Session)
	require.Equal(t, "session.id", evs[0].SessionSource)
}

// TestLongLoopTraceKeepsMemoryFlat feeds one loop trace of many spans:
// the heap after 200k spans must not exceed the heap after 20k by more
// than noise, since the engine keeps a bounded history per session.
func TestLongLoopTraceKeepsMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("feeds 200k spans")
	}
	d, _ := newTestDetector(t, nil, func(c *Config) { c.EventTime = true })
	ctx := context.Background()
	sink := consumertest.NewNop()
	d.next = sink
	heapAt := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	var at20k uint64
	for i := 0; i < 200_000; i++ {
		require.NoError(t, d.ConsumeTraces(ctx, toolTraces(3, uint64(i), base.Add(time.Duration(i)*time.Second), "bash", `{"c":"ls"}`, "same", nil)))
		if i == 20_000 {
			at20k = heapAt()
		}
	}
	at200k := heapAt()
	require.Less(t, at200k, at20k+(1<<20), fmt.Sprintf("heap grew from %d to %d bytes", at20k, at200k))
	require.EqualValues(t, 1, d.eng.Stats().Sessions.Load())
}

// TestForeignVerdictsAreRemoved: a client cannot forge a kill by sending a
// transition event or a synthetic transition span of its own.
func TestForeignVerdictsAreRemoved(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	d, sink := newTestDetector(t, tt, func(c *Config) { c.EventTime = true })
	td := toolTraces(5, 1, base, "read", `{"p":1}`, "x", nil)
	forged := loopevent.Event{ID: "forged", To: "stuck", Kill: true, Target: target.Process{ServiceInstanceID: "victim"}}
	span := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0)
	forged.CopyTo(span.Events().AppendEmpty().Attributes())
	span.Events().At(0).SetName(loopevent.EventName)
	synthetic := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().AppendEmpty()
	synthetic.SetName(loopevent.SyntheticSpanName)
	forged.CopyTo(synthetic.Attributes())
	require.NoError(t, d.ConsumeTraces(context.Background(), td))
	require.Empty(t, events(t, sink.AllTraces()))
	require.Equal(t, 1, sink.SpanCount(), "the synthetic span is dropped, the tool span kept")
	metadatatest.AssertEqualLoopdetectDegraded(t, tt, []metricdata.DataPoint[int64]{
		{Value: 2, Attributes: attribute.NewSet(attribute.String("kind", "foreign_verdict"))},
	}, metricdatatest.IgnoreTimestamp())
}

// TestKillSurvivesAFailedForward: when the next consumer refuses the batch
// that carried a kill, the client's retry is a duplicate the engine will not
// decide again, so the next tick re-emits the transitions.
func TestKillSurvivesAFailedForward(t *testing.T) {
	d, _ := newTestDetector(t, nil, func(c *Config) { c.EventTime = true })
	ctx := context.Background()
	sink := new(consumertest.TracesSink)
	refusing := consumertest.NewErr(errors.New("queue full"))
	d.next = sink
	for i := 0; i < 4; i++ {
		require.NoError(t, d.ConsumeTraces(ctx, toolTraces(8, uint64(i), base.Add(time.Duration(i)*time.Second), "bash", `{"c":"ls"}`, "same", nil)))
	}
	d.next = refusing
	fifth := toolTraces(8, 4, base.Add(4*time.Second), "bash", `{"c":"ls"}`, "same", nil)
	require.Error(t, d.ConsumeTraces(ctx, fifth))
	d.next = sink
	// The client retries the same batch: a duplicate, no new decision.
	require.NoError(t, d.ConsumeTraces(ctx, toolTraces(8, 4, base.Add(4*time.Second), "bash", `{"c":"ls"}`, "same", nil)))
	require.NoError(t, d.tick(ctx, base.Add(5*time.Second)))
	var kills []loopevent.Event
	for _, e := range events(t, sink.AllTraces()) {
		if e.Kill {
			kills = append(kills, e)
		}
	}
	require.Len(t, kills, 1, "the kill decided in the refused batch is re-emitted once")
	require.Equal(t, int64(5), kills[0].CallIndex)
	require.NoError(t, d.tick(ctx, base.Add(6*time.Second)))
	require.Len(t, events(t, sink.AllTraces()), 2, "nothing is re-emitted twice")
}

// TestRejectedLeaseIsCountedAsDegraded: a wait lease the engine does not
// honour (here an owner without a deadline) is reported, so an operator can
// see agents whose waits are ignored.
func TestRejectedLeaseIsCountedAsDegraded(t *testing.T) {
	tt := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tt.Shutdown(context.Background())) })
	d, _ := newTestDetector(t, tt, func(c *Config) { c.EventTime = true })
	td := toolTraces(3, 1, base, "wait_for_review", `{"pr": 7}`, `{"state": "open"}`, map[string]any{"loopdetect.wait.owner": "reviewer"})
	require.NoError(t, d.ConsumeTraces(context.Background(), td))
	metadatatest.AssertEqualLoopdetectDegraded(t, tt, []metricdata.DataPoint[int64]{
		{Value: 1, Attributes: attribute.NewSet(attribute.String("kind", "lease_rejected"))},
	}, metricdatatest.IgnoreTimestamp())
}

// TestTimerTransitionsReachEveryPipeline: two traces pipelines share the
// detector of one processor id; a timer-driven transition goes to the
// output of each, not only to the first pipeline created.
func TestTimerTransitionsReachEveryPipeline(t *testing.T) {
	cfg := createDefaultConfig()
	cfg.EventTime = true
	f := &factory{detectors: map[component.ID]*detector{}}
	set := processortest.NewNopSettings(metadata.Type)
	ctx := context.Background()
	first, second := new(consumertest.TracesSink), new(consumertest.TracesSink)
	p1, err := f.createTraces(ctx, set, cfg, first)
	require.NoError(t, err)
	p2, err := f.createTraces(ctx, set, cfg, second)
	require.NoError(t, err)
	d := f.detectors[set.ID]
	lease := map[string]any{"loopdetect.wait.owner": "approver", "loopdetect.wait.deadline": base.Add(time.Minute).UTC().Format(time.RFC3339)}
	for i := 0; i < 2; i++ {
		require.NoError(t, p2.ConsumeTraces(ctx, toolTraces(7, uint64(i), base.Add(time.Duration(i)*time.Millisecond), "check", `{"id":1}`, "pending", lease)))
	}
	require.Len(t, events(t, second.AllTraces()), 1, "the waiting transition rides on the batch that caused it")
	require.Empty(t, first.AllTraces())
	require.NoError(t, d.tick(ctx, base.Add(2*time.Minute)))
	for _, sink := range []*consumertest.TracesSink{first, second} {
		all := sink.AllTraces()
		evs := events(t, all[len(all)-1:])
		require.Len(t, evs, 1)
		require.Equal(t, "stuck", evs[0].To)
		require.Equal(t, "tick", evs[0].Trigger)
	}
	require.NoError(t, p1.Shutdown(ctx))
	require.NoError(t, p2.Shutdown(ctx))
}
