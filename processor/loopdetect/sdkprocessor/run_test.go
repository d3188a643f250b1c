package sdkprocessor_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	nooptrace "go.opentelemetry.io/otel/trace/noop"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/sdkprocessor"
)

// frameworkCall is a tool call as ADK Go makes it: the span is started
// under ctx but the context Start returns is dropped, so nothing nests
// under the tool span and, without a span in ctx, every call is the root
// of its own trace.
func frameworkCall(ctx context.Context, a *agent) {
	a.call(ctx, "list_issues", `{"repo": "acme/app"}`, `{"open": [12, 15, 31]}`)
}

// TestStartRunMakesOneSessionOfAFrameworkRun: a framework that starts no
// run span loops until its context is cancelled. With StartRun, whatever
// provider the root span comes from, every tool span joins the run's trace
// and the loop is killed at the 5th call; without it, each call is its own
// session and the loop runs on.
func TestStartRunMakesOneSessionOfAFrameworkRun(t *testing.T) {
	tests := []struct {
		name string
		// start returns the run's context and a function to call when it ends.
		start     func(t *testing.T, p *sdkprocessor.Processor, a *agent) (context.Context, func())
		wantCalls int
		wantKill  bool
	}{
		{
			name: "root span on the agent's provider",
			start: func(_ *testing.T, p *sdkprocessor.Processor, a *agent) (context.Context, func()) {
				return p.StartRun(context.Background(), a.tp, "")
			},
			wantCalls: 5, wantKill: true,
		},
		{
			name: "root span on another provider (the one that exports)",
			start: func(t *testing.T, p *sdkprocessor.Processor, _ *agent) (context.Context, func()) {
				other := sdktrace.NewTracerProvider()
				t.Cleanup(func() { require.NoError(t, other.Shutdown(context.Background())) })
				return p.StartRun(context.Background(), other, "my-agent run")
			},
			wantCalls: 5, wantKill: true,
		},
		{
			name: "no recording provider: a fresh trace id",
			start: func(_ *testing.T, p *sdkprocessor.Processor, _ *agent) (context.Context, func()) {
				return p.StartRun(context.Background(), nooptrace.NewTracerProvider(), "")
			},
			wantCalls: 5, wantKill: true,
		},
		{
			name: "no recording provider, inside a caller's span: still a run of its own",
			start: func(t *testing.T, p *sdkprocessor.Processor, a *agent) (context.Context, func()) {
				ctx, caller := a.tracer.Start(context.Background(), "POST /tasks")
				t.Cleanup(func() { caller.End() })
				ctx, end := p.StartRun(ctx, nooptrace.NewTracerProvider(), "")
				require.NotEqual(t, caller.SpanContext().TraceID(), trace.SpanContextFromContext(ctx).TraceID())
				return ctx, end
			},
			wantCalls: 5, wantKill: true,
		},
		{
			name: "without StartRun every call is its own session",
			start: func(*testing.T, *sdkprocessor.Processor, *agent) (context.Context, func()) {
				return context.Background(), func() {}
			},
			wantCalls: 30, wantKill: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newClock()
			rec := newRecorder()
			p, err := sdkprocessor.New(sdkprocessor.WithCallback(rec.callback), sdkprocessor.WithClock(clk.Now))
			require.NoError(t, err)
			a := newAgent(t, p, clk)

			ctx, end := tt.start(t, p, a)
			calls := 0
			for ; calls < 30 && ctx.Err() == nil; calls++ {
				frameworkCall(ctx, a)
			}
			end()
			a.flush()

			assert.Equal(t, tt.wantCalls, calls)
			assert.Equal(t, tt.wantKill, errors.Is(context.Cause(ctx), sdkprocessor.ErrKilled), "cause: %v", context.Cause(ctx))
			if tt.wantKill {
				assert.Equal(t, []string{
					"working->stuck unchanged_result #2 kill=false dry=false",
					"stuck->stuck frequent_identical #5 kill=true dry=false",
				}, rec.summary())
				assert.Equal(t, trace.SpanContextFromContext(ctx).TraceID().String(), rec.all()[0].Session)
			} else {
				assert.Empty(t, rec.summary())
				assert.Equal(t, int64(30), p.Stats().Sessions)
			}
		})
	}
}

func TestStartRunRootSpan(t *testing.T) {
	clk := newClock()
	p, err := sdkprocessor.New(sdkprocessor.WithClock(clk.Now))
	require.NoError(t, err)
	a := newAgent(t, p, clk)
	exported := tracetest.NewSpanRecorder()
	userTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(exported))
	defer func() { require.NoError(t, userTP.Shutdown(context.Background())) }()

	// The caller is inside a span of its own (a request, a batch job).
	parentCtx, parent := userTP.Tracer("server").Start(context.Background(), "POST /tasks")
	ctx, end := p.StartRun(parentCtx, userTP, "", trace.WithAttributes(attribute.String("gen_ai.agent.name", "triage")))
	for ctx.Err() == nil {
		frameworkCall(ctx, a)
	}
	end()
	parent.End()

	var root sdktrace.ReadOnlySpan
	for _, s := range exported.Ended() {
		if s.Name() == sdkprocessor.DefaultRunSpanName {
			root = s
		}
	}
	require.NotNil(t, root, "the run's root span is exported by the caller's provider")
	assert.False(t, root.Parent().IsValid(), "a new root: runs under one parent stay separate sessions")
	assert.NotEqual(t, parent.SpanContext().TraceID(), root.SpanContext().TraceID())
	require.Len(t, root.Links(), 1)
	assert.Equal(t, parent.SpanContext(), root.Links()[0].SpanContext)
	assert.Contains(t, root.Attributes(), attribute.String("gen_ai.agent.name", "triage"))
	assert.Contains(t, root.Attributes(), attribute.String("gen_ai.operation.name", "invoke_agent"))
	assert.Equal(t, codes.Error, root.Status().Code)
	var ke *sdkprocessor.KillError
	require.ErrorAs(t, context.Cause(ctx), &ke, "the kill cause survives end")
	assert.Equal(t, ke.Error(), root.Status().Description)
	assert.Equal(t, root.SpanContext().TraceID().String(), ke.Transition.Session)
}

func TestStartRunEndReleasesAHealthyRun(t *testing.T) {
	clk := newClock()
	p, err := sdkprocessor.New(sdkprocessor.WithClock(clk.Now))
	require.NoError(t, err)
	a := newAgent(t, p, clk)
	exported := tracetest.NewSpanRecorder()
	userTP := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(exported))
	defer func() { require.NoError(t, userTP.Shutdown(context.Background())) }()

	ctx, end := p.StartRun(context.Background(), userTP, "")
	frameworkCall(ctx, a)
	require.NoError(t, ctx.Err())
	end()

	assert.ErrorIs(t, context.Cause(ctx), context.Canceled)
	assert.NotErrorIs(t, context.Cause(ctx), sdkprocessor.ErrKilled)
	require.Len(t, exported.Ended(), 1)
	assert.Equal(t, codes.Unset, exported.Ended()[0].Status().Code)
	assert.Equal(t, int64(0), p.Stats().ContextsCancelled)
}
