//go:build linux

package reliability

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// privateCollector is the collector of testdata/private.yaml: the shape of
// config/local.yaml (OTLP on loopback, every span to a file), its kill
// secret from a secrets file.
type privateCollector struct {
	*testproc.Proc
	otlp          int
	traces, queue string
}

// privateRun describes one run of testdata/private.yaml.
type privateRun struct {
	// dir holds the traces file and the queue directory.
	dir string
	// secretsFile is the kill secret's file.
	secretsFile string
	// killPort is the supervisor's port.
	killPort int
	// env is added to the collector's environment.
	env []string
}

// startPrivate runs testdata/private.yaml under umask 000, the loosest a
// user can have, and returns once it is healthy (or, with wait false, at
// once: for runs that must fail).
func startPrivate(t *testing.T, r privateRun, wait bool) *privateCollector {
	t.Helper()
	bin, _ := binaries(t)
	c := &privateCollector{
		otlp:   testproc.FreePort(t),
		traces: filepath.Join(r.dir, "otelcol-loop-traces.jsonl"),
		queue:  filepath.Join(r.dir, "queue"),
	}
	health := testproc.FreePort(t)
	env := append([]string{
		"REL_HEALTH_PORT=" + strconv.Itoa(health),
		"REL_OTLP_PORT=" + strconv.Itoa(c.otlp),
		"REL_METRICS_PORT=" + strconv.Itoa(testproc.FreePort(t)),
		"REL_KILL_PORT=" + strconv.Itoa(r.killPort),
		"REL_SECRETS_FILE=" + r.secretsFile,
		"REL_TRACES_FILE=" + c.traces,
		"REL_QUEUE_DIR=" + c.queue,
	}, r.env...)
	abs, err := filepath.Abs(filepath.Join("testdata", "private.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c.Proc = testproc.Start(t, t.TempDir(), "collector", env, "",
		"/bin/sh", "-c", `umask 000; exec "$0" "$@"`, bin, "--config", abs)
	c.LogTail = 4000
	if wait {
		c.WaitHealthy(t, health, 30*time.Second)
	}
	return c
}

// post sends td as OTLP/JSON without a token (the loopback configs take
// none) and fails t unless it is accepted.
func (c *privateCollector) post(t *testing.T, calls ...call) {
	t.Helper()
	b := mustJSON(t, calls...)
	resp, err := http.Post(fmt.Sprintf("http://127.0.0.1:%d/v1/traces", c.otlp), "application/json", strings.NewReader(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("spans refused: HTTP %d; log:\n%s", resp.StatusCode, c.LogText())
	}
}

func mustJSON(t *testing.T, calls ...call) []byte {
	t.Helper()
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(spans(calls...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeSecrets writes a secrets file of mode perm (whatever the umask).
func writeSecrets(t *testing.T, path, secret string, perm os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		t.Fatal(err)
	}
}

// strangerDir is a fresh directory every local user may enter and list
// (and its parent), so what keeps a stranger out of a file in it is the
// file's own mode.
func strangerDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// stranger returns the uid and gid of the second local user the probes
// run as ("nobody"); reading as another user needs root, so it fails t
// when the suite runs as another user and the check is asked for.
func stranger(t *testing.T) (uid, gid uint32) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("reading as a second local user needs root (CI runs as root)")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("running as root needs a 'nobody' user to probe as: %v", err)
	}
	id, _ := strconv.ParseUint(u.Uid, 10, 32)
	g, _ := strconv.ParseUint(u.Gid, 10, 32)
	return uint32(id), uint32(g)
}

// readAs runs cat on path as uid:gid and returns what it printed and its
// error.
func readAs(t *testing.T, uid, gid uint32, path string) (string, error) {
	t.Helper()
	cmd := exec.Command("/bin/cat", path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{}}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestCollectorFilesArePrivate: the traces file holds the agents' instance
// ids, the capability a kill is accepted for; a stranger who read it from
// the 0644 file config/local.yaml wrote sent 8 spans naming one and the
// agent was killed. Now, under umask 000 and with the traces file already
// there at 0644, the collector leaves it 0600, its queue directory 0700 and
// every queue file 0600, and a second local user cannot read the file.
func TestCollectorFilesArePrivate(t *testing.T) {
	dir := strangerDir(t)
	secrets := filepath.Join(t.TempDir(), "kill.secrets")
	writeSecrets(t, secrets, testproc.NewSecret(t), 0o600)
	traces := filepath.Join(dir, "otelcol-loop-traces.jsonl")
	if err := os.WriteFile(traces, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(traces, 0o644); err != nil {
		t.Fatal(err)
	}
	c := startPrivate(t, privateRun{dir: dir, secretsFile: secrets, killPort: testproc.FreePort(t)}, true)
	inst := instanceID(t)
	c.post(t, call{trace: traceID(3, 1), seq: 1, resource: map[string]any{"service.instance.id": inst}})
	if !testproc.Eventually(10*time.Second, func() bool {
		b, _ := os.ReadFile(c.traces)
		return strings.Contains(string(b), inst)
	}) {
		t.Fatalf("the traces file never held the agent's instance id; log:\n%s", c.LogText())
	}

	checkMode := func(path string, want fs.FileMode) {
		t.Helper()
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if got := fi.Mode().Perm(); got != want {
			t.Errorf("%s: mode %04o, want %04o", path, got, want)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Geteuid() {
			t.Errorf("%s: owned by uid %d, want the collector's %d", path, uid, os.Geteuid())
		}
	}
	checkMode(c.traces, 0o600)
	checkMode(c.queue, 0o700)
	queued, err := os.ReadDir(c.queue)
	if err != nil {
		t.Fatal(err)
	}
	if len(queued) == 0 {
		t.Fatal("the persistent queue wrote no file")
	}
	for _, e := range queued {
		checkMode(filepath.Join(c.queue, e.Name()), 0o600)
	}

	t.Run("a second local user cannot read the traces file", func(t *testing.T) {
		uid, gid := stranger(t)
		// The control: the stranger reads a 0644 file beside it.
		control := filepath.Join(dir, "control")
		if err := os.WriteFile(control, []byte("readable\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(control, 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := readAs(t, uid, gid, control); err != nil || out != "readable\n" {
			t.Fatalf("the stranger cannot read even a 0644 file in the directory (%v): %s", err, out)
		}
		out, err := readAs(t, uid, gid, c.traces)
		if err == nil || strings.Contains(out, inst) {
			t.Fatalf("the stranger read the traces file (%v):\n%s", err, testproc.Tail(out, 500))
		}
		if !strings.Contains(out, "ermission denied") {
			t.Fatalf("reading failed, but not for permission: %s", out)
		}
	})
}

// TestAnotherUsersTracesFileIsRefused: a file at the traces path that a
// second local user created beforehand (and so can read whatever its mode)
// stops the collector at start, naming the path and its owner, before any
// span is written there.
func TestAnotherUsersTracesFileIsRefused(t *testing.T) {
	uid, gid := stranger(t)
	dir := strangerDir(t)
	secrets := filepath.Join(t.TempDir(), "kill.secrets")
	writeSecrets(t, secrets, testproc.NewSecret(t), 0o600)
	traces := filepath.Join(dir, "otelcol-loop-traces.jsonl")
	if err := os.WriteFile(traces, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(traces, int(uid), int(gid)); err != nil {
		t.Fatal(err)
	}
	c := startPrivate(t, privateRun{dir: dir, secretsFile: secrets, killPort: testproc.FreePort(t)}, false)
	if code := c.Wait(t, 30*time.Second); code == 0 {
		t.Fatalf("the collector started with another user's traces file; log:\n%s", c.LogText())
	}
	want := fmt.Sprintf("file: path %s: owned by uid %d, not the collector's user", traces, uid)
	if !strings.Contains(c.LogText(), want) {
		t.Fatalf("the refusal does not say %q; log:\n%s", want, c.LogText())
	}
}

// TestKillSecretOnlyInAFile: the kill secret was in the collector's
// environment, readable by a same-user agent in /proc/<pid>/environ. Now
// the collector and the supervisor read one 0600 file, the collector's
// environment holds no secret, and a loop still gets the agent killed; the
// same file readable by others stops the collector at start with an error
// naming kill.secrets_file.
func TestKillSecretOnlyInAFile(t *testing.T) {
	dir := t.TempDir()
	secret := testproc.NewSecret(t)
	secrets := filepath.Join(dir, "kill.secrets")
	writeSecrets(t, secrets, secret, 0o600)
	inst := instanceID(t)
	// The supervisor writes the same secret into its own 0600 file.
	sup := startSupervisor(t, dir, secret, inst, sleeper, nil)
	c := startPrivate(t, privateRun{dir: t.TempDir(), secretsFile: secrets, killPort: sup.port}, true)

	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", c.Cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(environ), "REL_SECRETS_FILE="+secrets) {
		t.Fatalf("read the wrong process's environment: %q", testproc.Tail(string(environ), 300))
	}
	if strings.Contains(string(environ), strings.TrimPrefix(secret, "whsec_")) {
		t.Fatal("the kill secret is in the collector's environment")
	}

	c.post(t, loopFor(inst, 5, 1)...)
	if code := sup.Wait(t, 30*time.Second); code != 86 {
		t.Fatalf("supervisor exit %d, want 86 (killed); supervisor log:\n%s\ncollector log:\n%s", code, sup.LogText(), c.LogText())
	}

	writeSecrets(t, secrets, secret, 0o644)
	refused := startPrivate(t, privateRun{dir: t.TempDir(), secretsFile: secrets, killPort: testproc.FreePort(t)}, false)
	if code := refused.Wait(t, 30*time.Second); code == 0 {
		t.Fatalf("the collector started with a secrets file others can read; log:\n%s", refused.LogText())
	}
	want := "kill.secrets_file: " + secrets + ": mode 0644 lets group or others read it"
	if !strings.Contains(refused.LogText(), want) {
		t.Fatalf("the refusal does not say %q; log:\n%s", want, refused.LogText())
	}
	if strings.Contains(refused.LogText(), strings.TrimPrefix(secret, "whsec_")) {
		t.Fatal("the refusal printed the secret")
	}
}

// TestProductionRefusesPlaintextBeyondLoopback: config/production.yaml moved
// off loopback by LOOP_OTLP_HTTP_ENDPOINT listened in plaintext, and a
// bearer token sent in the clear was accepted. Now the collector refuses to
// start, naming the receiver and what to set, and nothing listens there;
// on loopback the same file starts.
func TestProductionRefusesPlaintextBeyondLoopback(t *testing.T) {
	bin, _ := binaries(t)
	prod, err := filepath.Abs(filepath.Join("..", "..", "config", "production.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	port := testproc.FreePort(t)
	base := []string{
		"LOOPDETECT_WEBHOOK_SECRET=" + testproc.NewSecret(t),
		"LOOPDETECT_ALERTS_SECRET=" + testproc.NewSecret(t),
		"LOOPDETECT_DIGEST_KEY=reliability-digest-key",
		"LOOP_OTLP_TOKEN=" + token,
		"LOOPDETECT_STORAGE_DIR=" + t.TempDir(),
		"LOOP_OTLP_GRPC_ENDPOINT=127.0.0.1:" + strconv.Itoa(testproc.FreePort(t)),
		"LOOP_HEALTH_ENDPOINT=127.0.0.1:" + strconv.Itoa(testproc.FreePort(t)),
		"LOOP_METRICS_HOST=127.0.0.1",
	}
	// Every interface, in plaintext: refused.
	p := testproc.Start(t, t.TempDir(), "production-plaintext", append(base, "LOOP_OTLP_HTTP_ENDPOINT=0.0.0.0:"+strconv.Itoa(port)), "",
		bin, "--config", prod)
	if code := p.Wait(t, 30*time.Second); code == 0 {
		t.Fatalf("production.yaml started listening on 0.0.0.0 in plaintext; log:\n%s", p.LogText())
	}
	want := fmt.Sprintf(`receivers::otlp::protocols::http::endpoint: "0.0.0.0:%d" is beyond loopback and receivers::otlp::protocols::http::tls has no certificate`, port)
	if !strings.Contains(p.LogText(), want) {
		t.Fatalf("the refusal does not say %q; log:\n%s", want, p.LogText())
	}
	if conn, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
		_ = conn.Close()
		t.Fatal("something listens on the refused port")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dialing the refused port: %v", err)
	}

	// The control: the same file on loopback starts (its fixed debug and
	// metrics ports moved to free ones).
	health := testproc.FreePort(t)
	ok := testproc.Start(t, t.TempDir(), "production-loopback", append(base,
		"LOOP_OTLP_HTTP_ENDPOINT=127.0.0.1:"+strconv.Itoa(port),
		"LOOP_HEALTH_ENDPOINT=127.0.0.1:"+strconv.Itoa(health)), "", bin, "--config", prod,
		"--config", fmt.Sprintf("yaml:extensions::pprof::endpoint: 127.0.0.1:%d", testproc.FreePort(t)),
		"--config", fmt.Sprintf("yaml:extensions::zpages::endpoint: 127.0.0.1:%d", testproc.FreePort(t)),
		"--config", fmt.Sprintf("yaml:service::telemetry::metrics::readers: [{pull: {exporter: {prometheus: {host: 127.0.0.1, port: %d}}}}]", testproc.FreePort(t)))
	ok.WaitHealthy(t, health, 30*time.Second)
}

// refusedLine matches a logged refusal and the count of those left out
// before it.
var refusedLine = regexp.MustCompile(`rejected webhook from [^\n]*?(?: \(and (\d+) more refused requests not logged since [^)]*\))?\n`)

// TestRefusedRequestsDoNotFloodTheSupervisorsLog: a stranger on the kill
// port wrote 13,350 lines in 15 s into the supervisor's log, one a refused
// request. Now a flood of unsigned requests is each answered 400 but
// logged at most once a second, each line counting those it stands for,
// and the agent keeps running.
func TestRefusedRequestsDoNotFloodTheSupervisorsLog(t *testing.T) {
	dir := t.TempDir()
	sup := startSupervisor(t, dir, testproc.NewSecret(t), instanceID(t), sleeper, nil)
	url := fmt.Sprintf("http://127.0.0.1:%d/kill", sup.port)
	client := &http.Client{Timeout: 5 * time.Second}
	const maxRequests, maxTime = 20_000, 3 * time.Second
	start := time.Now()
	sent := 0
	for sent < maxRequests && time.Since(start) < maxTime {
		resp, err := client.Post(url, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("an unsigned request was answered %d, want 400", resp.StatusCode)
		}
		sent++
	}
	elapsed := time.Since(start)
	// One more after a second's pause: its line counts the flood's tail.
	time.Sleep(1100 * time.Millisecond)
	resp, err := client.Post(url, "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	sent++

	var lines, accounted int
	if !testproc.Eventually(5*time.Second, func() bool {
		lines, accounted = 0, 0
		for _, m := range refusedLine.FindAllStringSubmatch(sup.LogText(), -1) {
			lines++
			n, _ := strconv.Atoi(m[1])
			accounted += 1 + n
		}
		return accounted == sent
	}) {
		t.Fatalf("%d refused requests, %d accounted for in %d log lines; log:\n%s", sent, accounted, lines, testproc.Tail(sup.LogText(), 3000))
	}
	limit := int((elapsed+1100*time.Millisecond)/time.Second) + 2
	t.Logf("%d unsigned requests in %s: %d log lines (at most %d allowed)", sent, elapsed.Round(time.Millisecond), lines, limit)
	if lines > limit {
		t.Fatalf("%d log lines for %d refused requests in %s, want at most %d:\n%s", lines, sent, elapsed, limit, testproc.Tail(sup.LogText(), 3000))
	}
	if sent < 100 {
		t.Fatalf("only %d requests sent: no flood to measure", sent)
	}
	if sup.Exited() {
		t.Fatalf("the supervisor exited under the flood; log:\n%s", sup.LogText())
	}
}

// gatewayBinary is $OTELCOL_LOOP_GATEWAY_BIN, or the gateway compiled once
// from cmd/otelcol-loop-gateway.
func gatewayBinary(t *testing.T) string {
	t.Helper()
	binaries(t) // the build directory
	gatewayOnce.Do(func() {
		if p := testproc.BinFromEnv(t.Logf, "OTELCOL_LOOP_GATEWAY_BIN"); p != "" {
			gatewayBin = p
			return
		}
		root, err := testproc.RepoRoot()
		if err != nil {
			gatewayErr = err
			return
		}
		gatewayBin = filepath.Join(filepath.Dir(bins.supervisor), "otelcol-loop-gateway")
		gatewayErr = testproc.GoBuild(t.Logf, filepath.Join(root, "cmd", "otelcol-loop-gateway"), gatewayBin, ".")
	})
	if gatewayErr != nil {
		t.Fatal(gatewayErr)
	}
	return gatewayBin
}

var (
	gatewayOnce sync.Once
	gatewayBin  string
	gatewayErr  error
)

// TestGatewayRefusesDeepJSON: the tier-1 gateway had the 2 MiB size cap
// but no depth guard, and decoded six concurrent 1.96 MB 70,000-deep
// OTLP/JSON bodies (26 MiB of memory each). config/gateway.yaml now puts
// decode_guard in front of its OTLP/HTTP receiver: each is answered 400
// and counted, the gateway's peak RSS barely moves, and a shallow span is
// still accepted.
func TestGatewayRefusesDeepJSON(t *testing.T) {
	bin := gatewayBinary(t)
	cfg, err := filepath.Abs(filepath.Join("..", "..", "config", "gateway.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	g := &collector{otlp: testproc.FreePort(t), otlpGRPC: testproc.FreePort(t), metrics: testproc.FreePort(t)}
	health := testproc.FreePort(t)
	env := []string{
		"LOOP_OTLP_TOKEN=" + token,
		"LOOP_TIER2_TOKEN=reliability-tier2-token-0123456789",
		"LOOP_GATEWAY_HTTP_PORT=" + strconv.Itoa(g.otlp),
		"LOOP_GATEWAY_GRPC_PORT=" + strconv.Itoa(g.otlpGRPC),
		"LOOP_GATEWAY_METRICS_PORT=" + strconv.Itoa(g.metrics),
		"LOOP_GATEWAY_HEALTH_PORT=" + strconv.Itoa(health),
		// Tier 2 is nowhere: refused data never gets that far, and the
		// shallow span waits in the exporter's queue.
		"LOOP_TIER2_0=127.0.0.1:" + strconv.Itoa(testproc.FreePort(t)),
		"LOOP_TIER2_1=127.0.0.1:" + strconv.Itoa(testproc.FreePort(t)),
		"LOOP_TIER2_2=127.0.0.1:" + strconv.Itoa(testproc.FreePort(t)),
	}
	g.Proc = testproc.Start(t, t.TempDir(), "gateway", env, "", bin, "--config", cfg)
	g.LogTail = 4000
	g.WaitHealthy(t, health, 60*time.Second)

	idle := vmHWM(t, g.Cmd.Process.Pid)
	const depth = 70_000
	bodies := make([][]byte, 6)
	for i := range bodies {
		bodies[i] = spanWith(byte(i+1), deepArray(depth))
	}
	if n := len(bodies[0]); n > maxBody {
		t.Fatalf("a %d-byte body is over the gateway's size cap: it would test the cap, not the depth guard", n)
	}
	got := make([]int, len(bodies))
	var wg sync.WaitGroup
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = g.post(t, bodies[i], token)
		}()
	}
	wg.Wait()
	peak := vmHWM(t, g.Cmd.Process.Pid)
	refused := g.metric(t, "otelcol_decodeguard_requests_refused", `reason="depth"`)
	t.Logf("six %d-deep bodies of %d bytes: answers %v, peak RSS %d MiB (idle %d MiB), refused for depth: %v",
		depth, len(bodies[0]), got, peak>>20, idle>>20, refused)
	for i, code := range got {
		if code != http.StatusBadRequest {
			t.Errorf("body %d answered %d, want 400", i, code)
		}
	}
	if refused != float64(len(bodies)) {
		t.Errorf("otelcol_decodeguard_requests_refused{reason=\"depth\"} = %v, want %d", refused, len(bodies))
	}
	// Decoded, the six cost 26 MiB each; refused, they are read only up to
	// level 160.
	if grew := (peak - idle) >> 20; grew > 64 {
		t.Errorf("peak RSS grew by %d MiB, want at most 64", grew)
	}
	g.send(t, spans(call{trace: traceID(9, 1), seq: 1}))
	if g.Exited() {
		t.Fatalf("the gateway died; log:\n%s", testproc.Tail(g.LogText(), 3000))
	}
}
