package alert

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

// Destinations of a record.
const (
	DestKill   = "kill"
	DestAlerts = "alerts"
)

// Attribute keys of a compact record (a span of the internal traces carrier
// or a log record of the internal logs carrier). They exist only inside the
// exporter's queue.
const (
	attrDest      = "alertsink.destination"
	attrWebhookID = "alertsink.webhook_id"
	attrEventID   = "alertsink.event_id"
	attrType      = "alertsink.type"
	attrExpires   = "alertsink.expires_at_unix_nano"
	attrBody      = "alertsink.body"
	// RecordName names carrier spans.
	RecordName = "alert_sink.record"
)

// Record is one webhook to deliver: destination, the stable webhook-id,
// the expiry of kills, and the rendered body.
type Record struct {
	Dest      string
	WebhookID string
	EventID   string
	Type      string
	// ExpiresAt is zero for transitions and alerts.
	ExpiresAt time.Time
	Body      []byte
}

// Expired reports whether a kill or warn record has passed its expires_at.
func (r *Record) Expired(now time.Time) bool {
	return !r.ExpiresAt.IsZero() && !now.Before(r.ExpiresAt)
}

// CopyTo writes the record into attribute map m.
func (r *Record) CopyTo(m pcommon.Map) {
	m.PutStr(attrDest, r.Dest)
	m.PutStr(attrWebhookID, r.WebhookID)
	m.PutStr(attrEventID, r.EventID)
	m.PutStr(attrType, r.Type)
	if !r.ExpiresAt.IsZero() {
		m.PutInt(attrExpires, r.ExpiresAt.UnixNano())
	}
	m.PutEmptyBytes(attrBody).FromRaw(r.Body)
}

var errNotRecord = errors.New("alert_sink: queued item is not an alert record")

// FromMap reads a record written by CopyTo.
func FromMap(m pcommon.Map) (Record, error) {
	var r Record
	get := func(k string) string {
		if v, ok := m.Get(k); ok && v.Type() == pcommon.ValueTypeStr {
			return v.Str()
		}
		return ""
	}
	r.Dest = get(attrDest)
	r.WebhookID = get(attrWebhookID)
	r.EventID = get(attrEventID)
	r.Type = get(attrType)
	if v, ok := m.Get(attrExpires); ok && v.Type() == pcommon.ValueTypeInt {
		r.ExpiresAt = time.Unix(0, v.Int())
	}
	if v, ok := m.Get(attrBody); ok && v.Type() == pcommon.ValueTypeBytes {
		r.Body = v.Bytes().AsRaw()
	}
	if (r.Dest != DestKill && r.Dest != DestAlerts && r.Dest != DestAlertmanager) || r.WebhookID == "" || len(r.Body) == 0 {
		return r, errNotRecord
	}
	return r, nil
}

// Policy decides which records an event becomes.
type Policy struct {
	// Kill enables the kill destination.
	Kill bool
	// WarnOn lists the states whose entry sends a warn to the kill
	// destination, ahead of any kill; nil sends none.
	WarnOn map[string]bool
	// KillTTL is added to decided_at to give a kill's expires_at.
	KillTTL time.Duration
	// Alerts enables the alerts destination.
	Alerts bool
	// States and Reasons filter the alerts destination; nil lets all pass.
	States  map[string]bool
	Reasons map[string]bool
	// AlertsInstanceID keeps target.service_instance_id in the alerts
	// destination's bodies; without it they carry no kill target.
	AlertsInstanceID bool
	// KillKey and AlertsKey are the destinations' first signing keys: a
	// body names its agent by the instance id's digest under its own
	// destination's key (webhookbody.DigestInstance), never by the id.
	KillKey, AlertsKey []byte
	// KillListen, when set (kill.only_named_agents), is the host:port of
	// the kill endpoint: only agents whose resource names it
	// (loopsupervisor.listen) have notices sent there.
	KillListen string
	// Alertmanager, when set, turns events into Alertmanager alerts.
	Alertmanager *Alertmanager
}

