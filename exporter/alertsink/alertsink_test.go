package alertsink

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/otelcol-loop/otelcol-loop/internal/target"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configopaque"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/otelcol-loop/otelcol-loop/exporter/alertsink/internal/metadatatest"
	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/internal/stdwebhook"
	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

// The Standard Webhooks known-answer vector, through the signer the
// exporter uses.
func TestKnownAnswerVector(t *testing.T) {
	key, err := stdwebhook.ParseSecret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	require.NoError(t, err)
	assert.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
		stdwebhook.Sign([][]byte{key}, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, []byte(`{"test": 2432232314}`)))
}

func recordingServer(t *testing.T, rec *recorder, code int) string {
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.add(hit{at: time.Now(), id: r.Header.Get(stdwebhook.HeaderID), ts: r.Header.Get(stdwebhook.HeaderTimestamp),
			signature: r.Header.Get(stdwebhook.HeaderSignature), body: body})
		w.WriteHeader(code)
	}))
}

func TestKillBodyHeadersAndRotation(t *testing.T) {
	var kills, alerts recorder
	killURL := recordingServer(t, &kills, 200)
	alertURL := recordingServer(t, &alerts, 204)
	cfg := testConfig(killURL + "/kill")
	cfg.Kill.Secrets = []configopaque.String{testSecret, testSecret2}
	cfg.Alerts.Endpoint = alertURL + "/alerts"
	exp := startTraces(t, cfg, nopSettings())

	decided := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) // far future: unexpired
	ev := killEvent("ld_abc_2", decided)
	require.NoError(t, exp.ConsumeTraces(context.Background(), tracesWith(ev)))

	require.Len(t, kills.all(), 1)
	h := kills.all()[0]
	assert.Equal(t, "ld_abc_2.kill", h.id)
	ts, err := strconv.ParseInt(h.ts, 10, 64)
	require.NoError(t, err)
	assert.InDelta(t, time.Now().Unix(), ts, 5)
	k1, _ := stdwebhook.ParseSecret(testSecret)
	k2, _ := stdwebhook.ParseSecret(testSecret2)
	sigs := strings.Split(h.signature, " ")
	require.Len(t, sigs, 2, "two secrets during rotation give two signatures")
	assert.Equal(t, stdwebhook.Sign([][]byte{k1}, h.id, ts, h.body), sigs[0])
	assert.Equal(t, stdwebhook.Sign([][]byte{k2}, h.id, ts, h.body), sigs[1])

	var body map[string]any
	require.NoError(t, json.Unmarshal(h.body, &body))
	assert.Equal(t, "loop.kill", body["type"])
	assert.Equal(t, "ld_abc_2", body["id"])
	assert.EqualValues(t, 2, body["sequence"])
	assert.Equal(t, "2030-01-02T03:04:05Z", body["decided_at"])
	assert.Equal(t, "2030-01-02T03:05:05Z", body["expires_at"])
	target := body["target"].(map[string]any)
	assert.NotContains(t, target, "service_instance_id", "the kill capability never travels")
	assert.Equal(t, webhookbody.DigestInstance(k1, "inst-1"), target["instance_digest"], "named under the first secret; the supervisor tries each of its keys")
	assert.Equal(t, "2", body["schema_version"])
	assert.EqualValues(t, 4242, target["pid"])
	tr := body["transition"].(map[string]any)
	assert.Equal(t, "stuck", tr["to"])
	assert.Equal(t, true, tr["kill"])
	assert.Equal(t, "loop detected: same tool call x5 of last 10", tr["explanation"])
	assert.Equal(t, map[string]any{"normalizer": "n1", "fingerprint": "f1"}, body["versions"])
	assert.NotContains(t, string(h.body), "/secret/arguments", "raw arguments must never leave")

	// The same transition also went to the alerts destination.
	require.Len(t, alerts.all(), 1)
	a := alerts.all()[0]
	assert.Equal(t, "ld_abc_2.transition", a.id)
	assert.Empty(t, a.signature, "alerts destination has no secret: unsigned")
	body = map[string]any{}
	require.NoError(t, json.Unmarshal(a.body, &body))
	assert.Equal(t, "loop.transition", body["type"])
	assert.NotContains(t, body, "expires_at")
}

