package alert

import (
	"github.com/otelcol-loop/otelcol-loop/internal/target"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

// TestNewBodyEncodesEveryField: from an event with every field set, a warn
// body (the type that uses every field) has no field left empty — a field
// added to the body without its line in NewBody fails here.
func TestNewBodyEncodesEveryField(t *testing.T) {
	decided := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	ev := &loopevent.Event{
		ID: "ld_1_2", Sequence: 2, Session: "k", SessionSource: "session.id", TraceID: "0102",
		From: "working", To: "stuck", Reason: "frequent_identical", Trigger: "call",
		Period: 1, Repetitions: 5, Window: 10, CallIndex: 21, CycleTools: []string{"bash"},
		Signatures: []string{"s"}, Fingerprint: "f", FingerprintSource: "result", Confidence: "high",
		NormalizerVersion: "args-v1", FingerprintVersion: "fp-v1", FirstLoopSpanID: "01", SpanID: "02",
		DelayCalls: 5, DelaySeconds: 1.5, Kill: true, DryRun: true, Explanation: "loop detected",
		DecidedAt: decided, Client: "claude_code", Agent: "a",
		Target:      target.Process{ServiceName: "svc", ServiceInstanceID: "inst", PID: 42, HostName: "h"},
		TokensTotal: 10, TokensLoop: 4,
	}
	b := NewBody(ev, webhookbody.TypeWarn, decided, decided.Add(5*time.Minute), []byte("key"))
	if zero := webhookbody.ZeroFields(b); len(zero) > 0 {
		t.Fatalf("NewBody leaves body fields empty: %v", zero)
	}
}
