package load

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/otelcol-loop/otelcol-loop/cmd/loopagent/internal/scenario"
)

func TestLoadMix(t *testing.T) {
	sr := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(sr))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	st, err := Run(context.Background(), tp, Options{Sessions: 5, Rate: 4000, Duration: 500 * time.Millisecond, LoopFraction: 0.4, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	spans := sr.Ended()
	if int64(len(spans)) != st.Spans {
		t.Fatalf("recorded %d spans, stats say %d", len(spans), st.Spans)
	}
	// The pacing is by wall clock: allow a generous band around 2000.
	if st.Spans < 1000 || st.Spans > 2100 {
		t.Errorf("emitted %d spans for 4000/s over 0.5 s", st.Spans)
	}
	if st.LoopingSessions != 2 {
		t.Errorf("looping sessions %d", st.LoopingSessions)
	}
	frac := float64(st.ToolSpans) / float64(st.Spans)
	if frac < 0.15 || frac > 0.25 {
		t.Errorf("tool fraction %.3f", frac)
	}
	traces := map[string]string{} // conversation id -> trace id
	bySession := map[string][]sdktrace.ReadOnlySpan{}
	for _, sp := range spans {
		conv, op := "", ""
		var args, res string
		for _, kv := range sp.Attributes() {
			switch string(kv.Key) {
			case scenario.AttrConversationID:
				conv = kv.Value.AsString()
			case scenario.AttrOperationName:
				op = kv.Value.AsString()
			case scenario.AttrToolCallArgs:
				args = kv.Value.AsString()
			case scenario.AttrToolCallResult:
				res = kv.Value.AsString()
			}
		}
		if conv == "" || op == "" {
			t.Fatalf("span %q without conversation id or operation", sp.Name())
		}
		tid := sp.SpanContext().TraceID().String()
		if prev, ok := traces[conv]; ok && prev != tid {
			t.Fatalf("session %s spans two traces", conv)
		}
		traces[conv] = tid
		if op == scenario.OperationExecuteTool {
			if !json.Valid([]byte(args)) || len(args) < 180 || len(args) > 230 {
				t.Errorf("args %d bytes, valid=%v", len(args), json.Valid([]byte(args)))
			}
			if len(res) < 480 || len(res) > 530 {
				t.Errorf("result %d bytes", len(res))
			}
			bySession[conv] = append(bySession[conv], sp)
		}
	}
	if len(traces) != 5 {
		t.Errorf("%d sessions seen", len(traces))
	}
	// load-0000 loops: its last tool calls are identical.
	calls := bySession["load-0000"]
	if len(calls) < warmupCalls+3 {
		t.Fatalf("looping session made only %d calls", len(calls))
	}
	last := calls[len(calls)-1].Attributes()
	prev := calls[len(calls)-2].Attributes()
	if attrOf(last, scenario.AttrToolCallArgs) != attrOf(prev, scenario.AttrToolCallArgs) {
		t.Errorf("looping session's calls differ")
	}
	healthy := bySession["load-0004"]
	if len(healthy) > 2 && attrOf(healthy[len(healthy)-1].Attributes(), scenario.AttrToolCallArgs) == attrOf(healthy[len(healthy)-2].Attributes(), scenario.AttrToolCallArgs) {
		t.Errorf("healthy session repeated its call")
	}
}

func attrOf(kvs []attribute.KeyValue, key string) string {
	for _, kv := range kvs {
		if string(kv.Key) == key {
			return kv.Value.AsString()
		}
	}
	return ""
}
