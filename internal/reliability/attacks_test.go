//go:build linux

package reliability

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc/codes"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

const sleeper = `exec sleep 300`

func instanceID(t testing.TB) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return "inst-" + hex.EncodeToString(b[:])
}

func traceID(b byte, n uint64) pcommon.TraceID {
	var id pcommon.TraceID
	id[0] = b
	for i := 0; i < 8; i++ {
		id[8+i] = byte(n >> (8 * i))
	}
	return id
}

// waitKillsDelivered waits until the collector has delivered n signed kill
// webhooks (whatever the supervisor answered).
func waitKillsDelivered(t *testing.T, c *collector, n float64) {
	t.Helper()
	if !testproc.Eventually(20*time.Second, func() bool {
		return c.metric(t, "otelcol_alertsink_webhook_requests", `destination="kill"`, `result="delivered"`) >= n
	}) {
		t.Fatalf("the collector did not deliver %v kill(s); log:\n%s", n, testproc.Tail(c.LogText(), 3000))
	}
}

func TestUnauthenticatedSpansAreRefused(t *testing.T) {
	dir := t.TempDir()
	c := startCollector(t, dir, testproc.FreePort(t), testproc.NewSecret(t), 1000)
	b, err := (&ptrace.JSONMarshaler{}).MarshalTraces(spans(call{trace: traceID(1, 1), seq: 1}))
	if err != nil {
		t.Fatal(err)
	}
	for name, tok := range map[string]string{"no token": "", "wrong token": "guessed"} {
		if code := c.post(t, b, tok); code != http.StatusUnauthorized {
			t.Errorf("%s: HTTP %d, want 401", name, code)
		}
	}
	if code := c.post(t, b, token); code != http.StatusOK {
		t.Errorf("the right token: HTTP %d, want 200", code)
	}
}

// TestPIDOnlyKillIsRefused: spans naming only the victim's process.pid make
// the collector sign a genuine kill, which the supervisor refuses; the same
// loop naming the supervisor's instance id stops the agent.
func TestPIDOnlyKillIsRefused(t *testing.T) {
	dir := t.TempDir()
	secret := testproc.NewSecret(t)
	inst := instanceID(t)
	sup := startSupervisor(t, dir, secret, inst, sleeper, nil)
	c := startCollector(t, dir, sup.port, secret, 1000)

	var calls []call
	for i := 0; i < 6; i++ {
		calls = append(calls, call{trace: traceID(2, 1), seq: uint64(i + 1), resource: map[string]any{"service.name": "agent", "process.pid": int64(sup.agentPID)}})
	}
	c.send(t, spans(calls...))
	waitKillsDelivered(t, c, 1)
	if sup.Exited() || syscall.Kill(sup.agentPID, 0) != nil {
		t.Fatalf("a PID-only kill stopped the agent; supervisor log:\n%s", sup.LogText())
	}

	calls = calls[:0]
	for i := 0; i < 6; i++ {
		calls = append(calls, call{trace: traceID(2, 2), seq: uint64(100 + i), resource: map[string]any{"service.name": "agent", "service.instance.id": inst, "process.pid": int64(sup.agentPID)}})
	}
	c.send(t, spans(calls...))
	if code := sup.Wait(t, 20*time.Second); code != 86 {
		t.Fatalf("supervisor exit %d, want 86 (stopped on a verified kill)", code)
	}
}

// TestZeroTraceIDDoesNotMergeSenders: five senders' identical calls without
// trace context, the last from the supervised agent, used to read as one
// session looping and kill the agent that made a single call.
func TestZeroTraceIDDoesNotMergeSenders(t *testing.T) {
	dir := t.TempDir()
	secret := testproc.NewSecret(t)
	inst := instanceID(t)
	sup := startSupervisor(t, dir, secret, inst, sleeper, nil)
	c := startCollector(t, dir, sup.port, secret, 1000)
	for i := 0; i < 6; i++ {
		res := map[string]any{"service.name": "agent", "service.instance.id": fmt.Sprintf("other-agent-%d", i)}
		if i == 5 {
			res["service.instance.id"] = inst
		}
		c.send(t, spans(call{seq: uint64(i + 1), resource: res}))
	}
	if !testproc.Eventually(10*time.Second, func() bool {
		return c.metric(t, "otelcol_loopdetect_degraded", `kind="no_session"`) >= 6
	}) {
		t.Fatalf("zero-trace spans not counted as degraded{kind=no_session}: %v", c.metric(t, "otelcol_loopdetect_degraded", `kind="no_session"`))
	}
	if k := c.metric(t, "otelcol_loopdetect_kills"); k != 0 {
		t.Fatalf("%v kill(s) decided from merged senders", k)
	}
	if sup.Exited() {
		t.Fatalf("the agent was stopped; supervisor log:\n%s", sup.LogText())
	}
}

