package sdkprocessor_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/otelcol-loop/otelcol-loop/internal/target"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/goleak"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/sdkprocessor"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// clock is a fake clock the processor and the simulated agent share.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// recorder collects the transitions the callback sees.
type recorder struct {
	mu sync.Mutex
	ts []engine.Transition
	ch chan engine.Transition
}

func newRecorder() *recorder { return &recorder{ch: make(chan engine.Transition, 1024)} }

func (r *recorder) callback(t engine.Transition) {
	r.mu.Lock()
	r.ts = append(r.ts, t)
	r.mu.Unlock()
	select {
	case r.ch <- t:
	default:
	}
}

func (r *recorder) all() []engine.Transition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]engine.Transition(nil), r.ts...)
}

func (r *recorder) summary() []string {
	var out []string
	for _, t := range r.all() {
		out = append(out, fmt.Sprintf("%s->%s %s #%d kill=%v dry=%v", t.From, t.To, t.Reason, t.CallIndex, t.Kill, t.DryRun))
	}
	return out
}

// agent emits GenAI execute_tool spans through a real TracerProvider, in
// fake time: each call lasts 1 s and starts 9 s after the previous one.
type agent struct {
	t      *testing.T
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	clk    *clock
}

func newAgent(t *testing.T, p *sdkprocessor.Processor, clk *clock) *agent {
	res := resource.NewSchemaless(
		attribute.String("service.name", "pi-agent"),
		attribute.String("service.instance.id", "run-42"),
		attribute.Int("process.pid", 4242),
		attribute.String("host.name", "builder-1"),
	)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p), sdktrace.WithResource(res))
	t.Cleanup(func() { require.NoError(t, tp.Shutdown(context.Background())) })
	return &agent{t: t, tp: tp, tracer: tp.Tracer("agent"), clk: clk}
}

func (a *agent) call(ctx context.Context, tool, args, result string, extra ...attribute.KeyValue) {
	attrs := append([]attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", tool),
		attribute.String("gen_ai.tool.call.arguments", args),
		attribute.String("gen_ai.tool.call.result", result),
	}, extra...)
	_, s := a.tracer.Start(ctx, "execute_tool "+tool, trace.WithTimestamp(a.clk.Now()), trace.WithAttributes(attrs...))
	a.clk.Advance(time.Second)
	s.End(trace.WithTimestamp(a.clk.Now()))
	a.clk.Advance(8 * time.Second)
}

func (a *agent) flush() { require.NoError(a.t, a.tp.ForceFlush(context.Background())) }

const (
	seedArgs   = `{"command": "gh issue list --state open | awk '{print $1}' | sort -n"}`
	seedResult = "12\n15\n31\n"
)

// runSeed000 plays the 1,972-call incident: 16 varied calls, then the same bash call with
// the same answer up to 200 times, until ctx is cancelled. It returns the
// number of calls made.
func runSeed000(ctx context.Context, a *agent, extra ...attribute.KeyValue) int {
	n := 0
	for i := 1; i <= 16; i++ {
		a.call(ctx, "read_file", fmt.Sprintf(`{"path": "src/file%d.go"}`, i), fmt.Sprintf(`{"lines": %d0}`, i), extra...)
		n++
	}
	for i := 0; i < 200 && ctx.Err() == nil; i++ {
		a.call(ctx, "bash", seedArgs, seedResult, extra...)
		n++
	}
	return n
}

