//go:build linux

package reliability

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

var (
	builds = testproc.Builds{Pattern: "otelcol-loop-reliability-bin-"}
	bins   struct{ collector, supervisor string }
)

// binaries builds the supervisor (and the collector unless
// $OTELCOL_LOOP_BIN names one) once per test process.
func binaries(t testing.TB) (collector, supervisor string) {
	t.Helper()
	builds.Once(t, func(root, dir string) error {
		bins.supervisor = filepath.Join(dir, "loopsupervisor")
		if err := testproc.GoBuild(nil, root, bins.supervisor, "./cmd/loopsupervisor"); err != nil {
			return err
		}
		if p := testproc.BinFromEnv(t.Logf, "OTELCOL_LOOP_BIN"); p != "" {
			bins.collector = p
			return nil
		}
		bins.collector = filepath.Join(dir, "otelcol-loop")
		return testproc.GoBuild(t.Logf, filepath.Join(root, "cmd", "otelcol-loop"), bins.collector, ".")
	})
	return bins.collector, bins.supervisor
}

func TestMain(m *testing.M) {
	code := m.Run()
	builds.Remove()
	os.Exit(code)
}

const token = "reliability-otlp-token-0123456789"

type collector struct {
	*testproc.Proc
	otlp, otlpGRPC, metrics int
}

