//go:build unix

package scaleout

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// --- binaries ----------------------------------------------------------------

var (
	builds = testproc.Builds{Pattern: "otelcol-loop-scaleout-bin-"}
	bins   struct{ collector, gateway, agent string }
)

// binaries returns the otelcol-loop distribution ($OTELCOL_LOOP_BIN), the
// tier-1 gateway ($OTELCOL_LOOP_GATEWAY_BIN) and loopagent. What the
// environment does not name (or names but is missing) is built once per test
// process into a temporary directory: the two distributions are nested
// modules, built in their own directories (the gateway cold in ~90-140 s, so
// `make test` builds bin/otelcol-loop-gateway once and passes it in).
func binaries(t testing.TB) (collector, gateway, agent string) {
	t.Helper()
	builds.Once(t, func(root, dir string) error {
		bins.agent = filepath.Join(dir, "loopagent")
		if err := testproc.GoBuild(t.Logf, root, bins.agent, "./cmd/loopagent"); err != nil {
			return err
		}
		if bins.collector = testproc.BinFromEnv(t.Logf, "OTELCOL_LOOP_BIN"); bins.collector == "" {
			bins.collector = filepath.Join(dir, "otelcol-loop")
			if err := testproc.GoBuild(t.Logf, filepath.Join(root, "cmd", "otelcol-loop"), bins.collector, "."); err != nil {
				return err
			}
		}
		if bins.gateway = testproc.BinFromEnv(t.Logf, "OTELCOL_LOOP_GATEWAY_BIN"); bins.gateway == "" {
			bins.gateway = filepath.Join(dir, "otelcol-loop-gateway")
			return testproc.GoBuild(t.Logf, filepath.Join(root, "cmd", "otelcol-loop-gateway"), bins.gateway, ".")
		}
		return nil
	})
	return bins.collector, bins.gateway, bins.agent
}

// The bearer tokens the configs require (docs/security.md), in the
// environment every process started here inherits: the gateway reads
// LOOP_OTLP_TOKEN and LOOP_TIER2_TOKEN, tier 2 LOOP_TIER2_TOKEN, and the
// agents send theirs through the OTel SDK's OTEL_EXPORTER_OTLP_HEADERS.
const (
	otlpToken  = "scaleout-test-otlp-token"
	tier2Token = "scaleout-test-tier2-token"
)

func TestMain(m *testing.M) {
	for k, v := range map[string]string{
		"LOOP_OTLP_TOKEN":            otlpToken,
		"LOOP_TIER2_TOKEN":           tier2Token,
		"OTEL_EXPORTER_OTLP_HEADERS": "Authorization=Bearer%20" + otlpToken,
	} {
		if err := os.Setenv(k, v); err != nil {
			panic(err)
		}
	}
	code := m.Run()
	builds.Remove()
	os.Exit(code)
}

// start is testproc.Start with failures that quote only the last 4000 bytes
// of the process's log.
func start(t testing.TB, dir, name string, env []string, stdoutPath string, argv ...string) *testproc.Proc {
	t.Helper()
	p := testproc.Start(t, dir, name, env, stdoutPath, argv...)
	p.LogTail = 4000
	return p
}

// --- the tier-2 instances ----------------------------------------------------

type tier2 struct {
	*testproc.Proc
	idx                  int
	otlpGRPC, health, mx int
	seen                 string // file of what it received (startCluster with seen), else ""
}

