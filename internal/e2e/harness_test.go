//go:build unix

package e2e

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
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

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
)

// --- binaries ----------------------------------------------------------------

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
	bins      struct{ collector, supervisor, agent string }
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

// binaries builds (once per test process) the supervisor and the agent into
// a temporary directory, and the collector too unless $OTELCOL_LOOP_BIN names
// one (`make test` builds bin/otelcol-loop once and passes it in, so the
// distribution is not compiled twice).
func binaries(t testing.TB) (collector, supervisor, agent string) {
	t.Helper()
	buildOnce.Do(func() {
		root, err := repoRoot()
		if err != nil {
			buildErr = err
			return
		}
		if buildDir, err = os.MkdirTemp("", "otelcol-loop-e2e-bin-"); err != nil {
			buildErr = err
			return
		}
		build := func(dir, out, pkg string) error {
			cmd := exec.Command("go", "build", "-buildvcs=false", "-trimpath", "-o", out, pkg)
			cmd.Dir = dir
			if b, err := cmd.CombinedOutput(); err != nil {
				return fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
			}
			return nil
		}
		bins.supervisor = filepath.Join(buildDir, "loopsupervisor")
		bins.agent = filepath.Join(buildDir, "loopagent")
		if buildErr = build(root, bins.supervisor, "./cmd/loopsupervisor"); buildErr != nil {
			return
		}
		if buildErr = build(root, bins.agent, "./cmd/loopagent"); buildErr != nil {
			return
		}
		if p := os.Getenv("OTELCOL_LOOP_BIN"); p != "" {
			bins.collector = p
			return
		}
		bins.collector = filepath.Join(buildDir, "otelcol-loop")
		// The generated distribution is its own module (cmd/otelcol-loop).
		buildErr = build(filepath.Join(root, "cmd", "otelcol-loop"), bins.collector, ".")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return bins.collector, bins.supervisor, bins.agent
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
	log  string // stdout+stderr, or stderr when stdout is separate
	done chan struct{}
	err  error
}

// start runs argv with extra environment, its stderr (and stdout unless
// stdoutPath is set) to files in dir. Files, not pipes: the supervisor's
// agent inherits them, and Wait must not hang on a pipe a child holds.
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

// stop sends SIGTERM, waits up to grace, then SIGKILL. Idempotent.
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
		t.Fatalf("%s did not exit within %s; log:\n%s", p.name, d, p.logText())
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

// --- the collector -----------------------------------------------------------

type collector struct {
	*proc
	otlpHTTP, otlpGRPC, metrics, health int
	traces                              string
}

// startCollector runs the distribution with config/demo.yaml, kill webhooks
// going to 127.0.0.1:killPort signed with secret, and waits until it is
// healthy.
func startCollector(t testing.TB, dir string, killPort int, secret string) *collector {
	t.Helper()
	bin, _, _ := binaries(t)
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := &collector{
		otlpHTTP: freePort(t), otlpGRPC: freePort(t), metrics: freePort(t), health: freePort(t),
		traces: filepath.Join(dir, "traces.jsonl"),
	}
	env := []string{
		"LOOPDETECT_WEBHOOK_SECRET=" + secret,
		"LOOPSUPERVISOR_PORT=" + strconv.Itoa(killPort),
		"LOOP_OTLP_HTTP_PORT=" + strconv.Itoa(c.otlpHTTP),
		"LOOP_OTLP_GRPC_PORT=" + strconv.Itoa(c.otlpGRPC),
		"LOOP_METRICS_PORT=" + strconv.Itoa(c.metrics),
		"LOOP_HEALTH_PORT=" + strconv.Itoa(c.health),
		"LOOP_TRACES_FILE=" + c.traces,
	}
	c.proc = start(t, dir, "collector", env, "", bin, "--config", filepath.Join(root, "config", "demo.yaml"))
	healthURL := fmt.Sprintf("http://127.0.0.1:%d/", c.health)
	ok := eventually(20*time.Second, func() bool {
		if c.exited() {
			return true
		}
		resp, err := http.Get(healthURL)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	if !ok || c.exited() {
		t.Fatalf("collector not healthy (exited: %v); log:\n%s", c.exited(), c.logText())
	}
	return c
}

// metric returns the sum of the values of the collector's Prometheus series
// named name whose labels contain every one of labels (`k="v"`).
func (c *collector) metric(name string, labels ...string) (float64, error) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", c.metrics))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		series, val, ok := strings.Cut(line, " ")
		if i := strings.LastIndexByte(line, '}'); i > 0 {
			series, val, ok = line[:i+1], strings.TrimSpace(line[i+1:]), true
		}
		if !ok {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(series, l)
		}
		if !match {
			continue
		}
		f, err := strconv.ParseFloat(strings.Fields(val)[0], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", line, err)
		}
		sum += f
	}
	return sum, sc.Err()
}

// --- exported traces ---------------------------------------------------------

type transition struct {
	loopevent.Event
	SpanName string // the span the event sits on
}

type exported struct {
	transitions []transition
	spanNames   map[string]int // span name -> count
}

// readExported parses the file exporter's OTLP JSON lines written so far (a
// trailing line still being written is skipped).
func readExported(path string) (exported, error) {
	x := exported{spanNames: map[string]int{}}
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return x, nil
	}
	if err != nil {
		return x, err
	}
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		b = b[:i+1]
	} else {
		return x, nil
	}
	var u ptrace.JSONUnmarshaler
	for _, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		td, err := u.UnmarshalTraces(line)
		if err != nil {
			return x, fmt.Errorf("%s: %w", path, err)
		}
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			sss := td.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					sp := spans.At(k)
					x.spanNames[sp.Name()]++
					for e := 0; e < sp.Events().Len(); e++ {
						ev := sp.Events().At(e)
						if ev.Name() != loopevent.EventName {
							continue
						}
						le, err := loopevent.FromAttributes(ev.Attributes())
						if err != nil {
							return x, fmt.Errorf("transition event on span %s: %w", sp.SpanID(), err)
						}
						x.transitions = append(x.transitions, transition{Event: le, SpanName: sp.Name()})
					}
				}
			}
		}
	}
	return x, nil
}

func (x exported) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "spans: %v\n", x.spanNames)
	for _, tr := range x.transitions {
		fmt.Fprintf(&sb, "  #%d %s -> %s reason=%s call=%d kill=%v on %q\n", tr.Sequence, tr.From, tr.To, tr.Reason, tr.CallIndex, tr.Kill, tr.SpanName)
	}
	return sb.String()
}

// alive reports whether a process with this pid exists (zombies count as
// gone only once reaped; the supervisor reaps its agent).
func alive(pid int) bool {
	return syscall.Kill(pid, 0) == nil
}

// agentPID reads the agent's pid from the supervisor's log line
// "agent pid N (process group N), ...".
func agentPID(log string) int {
	_, rest, ok := strings.Cut(log, "loopsupervisor: agent pid ")
	if !ok {
		return 0
	}
	f := strings.Fields(rest)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.Atoi(f[0])
	return n
}

func readFile(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}
