//go:build unix

package scaleout

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// --- binaries ----------------------------------------------------------------

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
	bins      struct{ collector, gateway, agent string }
)

func repoRoot() (string, error) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(root, "builder-config.yaml")); err != nil {
		return "", fmt.Errorf("repository root not found: %w", err)
	}
	return root, nil
}

// binaries returns the otelcol-loop distribution ($OTELCOL_LOOP_BIN), the
// tier-1 gateway ($OTELCOL_LOOP_GATEWAY_BIN) and loopagent. What the
// environment does not name (or names but is missing) is built once per test
// process into a temporary directory: the two distributions are nested
// modules, built in their own directories (the gateway cold in ~90-140 s, so
// `make test` builds bin/otelcol-loop-gateway once and passes it in).
func binaries(t testing.TB) (collector, gateway, agent string) {
	t.Helper()
	buildOnce.Do(func() {
		root, err := repoRoot()
		if err != nil {
			buildErr = err
			return
		}
		if buildDir, err = os.MkdirTemp("", "otelcol-loop-scaleout-bin-"); err != nil {
			buildErr = err
			return
		}
		build := func(dir, out, pkg string) error {
			start := time.Now()
			cmd := exec.Command("go", "build", "-buildvcs=false", "-trimpath", "-o", out, pkg)
			cmd.Dir = dir
			if b, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("go build %s in %s: %v\n%s", pkg, dir, err, b)
			}
			t.Logf("built %s in %s", filepath.Base(out), time.Since(start).Round(100*time.Millisecond))
			return nil
		}
		fromEnv := func(name string) string {
			p := os.Getenv(name)
			if p == "" {
				return ""
			}
			if _, err := os.Stat(p); err != nil {
				t.Logf("$%s=%s is missing; building it", name, p)
				return ""
			}
			return p
		}
		bins.agent = filepath.Join(buildDir, "loopagent")
		if buildErr = build(root, bins.agent, "./cmd/loopagent"); buildErr != nil {
			return
		}
		if bins.collector = fromEnv("OTELCOL_LOOP_BIN"); bins.collector == "" {
			bins.collector = filepath.Join(buildDir, "otelcol-loop")
			if buildErr = build(filepath.Join(root, "cmd", "otelcol-loop"), bins.collector, "."); buildErr != nil {
				return
			}
		}
		if bins.gateway = fromEnv("OTELCOL_LOOP_GATEWAY_BIN"); bins.gateway == "" {
			bins.gateway = filepath.Join(buildDir, "otelcol-loop-gateway")
			buildErr = build(filepath.Join(root, "cmd", "otelcol-loop-gateway"), bins.gateway, ".")
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bins.collector, bins.gateway, bins.agent
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// --- ports and secrets -------------------------------------------------------

var (
	portsMu   sync.Mutex
	portsSeen = map[int]bool{}
)

// freePort returns a loopback TCP port that was free a moment ago and that
// this process has not handed out before.
func freePort(t testing.TB) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if !portsSeen[p] {
			portsSeen[p] = true
			return p
		}
	}
	t.Fatal("no free port")
	return 0
}

func newSecret(t testing.TB) string {
	var k [32]byte
	if _, err := rand.Read(k[:]); err != nil {
		t.Fatal(err)
	}
	return "whsec_" + base64.StdEncoding.EncodeToString(k[:])
}

// --- processes ---------------------------------------------------------------

// proc is a process this test started; t.Cleanup stops it by PID.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// start runs argv with extra environment; stderr (and stdout unless
// stdoutPath is set) go to files in dir.
func start(t testing.TB, dir, name string, env []string, stdoutPath string, argv ...string) *proc {
	t.Helper()
	p := &proc{name: name, log: filepath.Join(dir, name+".log"), done: make(chan struct{})}
	logf, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	out := logf
	if stdoutPath != "" {
		if out, err = os.Create(stdoutPath); err != nil {
			t.Fatal(err)
		}
		defer out.Close()
	}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = out, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.stop(t, 10*time.Second) })
	return p
}