func TestSameWebhookIDOnRetry(t *testing.T) {
	var rec recorder
	n := 0
	url := serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.add(hit{id: r.Header.Get(stdwebhook.HeaderID), body: body})
		n++
		if n < 3 {
			w.WriteHeader(503)
			return
		}
		w.WriteHeader(200)
	}))
	exp := startTraces(t, testConfig(url+"/kill"), nopSettings())
	require.NoError(t, exp.ConsumeTraces(context.Background(), tracesWith(killEvent("ld_r_1", time.Now()))))
	hits := rec.all()
	require.Len(t, hits, 3)
	for _, h := range hits {
		assert.Equal(t, "ld_r_1.kill", h.id)
		assert.Equal(t, hits[0].body, h.body, "body must be byte-identical on retry")
	}
}

func TestFiltersDryRunAndExpiry(t *testing.T) {
	var kills, alerts recorder
	cfg := testConfig(recordingServer(t, &kills, 200) + "/kill")
	cfg.Alerts.Endpoint = recordingServer(t, &alerts, 200) + "/alerts"
	cfg.Alerts.States = []string{"stuck"}
	cfg.Alerts.Reasons = []string{"frequent_identical"}
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	exp := startTraces(t, cfg, metadatatest.NewSettings(tel))

	now := time.Now()
	working := killEvent("ld_f_1", now)
	working.To, working.Kill = "working", false
	otherReason := killEvent("ld_f_2", now)
	otherReason.Reason, otherReason.Kill = "unchanged_result", false
	dry := killEvent("ld_f_3", now)
	dry.DryRun = true
	expired := killEvent("ld_f_4", now.Add(-2*time.Minute))
	require.NoError(t, exp.ConsumeTraces(context.Background(), tracesWith(working, otherReason, dry, expired)))

	assert.Empty(t, kills.all(), "dry-run and expired kills are not sent")
	var ids []string
	for _, h := range alerts.all() {
		ids = append(ids, h.id)
	}
	assert.ElementsMatch(t, []string{"ld_f_3.transition", "ld_f_4.transition"}, ids)
	assert.Equal(t, int64(2), sumCounter(t, tel, "otelcol_alertsink_events_filtered"))
	assert.Equal(t, int64(1), sumCounter(t, tel, "otelcol_alertsink_kills_expired"))
}

func TestExpiredWhileRetrying(t *testing.T) {
	var rec recorder
	url := recordingServer(t, &rec, 503)
	cfg := testConfig(url + "/kill")
	cfg.Kill.TTL = 300 * time.Millisecond
	cfg.RetryConfig.InitialInterval = 50 * time.Millisecond
	cfg.RetryConfig.MaxInterval = 50 * time.Millisecond
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	exp := startTraces(t, cfg, metadatatest.NewSettings(tel))
	start := time.Now()
	require.NoError(t, exp.ConsumeTraces(context.Background(), tracesWith(killEvent("ld_x_1", start))))
	hits := rec.all()
	require.NotEmpty(t, hits)
	for _, h := range hits {
		assert.Less(t, h.at.Sub(start), 300*time.Millisecond, "a kill was sent after its expires_at")
	}
	assert.Equal(t, int64(1), sumCounter(t, tel, "otelcol_alertsink_kills_expired"))
}

