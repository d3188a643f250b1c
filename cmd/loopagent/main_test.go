package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// sink collects the OTLP spans a test receiver got.
type sink struct {
	mu    sync.Mutex
	rs    []*tracepb.ResourceSpans
	spans []*tracepb.Span
	reqs  int
}

func (s *sink) add(req *collectortrace.ExportTraceServiceRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs++
	for _, rs := range req.ResourceSpans {
		s.rs = append(s.rs, rs)
		for _, ss := range rs.ScopeSpans {
			s.spans = append(s.spans, ss.Spans...)
		}
	}
}

func (s *sink) snapshot() ([]*tracepb.ResourceSpans, []*tracepb.Span) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*tracepb.ResourceSpans(nil), s.rs...), append([]*tracepb.Span(nil), s.spans...)
}

func (s *sink) countOp(op string) int {
	_, spans := s.snapshot()
	n := 0
	for _, sp := range spans {
		if str(sp.Attributes, "gen_ai.operation.name") == op {
			n++
		}
	}
	return n
}

func str(kvs []*commonpb.KeyValue, key string) string {
	for _, kv := range kvs {
		if kv.Key == key {
			switch v := kv.Value.Value.(type) {
			case *commonpb.AnyValue_StringValue:
				return v.StringValue
			case *commonpb.AnyValue_IntValue:
				return strconv.FormatInt(v.IntValue, 10)
			}
		}
	}
	return ""
}

// httpReceiver is a loopback OTLP/HTTP protobuf traces endpoint.
func httpReceiver(t *testing.T) (*sink, string) {
	s := &sink{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			http.Error(w, "unexpected "+r.URL.Path, http.StatusNotFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req collectortrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		s.add(&req)
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return s, srv.Listener.Addr().String()
}

type grpcTraces struct {
	collectortrace.UnimplementedTraceServiceServer
	s *sink
}

func (g grpcTraces) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	g.s.add(req)
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

func grpcReceiver(t *testing.T) (*sink, string) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &sink{}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, grpcTraces{s: s})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return s, lis.Addr().String()
}

func runAgent(t *testing.T, args ...string) (map[string]any, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	var res map[string]any
	if out.Len() > 0 {
		if err := json.Unmarshal(out.Bytes(), &res); err != nil {
			t.Fatalf("stdout is not one JSON line: %q", out.String())
		}
	}
	return res, errb.String(), code
}

func checkResource(t *testing.T, s *sink, service, instance string) {
	t.Helper()
	rss, _ := s.snapshot()
	if len(rss) == 0 {
		t.Fatal("no spans received")
	}
	for _, rs := range rss {
		a := rs.Resource.Attributes
		if str(a, "service.name") != service || str(a, "service.instance.id") != instance {
			t.Errorf("resource service.name=%q service.instance.id=%q", str(a, "service.name"), str(a, "service.instance.id"))
		}
		if str(a, "process.pid") == "" || str(a, "host.name") == "" {
			t.Errorf("resource lacks process.pid or host.name: %v", a)
		}
	}
}

func TestScenarioOverHTTP(t *testing.T) {
	s, addr := httpReceiver(t)
	t.Setenv("OTEL_SERVICE_NAME", "agent-under-test")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "service.instance.id=inst-42,deployment.environment.name=test")
	res, stderr, code := runAgent(t, "--endpoint", "http://"+addr, "--scenario", "pagination", "--speed", "1000",
		"--session-id", "conv-7", "-q")
	if code != 0 || res["status"] != "ok" || res["stop"] != "finished" || res["calls"] != float64(5) {
		t.Fatalf("code %d result %v stderr %s", code, res, stderr)
	}
	if res["export_errors"] != float64(0) {
		t.Errorf("export errors: %v (%s)", res["export_errors"], stderr)
	}
	checkResource(t, s, "agent-under-test", "inst-42")
	if n := s.countOp("execute_tool"); n != 5 {
		t.Errorf("%d execute_tool spans received", n)
	}
	if n := s.countOp("invoke_agent"); n != 1 {
		t.Errorf("%d invoke_agent spans received", n)
	}
	_, spans := s.snapshot()
	for _, sp := range spans {
		if str(sp.Attributes, "gen_ai.conversation.id") != "conv-7" {
			t.Errorf("span %s lacks the session id", sp.Name)
		}
	}
	// One export per tool call at least (flush after each call).
	if s.reqs < 5 {
		t.Errorf("only %d export requests for 5 calls", s.reqs)
	}
}