func TestSeed000LoopIsKilled(t *testing.T) {
	clk := newClock()
	rec := newRecorder()
	p, err := sdkprocessor.New(sdkprocessor.WithCallback(rec.callback), sdkprocessor.WithClock(clk.Now))
	require.NoError(t, err)
	a := newAgent(t, p, clk)

	ctx, run := a.tracer.Start(context.Background(), "invoke_agent", trace.WithTimestamp(clk.Now()))
	ctx, cancel := p.RegisterTrace(ctx)
	defer cancel(nil)
	calls := runSeed000(ctx, a)
	run.End(trace.WithTimestamp(clk.Now()))
	a.flush()

	// The kill cancels the context before span.End of the 21st call returns.
	assert.Equal(t, 21, calls)
	require.Error(t, ctx.Err())
	cause := context.Cause(ctx)
	require.ErrorIs(t, cause, sdkprocessor.ErrKilled)
	var ke *sdkprocessor.KillError
	require.ErrorAs(t, cause, &ke)
	assert.Equal(t, engine.ReasonFrequentIdentical, ke.Transition.Reason)
	assert.Contains(t, cause.Error(), ke.Transition.Explanation)
	assert.NotEmpty(t, ke.Transition.Explanation)

	// Same transitions as the collector golden testdata/scenarios/s000-bash-loop.
	assert.Equal(t, []string{
		"working->stuck unchanged_result #18 kill=false dry=false",
		"stuck->stuck frequent_identical #21 kill=true dry=false",
	}, rec.summary())
	ts := rec.all()
	traceID := run.SpanContext().TraceID()
	for _, tr := range ts {
		assert.Equal(t, traceID.String(), tr.Session)
		assert.Equal(t, "trace_id", tr.SessionSource)
		assert.Equal(t, [16]byte(traceID), tr.TraceID)
		assert.Equal(t, "genai_semconv", tr.Client)
		assert.Equal(t, target.Process{ServiceName: "pi-agent", ServiceInstanceID: "run-42", PID: 4242, HostName: "builder-1"}, tr.Target)
		assert.Equal(t, []string{"bash"}, tr.CycleTools)
	}
	assert.Equal(t, int64(5), ts[1].DelayCalls)
	assert.Equal(t, "loopdetect: agent session "+traceID.String()+" killed: "+ts[1].Explanation, cause.Error())
	t.Logf("explanations: %q / %q", ts[0].Explanation, ts[1].Explanation)

	st := p.Stats()
	assert.Equal(t, int64(22), st.Spans) // 21 tool calls + the agent span
	assert.Equal(t, int64(21), st.ToolCalls)
	assert.Equal(t, int64(2), st.Transitions)
	assert.Equal(t, int64(1), st.Kills)
	assert.Equal(t, int64(1), st.ContextsCancelled)
	assert.Equal(t, int64(0), st.CallbacksDropped)
	state, reason, ok := p.Session(traceID.String())
	require.True(t, ok)
	assert.Equal(t, engine.StateStuck, state)
	assert.Equal(t, engine.ReasonFrequentIdentical, reason)
}

func TestHealthyPaginationIsNotStuck(t *testing.T) {
	clk := newClock()
	rec := newRecorder()
	p, err := sdkprocessor.New(sdkprocessor.WithCallback(rec.callback), sdkprocessor.WithClock(clk.Now))
	require.NoError(t, err)
	a := newAgent(t, p, clk)

	ctx, run := a.tracer.Start(context.Background(), "invoke_agent", trace.WithTimestamp(clk.Now()))
	ctx, cancel := p.RegisterTrace(ctx)
	defer cancel(nil)
	var items []string
	for i := 0; i < 60; i++ {
		items = append(items, fmt.Sprintf(`{"id": %d, "title": "issue %d"}`, i, i))
		next := fmt.Sprintf("c%d", i+1)
		a.call(ctx, "list_issues", fmt.Sprintf(`{"repo": "o/r", "cursor": "c%d", "per_page": 1}`, i),
			fmt.Sprintf(`{"items": [%s], "next_cursor": %q}`, strings.Join(items, ","), next))
		// A non-tool span between the calls (an LLM call) is ignored.
		_, llm := a.tracer.Start(ctx, "chat gpt-4o", trace.WithAttributes(attribute.String("gen_ai.operation.name", "chat")))
		llm.End()
	}
	run.End(trace.WithTimestamp(clk.Now()))
	a.flush()

	for _, tr := range rec.all() {
		assert.NotEqual(t, engine.StateStuck, tr.To, "transition %+v", tr)
	}
	require.NoError(t, ctx.Err())
	st := p.Stats()
	assert.Equal(t, int64(60), st.ToolCalls)
	assert.Equal(t, int64(121), st.Spans)
	assert.Equal(t, int64(0), st.Kills)
}