func TestSyntheticSpanAndLogsInput(t *testing.T) {
	var rec recorder
	url := recordingServer(t, &rec, 200)
	cfg := testConfig(url + "/kill")

	// A synthetic span carrying the event as its span event, and one
	// carrying the attributes on the span itself; target from the resource.
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.instance.id", "from-resource")
	ss := rs.ScopeSpans().AppendEmpty()
	ev1 := killEvent("ld_s_1", time.Now())
	ev1.Target = target.Process{}
	sp := ss.Spans().AppendEmpty()
	sp.SetName(loopevent.SyntheticSpanName)
	e := sp.Events().AppendEmpty()
	e.SetName(loopevent.EventName)
	ev1.CopyTo(e.Attributes())
	ev2 := killEvent("ld_s_2", time.Now())
	sp2 := ss.Spans().AppendEmpty()
	sp2.SetName(loopevent.SyntheticSpanName)
	ev2.CopyTo(sp2.Attributes())
	// Noise: a tool span without events, an event of another name, and a
	// malformed transition event.
	ss.Spans().AppendEmpty().SetName("execute_tool x")
	ss.Spans().At(0).Events().AppendEmpty().SetName("exception")
	bad := ss.Spans().AppendEmpty().Events().AppendEmpty()
	bad.SetName(loopevent.EventName)
	bad.Attributes().PutStr(loopevent.AttrTo, "stuck")
	bad.Attributes().PutStr(loopevent.AttrDecidedAt, "not a time")

	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	exp := startTraces(t, cfg, metadatatest.NewSettings(tel))
	require.NoError(t, exp.ConsumeTraces(context.Background(), td))
	assert.Equal(t, int64(1), sumCounter(t, tel, "otelcol_alertsink_events_invalid", attribute.String("signal", "traces")))

	// Logs input.
	ld := plog.NewLogs()
	lr := ld.ResourceLogs().AppendEmpty().ScopeLogs().AppendEmpty().LogRecords().AppendEmpty()
	lr.SetEventName(loopevent.EventName)
	ev3 := killEvent("ld_s_3", time.Now())
	ev3.CopyTo(lr.Attributes())
	other := ld.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().AppendEmpty()
	other.Body().SetStr("unrelated log line")
	lexp, err := NewFactory().CreateLogs(context.Background(), nopSettings(), cfg)
	require.NoError(t, err)
	require.NoError(t, lexp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, lexp.Shutdown(context.Background())) })
	require.NoError(t, lexp.ConsumeLogs(context.Background(), ld))

	got := map[string]string{}
	var seen []string
	for _, h := range rec.all() {
		var b struct {
			Target webhookbody.Target `json:"target"`
		}
		require.NoError(t, json.Unmarshal(h.body, &b))
		inst := instanceNamed(t, b.Target, "from-resource", "inst-1")
		if strings.HasSuffix(h.id, ".seen") {
			seen = append(seen, inst)
			continue
		}
		got[h.id] = inst
	}
	assert.Equal(t, []string{"from-resource"}, seen, "the one resource with an instance id is announced once")
	assert.Equal(t, map[string]string{
		"ld_s_1.kill": "from-resource",
		"ld_s_2.kill": "inst-1",
		"ld_s_3.kill": "inst-1",
	}, got)
}

// TestSecretsNeverLeak drives every failure path with a zap observer and
// greps all log output, errors and metric attributes for the secrets.
func TestSecretsNeverLeak(t *testing.T) {
	core, logs := observer.New(zapcore.DebugLevel)
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	set := metadatatest.NewSettings(tel)
	set.Logger = zap.New(core)

	var errs []error
	codes := []int{400, 401, 410, 301, 503}
	for i, code := range codes {
		var rec recorder
		cfg := testConfig(recordingServer(t, &rec, code) + "/kill")
		cfg.Kill.Secrets = []configopaque.String{testSecret}
		cfg.Alerts.Endpoint = closedURL(t)
		cfg.Alerts.Secrets = []configopaque.String{testSecret2}
		cfg.Alerts.Headers.Set("Authorization", "Bearer "+testSecret2)
		cfg.RetryConfig.MaxElapsedTime = 30 * time.Millisecond
		exp := startTraces(t, cfg, set)
		errs = append(errs, exp.ConsumeTraces(context.Background(), tracesWith(killEvent(fmt.Sprintf("ld_leak_%d", i), time.Now()))))
	}
	// Config errors too.
	bad := testConfig("http://example.com/kill")
	bad.Kill.Secrets = []configopaque.String{configopaque.String("whsec_%%%" + testSecret[6:])}
	errs = append(errs, bad.Validate())

	var text strings.Builder
	for _, e := range errs {
		if e != nil {
			text.WriteString(e.Error())
			fmt.Fprintf(&text, "%+v %#v\n", e, e)
		}
	}
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	for _, entry := range logs.All() {
		buf, err := enc.EncodeEntry(entry.Entry, entry.Context)
		require.NoError(t, err)
		text.Write(buf.Bytes())
	}
	for _, name := range []string{requestsMetric, "otelcol_alertsink_records_dropped", "otelcol_alertsink_endpoints_disabled"} {
		if m, err := tel.GetMetric(name); err == nil {
			fmt.Fprintf(&text, "%+v\n", m)
		}
	}
	out := text.String()
	require.NotEmpty(t, logs.All(), "expected failure logs to grep")
	require.Contains(t, out, "410", "expected the 410 path to be logged")
	for _, s := range []string{testSecret, testSecret2, testSecret[6:], testSecret2[6:]} {
		assert.NotContains(t, out, s, "secret leaked")
	}
}