// startCollector runs testdata/collector.yaml with kills going to
// 127.0.0.1:killPort signed with secret.
func startCollector(t testing.TB, dir string, killPort int, secret string, maxSessions int) *collector {
	t.Helper()
	bin, _ := binaries(t)
	c := &collector{otlp: testproc.FreePort(t), otlpGRPC: testproc.FreePort(t), metrics: testproc.FreePort(t)}
	health := testproc.FreePort(t)
	env := []string{
		"LOOPDETECT_WEBHOOK_SECRET=" + secret,
		"LOOP_OTLP_TOKEN=" + token,
		"REL_KILL_PORT=" + strconv.Itoa(killPort),
		"REL_OTLP_PORT=" + strconv.Itoa(c.otlp),
		"REL_OTLP_GRPC_PORT=" + strconv.Itoa(c.otlpGRPC),
		"REL_METRICS_PORT=" + strconv.Itoa(c.metrics),
		"REL_HEALTH_PORT=" + strconv.Itoa(health),
		"REL_MAX_SESSIONS=" + strconv.Itoa(maxSessions),
	}
	abs, err := filepath.Abs(filepath.Join("testdata", "collector.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c.Proc = testproc.Start(t, dir, "collector", env, "", bin, "--config", abs)
	c.LogTail = 4000
	c.WaitHealthy(t, health, 30*time.Second)
	return c
}

// post sends an OTLP/JSON body with the bearer token tok ("" for none) and
// returns the status code.
func (c *collector) post(t testing.TB, body []byte, tok string) int {
	t.Helper()
	return c.postAs(t, "application/json", body, tok)
}

// postAs is post with a given Content-Type.
func (c *collector) postAs(t testing.TB, contentType string, body []byte, tok string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/v1/traces", c.otlp), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST /v1/traces: %v", err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// exportGRPC sends a protobuf-encoded trace export request over OTLP/gRPC
// with the token tok and returns the status code.
func (c *collector) exportGRPC(t testing.TB, body []byte, tok string) codes.Code {
	t.Helper()
	req := ptraceotlp.NewExportRequest()
	if err := req.UnmarshalProto(body); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", c.otlpGRPC), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
	_, err = ptraceotlp.NewGRPCClient(conn).Export(ctx, req)
	return status.Code(err)
}

// send posts td with the token and fails t unless it is accepted.
func (c *collector) send(t testing.TB, td ptrace.Traces) {
	t.Helper()
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	if code := c.post(t, b, token); code != http.StatusOK {
		t.Fatalf("spans refused: HTTP %d; collector log:\n%s", code, testproc.Tail(c.LogText(), 3000))
	}
}

// sendRetrying is send for floods: a batch the memory limiter refused
// (HTTP 429/503, the receiver's back-pressure) is sent again.
func (c *collector) sendRetrying(t testing.TB, td ptrace.Traces) {
	t.Helper()
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(td)
	if err != nil {
		t.Fatal(err)
	}
	for try := 0; ; try++ {
		code := c.post(t, b, token)
		if code == http.StatusOK {
			return
		}
		if (code != http.StatusTooManyRequests && code != http.StatusServiceUnavailable) || try == 50 {
			t.Fatalf("flood batch refused: HTTP %d; collector log:\n%s", code, testproc.Tail(c.LogText(), 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// metric sums the collector's Prometheus series name whose labels contain
// every one of labels.
func (c *collector) metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", c.metrics))
	if err != nil {
		t.Fatal(err)
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
		i := strings.LastIndexByte(line, ' ')
		series := line[:i]
		match := true
		for _, l := range labels {
			match = match && strings.Contains(series, l)
		}
		if f, err := strconv.ParseFloat(line[i+1:], 64); err == nil && match {
			sum += f
		}
	}
	return sum
}

// call describes one tool span.
type call struct {
	trace    pcommon.TraceID
	seq      uint64
	resource map[string]any
	tool     string
	args     string
}

// spans builds one batch of execute_tool spans, one resource per call.
func spans(calls ...call) ptrace.Traces {
	td := ptrace.NewTraces()
	now := time.Now()
	for i, c := range calls {
		rs := td.ResourceSpans().AppendEmpty()
		for k, v := range c.resource {
			_ = rs.Resource().Attributes().PutEmpty(k).FromRaw(v)
		}
		s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
		s.SetTraceID(c.trace)
		var sid pcommon.SpanID
		for b := 0; b < 8; b++ {
			sid[b] = byte(c.seq >> (8 * b))
		}
		sid[7] |= 0x80
		s.SetSpanID(sid)
		tool := c.tool
		if tool == "" {
			tool = "bash"
		}
		args := c.args
		if args == "" {
			args = `{"command":"npm test"}`
		}
		start := now.Add(time.Duration(i) * time.Millisecond)
		s.SetName("execute_tool " + tool)
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Millisecond)))
		a := s.Attributes()
		a.PutStr("gen_ai.operation.name", "execute_tool")
		a.PutStr("gen_ai.tool.name", tool)
		a.PutStr("gen_ai.tool.call.arguments", args)
		a.PutStr("gen_ai.tool.call.result", "1 failing test")
	}
	return td
}

type supervisor struct {
	*testproc.Proc
	port     int
	instance string
	agentPID int
}

var agentPIDRe = regexp.MustCompile(`agent pid (\d+)`)

// startSupervisor runs loopsupervisor around script (sh -c) with a 0600
// secrets file, and waits for the agent's pid in its log.
func startSupervisor(t testing.TB, dir, secret, instance, script string, env []string, extra ...string) *supervisor {
	t.Helper()
	return startSupervisorOn(t, dir, testproc.FreePort(t), secret, instance, script, env, extra...)
}

// startSupervisorOn is startSupervisor listening on a given port.
func startSupervisorOn(t testing.TB, dir string, port int, secret, instance, script string, env []string, extra ...string) *supervisor {
	t.Helper()
	_, bin := binaries(t)
	secrets := filepath.Join(dir, "supervisor.secrets")
	if err := os.WriteFile(secrets, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	idFile := filepath.Join(dir, "supervisor.instance-id")
	if err := os.WriteFile(idFile, []byte(instance+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &supervisor{port: port, instance: instance}
	args := append([]string{bin, "--secrets-file", secrets, "--listen", "127.0.0.1:" + strconv.Itoa(s.port),
		"--instance-id-file", idFile, "--grace", "2s", "--backstop", "5m"}, extra...)
	args = append(args, "--", "/bin/sh", "-c", script)
	s.Proc = testproc.Start(t, dir, "supervisor", env, "", args...)
	if !testproc.Eventually(10*time.Second, func() bool {
		m := agentPIDRe.FindStringSubmatch(s.LogText())
		if m == nil {
			return s.Exited()
		}
		s.agentPID, _ = strconv.Atoi(m[1])
		return true
	}) || s.agentPID == 0 {
		t.Fatalf("supervisor did not start its agent; log:\n%s", s.LogText())
	}
	return s
}

// vmHWM is a process's peak resident set size in bytes (Linux).
func vmHWM(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			f := strings.Fields(l)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}