func TestSynchronousCallbackAndSessionKeys(t *testing.T) {
	clk := newClock()
	var got []engine.Transition
	p, err := sdkprocessor.New(
		sdkprocessor.WithCallbackQueue(0),
		sdkprocessor.WithCallback(func(tr engine.Transition) { got = append(got, tr) }),
		sdkprocessor.WithSessionKeys("gen_ai.conversation.id"),
		sdkprocessor.WithClock(clk.Now),
		sdkprocessor.WithTickInterval(0),
	)
	require.NoError(t, err)
	a := newAgent(t, p, clk)

	// The conversation spans several traces; the session follows it.
	ctx, cancel := p.Register(context.Background(), "conv-7")
	defer cancel(nil)
	other, cancelOther := p.Register(context.Background(), "conv-8")
	defer cancelOther(nil)
	conv := attribute.String("gen_ai.conversation.id", "conv-7")
	for i := 0; i < 16; i++ {
		a.call(ctx, "read_file", fmt.Sprintf(`{"path": "f%d"}`, i), "ok", conv)
	}
	n := 0
	for ctx.Err() == nil && n < 50 {
		tctx, root := a.tracer.Start(ctx, "turn") // a new trace per turn
		a.call(tctx, "bash", seedArgs, seedResult, conv)
		root.End()
		n++
	}
	// Synchronous: the callback has run when span.End returns.
	require.Len(t, got, 2)
	assert.Equal(t, 5, n)
	assert.Equal(t, "conv-7", got[1].Session)
	assert.Equal(t, "gen_ai.conversation.id", got[1].SessionSource)
	assert.True(t, got[1].Kill)
	require.ErrorIs(t, context.Cause(ctx), sdkprocessor.ErrKilled)
	require.NoError(t, other.Err(), "another session's context is untouched")
}

func TestDryRunDoesNotCancel(t *testing.T) {
	clk := newClock()
	rec := newRecorder()
	p, err := sdkprocessor.New(sdkprocessor.WithCallback(rec.callback), sdkprocessor.WithClock(clk.Now), sdkprocessor.WithDryRun(true))
	require.NoError(t, err)
	a := newAgent(t, p, clk)
	ctx, run := a.tracer.Start(context.Background(), "invoke_agent")
	ctx, cancel := p.RegisterTrace(ctx)
	defer cancel(nil)
	assert.Equal(t, 216, runSeed000(ctx, a))
	run.End()
	a.flush()
	assert.Equal(t, []string{
		"working->stuck unchanged_result #18 kill=false dry=false",
		"stuck->stuck frequent_identical #21 kill=false dry=true",
	}, rec.summary())
	require.NoError(t, ctx.Err())
	assert.Equal(t, int64(1), p.Stats().DryRunKills)
	assert.Equal(t, int64(0), p.Stats().Kills)
}

func TestBackstopOnManualTick(t *testing.T) {
	clk := newClock()
	rec := newRecorder()
	p, err := sdkprocessor.New(sdkprocessor.WithCallback(rec.callback), sdkprocessor.WithCallbackQueue(0),
		sdkprocessor.WithClock(clk.Now), sdkprocessor.WithTickInterval(0), sdkprocessor.WithBackstop(time.Minute))
	require.NoError(t, err)
	a := newAgent(t, p, clk)
	ctx, run := a.tracer.Start(context.Background(), "invoke_agent")
	ctx, cancel := p.RegisterTrace(ctx)
	defer cancel(nil)
	// Five varied calls started at 0 s … 36 s; the clock is at 45 s.
	for i := 0; i < 5; i++ {
		a.call(ctx, "read_file", fmt.Sprintf(`{"path": "f%d"}`, i), fmt.Sprintf("%d", i))
	}
	p.Tick()
	assert.Empty(t, rec.all())
	// No further call: only the timer can see the session pass 1 min.
	clk.Advance(20 * time.Second)
	p.Tick()
	require.Equal(t, []string{"working->stuck backstop #5 kill=true dry=false"}, rec.summary())
	assert.Equal(t, engine.TriggerTick, rec.all()[0].Trigger)
	require.ErrorIs(t, context.Cause(ctx), sdkprocessor.ErrKilled)
	run.End()
}

func TestTickerGoroutineAndShutdown(t *testing.T) {
	clk := newClock()
	rec := newRecorder()
	p, err := sdkprocessor.New(sdkprocessor.WithCallback(rec.callback), sdkprocessor.WithClock(clk.Now),
		sdkprocessor.WithTickInterval(time.Millisecond), sdkprocessor.WithBackstop(time.Minute))
	require.NoError(t, err)
	a := newAgent(t, p, clk)
	ctx, run := a.tracer.Start(context.Background(), "invoke_agent")
	a.call(ctx, "read_file", `{"path": "a"}`, "a")
	run.End()
	clk.Advance(time.Minute)
	select {
	case tr := <-rec.ch:
		assert.Equal(t, engine.ReasonBackstop, tr.Reason)
		assert.Equal(t, engine.TriggerTick, tr.Trigger)
	case <-time.After(10 * time.Second):
		t.Fatal("the ticker did not run the backstop")
	}
	require.NoError(t, p.Shutdown(context.Background()))
	require.NoError(t, p.Shutdown(context.Background()), "Shutdown is idempotent")
	// After Shutdown, spans are ignored.
	before := p.Stats().Spans
	a.call(context.Background(), "bash", seedArgs, seedResult)
	assert.Equal(t, before, p.Stats().Spans)
	require.NoError(t, p.ForceFlush(context.Background()))
}

