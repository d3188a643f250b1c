// Package alert turns loop transition events into the compact alert records
// alert_sink queues, and renders the webhook body they carry. The body is
// rendered once, before queueing, so every retry and every replay after a
// restart sends the same bytes under the same webhook-id.
package alert // import "github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/alert"

import (
	"encoding/json"
	"math"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
)

// Webhook body types.
const (
	TypeTransition = "loop.transition"
	TypeKill       = "loop.kill"
	// TypeWarn is the first step of the response ladder: the session became
	// stuck, the supervisor may nudge the agent before any kill.
	TypeWarn = "loop.warn"
)

// Actions asked of the supervisor (the body's action field).
const (
	ActionKill = "kill"
	ActionWarn = "warn"
)

// SchemaVersion is the version of the webhook body (docs/webhook.schema.json).
const SchemaVersion = "1"

// Body is the JSON body of one webhook (docs/webhook.md).
type Body struct {
	SchemaVersion string     `json:"schema_version"`
	Type          string     `json:"type"`
	ID            string     `json:"id"`
	Sequence      int64      `json:"sequence"`
	DecidedAt     string     `json:"decided_at"`
	ExpiresAt     string     `json:"expires_at,omitempty"`
	Action        string     `json:"action,omitempty"`
	Nudge         string     `json:"nudge,omitempty"`
	Session       Session    `json:"session"`
	Target        Target     `json:"target"`
	Transition    Transition `json:"transition"`
	Evidence      Evidence   `json:"evidence"`
	Tokens        *Tokens    `json:"tokens,omitempty"`
	Versions      Versions   `json:"versions"`
}

// Tokens is what the session's model calls used, when the agent reports it.
type Tokens struct {
	// Total is input + output tokens of the session so far.
	Total int64 `json:"total"`
	// Loop is the part used since the current loop began.
	Loop int64 `json:"loop"`
}

// Session identifies the agent session the event belongs to.
type Session struct {
	Key     string `json:"key"`
	Source  string `json:"source,omitempty"`
	TraceID string `json:"trace_id,omitempty"`
	Agent   string `json:"agent,omitempty"`
	Client  string `json:"client,omitempty"`
}

// Target identifies the agent process (resource attributes of the agent).
type Target struct {
	ServiceName       string `json:"service_name,omitempty"`
	ServiceInstanceID string `json:"service_instance_id,omitempty"`
	PID               int64  `json:"pid,omitempty"`
	HostName          string `json:"host_name,omitempty"`
}

// Transition is the state change and the loop that caused it.
type Transition struct {
	From            string   `json:"from"`
	To              string   `json:"to"`
	Reason          string   `json:"reason"`
	Trigger         string   `json:"trigger,omitempty"`
	Explanation     string   `json:"explanation"`
	Kill            bool     `json:"kill"`
	DryRun          bool     `json:"dry_run"`
	Period          int64    `json:"period"`
	Repetitions     int64    `json:"repetitions"`
	Window          int64    `json:"window,omitempty"`
	CallIndex       int64    `json:"call_index,omitempty"`
	CycleTools      []string `json:"cycle_tools,omitempty"`
	FirstLoopSpanID string   `json:"first_loop_span_id,omitempty"`
	TriggerSpanID   string   `json:"trigger_span_id,omitempty"`
	DelayCalls      int64    `json:"delay_calls,omitempty"`
	DelaySeconds    float64  `json:"delay_seconds,omitempty"`
}

// Evidence carries keyed digests only, never raw arguments or results.
type Evidence struct {
	Signatures        []string `json:"signatures,omitempty"`
	Fingerprint       string   `json:"fingerprint,omitempty"`
	FingerprintSource string   `json:"fingerprint_source,omitempty"`
	Confidence        string   `json:"confidence,omitempty"`
}

// Versions names the normalizer and fingerprint definitions in force.
type Versions struct {
	Normalizer  string `json:"normalizer,omitempty"`
	Fingerprint string `json:"fingerprint,omitempty"`
}

// NewBody builds the body of a webhook of type typ for ev. expiresAt is set
// only on kills and warns.
func NewBody(ev *loopevent.Event, typ string, decidedAt, expiresAt time.Time) Body {
	b := Body{
		SchemaVersion: SchemaVersion,
		Type:          typ,
		ID:            ev.ID,
		Sequence:      ev.Sequence,
		DecidedAt:     decidedAt.UTC().Format(time.RFC3339Nano),
		Session: Session{
			Key:     ev.Session,
			Source:  ev.SessionSource,
			TraceID: ev.TraceID,
			Agent:   ev.Agent,
			Client:  ev.Client,
		},
		Target: Target{
			ServiceName:       ev.Target.ServiceName,
			ServiceInstanceID: ev.Target.ServiceInstanceID,
			PID:               ev.Target.PID,
			HostName:          ev.Target.HostName,
		},
		Transition: Transition{
			From:            ev.From,
			To:              ev.To,
			Reason:          ev.Reason,
			Trigger:         ev.Trigger,
			Explanation:     ev.Explanation,
			Kill:            ev.Kill,
			DryRun:          ev.DryRun,
			Period:          ev.Period,
			Repetitions:     ev.Repetitions,
			Window:          ev.Window,
			CallIndex:       ev.CallIndex,
			CycleTools:      ev.CycleTools,
			FirstLoopSpanID: ev.FirstLoopSpanID,
			TriggerSpanID:   ev.SpanID,
			DelayCalls:      ev.DelayCalls,
			DelaySeconds:    finite(ev.DelaySeconds),
		},
		Evidence: Evidence{
			Signatures:        ev.Signatures,
			Fingerprint:       ev.Fingerprint,
			FingerprintSource: ev.FingerprintSource,
			Confidence:        ev.Confidence,
		},
		Versions: Versions{
			Normalizer:  ev.NormalizerVersion,
			Fingerprint: ev.FingerprintVersion,
		},
	}
	switch typ {
	case TypeKill:
		b.ExpiresAt = expiresAt.UTC().Format(time.RFC3339Nano)
		b.Action = ActionKill
	case TypeWarn:
		b.ExpiresAt = expiresAt.UTC().Format(time.RFC3339Nano)
		b.Action = ActionWarn
		b.Nudge = ev.Nudge()
	}
	if ev.TokensTotal > 0 || ev.TokensLoop > 0 {
		b.Tokens = &Tokens{Total: ev.TokensTotal, Loop: ev.TokensLoop}
	}
	return b
}

func finite(f float64) float64 {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// Marshal renders the body as compact JSON.
func (b *Body) Marshal() ([]byte, error) {
	return json.Marshal(b)
}
