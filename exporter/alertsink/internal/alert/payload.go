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
	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

// NewBody builds the body of a webhook of type typ for ev, its target's
// instance digest made with key (webhookbody.DigestInstance). expiresAt is
// set on every type but transitions. The raw instance id is in the target
// too: the caller keeps it only where it is allowed (Policy.Records).
func NewBody(ev *loopevent.Event, typ string, decidedAt, expiresAt time.Time, key []byte) webhookbody.Body {
	b := webhookbody.Body{
		SchemaVersion: webhookbody.SchemaVersion,
		Type:          typ,
		ID:            ev.ID,
		Sequence:      ev.Sequence,
		DecidedAt:     decidedAt.UTC(),
		Session: webhookbody.Session{
			Key:     ev.Session,
			Source:  ev.SessionSource,
			TraceID: ev.TraceID,
			Agent:   ev.Agent,
			Client:  ev.Client,
		},
		Target: webhookbody.Target{
			ServiceName: ev.Target.ServiceName, InstanceDigest: digest(key, ev.Target.ServiceInstanceID),
			ServiceInstanceID: ev.Target.ServiceInstanceID, PID: ev.Target.PID, HostName: ev.Target.HostName,
		},
		Transition: webhookbody.Transition{
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
		Evidence: webhookbody.Evidence{
			Signatures:        ev.Signatures,
			Fingerprint:       ev.Fingerprint,
			FingerprintSource: ev.FingerprintSource,
			Confidence:        ev.Confidence,
		},
		Versions: webhookbody.Versions{
			Normalizer:  ev.NormalizerVersion,
			Fingerprint: ev.FingerprintVersion,
		},
	}
	switch typ {
	case webhookbody.TypeKill:
		b.ExpiresAt = expiresAt.UTC()
		b.Action = webhookbody.ActionKill
	case webhookbody.TypeWarn:
		b.ExpiresAt = expiresAt.UTC()
		b.Action = webhookbody.ActionWarn
		b.Nudge = ev.Nudge()
	case webhookbody.TypeRecover:
		b.ExpiresAt = expiresAt.UTC()
		b.Action = webhookbody.ActionRecover
	}
	if ev.TokensTotal > 0 || ev.TokensLoop > 0 {
		b.Tokens = &webhookbody.Tokens{Total: ev.TokensTotal, Loop: ev.TokensLoop}
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
func Marshal(b *webhookbody.Body) ([]byte, error) {
	return json.Marshal(b)
}
