package sdkprocessor_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/sdkprocessor"
)

// noop is the baseline: a SpanProcessor that does nothing.
type noop struct{}

func (noop) OnStart(context.Context, sdktrace.ReadWriteSpan) {}
func (noop) OnEnd(sdktrace.ReadOnlySpan)                     {}
func (noop) Shutdown(context.Context) error                  { return nil }
func (noop) ForceFlush(context.Context) error                { return nil }

const variants = 64

// toolAttrs is a tool span's attributes: ~200-byte JSON arguments and a
// ~500-byte result, distinct per variant (a working agent), or the same
// for every variant (a stuck loop).
func toolAttrs(i int, same bool) []attribute.KeyValue {
	if same {
		i = 0
	}
	args := fmt.Sprintf(`{"command": "grep -rn 'func New' ./pkg/module%02d --include='*.go' | head -50", "cwd": "/home/agent/work/repo", "timeout_ms": 30000, "env": {"LANG": "C", "CI": "1"}}`, i)
	for len(args) < 200 {
		args = args[:len(args)-1] + ` `
		args += "}"
	}
	var rb strings.Builder
	for j := 0; rb.Len() < 480; j++ {
		fmt.Fprintf(&rb, "pkg/module%02d/file%02d.go:%d: func New(opts ...Option) (*T, error)\n", i, j, 10+j)
	}
	return []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", "bash"),
		attribute.String("gen_ai.tool.call.id", fmt.Sprintf("call_%08d", i)),
		attribute.String("gen_ai.tool.call.arguments", args),
		attribute.String("gen_ai.tool.call.result", rb.String()[:500]),
	}
}

func chatAttrs(int, bool) []attribute.KeyValue {
	return []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", "chat"),
		attribute.String("gen_ai.provider.name", "openai"),
		attribute.String("gen_ai.request.model", "gpt-4o"),
		attribute.Int("gen_ai.usage.input_tokens", 1200),
		attribute.Int("gen_ai.usage.output_tokens", 300),
	}
}

// recorded ends real SDK spans and keeps their ReadOnlySpans.
func recorded(b *testing.B, name string, attrs func(int, bool) []attribute.KeyValue, same bool) []sdktrace.ReadOnlySpan {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tr := tp.Tracer("bench")
	for i := 0; i < variants; i++ {
		_, s := tr.Start(context.Background(), name, trace.WithAttributes(attrs(i, same)...))
		s.End()
	}
	return rec.Ended()
}

// benchSpan replays a recorded span as a new one: fresh span id, later
// times (so the engine sees new calls, not duplicate deliveries).
type benchSpan struct {
	sdktrace.ReadOnlySpan
	sc         trace.SpanContext
	start, end time.Time
}

func (s *benchSpan) SpanContext() trace.SpanContext { return s.sc }
func (s *benchSpan) StartTime() time.Time           { return s.start }
func (s *benchSpan) EndTime() time.Time             { return s.end }

// BenchmarkOnEnd measures OnEnd alone for one ended span, against a no-op
// SpanProcessor. Sub-benchmarks: tool (a working agent's varied calls),
// tool_loop (the same call over and over: a stuck session after its kill)
// and non_tool (an LLM chat span).
func BenchmarkOnEnd(b *testing.B) {
	kinds := []struct {
		name  string
		span  string
		attrs func(int, bool) []attribute.KeyValue
		same  bool
	}{
		{"tool", "execute_tool bash", toolAttrs, false},
		{"tool_loop", "execute_tool bash", toolAttrs, true},
		{"non_tool", "chat gpt-4o", chatAttrs, false},
	}
	for _, k := range kinds {
		spans := recorded(b, k.span, k.attrs, k.same)
		for _, procName := range []string{"loopdetect", "noop"} {
			b.Run(k.name+"/"+procName, func(b *testing.B) {
				var sp sdktrace.SpanProcessor = noop{}
				if procName == "loopdetect" {
					p, err := sdkprocessor.New(sdkprocessor.WithCallback(func(engine.Transition) {}))
					if err != nil {
						b.Fatal(err)
					}
					defer func() { _ = p.Shutdown(context.Background()) }()
					sp = p
				}
				tid := spans[0].SpanContext().TraceID()
				base := time.Now()
				w := &benchSpan{}
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					var sid trace.SpanID
					binary.BigEndian.PutUint64(sid[:], uint64(i+1))
					w.ReadOnlySpan = spans[i%variants]
					w.sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
					w.start = base.Add(time.Duration(i) * time.Second)
					w.end = w.start.Add(500 * time.Millisecond)
					sp.OnEnd(w)
				}
			})
		}
	}
}

// BenchmarkSpan measures a whole span's life in the SDK (Start with its
// attributes, End) with the loop detector registered, against a no-op
// SpanProcessor: the cost an agent pays per span.
func BenchmarkSpan(b *testing.B) {
	for _, k := range []struct {
		name  string
		span  string
		attrs func(int, bool) []attribute.KeyValue
	}{
		{"tool", "execute_tool bash", toolAttrs},
		{"non_tool", "chat gpt-4o", chatAttrs},
	} {
		attrs := make([][]attribute.KeyValue, variants)
		for i := range attrs {
			attrs[i] = k.attrs(i, false)
		}
		for _, procName := range []string{"loopdetect", "noop"} {
			b.Run(k.name+"/"+procName, func(b *testing.B) {
				var sp sdktrace.SpanProcessor = noop{}
				if procName == "loopdetect" {
					p, err := sdkprocessor.New()
					if err != nil {
						b.Fatal(err)
					}
					sp = p
				}
				tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sp))
				defer func() { _ = tp.Shutdown(context.Background()) }()
				tr := tp.Tracer("bench")
				ctx, run := tr.Start(context.Background(), "invoke_agent")
				defer run.End()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					_, s := tr.Start(ctx, k.span, trace.WithAttributes(attrs[i%variants]...))
					s.End()
				}
			})
		}
	}
}