// spanWith is OTLP/JSON with one tool span whose arguments are value
// (JSON text of an AnyValue), written by write.
func spanWith(trace byte, write func(b *bytes.Buffer)) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"agent"}}]},"scopeSpans":[{"spans":[{"traceId":"%02x0000000000000000000000000000aa","spanId":"00000000000000a1","name":"execute_tool bash","startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":[{"key":"gen_ai.operation.name","value":{"stringValue":"execute_tool"}},{"key":"gen_ai.tool.name","value":{"stringValue":"bash"}},{"key":"gen_ai.tool.call.arguments","value":`, trace)
	write(&b)
	b.WriteString(`}]}]}]}]}`)
	return b.Bytes()
}

// deepKVList is a kvlistValue nested depth levels deep (9.8 MB at 200,000).
func deepKVList(depth int) func(*bytes.Buffer) {
	return func(b *bytes.Buffer) {
		b.WriteString(strings.Repeat(`{"kvlistValue":{"values":[{"key":"a","value":`, depth))
		b.WriteString(`{"stringValue":"x"}`)
		b.WriteString(strings.Repeat(`}]}}`, depth))
	}
}

// deepArray is an arrayValue nested depth levels deep (19.8 MiB at
// 740,000).
func deepArray(depth int) func(*bytes.Buffer) {
	return func(b *bytes.Buffer) {
		b.WriteString(strings.Repeat(`{"arrayValue":{"values":[`, depth))
		b.WriteString(`{"stringValue":"x"}`)
		b.WriteString(strings.Repeat(`]}}`, depth))
	}
}

// wideArray is the costliest shape per byte that the depth limit lets
// through: one arrayValue of empty values ({} is 3 bytes of JSON and a
// whole pdata value), filling size bytes of request.
func wideArray(size int) func(*bytes.Buffer) {
	return func(b *bytes.Buffer) {
		b.WriteString(`{"arrayValue":{"values":[{}`)
		b.WriteString(strings.Repeat(`,{}`, (size-b.Len()-16)/3))
		b.WriteString(`]}}`)
	}
}

// wideArrayProto is wideArray in protobuf, where an empty value is 2 bytes.
func wideArrayProto(trace byte, size int) []byte {
	td := ptrace.NewTraces()
	s := td.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetTraceID(traceID(trace, 1))
	s.SetName("execute_tool bash")
	s.Attributes().PutStr("gen_ai.operation.name", "execute_tool")
	s.Attributes().PutStr("gen_ai.tool.name", "bash")
	vals := s.Attributes().PutEmptySlice("gen_ai.tool.call.arguments")
	vals.EnsureCapacity((size - 200) / 2)
	for range (size - 200) / 2 {
		vals.AppendEmpty()
	}
	b, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		panic(err)
	}
	return b
}

// memoryCeiling is the peak RSS allowed for six concurrent worst-case
// requests of each shape (docs/security.md states what is measured).
const memoryCeiling = 600 << 20

// maxBody is the receivers' max_request_body_size (and, in MiB,
// max_recv_msg_size_mib) in the shipped configs and in
// testdata/collector.yaml; config/ checks the shipped configs against it.
const maxBody = 2 << 20

// TestWorstCaseRequestsStayUnderMemoryCeiling sends six requests of each
// shape at once to a fresh collector and reads its peak RSS (VmHWM): deep
// JSON is refused by decode_guard as soon as it passes max_depth (the rest
// is never read), a body over max_request_body_size or a gRPC message over
// max_recv_msg_size_mib is cut off there, and the costliest bodies that are
// accepted — one flat array of empty values filling the size limit, 3 bytes
// a value in JSON, 2 in protobuf — are bounded by that limit.
func TestWorstCaseRequestsStayUnderMemoryCeiling(t *testing.T) {
	shapes := []struct {
		name     string
		encoding string // json, protobuf (both over HTTP) or grpc
		body     func(trace byte) []byte
		want     string
		reason   string // decode_guard's refusal reason, if it refuses
	}{
		{"200,000-deep kvlistValue (9.8 MB)", "json", func(tr byte) []byte { return spanWith(tr, deepKVList(200_000)) }, "400", "depth"},
		{"740,000-deep arrayValue (19.8 MiB)", "json", func(tr byte) []byte { return spanWith(tr, deepArray(740_000)) }, "400", "depth"},
		{"flat arrayValue of 19.8 MiB", "json", func(tr byte) []byte { return spanWith(tr, wideArray(20_800_000)) }, "400", "size"},
		{"flat arrayValue filling max_request_body_size", "json", func(tr byte) []byte { return spanWith(tr, wideArray(maxBody-64)) }, "200", ""},
		{"protobuf flat arrayValue filling max_request_body_size", "protobuf", func(tr byte) []byte { return wideArrayProto(tr, maxBody-64) }, "200", ""},
		{"gRPC flat arrayValue of twice max_recv_msg_size_mib", "grpc", func(tr byte) []byte { return wideArrayProto(tr, 2*maxBody) }, codes.ResourceExhausted.String(), ""},
		{"gRPC flat arrayValue filling max_recv_msg_size_mib", "grpc", func(tr byte) []byte { return wideArrayProto(tr, maxBody-64) }, codes.OK.String(), ""},
	}
	for _, shape := range shapes {
		t.Run(shape.name, func(t *testing.T) {
			c := startCollector(t, t.TempDir(), testproc.FreePort(t), testproc.NewSecret(t), 1000)
			idle := vmHWM(t, c.Cmd.Process.Pid)
			bodies := make([][]byte, 6)
			for i := range bodies {
				bodies[i] = shape.body(byte(i + 1))
			}
			var wg sync.WaitGroup
			got := make([]string, len(bodies))
			for i := range bodies {
				wg.Add(1)
				go func() {
					defer wg.Done()
					switch shape.encoding {
					case "grpc":
						got[i] = c.exportGRPC(t, bodies[i], token).String()
					case "protobuf":
						got[i] = strconv.Itoa(c.postAs(t, "application/x-protobuf", bodies[i], token))
					default:
						got[i] = strconv.Itoa(c.post(t, bodies[i], token))
					}
				}()
			}
			wg.Wait()
			peak := vmHWM(t, c.Cmd.Process.Pid)
			t.Logf("six of %d bytes: peak RSS %d MiB (idle %d MiB); answers %v; refused by decode_guard: %v",
				len(bodies[0]), peak>>20, idle>>20, got, c.metric(t, "otelcol_decodeguard_requests_refused"))
			for _, g := range got {
				if g != shape.want {
					t.Errorf("answered %s, want %s", g, shape.want)
				}
			}
			if shape.reason != "" {
				if n := c.metric(t, "otelcol_decodeguard_requests_refused", `reason="`+shape.reason+`"`); n != float64(len(bodies)) {
					t.Errorf("otelcol_decodeguard_requests_refused{reason=%q} = %v, want %d", shape.reason, n, len(bodies))
				}
			}
			if peak > memoryCeiling {
				t.Errorf("peak RSS %d MiB over the %d MiB ceiling", peak>>20, memoryCeiling>>20)
			}
			if c.Exited() {
				t.Fatalf("the collector died; log:\n%s", testproc.Tail(c.LogText(), 3000))
			}
		})
	}
}

// TestCraftedShardFloodDoesNotEvictTheVictim: sessions crafted to land in
// the victim's shard under the old unkeyed hash (xxhash of the session key
// mod 16), twice that shard's old share of max_sessions, arrive in the
// middle of the victim's loop; the loop still ends in a kill.
func TestCraftedShardFloodDoesNotEvictTheVictim(t *testing.T) {
	const maxSessions = 16_000
	dir := t.TempDir()
	secret := testproc.NewSecret(t)
	inst := instanceID(t)
	sup := startSupervisor(t, dir, secret, inst, sleeper, nil)
	c := startCollector(t, dir, sup.port, secret, maxSessions)
	victim := traceID(3, 1)
	res := map[string]any{"service.name": "agent", "service.instance.id": inst}
	var calls []call
	for i := 0; i < 3; i++ {
		calls = append(calls, call{trace: victim, seq: uint64(i + 1), resource: res})
	}
	c.send(t, spans(calls...))

	target := xxhash.Sum64String(hex.EncodeToString(victim[:])) % 16
	flood, batch := 2*maxSessions/16, []call(nil)
	for n, sent := uint64(0), 0; sent < flood; n++ {
		id := traceID(4, n)
		if xxhash.Sum64String(hex.EncodeToString(id[:]))%16 != target {
			continue
		}
		sent++
		batch = append(batch, call{trace: id, seq: n + 1, resource: map[string]any{"service.name": "attacker"}, tool: "read"})
		if len(batch) == 500 || sent == flood {
			c.send(t, spans(batch...))
			batch = batch[:0]
		}
	}
	calls = calls[:0]
	for i := 3; i < 6; i++ {
		calls = append(calls, call{trace: victim, seq: uint64(i + 1), resource: res})
	}
	c.send(t, spans(calls...))
	if code := sup.Wait(t, 20*time.Second); code != 86 {
		t.Fatalf("supervisor exit %d, want 86: the victim's loop was not killed (evictions %v)", code,
			c.metric(t, "otelcol_loopdetect_evictions"))
	}
	if ev := c.metric(t, "otelcol_loopdetect_evictions", `cause="capacity"`); ev != 0 {
		t.Fatalf("%v sessions evicted below max_sessions", ev)
	}
}

// TestSecretIsOutOfTheAgentsReach: the supervisor holds the signing secret
// in its environment (allowed explicitly here, so there is something to
// find) and in its secrets file; the agent looks where it used to find it,
// /proc/<supervisor pid>/environ, and — when it runs as another user — the
// secrets file, and finds nothing. Without the explicit flag a secret in
// the environment is refused.
func TestSecretIsOutOfTheAgentsReach(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	for _, d := range []string{filepath.Dir(out), out} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := testproc.NewSecret(t)
	look := `tr '\0' '\n' < /proc/$PPID/environ; tr '\0' '\n' < /proc/$PPID/cmdline;`
	extra := []string{"--allow-env-secrets"}
	if os.Geteuid() == 0 {
		// Root reads any process's /proc entries and any file: the agent
		// must be another user, as docs/security.md requires; then the
		// 0600 secrets file is out of its reach too.
		if _, err := user.Lookup("nobody"); err != nil {
			t.Fatalf("running as root needs a 'nobody' user to run the agent as: %v", err)
		}
		extra = append(extra, "--agent-user", "nobody")
		look += ` cat "` + filepath.Join(dir, "supervisor.secrets") + `";`
	}
	probe := `{ ` + look + ` } > "` + out + `/read" 2>&1; echo done > "` + out + `/done"; exec sleep 300`
	sup := startSupervisor(t, dir, secret, instanceID(t), probe, []string{"LOOPSUPERVISOR_SECRETS=" + secret}, extra...)
	if !testproc.Eventually(10*time.Second, func() bool { _, err := os.Stat(filepath.Join(out, "done")); return err == nil }) {
		t.Fatalf("the probe did not run; supervisor log:\n%s", sup.LogText())
	}
	read, err := os.ReadFile(filepath.Join(out, "read"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(read), strings.TrimPrefix(secret, "whsec_")) {
		t.Fatal("the agent read the supervisor's signing secret")
	}
	if !strings.Contains(string(read), "ermission denied") {
		t.Fatalf("the probe was not refused anything:\n%s", read)
	}

	// The secret in the supervisor's own environment: refused by default.
	_, bin := binaries(t)
	p := testproc.Start(t, t.TempDir(), "supervisor-env", []string{"LOOPSUPERVISOR_SECRETS=" + secret}, "",
		bin, "--listen", "127.0.0.1:"+strconv.Itoa(testproc.FreePort(t)), "--", "/bin/true")
	if code := p.Wait(t, 10*time.Second); code != 2 {
		t.Fatalf("a secret in the environment: exit %d, want 2; log:\n%s", code, p.LogText())
	}
}
