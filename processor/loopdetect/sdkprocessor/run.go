package sdkprocessor

import (
	"context"
	"crypto/rand"
	"errors"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// DefaultRunSpanName is the name of the root span StartRun starts when
// given an empty name (the GenAI conventions' agent invocation).
const DefaultRunSpanName = "invoke_agent"

// StartRun makes one agent run one session, in one line, for frameworks
// that start no span around a run (ADK Go's runner.Run is one: each of its
// spans would otherwise be the root of its own trace, and no loop would
// ever be seen). It starts a new root span named name (DefaultRunSpanName
// if empty) on tp (nil: otel.GetTracerProvider()), linked to the span in
// ctx if there is one, and registers the run's trace for kills as
// RegisterTrace does. Every span started under the returned context, on
// any tracer provider, joins that trace.
//
// If tp records nothing (the global provider before one is set), the
// context carries a fresh sampled trace id instead, so the framework's
// spans still share one trace; nothing is exported for the run itself.
//
// Call end when the run returns: it ends the root span, with an error
// status naming the kill if the run was killed, and releases the
// registration. The context stays cancelled with its *KillError cause
// after a kill, so context.Cause(ctx) can be read after end too.
//
// The root span must be sampled: under a parent-based sampler, the spans
// of an unsampled run are not recorded, and the processor never sees them.
// The session is the trace id: with WithSessionKeys, use Register with
// your own key instead.
func (p *Processor) StartRun(ctx context.Context, tp trace.TracerProvider, name string, opts ...trace.SpanStartOption) (context.Context, func()) {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	if name == "" {
		name = DefaultRunSpanName
	}
	start := []trace.SpanStartOption{
		trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("gen_ai.operation.name", "invoke_agent")),
	}
	// A new root keeps runs under one long-lived parent (a batch job, a
	// server span) from becoming one session; the link keeps the lineage.
	parent := trace.SpanContextFromContext(ctx)
	if parent.IsValid() {
		start = append(start, trace.WithLinks(trace.Link{SpanContext: parent}))
	}
	ctx, span := tp.Tracer("github.com/otelcol-loop/otelcol-loop/processor/loopdetect/sdkprocessor").
		Start(ctx, name, append(start, opts...)...)
	// A no-op tracer makes no span: it returns none, or the parent's.
	if sc := span.SpanContext(); !sc.TraceID().IsValid() || sc.Equal(parent) {
		ctx = trace.ContextWithSpanContext(ctx, freshSpanContext())
	}
	ctx, cancel := p.RegisterTrace(ctx)
	end := func() {
		var kill *KillError
		if errors.As(context.Cause(ctx), &kill) {
			span.SetStatus(codes.Error, kill.Error())
		}
		span.End()
		cancel(nil)
	}
	return ctx, end
}

// freshSpanContext is a sampled root span context with random ids: the
// sampled flag makes the usual parent-based samplers record the children.
func freshSpanContext() trace.SpanContext {
	var tid trace.TraceID
	var sid trace.SpanID
	for !tid.IsValid() {
		_, _ = rand.Read(tid[:])
	}
	for !sid.IsValid() {
		_, _ = rand.Read(sid[:])
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
}