func TestShutdownDeliversQueuedTransitions(t *testing.T) {
	clk := newClock()
	release := make(chan struct{})
	var mu sync.Mutex
	var n int
	p, err := sdkprocessor.New(sdkprocessor.WithClock(clk.Now), sdkprocessor.WithCallbackQueue(1),
		sdkprocessor.WithCallback(func(engine.Transition) {
			<-release
			mu.Lock()
			n++
			mu.Unlock()
		}))
	require.NoError(t, err)
	a := newAgent(t, p, clk)
	// Five sessions each reach stuck; the callback is blocked, so at most
	// one transition is in the callback, one queued, the rest are dropped.
	for s := 0; s < 5; s++ {
		ctx, run := a.tracer.Start(context.Background(), "invoke_agent")
		a.call(ctx, "bash", seedArgs, seedResult)
		a.call(ctx, "bash", seedArgs, seedResult)
		run.End()
	}
	// Whether the callback goroutine took the first one before the others
	// came decides whether 1 or 2 are held.
	dropped := p.Stats().CallbacksDropped
	assert.True(t, dropped == 3 || dropped == 4, "dropped %d", dropped)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	assert.ErrorIs(t, p.ForceFlush(ctx), context.Canceled)
	close(release)
	require.NoError(t, p.Shutdown(context.Background()))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, int64(5), int64(n)+dropped)
}

func TestConcurrentSessions(t *testing.T) {
	clk := newClock()
	rec := newRecorder()
	p, err := sdkprocessor.New(sdkprocessor.WithCallback(rec.callback), sdkprocessor.WithClock(clk.Now))
	require.NoError(t, err)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
	defer func() { require.NoError(t, tp.Shutdown(context.Background())) }()
	tracer := tp.Tracer("agent")

	const agents = 16
	var wg sync.WaitGroup
	errs := make([]error, agents)
	for g := 0; g < agents; g++ {
		wg.Go(func() {
			looping := g%2 == 0
			ctx, run := tracer.Start(context.Background(), "invoke_agent")
			defer run.End()
			ctx, cancel := p.RegisterTrace(ctx)
			defer cancel(nil)
			start := time.Unix(1_700_000_000, 0)
			for i := 0; i < 40 && ctx.Err() == nil; i++ {
				args, result := seedArgs, seedResult
				if !looping {
					args, result = fmt.Sprintf(`{"cursor": %d}`, i), fmt.Sprintf(`{"page": %d}`, i)
				}
				ts := start.Add(time.Duration(i) * 9 * time.Second)
				_, s := tracer.Start(ctx, "execute_tool bash", trace.WithTimestamp(ts), trace.WithAttributes(
					attribute.String("gen_ai.operation.name", "execute_tool"),
					attribute.String("gen_ai.tool.name", "bash"),
					attribute.String("gen_ai.tool.call.arguments", args),
					attribute.String("gen_ai.tool.call.result", result)))
				s.End(trace.WithTimestamp(ts.Add(time.Second)))
			}
			if looping != (ctx.Err() != nil) {
				errs[g] = fmt.Errorf("agent %d looping=%v cancelled=%v", g, looping, ctx.Err() != nil)
			}
		})
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.NoError(t, tp.ForceFlush(context.Background()))
	assert.Equal(t, int64(agents/2), p.Stats().Kills)
	assert.Equal(t, int64(agents/2), p.Stats().ContextsCancelled)
}

func TestRegisterCancelAndNoSpan(t *testing.T) {
	p, err := sdkprocessor.New(sdkprocessor.WithTickInterval(0))
	require.NoError(t, err)
	defer func() { require.NoError(t, p.Shutdown(context.Background())) }()
	ctx, cancel := p.Register(context.Background(), "s")
	mine := errors.New("run finished")
	cancel(mine)
	assert.Equal(t, mine, context.Cause(ctx))
	// Without a span in the context nothing is registered.
	ctx, cancel = p.RegisterTrace(context.Background())
	require.NoError(t, ctx.Err())
	cancel(nil)
	require.ErrorIs(t, ctx.Err(), context.Canceled)
}

func TestStructuredAndEventAttributes(t *testing.T) {
	clk := newClock()
	rec := newRecorder()
	p, err := sdkprocessor.New(sdkprocessor.WithCallback(rec.callback), sdkprocessor.WithCallbackQueue(0), sdkprocessor.WithClock(clk.Now))
	require.NoError(t, err)
	a := newAgent(t, p, clk)
	ctx, run := a.tracer.Start(context.Background(), "invoke_agent")
	defer run.End()
	// Arguments as a structured map; the failure once as an error status,
	// once as an exception event: the extract code path reads all of them.
	for i := 0; i < 2; i++ {
		_, s := a.tracer.Start(ctx, "execute_tool fetch", trace.WithTimestamp(clk.Now()), trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", "fetch"),
			attribute.Map("gen_ai.tool.call.arguments", attribute.String("url", "https://x"), attribute.StringSlice("h", []string{"a", "b"})),
		))
		if i == 0 {
			s.SetStatus(codes.Error, "bad_request: nope")
		} else {
			s.AddEvent("exception", trace.WithAttributes(attribute.String("exception.type", "bad_request"), attribute.String("exception.message", "nope")))
		}
		a.clk.Advance(time.Second)
		s.End(trace.WithTimestamp(clk.Now()))
		a.clk.Advance(time.Second)
	}
	st := p.Stats()
	assert.Equal(t, int64(2), st.ToolCalls)
	assert.Equal(t, int64(0), st.Malformed)
	ts := rec.all()
	require.NotEmpty(t, ts)
	last := ts[len(ts)-1]
	assert.Equal(t, engine.StateStuck, last.To)
	assert.Equal(t, engine.ReasonNonRetryableError, last.Reason)
	assert.False(t, last.LowConfidence, "structured arguments make a full signature")
}

