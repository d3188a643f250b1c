package webhookbody

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
)

// Full is a body with every field set, for round-trip tests here and in
// the encoder's package: a field added without a value here fails
// TestEveryFieldSurvivesTheRoundTrip.
func full() Body {
	return Body{
		SchemaVersion: SchemaVersion, Type: TypeWarn, ID: "ld_1_2", Sequence: 2,
		DecidedAt: time.Date(2026, 11, 30, 12, 0, 0, 5, time.UTC), ExpiresAt: time.Date(2026, 11, 30, 12, 5, 0, 0, time.UTC),
		Action: ActionWarn, Nudge: "try a different approach",
		Session: Session{Key: "k", Source: "session.id", TraceID: "0102", Agent: "a", Client: "claude_code"},
		Target:  engine.Target{ServiceName: "svc", ServiceInstanceID: "0f6c2a9e-0b7d-4c51-9a1e-3d2f8b7c6a50", PID: 42, HostName: "h"},
		Transition: Transition{From: "working", To: "stuck", Reason: "frequent_identical", Trigger: "call", Explanation: "x",
			Kill: true, DryRun: true, Period: 1, Repetitions: 5, Window: 10, CallIndex: 21, CycleTools: []string{"bash"},
			FirstLoopSpanID: "01", TriggerSpanID: "02", DelayCalls: 5, DelaySeconds: 1.5},
		Evidence: Evidence{Signatures: []string{"s"}, Fingerprint: "f", FingerprintSource: "result", Confidence: "high"},
		Tokens:   &Tokens{Total: 10, Loop: 4},
		Versions: Versions{Normalizer: "args-v1", Fingerprint: "fp-v1"},
	}
}

func TestEveryFieldSurvivesTheRoundTrip(t *testing.T) {
	b := full()
	if zero := ZeroFields(b); len(zero) > 0 {
		t.Fatalf("the sample leaves fields unset: %v", zero)
	}
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var got Body
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, b) {
		t.Fatalf("round trip changed the body:\n got %+v\nwant %+v", got, b)
	}
}

func TestTimesAreRFC3339NanoAndExpiryIsOmittedWhenZero(t *testing.T) {
	b := full()
	b.Type, b.ExpiresAt, b.Action, b.Nudge = TypeTransition, time.Time{}, "", ""
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m["decided_at"] != "2026-11-30T12:00:00.000000005Z" {
		t.Errorf("decided_at = %v", m["decided_at"])
	}
	if _, ok := m["expires_at"]; ok {
		t.Errorf("a transition body carries expires_at: %s", raw)
	}
}
