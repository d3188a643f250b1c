package loopdetect

import (
	"context"
	"testing"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processorhelper"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/metadata"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/metadatatest"
)

// BenchmarkWrapper is the per-batch cost of processorhelper's wrapper
// (its spans-in/out and duration accounting) around a process function
// that does nothing, against calling that function and the next consumer
// directly; one op is one batch of 100 spans. It is what loop_detect's own
// consume function (factory.go) saves.
func BenchmarkWrapper(b *testing.B) {
	td := ptrace.NewTraces()
	for r := 0; r < 10; r++ {
		ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans()
		for k := 0; k < 10; k++ {
			ss.AppendEmpty().SetName("chat")
		}
	}
	id := func(_ context.Context, td ptrace.Traces) (ptrace.Traces, error) { return td, nil }
	ctx := context.Background()
	b.Run("direct", func(b *testing.B) {
		next := consumertest.NewNop()
		var c consumer.Traces = next
		for b.Loop() {
			if _, err := id(ctx, td); err != nil {
				b.Fatal(err)
			}
			_ = c.ConsumeTraces(ctx, td)
		}
	})
	for _, tel := range []string{"nop", "sdk"} {
		b.Run("processorhelper/telemetry="+tel, func(b *testing.B) {
			set := processortest.NewNopSettings(metadata.Type)
			if tel == "sdk" {
				tt := componenttest.NewTelemetry()
				defer func() { _ = tt.Shutdown(ctx) }()
				set = metadatatest.NewSettings(tt)
			}
			fwd, _ := consumer.NewTraces(consumertest.NewNop().ConsumeTraces)
			p, err := processorhelper.NewTraces(ctx, set, nil, fwd, id)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				_ = p.ConsumeTraces(ctx, td)
			}
		})
	}
}
