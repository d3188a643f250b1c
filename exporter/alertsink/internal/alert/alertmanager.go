package alert

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
)

// DestAlertmanager names the Alertmanager destination of a record.
const DestAlertmanager = "alertmanager"

// TypeAlertmanager is the record type of an Alertmanager v2 API batch.
const TypeAlertmanager = "alertmanager.alerts"

// Alert names. The state alert's name follows the state it reports; a kill,
// decided or dry-run, is an alert of its own.
const (
	AlertNameKill = "AgentLoopKill"
)

// StateAlertName returns the alertname of the alert that reports a session
// in state: "AgentStuck", "AgentUncertain", ….
func StateAlertName(state string) string {
	if state == "" {
		return "AgentState"
	}
	return "Agent" + strings.ToUpper(state[:1]) + state[1:]
}

// ReservedLabels are the label names the destination sets itself; configured static labels must
// not reuse them.
var ReservedLabels = []string{"alertname", "state", "reason", "service", "agent", "client", "session", "dry_run"}

// TraceURLFields are the placeholders a trace_url template may use.
var TraceURLFields = []string{"trace_id", "span_id", "session", "service"}

// maxTracked bounds the sessions whose firing alerts the destination
// remembers for resolution; past it an alert still ends at its endsAt.
const maxTracked = 10_000

// PostableAlert is one alert of the Alertmanager v2 API
// (POST /api/v2/alerts).
type PostableAlert struct {
	Labels       map[string]string `json:"labels"`
	Annotations  map[string]string `json:"annotations,omitempty"`
	StartsAt     string            `json:"startsAt,omitempty"`
	EndsAt       string            `json:"endsAt,omitempty"`
	GeneratorURL string            `json:"generatorURL,omitempty"`
}

// firing is an alert sent as firing and not yet resolved.
type firing struct {
	state, kill *PostableAlert
}

// pending is an alert for a state that fires only once the session has
// stayed in it for the configured time.
type pending struct {
	alert PostableAlert
	due   time.Time
	id    string
}

// Alertmanager turns transition events into Alertmanager alerts: entering
// an alerting state fires one, leaving it resolves it (endsAt), and a kill
// is an alert of its own. It remembers the firing alerts of up to
// maxTracked sessions so the resolution carries exactly the labels the
// alert fired with. It is safe for concurrent use.
type Alertmanager struct {
	// States are the states whose entry fires an alert.
	States map[string]bool
	// UncertainAfter delays the alert of the uncertain state: it fires only
	// when the session is still uncertain after this long (0: at once).
	UncertainAfter time.Duration
	// ResolveAfter is the endsAt horizon of a firing alert: a session that
	// never reports again (killed, forgotten) stops alerting after it.
	ResolveAfter time.Duration
	// TraceURL is the link template, with {trace_id}, {span_id}, {session}
	// and {service} replaced.
	TraceURL string
	// Labels are static labels added to every alert.
	Labels map[string]string

	mu      sync.Mutex
	active  map[string]*firing
	waiting map[string]*pending
	// seq is the newest transition seen per session: a redelivered event
	// must not resolve and re-fire its own alert.
	seq map[string]int64
}

// Alerts returns the alerts one event changes: resolutions of what the
// session left, and the alerts it fires now. now is the exporter's clock.
func (a *Alertmanager) Alerts(ev *loopevent.Event, decided time.Time) []PostableAlert {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.active == nil {
		a.active = map[string]*firing{}
		a.waiting = map[string]*pending{}
		a.seq = map[string]int64{}
	}
	if last, ok := a.seq[ev.Session]; ok && ev.Sequence <= last {
		return nil
	}
	if len(a.seq) >= maxTracked {
		clear(a.seq)
	}
	a.seq[ev.Session] = ev.Sequence
	var out []PostableAlert
	f := a.active[ev.Session]
	if ev.From != ev.To {
		if f != nil {
			end := decided.UTC().Format(time.RFC3339Nano)
			for _, p := range []*PostableAlert{f.state, f.kill} {
				if p != nil {
					r := *p
					r.EndsAt = end
					out = append(out, r)
				}
			}
			delete(a.active, ev.Session)
			f = nil
		}
		delete(a.waiting, ev.Session)
		if a.States[ev.To] {
			al := a.alert(ev, StateAlertName(ev.To), decided)
			if ev.To == "uncertain" && a.UncertainAfter > 0 {
				if len(a.waiting) < maxTracked {
					a.waiting[ev.Session] = &pending{alert: al, due: decided.Add(a.UncertainAfter), id: ev.ID}
				}
			} else {
				out = append(out, al)
				f = a.track(ev.Session)
				if f != nil {
					f.state = &al
				}
			}
		}
	}
	if ev.Kill || ev.DryRun {
		al := a.alert(ev, AlertNameKill, decided)
		al.Labels["dry_run"] = strconv.FormatBool(ev.DryRun)
		out = append(out, al)
		if f == nil {
			f = a.track(ev.Session)
		}
		if f != nil {
			f.kill = &al
		}
	}
	return out
}