// tier2Config is an otelcol-loop configuration for one tier-2 instance:
// OTLP/gRPC in from the gateway, traces and logs through one loop_detect,
// alert_sink sending kills to /kill/<idx> and every transition (as a signed
// loop.transition alert) to /alerts/<idx> of the test receiver, so the test
// knows which instance decided what.
const tier2Config = `extensions:
  health_check:
    endpoint: 127.0.0.1:{{health}}
  bearertokenauth/tier1:
    token: ${env:LOOP_TIER2_TOKEN}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{{grpc}}
        auth:
          authenticator: bearertokenauth/tier1
processors:
  memory_limiter:
    check_interval: 1s
    limit_mib: 256
    spike_limit_mib: 64
  loop_detect:
    session:
      keys: [gen_ai.conversation.id, session.id]
    digest_key: scaleout-test-digest-key
    tick_interval: 250ms
    kill:
      enabled: true
      reasons: [frequent_identical, backstop]
      after_loop_calls: 5
exporters:{{seen_exporter}}
  alert_sink:
    kill:
      endpoint: http://127.0.0.1:{{receiver}}/kill/{{idx}}
      secrets: ["${env:LOOPDETECT_WEBHOOK_SECRET}"]
      ttl: 60s
    alerts:
      endpoint: http://127.0.0.1:{{receiver}}/alerts/{{idx}}
      secrets: ["${env:LOOPDETECT_ALERTS_SECRET}"]
    timeout: 2s
    retry_on_failure:
      enabled: true
      initial_interval: 100ms
      max_interval: 1s
      max_elapsed_time: 30s
service:
  extensions: [health_check, bearertokenauth/tier1]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [memory_limiter, loop_detect]
      exporters: [alert_sink{{seen}}]
    logs:
      receivers: [otlp]
      processors: [memory_limiter, loop_detect]
      exporters: [alert_sink{{seen}}]
  telemetry:
    logs:
      level: info
    metrics:
      level: normal
      readers:
        - pull:
            exporter:
              prometheus:
                host: 127.0.0.1
                port: {{metrics}}
`

// seenExporter is the file exporter startCluster(t, true) adds to both pipelines:
// every span and log record the instance received, as OTLP JSON lines, so
// a test can tell which instance saw which session.
const seenExporter = `
  file/seen:
    path: {{seen_path}}
    flush_interval: 100ms`

// renderTier2Config fills tier2Config's ports and paths; seenPath "" leaves
// the file/seen exporter out.
func renderTier2Config(health, grpc, receiverPort, idx, metrics int, seenPath string) string {
	seenExp, seenRef := "", ""
	if seenPath != "" {
		seenExp, seenRef = strings.ReplaceAll(seenExporter, "{{seen_path}}", seenPath), ", file/seen"
	}
	return strings.NewReplacer("{{health}}", strconv.Itoa(health), "{{grpc}}", strconv.Itoa(grpc),
		"{{receiver}}", strconv.Itoa(receiverPort), "{{idx}}", strconv.Itoa(idx), "{{metrics}}", strconv.Itoa(metrics),
		"{{seen_exporter}}", seenExp, "{{seen}}", seenRef).Replace(tier2Config)
}

// cluster is the two-tier deployment the scale-out tests run: three
// otelcol-loop instances behind one gateway, their kills sent to rcv.
type cluster struct {
	dir string
	rcv *receiver
	ins []*tier2
	gw  *gateway
}

// startCluster starts the three instances (seen: each also writes what it
// receives to its tier2.seen, see seenExporter) and the gateway.
func startCluster(t testing.TB, seen bool) *cluster {
	t.Helper()
	c := &cluster{dir: t.TempDir()}
	secret := testproc.NewSecret(t)
	c.rcv = newReceiver(t, secret)
	for i := range 3 {
		c.ins = append(c.ins, startTier2(t, c.dir, i, c.rcv.port(), secret, seen))
	}
	c.gw = startGateway(t, c.dir, c.ins)
	return c
}

// startTier2 starts instance idx; seen: its input is also written to
// tier2.seen.
func startTier2(t testing.TB, dir string, idx, receiverPort int, secret string, seen bool) *tier2 {
	t.Helper()
	bin, _, _ := binaries(t)
	in := &tier2{idx: idx, otlpGRPC: testproc.FreePort(t), health: testproc.FreePort(t), mx: testproc.FreePort(t)}
	if seen {
		in.seen = filepath.Join(dir, fmt.Sprintf("seen-%d.jsonl", idx))
	}
	cfg := renderTier2Config(in.health, in.otlpGRPC, receiverPort, idx, in.mx, in.seen)
	path := filepath.Join(dir, fmt.Sprintf("tier2-%d.yaml", idx))
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	in.Proc = start(t, dir, fmt.Sprintf("tier2-%d", idx), []string{"LOOPDETECT_WEBHOOK_SECRET=" + secret, "LOOPDETECT_ALERTS_SECRET=" + alertsSecret(secret)}, "", bin, "--config", "file:"+path)
	in.WaitHealthy(t, in.health, 30*time.Second)
	return in
}