func TestOptionValidation(t *testing.T) {
	_, err := sdkprocessor.New(sdkprocessor.WithKeys(extract.Keys{}))
	require.ErrorContains(t, err, "no span would be a tool call")
	bad := engine.DefaultConfig()
	bad.HistorySize = 1
	_, err = sdkprocessor.New(sdkprocessor.WithEngineConfig(bad))
	require.ErrorContains(t, err, "history_size")
	_, err = sdkprocessor.New(sdkprocessor.WithTickInterval(-time.Second))
	require.Error(t, err)
	_, err = sdkprocessor.New(sdkprocessor.WithFrequentIdentical(3, 5))
	require.ErrorContains(t, err, "frequent_identical")
	_, err = sdkprocessor.New(sdkprocessor.WithClock(nil))
	require.Error(t, err)
}

// Token usage on LLM spans reaches the transitions the callback gets.
func TestTransitionsCarryLLMTokens(t *testing.T) {
	var got []engine.Transition
	p, err := sdkprocessor.New(sdkprocessor.WithCallbackQueue(0), sdkprocessor.WithTickInterval(0),
		sdkprocessor.WithCallback(func(tr engine.Transition) { got = append(got, tr) }))
	require.NoError(t, err)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(p))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tracer := tp.Tracer("agent")
	ctx, run := tracer.Start(context.Background(), "invoke_agent")
	for i := 0; i < 3 && len(got) == 0; i++ {
		_, llm := tracer.Start(ctx, "chat", trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "chat"),
			attribute.Int("gen_ai.usage.input_tokens", 400), attribute.Int("gen_ai.usage.output_tokens", 100)))
		llm.End()
		_, s := tracer.Start(ctx, "execute_tool bash", trace.WithAttributes(
			attribute.String("gen_ai.operation.name", "execute_tool"),
			attribute.String("gen_ai.tool.name", "bash"),
			attribute.String("gen_ai.tool.call.arguments", `{"command":"ls"}`),
			attribute.String("gen_ai.tool.call.result", "a b")))
		s.End()
	}
	run.End()
	require.NotEmpty(t, got)
	assert.Equal(t, engine.StateStuck, got[0].To)
	// The first model call came before the session's first tool call, so
	// before the session existed: not counted.
	assert.Equal(t, int64(500), got[0].TokensTotal)
	assert.Equal(t, int64(500), got[0].TokensLoop)
}
