package alertsink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// amNotification is the part of an Alertmanager webhook notification the
// tests read.
type amNotification struct {
	Status string `json:"status"`
	Alerts []struct {
		Status      string            `json:"status"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
		EndsAt      string            `json:"endsAt"`
	} `json:"alerts"`
}

// slackStandIn records the notifications Alertmanager routes to it, as
// Slack would receive them.
type slackStandIn struct {
	mu   sync.Mutex
	seen []amNotification
}

func (s *slackStandIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var n amNotification
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &n); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.seen = append(s.seen, n)
	s.mu.Unlock()
}

// forSession returns the notifications that carry an alert of session.
func (s *slackStandIn) forSession(session string) []amNotification {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []amNotification
	for _, n := range s.seen {
		for _, a := range n.Alerts {
			if a.Labels["session"] == session {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// Alertmanager's grouping timers in the test: short, so a notification
// follows within a second, and a long repeat interval, so any second
// notification of one alert would be a duplicate.
const (
	amGroupWait     = 200 * time.Millisecond
	amGroupInterval = 500 * time.Millisecond
)

// startAlertmanager runs the real Alertmanager ($ALERTMANAGER_BIN) on a free
// loopback port, routing every alert, one notification group per session,
// to hook. It returns the base URL.
func startAlertmanager(t *testing.T, hook string) string {
	t.Helper()
	bin := testproc.RequireTool(t, "ALERTMANAGER_BIN", "alert-tools")
	dir := t.TempDir()
	cfg := fmt.Sprintf(`route:
  receiver: stand-in
  group_by: [alertname, session]
  group_wait: %s
  group_interval: %s
  repeat_interval: 24h
receivers:
  - name: stand-in
    webhook_configs:
      - url: %s
        send_resolved: true
`, amGroupWait, amGroupInterval, hook)
	cfgPath := filepath.Join(dir, "alertmanager.yml")
	require.NoError(t, os.WriteFile(cfgPath, []byte(cfg), 0o600))
	return runAlertmanager(t, bin, dir, cfgPath)
}

// runAlertmanager starts bin with cfgPath and waits until it is ready.
func runAlertmanager(t *testing.T, bin, dir, cfgPath string) string {
	t.Helper()
	port := testproc.FreePort(t)
	p := testproc.Start(t, dir, "alertmanager", nil, "", bin,
		"--config.file="+cfgPath,
		"--storage.path="+filepath.Join(dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", port),
		"--cluster.listen-address=",
		"--log.level=warn",
	)
	p.LogTail = 4000
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	ready := testproc.Eventually(30*time.Second, func() bool {
		if p.Exited() {
			return true
		}
		resp, err := http.Get(base + "/-/ready")
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if !ready || p.Exited() {
		t.Fatalf("alertmanager not ready (exited: %v); log:\n%s", p.Exited(), testproc.Tail(p.LogText(), 4000))
	}
	return base
}

// stuckTransition is a session entering stuck (no kill), or, with to set to
// working, leaving it.
func stuckTransition(session string, seq int64, from, to string, decided time.Time) loopevent.Event {
	ev := killEvent(fmt.Sprintf("ld_%s_%d", session, seq), decided)
	ev.Session, ev.Sequence, ev.From, ev.To, ev.Kill = session, seq, from, to, false
	ev.Client = "genai_semconv"
	ev.TokensTotal, ev.TokensLoop = 52_000, 31_000
	if to == "working" {
		ev.Reason, ev.Explanation = "progress", "progress: the fingerprint changed"
	}
	return ev
}

func alertmanagerConfig(t *testing.T, base string) *Config {
	cfg := testConfig("")
	cfg.Kill.Endpoint, cfg.Kill.Secrets = "", nil
	cfg.Alertmanager.Endpoint = base
	cfg.Alertmanager.TraceURL = "https://traces.example/trace/{trace_id}"
	cfg.Alertmanager.Labels = map[string]string{"team": "agents"}
	return cfg
}

// A real Alertmanager between alert_sink and a Slack stand-in: a loop pages
// once with the labels on-call routes on, a replay after a restart does not
// page again, recovery resolves the page, and a silence made through
// Alertmanager's API keeps the next loop quiet.
func TestAlertmanagerFiresOnceResolvesAndHonoursSilences(t *testing.T) {
	slack := &slackStandIn{}
	hook := serve(t, slack) + "/slack"
	base := startAlertmanager(t, hook)
	cfg := alertmanagerConfig(t, base)
	exp := startTraces(t, cfg, nopSettings())
	ctx := context.Background()
	now := time.Now().UTC()

	// Fire: one notification, firing, with the routing labels.
	enter := stuckTransition("sess-1", 1, "working", "stuck", now)
	require.NoError(t, exp.ConsumeTraces(ctx, tracesWith(enter)))
	require.True(t, testproc.Eventually(10*time.Second, func() bool { return len(slack.forSession("sess-1")) > 0 }),
		"alertmanager never notified the stuck session")
	got := slack.forSession("sess-1")[0]
	require.Equal(t, "firing", got.Status)
	require.Len(t, got.Alerts, 1)
	a := got.Alerts[0]
	assert.Equal(t, map[string]string{
		"alertname": "AgentStuck", "state": "stuck", "reason": "frequent_identical", "service": "agent",
		"agent": "coder", "client": "genai_semconv", "session": "sess-1", "team": "agents",
	}, a.Labels)
	assert.Equal(t, "loop detected: same tool call x5 of last 10", a.Annotations["explanation"])
	assert.Equal(t, "52000", a.Annotations["tokens"])
	assert.Equal(t, "31000", a.Annotations["loop_tokens"])
	assert.Equal(t, "https://traces.example/trace/0102030405060708090a0b0c0d0e0f10", a.Annotations["trace_url"])

	// Idempotent: the same event replayed by a restarted collector (fresh
	// exporter state) posts the same alert again; nobody is paged twice.
	replay := startTraces(t, alertmanagerConfig(t, base), nopSettings())
	require.NoError(t, replay.ConsumeTraces(ctx, tracesWith(enter)))
	// Absence needs a wait: three group intervals, in which a changed group
	// would have been flushed.
	time.Sleep(amGroupWait + 3*amGroupInterval)
	require.Len(t, slack.forSession("sess-1"), 1, "a re-sent alert must not notify again")

	// Resolve: leaving stuck ends the alert; Alertmanager sends "resolved".
	leave := stuckTransition("sess-1", 2, "stuck", "working", now.Add(time.Second))
	require.NoError(t, exp.ConsumeTraces(ctx, tracesWith(leave)))
	require.True(t, testproc.Eventually(10*time.Second, func() bool { return len(slack.forSession("sess-1")) > 1 }),
		"alertmanager never sent the resolution")
	res := slack.forSession("sess-1")[1]
	assert.Equal(t, "resolved", res.Status)
	require.Len(t, res.Alerts, 1)
	assert.Equal(t, a.Labels, res.Alerts[0].Labels)

	// Silence: a silence on session sess-2, created through Alertmanager's
	// API, suppresses its alert; sess-3, unsilenced, still pages, and
	// Alertmanager reports sess-2's alert as received but suppressed.
	silence := map[string]any{
		"matchers":  []map[string]any{{"name": "session", "value": "sess-2", "isRegex": false, "isEqual": true}},
		"startsAt":  now.Add(-time.Minute).Format(time.RFC3339),
		"endsAt":    now.Add(time.Hour).Format(time.RFC3339),
		"createdBy": "alertsink test",
		"comment":   "known loop, being fixed",
	}
	raw, err := json.Marshal(silence)
	require.NoError(t, err)
	resp, err := http.Post(base+"/api/v2/silences", "application/json", bytes.NewReader(raw))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	require.NoError(t, exp.ConsumeTraces(ctx, tracesWith(
		stuckTransition("sess-2", 1, "working", "stuck", now),
		stuckTransition("sess-3", 1, "working", "stuck", now))))
	require.True(t, testproc.Eventually(10*time.Second, func() bool { return len(slack.forSession("sess-3")) > 0 }),
		"the unsilenced session never paged")
	time.Sleep(amGroupWait + 3*amGroupInterval)
	assert.Empty(t, slack.forSession("sess-2"), "a silenced alert must not notify")

	q := url.Values{"filter": {`session="sess-2"`}}
	resp, err = http.Get(base + "/api/v2/alerts?" + q.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	var alerts []struct {
		Labels map[string]string `json:"labels"`
		Status struct {
			State      string   `json:"state"`
			SilencedBy []string `json:"silencedBy"`
		} `json:"status"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&alerts))
	require.Len(t, alerts, 1, "the silenced alert reached alertmanager")
	assert.Equal(t, "suppressed", alerts[0].Status.State)
	assert.Len(t, alerts[0].Status.SilencedBy, 1)
}