// Due returns, per event id, the delayed alerts whose time has come at now,
// and marks them firing.
func (a *Alertmanager) Due(now time.Time) map[string][]PostableAlert {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out map[string][]PostableAlert
	for sess, p := range a.waiting {
		if now.Before(p.due) {
			continue
		}
		delete(a.waiting, sess)
		if out == nil {
			out = map[string][]PostableAlert{}
		}
		out[p.id] = append(out[p.id], p.alert)
		if f := a.track(sess); f != nil {
			al := p.alert
			f.state = &al
		}
	}
	return out
}

func (a *Alertmanager) track(session string) *firing {
	if f := a.active[session]; f != nil {
		return f
	}
	if len(a.active) >= maxTracked {
		return nil
	}
	f := &firing{}
	a.active[session] = f
	return f
}

// alert builds the firing alert named name for ev.
func (a *Alertmanager) alert(ev *loopevent.Event, name string, decided time.Time) PostableAlert {
	labels := make(map[string]string, 8+len(a.Labels))
	for k, v := range a.Labels {
		labels[k] = v
	}
	set := func(k, v string) {
		if v != "" {
			labels[k] = v
		}
	}
	service := ev.Target.ServiceName
	if service == "" {
		service = ev.Agent
	}
	set("alertname", name)
	set("state", ev.To)
	set("reason", ev.Reason)
	set("service", service)
	if ev.Agent != service {
		set("agent", ev.Agent)
	}
	set("client", ev.Client)
	set("session", ev.Session)

	ann := map[string]string{
		"summary":     summary(ev, name, service),
		"explanation": ev.Explanation,
		"calls":       strconv.FormatInt(ev.CallIndex, 10),
	}
	put := func(k, v string) {
		if v != "" {
			ann[k] = v
		}
	}
	start := decided
	if ev.DelaySeconds > 0 {
		start = decided.Add(-time.Duration(ev.DelaySeconds * float64(time.Second)))
	}
	if ev.DelayCalls > 0 {
		ann["loop_calls"] = strconv.FormatInt(ev.DelayCalls, 10)
		put("loop_start", start.UTC().Format(time.RFC3339Nano))
	}
	if ev.TokensTotal > 0 {
		ann["tokens"] = strconv.FormatInt(ev.TokensTotal, 10)
	}
	if ev.TokensLoop > 0 {
		ann["loop_tokens"] = strconv.FormatInt(ev.TokensLoop, 10)
	}
	put("trace_id", ev.TraceID)
	put("span_id", ev.SpanID)
	put("event_id", ev.ID)
	link := a.link(ev, service)
	put("trace_url", link)
	return PostableAlert{
		Labels:       labels,
		Annotations:  ann,
		StartsAt:     decided.UTC().Format(time.RFC3339Nano),
		EndsAt:       decided.Add(a.ResolveAfter).UTC().Format(time.RFC3339Nano),
		GeneratorURL: link,
	}
}

func summary(ev *loopevent.Event, name, service string) string {
	who := service
	if who == "" {
		who = "agent"
	}
	switch {
	case name == AlertNameKill && ev.DryRun:
		return fmt.Sprintf("%s session %s would be killed (dry run): %s", who, ev.Session, ev.Explanation)
	case name == AlertNameKill:
		return fmt.Sprintf("%s session %s killed: %s", who, ev.Session, ev.Explanation)
	default:
		return fmt.Sprintf("%s session %s is %s: %s", who, ev.Session, ev.To, ev.Explanation)
	}
}

// link renders the trace_url template; the values are URL path-escaped
// session keys and ids, never free text.
func (a *Alertmanager) link(ev *loopevent.Event, service string) string {
	if a.TraceURL == "" {
		return ""
	}
	return strings.NewReplacer(
		"{trace_id}", escape(ev.TraceID),
		"{span_id}", escape(ev.SpanID),
		"{session}", escape(ev.Session),
		"{service}", escape(service),
	).Replace(a.TraceURL)
}

func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// AlertmanagerRecord wraps alerts into one record for the queue, under a
// webhook-id stable for the event, so a retry re-sends the same alerts.
func AlertmanagerRecord(eventID, suffix string, alerts []PostableAlert) (Record, error) {
	raw, err := json.Marshal(alerts)
	if err != nil {
		return Record{}, fmt.Errorf("alert_sink: rendering alertmanager alerts: %w", err)
	}
	return Record{Dest: DestAlertmanager, WebhookID: eventID + suffix, EventID: eventID, Type: TypeAlertmanager, Body: raw}, nil
}

// CheckTraceURL reports placeholders a trace_url template does not know.
func CheckTraceURL(tmpl string) error {
	rest := tmpl
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			return nil
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return fmt.Errorf("unclosed placeholder in %q", tmpl)
		}
		name := rest[i+1 : i+j]
		known := false
		for _, f := range TraceURLFields {
			if f == name {
				known = true
			}
		}
		if !known {
			return fmt.Errorf("unknown placeholder {%s} (want one of {%s})", name, strings.Join(TraceURLFields, "}, {"))
		}
		rest = rest[i+j+1:]
	}
}