// metric sums the instance's Prometheus series called name.
func (in *tier2) metric(name string) float64 {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", in.mx))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// --- the gateway -------------------------------------------------------------

type gateway struct {
	*testproc.Proc
	grpc, http, health, mx int
	overlay                string
}

// startGateway runs bin/otelcol-loop-gateway with the committed
// config/gateway.yaml, ports from the environment, and a second config file
// layered over it that lists the tier-2 instances (lists replace lists).
func startGateway(t testing.TB, dir string, backends []*tier2) *gateway {
	t.Helper()
	_, bin, _ := binaries(t)
	root, err := testproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway{grpc: testproc.FreePort(t), http: testproc.FreePort(t), health: testproc.FreePort(t), mx: testproc.FreePort(t),
		overlay: filepath.Join(dir, "gateway-backends.yaml")}
	g.setBackends(t, backends)
	env := []string{
		"LOOP_GATEWAY_GRPC_PORT=" + strconv.Itoa(g.grpc),
		"LOOP_GATEWAY_HTTP_PORT=" + strconv.Itoa(g.http),
		"LOOP_GATEWAY_HEALTH_PORT=" + strconv.Itoa(g.health),
		"LOOP_GATEWAY_METRICS_PORT=" + strconv.Itoa(g.mx),
	}
	g.Proc = start(t, dir, "gateway", env, "", bin,
		"--config", "file:"+filepath.Join(root, "config", "gateway.yaml"), "--config", "file:"+g.overlay)
	g.WaitHealthy(t, g.health, 30*time.Second)
	return g
}

// setBackends (re)writes the overlay listing the instances' OTLP endpoints.
func (g *gateway) setBackends(t testing.TB, backends []*tier2) {
	t.Helper()
	var hosts []string
	for _, b := range backends {
		hosts = append(hosts, fmt.Sprintf("          - 127.0.0.1:%d\n", b.otlpGRPC))
	}
	y := "exporters:\n  load_balancing:\n    resolver:\n      static:\n        hostnames:\n" + strings.Join(hosts, "")
	tmp := g.overlay + ".tmp"
	if err := os.WriteFile(tmp, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, g.overlay); err != nil {
		t.Fatal(err)
	}
}

// --- the webhook receiver ----------------------------------------------------

// hook is one verified webhook as received.
type hook struct {
	instance  int    // from the path /kill/<i> or /alerts/<i>
	webhookID string // header
	at        time.Time
	body      hookBody
}

type hookBody struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Sequence int    `json:"sequence"`
	Session  struct {
		Key     string `json:"key"`
		Source  string `json:"source"`
		TraceID string `json:"trace_id"`
	} `json:"session"`
	Target struct {
		ServiceName       string `json:"service_name"`
		ServiceInstanceID string `json:"service_instance_id"`
		PID               int64  `json:"pid"`
	} `json:"target"`
	Transition struct {
		From       string `json:"from"`
		To         string `json:"to"`
		Reason     string `json:"reason"`
		Kill       bool   `json:"kill"`
		DryRun     bool   `json:"dry_run"`
		CallIndex  int    `json:"call_index"`
		Window     int    `json:"window"`
		DelayCalls int    `json:"delay_calls"`
	} `json:"transition"`
}

// receiver stands in for the supervisor: it verifies the Standard Webhooks
// signature (HMAC-SHA256 over "id.timestamp.body" with the key behind
// whsec_) and records every kill and transition alert. Its replay cache
// models the reference supervisor's (cmd/loopsupervisor: webhook ids are
// remembered for 15 minutes and a repeat is answered already_handled).
type receiver struct {
	key       []byte
	alertsKey []byte // the alerts destination signs with its own key
	srv       *http.Server
	ln        net.Listener

	mu       sync.Mutex
	kills    []hook
	alerts   []hook
	warns    []hook
	bad      []string
	seen     map[string]bool // webhook ids, as the supervisor's replay cache
	replayed []hook          // kills answered already_handled by id
}

// alertsSecret is the alerts destination's own secret, derived from the
// kill secret (alert_sink refuses one key for both destinations).
func alertsSecret(killSecret string) string {
	k, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(killSecret, "whsec_"))
	for i := range k {
		k[i] ^= 0x5a
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(k)
}