func TestScenarioOverGRPC(t *testing.T) {
	s, addr := grpcReceiver(t)
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "service.instance.id=inst-g")
	res, stderr, code := runAgent(t, "--protocol", "grpc", "--endpoint", addr, "--scenario", "seed000",
		"--speed", "1000", "--max-calls", "21", "-q")
	if code != 0 || res["status"] != "ok" || res["stop"] != "max_calls" {
		t.Fatalf("code %d result %v stderr %s", code, res, stderr)
	}
	checkResource(t, s, "loopagent", "inst-g")
	if n := s.countOp("execute_tool"); n != 21 {
		t.Errorf("%d execute_tool spans received", n)
	}
}

func TestLoadMode(t *testing.T) {
	s, addr := httpReceiver(t)
	res, stderr, code := runAgent(t, "--endpoint", addr, "--load", "--sessions", "4", "--rate", "2000", "--duration", "500ms")
	if code != 0 || res["status"] != "ok" || res["mode"] != "load" {
		t.Fatalf("code %d result %v stderr %s", code, res, stderr)
	}
	_, spans := s.snapshot()
	if float64(len(spans)) != res["spans"] {
		t.Errorf("received %d spans, agent reports %v", len(spans), res["spans"])
	}
	// How close the rate comes to the target depends on the machine; that it
	// never exceeds it does not.
	if r := res["achieved_rate"].(float64); r <= 0 || r > 2000*1.1 {
		t.Errorf("achieved rate %v for a 2000/s target", r)
	}
}

func TestBadFlags(t *testing.T) {
	if _, _, code := runAgent(t, "--scenario", "nope"); code != 2 {
		t.Errorf("unknown scenario exit %d", code)
	}
	if _, _, code := runAgent(t, "--protocol", "smoke", "--max-calls", "1"); code != 1 {
		t.Errorf("unknown protocol exit %d", code)
	}
	if _, _, code := runAgent(t, "--speed", "0"); code != 2 {
		t.Errorf("zero speed exit %d", code)
	}
}

// TestSIGTERM runs the real binary: spans arrive while it loops (flushed
// after every call); SIGTERM ends and flushes the invoke_agent span, exits
// 143 and prints no result line.
func TestSIGTERM(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "loopagent")
	build := exec.Command("go", "build", "-buildvcs=false", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	s, addr := httpReceiver(t)
	cmd := exec.Command(bin, "--endpoint", addr, "--scenario", "seed000", "--speed", "40", "-q")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-done //nolint:errcheck // killed on purpose: its exit status says nothing
		}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for s.countOp("execute_tool") < 18 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d tool spans arrived; stderr %s", s.countOp("execute_tool"), stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s.countOp("invoke_agent") != 0 {
		t.Fatal("invoke_agent ended before the kill")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done: //nolint:errcheck // exiting at all is what is tested, not how
	case <-time.After(15 * time.Second):
		t.Fatal("agent did not exit after SIGTERM")
	}
	if code := cmd.ProcessState.ExitCode(); code != 143 {
		t.Errorf("exit code %d, want 143; stderr %s", code, stderr.String())
	}
	if stdout.Len() != 0 {
		t.Errorf("result line printed after a kill: %q", stdout.String())
	}
	_, spans := s.snapshot()
	found := false
	for _, sp := range spans {
		if str(sp.Attributes, "gen_ai.operation.name") == "invoke_agent" {
			found = true
			if sp.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || str(sp.Attributes, "error.type") != "terminated" {
				t.Errorf("invoke_agent status %v error.type %q", sp.Status, str(sp.Attributes, "error.type"))
			}
		}
	}
	if !found {
		t.Error("invoke_agent span not flushed on SIGTERM")
	}
}

// TestEndpointFromEnvironment: without --endpoint the agent sends where
// OTEL_EXPORTER_OTLP_ENDPOINT points, as the README tells users to point
// their own agents (a base URL: the receiver is asked for /v1/traces).
func TestEndpointFromEnvironment(t *testing.T) {
	s, addr := httpReceiver(t)
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
	res, stderr, code := runAgent(t, "--scenario", "pagination", "--speed", "1000", "-q")
	if code != 0 || res["status"] != "ok" || res["export_errors"] != float64(0) {
		t.Fatalf("code %d result %v stderr %s", code, res, stderr)
	}
	if n := s.countOp("execute_tool"); n != 5 {
		t.Errorf("%d execute_tool spans reached the receiver named by OTEL_EXPORTER_OTLP_ENDPOINT, want 5", n)
	}
}