// stop sends SIGTERM to the PID, waits up to grace, then SIGKILL. Idempotent.
func (p *proc) stop(t testing.TB, grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	t.Logf("%s (pid %d) still running %s after SIGTERM: SIGKILL", p.name, p.cmd.Process.Pid, grace)
	_ = p.cmd.Process.Kill()
	<-p.done
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("%s did not exit within %s; log:\n%s", p.name, d, tail(p.logText(), 4000))
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		return ee.ExitCode()
	default:
		t.Fatalf("%s: %v", p.name, p.err)
		return -1
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) logText() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// eventually polls cond every 20 ms until it is true or d has passed.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitHealthy polls a health_check endpoint until it answers 200.
func waitHealthy(t testing.TB, p *proc, port int) {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	ok := eventually(30*time.Second, func() bool {
		if p.exited() {
			return true
		}
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if !ok || p.exited() {
		t.Fatalf("%s not healthy (exited: %v); log:\n%s", p.name, p.exited(), tail(p.logText(), 4000))
	}
}

// --- the tier-2 instances ----------------------------------------------------

type tier2 struct {
	*proc
	idx                  int
	otlpGRPC, health, mx int
}

// tier2Config is an otelcol-loop configuration for one tier-2 instance:
// OTLP/gRPC in from the gateway, loop_detect, alert_sink sending kills to
// /kill/<idx> and every transition (as a signed loop.transition alert) to
// /alerts/<idx> of the test receiver, so the test knows which instance
// decided what.
const tier2Config = `extensions:
  health_check:
    endpoint: 127.0.0.1:{{health}}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{{grpc}}
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
exporters:
  alert_sink:
    kill:
      endpoint: http://127.0.0.1:{{receiver}}/kill/{{idx}}
      secrets: ["${env:LOOPDETECT_WEBHOOK_SECRET}"]
      ttl: 60s
    alerts:
      endpoint: http://127.0.0.1:{{receiver}}/alerts/{{idx}}
      secrets: ["${env:LOOPDETECT_WEBHOOK_SECRET}"]
    timeout: 2s
    retry_on_failure:
      enabled: true
      initial_interval: 100ms
      max_interval: 1s
      max_elapsed_time: 30s
service:
  extensions: [health_check]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [memory_limiter, loop_detect]
      exporters: [alert_sink]
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

func startTier2(t testing.TB, dir string, idx, receiverPort int, secret string) *tier2 {
	t.Helper()
	bin, _, _ := binaries(t)
	in := &tier2{idx: idx, otlpGRPC: freePort(t), health: freePort(t), mx: freePort(t)}
	cfg := strings.NewReplacer("{{health}}", strconv.Itoa(in.health), "{{grpc}}", strconv.Itoa(in.otlpGRPC),
		"{{receiver}}", strconv.Itoa(receiverPort), "{{idx}}", strconv.Itoa(idx), "{{metrics}}", strconv.Itoa(in.mx)).Replace(tier2Config)
	path := filepath.Join(dir, fmt.Sprintf("tier2-%d.yaml", idx))
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	in.proc = start(t, dir, fmt.Sprintf("tier2-%d", idx), []string{"LOOPDETECT_WEBHOOK_SECRET=" + secret}, "", bin, "--config", "file:"+path)
	waitHealthy(t, in.proc, in.health)
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
	*proc
	grpc, http, health, mx int
	overlay                string
}

// startGateway runs bin/otelcol-loop-gateway with the committed
// config/gateway.yaml, ports from the environment, and a second config file
// layered over it that lists the tier-2 instances (lists replace lists).
func startGateway(t testing.TB, dir string, backends []*tier2) *gateway {
	t.Helper()
	_, bin, _ := binaries(t)
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	g := &gateway{grpc: freePort(t), http: freePort(t), health: freePort(t), mx: freePort(t),
		overlay: filepath.Join(dir, "gateway-backends.yaml")}
	g.setBackends(t, backends)
	env := []string{
		"LOOP_GATEWAY_GRPC_PORT=" + strconv.Itoa(g.grpc),
		"LOOP_GATEWAY_HTTP_PORT=" + strconv.Itoa(g.http),
		"LOOP_GATEWAY_HEALTH_PORT=" + strconv.Itoa(g.health),
		"LOOP_GATEWAY_METRICS_PORT=" + strconv.Itoa(g.mx),
	}
	g.proc = start(t, dir, "gateway", env, "", bin,
		"--config", "file:"+filepath.Join(root, "config", "gateway.yaml"), "--config", "file:"+g.overlay)
	waitHealthy(t, g.proc, g.health)
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
	key []byte
	srv *http.Server
	ln  net.Listener

	mu       sync.Mutex
	kills    []hook
	alerts   []hook
	bad      []string
	seen     map[string]bool // webhook ids, as the supervisor's replay cache
	replayed []hook          // kills answered already_handled by id
}

func newReceiver(t testing.TB, secret string) *receiver {
	t.Helper()
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &receiver{key: key, ln: ln, seen: map[string]bool{}}
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
	mac := hmac.New(sha256.New, r.key)
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