// The ready-made config/alertmanager.yml loads in the pinned Alertmanager
// and accepts the alerts alert_sink posts.
func TestShippedAlertmanagerConfigLoads(t *testing.T) {
	bin := testproc.RequireTool(t, "ALERTMANAGER_BIN", "alert-tools")
	base := runAlertmanager(t, bin, t.TempDir(), filepath.Join("..", "..", "config", "alertmanager.yml"))
	exp := startTraces(t, alertmanagerConfig(t, base), nopSettings())
	require.NoError(t, exp.ConsumeTraces(context.Background(), tracesWith(stuckTransition("sess-cfg", 1, "working", "stuck", time.Now()))))
	resp, err := http.Get(base + "/api/v2/alerts?" + url.Values{"filter": {`session="sess-cfg"`}}.Encode())
	require.NoError(t, err)
	defer resp.Body.Close()
	var alerts []map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&alerts))
	require.Len(t, alerts, 1)
}

// An uncertain session pages only when it stays uncertain past
// alertmanager.uncertain_after; the delayed alert goes through the same
// queue and delivery as the others.
func TestUncertainAlertIsPostedWhenItPersists(t *testing.T) {
	var posts recorder
	base := recordingServer(t, &posts, http.StatusOK)
	cfg := alertmanagerConfig(t, base)
	cfg.Alertmanager.UncertainAfter = 10 * time.Minute
	exp := startTraces(t, cfg, nopSettings())
	sink := exp.(*tracesExporter).sink
	decided := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := decided
	sink.now = func() time.Time { return clock }

	ev := stuckTransition("sess-u", 1, "working", "uncertain", decided)
	ev.Reason = "missing_fingerprint"
	require.NoError(t, exp.ConsumeTraces(context.Background(), tracesWith(ev)))
	assert.Empty(t, posts.all(), "uncertain does not page at once")

	clock = decided.Add(9 * time.Minute)
	sink.fireDue(context.Background())
	assert.Empty(t, posts.all())

	clock = decided.Add(10 * time.Minute)
	sink.fireDue(context.Background())
	require.Len(t, posts.all(), 1)
	var als []map[string]any
	require.NoError(t, json.Unmarshal(posts.all()[0].body, &als))
	require.Len(t, als, 1)
	labels := als[0]["labels"].(map[string]any)
	assert.Equal(t, "AgentUncertain", labels["alertname"])
	assert.Equal(t, "sess-u", labels["session"])
	assert.Equal(t, "2030-01-02T03:04:05Z", als[0]["startsAt"], "the alert starts when the session became uncertain")
}
