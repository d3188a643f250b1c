package webhookbody

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
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
		Target:  Target{ServiceName: "svc", InstanceDigest: DigestInstance([]byte("k"), "0f6c2a9e-0b7d-4c51-9a1e-3d2f8b7c6a50"), ServiceInstanceID: "0f6c2a9e-0b7d-4c51-9a1e-3d2f8b7c6a50", PID: 42, HostName: "h"},
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

// A target names an instance only for a holder of the key its digest was
// made with; a schema 1 body's raw id still matches.
func TestTargetNamesItsInstanceOnlyUnderItsKey(t *testing.T) {
	const id = "0f6c2a9e-0b7d-4c51-9a1e-3d2f8b7c6a50"
	k1, k2 := []byte("key one"), []byte("key two")
	digested := Target{InstanceDigest: DigestInstance(k1, id)}
	for _, tc := range []struct {
		name string
		t    Target
		id   string
		keys [][]byte
		want bool
	}{
		{"its key", digested, id, [][]byte{k1}, true},
		{"its key second of two (rotation)", digested, id, [][]byte{k2, k1}, true},
		{"another key", digested, id, [][]byte{k2}, false},
		{"another id", digested, id + "x", [][]byte{k1}, false},
		{"no keys", digested, id, nil, false},
		{"a raw id (schema 1)", Target{ServiceInstanceID: id}, id, nil, true},
		{"a wrong raw id", Target{ServiceInstanceID: "other"}, id, nil, false},
		{"nothing", Target{PID: 42}, id, [][]byte{k1}, false},
		{"an empty own id never matches", Target{}, "", [][]byte{k1}, false},
	} {
		if got := tc.t.Names(tc.id, tc.keys); got != tc.want {
			t.Errorf("%s: Names = %v, want %v", tc.name, got, tc.want)
		}
	}
	if d := DigestInstance(k1, id); d == DigestInstance(k2, id) || len(d) != len("hmac-sha256:")+64 {
		t.Errorf("digest %q: want hmac-sha256 and 64 hex digits, different per key", d)
	}
}
