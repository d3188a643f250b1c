// Package webhookbody is the one definition of the webhook body alert_sink
// sends and the supervisor acts on (docs/webhook.md, webhook.schema.json):
// alert_sink encodes it from a transition event, loopsupervisor decodes the
// same type. It has no pdata dependency. Adding a field is one struct field
// here and its line in alert_sink's encoder (alert.NewBody).
package webhookbody // import "github.com/otelcol-loop/otelcol-loop/internal/webhookbody"

import (
	"time"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
)

// Body types.
const (
	TypeTransition = "loop.transition"
	TypeKill       = "loop.kill"
	// TypeWarn is the first step of the response ladder: the session became
	// stuck, the supervisor may nudge the agent before any kill.
	TypeWarn = "loop.warn"
	// TypeRecover tells the supervisor that a warned session left the warned
	// state on new evidence: whatever it did on the warn (a nudge, a held
	// kill, blocked calls) ends.
	TypeRecover = "loop.recover"
)

// Actions asked of the supervisor (the body's action field).
const (
	ActionKill    = "kill"
	ActionWarn    = "warn"
	ActionRecover = "recover"
)

// SchemaVersion is the version of the webhook body (docs/webhook.schema.json).
const SchemaVersion = "1"

// Body is the JSON body of one webhook.
type Body struct {
	// SchemaVersion is SchemaVersion.
	SchemaVersion string `json:"schema_version"`
	// Type is one of the body types.
	Type string `json:"type"`
	// ID is the transition event's id, stable for (session, sequence).
	ID string `json:"id"`
	// Sequence counts the session's transitions from 1.
	Sequence int64 `json:"sequence"`
	// DecidedAt is when the engine decided (UTC).
	DecidedAt time.Time `json:"decided_at"`
	// ExpiresAt is when a kill or warn stops being valid (zero otherwise).
	ExpiresAt time.Time `json:"expires_at,omitzero"`
	// Action is "kill" or "warn" on those types.
	Action string `json:"action,omitempty"`
	// Nudge is the text a warn suggests the agent be told.
	Nudge string `json:"nudge,omitempty"`
	// Session identifies the agent session.
	Session Session `json:"session"`
	// Target identifies the agent process a kill must reach.
	Target engine.Target `json:"target"`
	// Transition is the state change and the loop that caused it.
	Transition Transition `json:"transition"`
	// Evidence carries keyed digests only.
	Evidence Evidence `json:"evidence"`
	// Tokens is what the session's model calls used, when reported.
	Tokens *Tokens `json:"tokens,omitempty"`
	// Versions names the normalizer and fingerprint definitions in force.
	Versions Versions `json:"versions"`
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
	// Key is the session key (loop_session in the supervisor's result line).
	Key string `json:"key"`
	// Source names what the key was taken from.
	Source string `json:"source,omitempty"`
	// TraceID is the hex trace id of the triggering call.
	TraceID string `json:"trace_id,omitempty"`
	// Agent is the agent name, when known.
	Agent string `json:"agent,omitempty"`
	// Client is the recognised client shape.
	Client string `json:"client,omitempty"`
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