// Outcome counts what Records decided besides the records it returned.
type Outcome struct {
	// Filtered is true when the alerts destination is enabled but its
	// filters excluded the event.
	Filtered bool
	// Expired is true when the event asked for a kill that had already
	// expired when it reached the exporter.
	Expired bool
}

// ErrNoID reports an event without the stable id the webhook-id needs.
var ErrNoID = errors.New("alert_sink: transition event has no " + loopevent.AttrID)

// Records converts one event into the records to queue. route is the
// loopsupervisor.listen its agent's resource names ("" for none).
func (p *Policy) Records(ev *loopevent.Event, route string, now time.Time) ([]Record, Outcome, error) {
	var out Outcome
	if ev.ID == "" {
		return nil, out, ErrNoID
	}
	decided := ev.DecidedAt
	if decided.IsZero() {
		decided = now
	}
	var recs []Record
	kill := p.Kill && p.routesTo(route)
	exp := decided.Add(p.KillTTL)
	live := now.Before(exp)
	// The warn goes first: a transition that enters stuck and kills at once
	// still reaches the supervisor as warn, then kill. Leaving a warned
	// state on new evidence (recover) ends what the warn started at the
	// supervisor: its nudge and any call its agent's hook would block.
	for _, n := range [...]struct {
		typ  string
		want bool
	}{
		{webhookbody.TypeWarn, p.WarnOn[ev.To] && ev.From != ev.To},
		{webhookbody.TypeRecover, p.WarnOn[ev.From] && !p.WarnOn[ev.To]},
		{webhookbody.TypeKill, ev.Kill && !ev.DryRun},
	} {
		if !kill || !n.want {
			continue
		}
		if !live {
			out.Expired = out.Expired || n.typ == webhookbody.TypeKill
			continue
		}
		r, err := p.killRecord(ev, n.typ, decided, exp)
		if err != nil {
			return nil, out, err
		}
		recs = append(recs, r)
	}
	if p.Alerts {
		if (p.States == nil || p.States[ev.To]) && (p.Reasons == nil || p.Reasons[ev.Reason]) {
			b := NewBody(ev, webhookbody.TypeTransition, decided, time.Time{}, p.AlertsKey)
			if !p.AlertsInstanceID {
				b.Target.ServiceInstanceID = ""
			}
			raw, err := Marshal(&b)
			if err != nil {
				return nil, out, fmt.Errorf("alert_sink: rendering transition body: %w", err)
			}
			recs = append(recs, Record{Dest: DestAlerts, WebhookID: ev.ID + ".transition", EventID: ev.ID, Type: webhookbody.TypeTransition, Body: raw})
		} else {
			out.Filtered = true
		}
	}
	if p.Alertmanager != nil {
		if als := p.Alertmanager.Alerts(ev, decided); len(als) > 0 {
			r, err := AlertmanagerRecord(ev.ID, "."+DestAlertmanager, als)
			if err != nil {
				return nil, out, err
			}
			recs = append(recs, r)
		}
	}
	return recs, out, nil
}

// killRecord renders one notice of type typ to the kill destination; the
// agent is named only by its digest under the kill key.
func (p *Policy) killRecord(ev *loopevent.Event, typ string, decided, exp time.Time) (Record, error) {
	b := NewBody(ev, typ, decided, exp, p.KillKey)
	b.Target.ServiceInstanceID = ""
	raw, err := Marshal(&b)
	if err != nil {
		return Record{}, fmt.Errorf("alert_sink: rendering %s body: %w", typ, err)
	}
	suffix := strings.TrimPrefix(typ, "loop.")
	return Record{Dest: DestKill, WebhookID: ev.ID + "." + suffix, EventID: ev.ID, Type: typ, ExpiresAt: exp, Body: raw}, nil
}

// routesTo reports whether notices of an agent whose resource names route
// go to the kill destination.
func (p *Policy) routesTo(route string) bool {
	return p.KillListen == "" || route == p.KillListen
}

// digest is the instance id's digest under key; "" without a key or id.
func digest(key []byte, id string) string {
	if len(key) == 0 || id == "" {
		return ""
	}
	return webhookbody.DigestInstance(key, id)
}

