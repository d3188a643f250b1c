package alert

import (
	"encoding/json"
	"github.com/otelcol-loop/otelcol-loop/internal/target"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func transition(seq int64, session, from, to, reason string, at time.Time) loopevent.Event {
	return loopevent.Event{
		ID: "ld_1_" + string(rune('0'+seq)), Sequence: seq, Session: session, TraceID: "0102", SpanID: "aa",
		From: from, To: to, Reason: reason, Explanation: "loop detected: same tool call x5 of last 10",
		CallIndex: 9, DelayCalls: 5, DelaySeconds: 20, DecidedAt: at, Client: "genai_semconv", Agent: "coder",
		Target: target.Process{ServiceName: "agent-svc"}, TokensTotal: 9000, TokensLoop: 4000,
	}
}

func newAM() *Alertmanager {
	return &Alertmanager{
		States:         map[string]bool{"stuck": true, "uncertain": true},
		UncertainAfter: 10 * time.Minute,
		ResolveAfter:   time.Hour,
		TraceURL:       "https://ui.example/trace/{trace_id}?s={session}",
		Labels:         map[string]string{"cluster": "prod"},
	}
}

func TestEnteringStuckFiresAndLeavingResolvesWithTheSameLabels(t *testing.T) {
	am := newAM()
	in := transition(1, "sess/1", "working", "stuck", "frequent_identical", t0)
	fired := am.Alerts(&in, t0)
	require.Len(t, fired, 1)
	f := fired[0]
	assert.Equal(t, map[string]string{
		"alertname": "AgentStuck", "state": "stuck", "reason": "frequent_identical", "service": "agent-svc",
		"agent": "coder", "client": "genai_semconv", "session": "sess/1", "cluster": "prod",
	}, f.Labels)
	assert.Equal(t, "2030-01-02T03:04:05Z", f.StartsAt)
	assert.Equal(t, "2030-01-02T04:04:05Z", f.EndsAt, "firing alerts end at resolve_after unless resolved")
	assert.Equal(t, "https://ui.example/trace/0102?s=sess%2F1", f.GeneratorURL)
	assert.Equal(t, map[string]string{
		"summary":     "agent-svc session sess/1 is stuck: loop detected: same tool call x5 of last 10",
		"explanation": "loop detected: same tool call x5 of last 10",
		"calls":       "9", "loop_calls": "5", "loop_start": "2030-01-02T03:03:45Z",
		"tokens": "9000", "loop_tokens": "4000", "trace_id": "0102", "span_id": "aa", "event_id": in.ID,
		"trace_url": f.GeneratorURL,
	}, f.Annotations)

	out := transition(2, "sess/1", "stuck", "working", "progress", t0.Add(time.Minute))
	resolved := am.Alerts(&out, t0.Add(time.Minute))
	require.Len(t, resolved, 1)
	assert.Equal(t, f.Labels, resolved[0].Labels, "a resolution must carry the labels the alert fired with")
	assert.Equal(t, f.StartsAt, resolved[0].StartsAt)
	assert.Equal(t, "2030-01-02T03:05:05Z", resolved[0].EndsAt)
}

func TestKillIsItsOwnAlertAndResolvesWithTheSession(t *testing.T) {
	for _, dry := range []bool{false, true} {
		am := newAM()
		in := transition(1, "s", "working", "stuck", "periodic_loop", t0)
		require.Len(t, am.Alerts(&in, t0), 1)
		kill := transition(2, "s", "stuck", "stuck", "periodic_loop", t0.Add(time.Second))
		kill.Kill, kill.DryRun = !dry, dry
		got := am.Alerts(&kill, t0.Add(time.Second))
		require.Len(t, got, 1, "a kill of a stuck session adds the kill alert, the stuck alert keeps firing")
		assert.Equal(t, AlertNameKill, got[0].Labels["alertname"])
		assert.Equal(t, map[bool]string{false: "false", true: "true"}[dry], got[0].Labels["dry_run"])

		out := transition(3, "s", "stuck", "working", "progress", t0.Add(2*time.Second))
		res := am.Alerts(&out, t0.Add(2*time.Second))
		require.Len(t, res, 2)
		names := []string{res[0].Labels["alertname"], res[1].Labels["alertname"]}
		assert.ElementsMatch(t, []string{"AgentStuck", AlertNameKill}, names)
		for _, r := range res {
			assert.Equal(t, "2030-01-02T03:04:07Z", r.EndsAt)
		}
	}
}

func TestRedeliveredEventChangesNothing(t *testing.T) {
	am := newAM()
	in := transition(1, "s", "working", "stuck", "frequent_identical", t0)
	require.Len(t, am.Alerts(&in, t0), 1)
	assert.Empty(t, am.Alerts(&in, t0), "the same event again must not resolve and re-fire its alert")
}

func TestUncertainFiresOnlyWhenItPersists(t *testing.T) {
	am := newAM()
	brief := transition(1, "brief", "working", "uncertain", "missing_fingerprint", t0)
	assert.Empty(t, am.Alerts(&brief, t0))
	long := transition(1, "long", "working", "uncertain", "missing_fingerprint", t0)
	assert.Empty(t, am.Alerts(&long, t0))
	cleared := transition(2, "brief", "uncertain", "working", "progress", t0.Add(5*time.Minute))
	assert.Empty(t, am.Alerts(&cleared, t0.Add(5*time.Minute)), "an uncertain alert that never fired needs no resolution")

	assert.Empty(t, am.Due(t0.Add(10*time.Minute-time.Second)))
	due := am.Due(t0.Add(10 * time.Minute))
	require.Len(t, due, 1)
	require.Len(t, due[long.ID], 1)
	assert.Equal(t, "AgentUncertain", due[long.ID][0].Labels["alertname"])
	assert.Equal(t, "long", due[long.ID][0].Labels["session"])
	assert.Empty(t, am.Due(t0.Add(time.Hour)), "a delayed alert fires once")

	out := transition(2, "long", "uncertain", "stuck", "periodic_loop", t0.Add(11*time.Minute))
	got := am.Alerts(&out, t0.Add(11*time.Minute))
	require.Len(t, got, 2, "uncertain resolved, stuck fired")
	assert.Equal(t, "AgentUncertain", got[0].Labels["alertname"])
	assert.NotEmpty(t, got[0].EndsAt)
	assert.Equal(t, "AgentStuck", got[1].Labels["alertname"])
}

func TestStatesNotConfiguredFireNothing(t *testing.T) {
	am := newAM()
	ev := transition(1, "s", "working", "retrying", "retry_policy", t0)
	assert.Empty(t, am.Alerts(&ev, t0))
}

func TestPolicyQueuesOneAlertmanagerRecordPerEvent(t *testing.T) {
	p := Policy{Alertmanager: newAM()}
	ev := transition(1, "s", "working", "stuck", "frequent_identical", t0)
	recs, _, err := p.Records(&ev, "", t0)
	require.NoError(t, err)
	require.Len(t, recs, 1)
	assert.Equal(t, DestAlertmanager, recs[0].Dest)
	assert.Equal(t, ev.ID+".alertmanager", recs[0].WebhookID)
	var als []PostableAlert
	require.NoError(t, json.Unmarshal(recs[0].Body, &als))
	require.Len(t, als, 1)
	back, err := FromMap(carrierAttrs(recs[0]))
	require.NoError(t, err, "alertmanager records survive the queue")
	assert.Equal(t, recs[0].Body, back.Body)
}

func carrierAttrs(r Record) pcommon.Map {
	td := TracesCarrier([]Record{r})
	return td.ResourceSpans().At(0).ScopeSpans().At(0).Spans().At(0).Attributes()
}

func TestCheckTraceURL(t *testing.T) {
	for _, tc := range []struct {
		tmpl string
		ok   bool
	}{
		{"", true},
		{"https://x/{trace_id}/{span_id}?s={session}&svc={service}", true},
		{"https://x/{traceid}", false},
		{"https://x/{trace_id", false},
	} {
		err := CheckTraceURL(tc.tmpl)
		assert.Equal(t, tc.ok, err == nil, "%q: %v", tc.tmpl, err)
	}
}