func newReceiver(t testing.TB, secret string) *receiver {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	alertsKey, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(alertsSecret(secret), "whsec_"))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{key: key, alertsKey: alertsKey, ln: ln, seen: map[string]bool{}}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }()
	t.Cleanup(func() { _ = r.srv.Close() })
	return r
}

func (r *receiver) port() int { return r.ln.Addr().(*net.TCPAddr).Port }

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	if err != nil {
		http.Error(w, "unreadable", http.StatusBadRequest)
		return
	}
	id, ts, sigs := req.Header.Get("webhook-id"), req.Header.Get("webhook-timestamp"), req.Header.Get("webhook-signature")
	fail := func(code int, why string) {
		r.mu.Lock()
		r.bad = append(r.bad, fmt.Sprintf("%s %s: %s", req.URL.Path, id, why))
		r.mu.Unlock()
		http.Error(w, why, code)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if id == "" || err != nil {
		fail(http.StatusBadRequest, "missing webhook-id or webhook-timestamp")
		return
	}
	if d := time.Since(time.Unix(sec, 0)); d > 5*time.Minute || d < -5*time.Minute {
		fail(http.StatusUnauthorized, "timestamp outside the window")
		return
	}
	key := r.key
	if strings.HasPrefix(req.URL.Path, "/alerts/") {
		key = r.alertsKey
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	ok := false
	for _, s := range strings.Fields(sigs) {
		v, found := strings.CutPrefix(s, "v1,")
		if !found {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(v)
		if err == nil && hmac.Equal(got, want) {
			ok = true
		}
	}
	if !ok {
		fail(http.StatusUnauthorized, "no valid signature")
		return
	}
	var h hook
	if err := json.Unmarshal(body, &h.body); err != nil {
		fail(http.StatusBadRequest, "bad body: "+err.Error())
		return
	}
	h.webhookID, h.at = id, time.Now()
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	if len(parts) != 2 {
		fail(http.StatusNotFound, "unknown path")
		return
	}
	if h.instance, err = strconv.Atoi(parts[1]); err != nil {
		fail(http.StatusNotFound, "unknown path")
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case parts[0] == "kill" && h.body.Type == "loop.kill":
		if r.seen[id] {
			r.replayed = append(r.replayed, h)
		}
		r.seen[id] = true
		r.kills = append(r.kills, h)
	case parts[0] == "kill" && h.body.Type == "loop.warn":
		// The response ladder's step before the kill (alert_sink
		// kill.warn_on): counted, acted on by no one here.
		r.warns = append(r.warns, h)
	case parts[0] == "alerts" && h.body.Type == "loop.transition":
		r.alerts = append(r.alerts, h)
	default:
		r.bad = append(r.bad, fmt.Sprintf("%s %s: type %q on this path", req.URL.Path, id, h.body.Type))
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"result":"ok"}`)
}

type snapshot struct {
	kills, alerts, replayed []hook
	bad                     []string
}

func (r *receiver) snapshot() snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return snapshot{kills: append([]hook(nil), r.kills...), alerts: append([]hook(nil), r.alerts...),
		replayed: append([]hook(nil), r.replayed...), bad: append([]string(nil), r.bad...)}
}

// stuck returns, per session, the transitions into stuck (from the alerts).
func (s snapshot) stuck() map[string][]hook {
	m := map[string][]hook{}
	for _, h := range s.alerts {
		if h.body.Transition.To == "stuck" {
			m[h.body.Session.Key] = append(m[h.body.Session.Key], h)
		}
	}
	return m
}

// killsBySession groups the kill deliveries (retries included) by session.
func (s snapshot) killsBySession() map[string][]hook {
	m := map[string][]hook{}
	for _, h := range s.kills {
		m[h.body.Session.Key] = append(m[h.body.Session.Key], h)
	}
	return m
}

func validateGateway(bin, file string) (string, error) {
	cmd := exec.Command(bin, "validate", "--config=file:"+file)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// rebalance is what stopping one tier-2 instance mid-run did.
type rebalance struct {
	// victim is the stopped instance; moved are the loops it had detected.
	victim int
	moved  []string
	// again finds, in a snapshot, each session's detection on another
	// instance after the stop (not an escalation of an earlier one).
	again     func(snapshot) map[string]hook
	stoppedAt time.Time
}

// stopBusiestAndRedetect stops, by PID, the instance that detected the most
// loops (first: each session's first detection), gives the gateway the
// remaining backends (SIGHUP), and waits until every moved loop is
// detected again, with its kill delivered, on a remaining instance.
func stopBusiestAndRedetect(t *testing.T, began time.Time, gw *gateway, ins []*tier2, rcv *receiver, first map[string]hook) rebalance {
	t.Helper()
	perInstance := map[int][]string{}
	for sess, h := range first {
		perInstance[h.instance] = append(perInstance[h.instance], sess)
	}
	victim := 0
	for i := range len(ins) {
		if len(perInstance[i]) > len(perInstance[victim]) {
			victim = i
		}
	}
	moved := perInstance[victim]
	sort.Strings(moved)
	t.Logf("phase 1 after %s: loops per instance #0 %d, #1 %d, #2 %d; stopping #%d",
		time.Since(began).Round(time.Millisecond), len(perInstance[0]), len(perInstance[1]), len(perInstance[2]), victim)

	ins[victim].Stop(t, 10*time.Second)
	var rest []*tier2
	for _, in := range ins {
		if in.idx != victim {
			rest = append(rest, in)
		}
	}
	gw.setBackends(t, rest)
	if err := gw.Cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	r := rebalance{victim: victim, moved: moved, stoppedAt: time.Now()}
	r.again = func(s snapshot) map[string]hook {
		m := map[string]hook{}
		for sess, hs := range s.stuck() {
			for _, h := range hs {
				if h.instance != victim && h.instance != first[sess].instance && h.body.Transition.From != "stuck" {
					m[sess] = h
				}
			}
		}
		return m
	}
	ok := testproc.Eventually(30*time.Second, func() bool {
		s := rcv.snapshot()
		second, kills := r.again(s), s.killsBySession()
		for _, sess := range moved {
			h, found := second[sess]
			if !found {
				return false
			}
			delivered := false
			for _, k := range kills[sess] {
				delivered = delivered || k.instance == h.instance
			}
			if !delivered {
				return false
			}
		}
		return true
	})
	if !ok {
		second := r.again(rcv.snapshot())
		var missing []string
		for _, sess := range moved {
			if _, found := second[sess]; !found {
				missing = append(missing, sess)
			}
		}
		t.Fatalf("%d of %d moved loops not detected again (with kill) within 30 s: %v\ngateway log:\n%s", len(missing), len(moved), missing, testproc.Tail(gw.LogText(), 3000))
	}
	return r
}

// compareMovedKills checks, for every moved loop, that it was detected
// again within the frequent_identical window (10 calls) of what its new
// instance saw, and that both instances' kills arrived; it counts how many
// second kills repeated the first's webhook-id (a supervisor's replay cache
// drops those) and gives a sample for the log.
func compareMovedKills(t *testing.T, s snapshot, r rebalance, first map[string]hook) (moved map[string]bool, sameID, newID int, sample string) {
	t.Helper()
	stuck, kills, second := s.stuck(), s.killsBySession(), r.again(s)
	moved = map[string]bool{}
	for _, sess := range r.moved {
		moved[sess] = true
		h := second[sess]
		if h.body.Transition.CallIndex > 10 {
			t.Errorf("moved loop %s: detected again only at call %d on #%d", sess, h.body.Transition.CallIndex, h.instance)
		}
		var firstKill, secondKill string
		for _, k := range kills[sess] {
			switch k.instance {
			case first[sess].instance:
				firstKill = k.webhookID
			case h.instance:
				secondKill = k.webhookID
			}
		}
		if firstKill == "" || secondKill == "" {
			t.Errorf("moved loop %s: kills first %q second %q", sess, firstKill, secondKill)
			continue
		}
		if firstKill == secondKill {
			sameID++
		} else {
			newID++
		}
		if sample == "" {
			sample = fmt.Sprintf("%s: kill %s from #%d, kill %s from #%d; stuck transitions %s", sess,
				firstKill, first[sess].instance, secondKill, h.instance, describe(stuck[sess]))
		}
	}
	return moved, sameID, newID, sample
}