// RouteAttr is the resource attribute by which an agent names the
// supervisor that started it (host:port, as loopsupervisor sets it).
const RouteAttr = "loopsupervisor.listen"

// Route is the RouteAttr of a resource, "" when it has none.
func Route(res pcommon.Map) string {
	if v, ok := res.Get(RouteAttr); ok {
		return v.Str()
	}
	return ""
}

// FillTarget completes an event's target from the resource of the span or
// log record that carried it, for fields the event left empty.
func FillTarget(ev *loopevent.Event, res pcommon.Map) {
	str := func(k string) string {
		if v, ok := res.Get(k); ok {
			return v.AsString()
		}
		return ""
	}
	if ev.Target.ServiceName == "" {
		ev.Target.ServiceName = str("service.name")
	}
	if ev.Target.ServiceInstanceID == "" {
		ev.Target.ServiceInstanceID = str("service.instance.id")
	}
	if ev.Target.HostName == "" {
		ev.Target.HostName = str("host.name")
	}
	if ev.Target.PID == 0 {
		if v, ok := res.Get("process.pid"); ok && v.Type() == pcommon.ValueTypeInt {
			ev.Target.PID = v.Int()
		}
	}
}

// Extracted is what ExtractTraces and ExtractLogs found.
type Extracted struct {
	Events []loopevent.Event
	// Routes holds each event's RouteAttr ("" when its resource has none).
	Routes []string
	// Invalid counts transition events that could not be decoded.
	Invalid int
}

func (x *Extracted) add(attrs, res pcommon.Map, seen map[string]bool) {
	ev, err := loopevent.FromAttributes(attrs)
	if err != nil || ev.ID == "" {
		x.Invalid++
		return
	}
	if seen[ev.ID] {
		return
	}
	seen[ev.ID] = true
	FillTarget(&ev, res)
	x.Events = append(x.Events, ev)
	x.Routes = append(x.Routes, Route(res))
}

// ExtractTraces finds the transition events in td: span events named
// loopevent.EventName (on tool spans or the synthetic transition span), and
// synthetic spans that carry the attributes on the span itself. Everything
// else is ignored. td is only read.
func ExtractTraces(td ptrace.Traces) Extracted {
	var x Extracted
	seen := map[string]bool{}
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		rs := rss.At(i)
		res := rs.Resource().Attributes()
		sss := rs.ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				sp := spans.At(k)
				found := false
				evs := sp.Events()
				for e := 0; e < evs.Len(); e++ {
					if evs.At(e).Name() == loopevent.EventName {
						found = true
						x.add(evs.At(e).Attributes(), res, seen)
					}
				}
				if !found && sp.Name() == loopevent.SyntheticSpanName {
					if _, ok := sp.Attributes().Get(loopevent.AttrTo); ok {
						x.add(sp.Attributes(), res, seen)
					}
				}
			}
		}
	}
	return x
}

// ExtractLogs finds log records whose event name is loopevent.EventName.
func ExtractLogs(ld plog.Logs) Extracted {
	var x Extracted
	seen := map[string]bool{}
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		rl := rls.At(i)
		res := rl.Resource().Attributes()
		sls := rl.ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				lr := lrs.At(k)
				if lr.EventName() == loopevent.EventName {
					x.add(lr.Attributes(), res, seen)
				}
			}
		}
	}
	return x
}

// TracesCarrier packs records into a small ptrace.Traces, one span each.
func TracesCarrier(recs []Record) ptrace.Traces {
	td := ptrace.NewTraces()
	ss := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty()
	ss.Scope().SetName("alert_sink")
	for i := range recs {
		sp := ss.Spans().AppendEmpty()
		sp.SetName(RecordName)
		recs[i].CopyTo(sp.Attributes())
	}
	return td
}

// LogsCarrier packs records into a small plog.Logs, one log record each.
func LogsCarrier(recs []Record) plog.Logs {
	ld := plog.NewLogs()
	sl := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty()
	sl.Scope().SetName("alert_sink")
	for i := range recs {
		lr := sl.LogRecords().AppendEmpty()
		lr.SetEventName(RecordName)
		recs[i].CopyTo(lr.Attributes())
	}
	return ld
}
