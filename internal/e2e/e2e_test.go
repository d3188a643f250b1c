//go:build unix

package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// Agent time compression: seed000 is ~85 s of agent time (16 calls 3 s
// apart, then the loop every 8 s), pagination ~12 s.
const (
	seed000Speed    = 20
	paginationSpeed = 20
)

// supervised is loopsupervisor running loopagent against a collector.
type supervised struct {
	*testproc.Proc
	port   int
	result string // --result-file
	stdout string // the supervisor's (and the agent's) stdout
}

func startSupervised(t *testing.T, dir string, c *collector, port int, secret, scenario string, speed float64) *supervised {
	t.Helper()
	_, supBin, agentBin := binaries(t)
	s := &supervised{port: port, result: filepath.Join(dir, "result.jsonl"), stdout: filepath.Join(dir, "supervisor.stdout")}
	// Registered before the supervisor's own clean-up, so it runs after it:
	// should the supervisor have been SIGKILLed, its agent's group is
	// stopped here (by the pid the supervisor logged).
	t.Cleanup(func() {
		if s.Proc == nil {
			return
		}
		if pid := agentPID(s.LogText()); pid > 1 && syscall.Kill(-pid, 0) == nil {
			t.Logf("agent group %d outlived its supervisor: SIGKILL", pid)
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
	s.Proc = testproc.Start(t, dir, "supervisor", []string{"LOOPSUPERVISOR_SECRETS=" + secret}, s.stdout,
		supBin, "--allow-env-secrets", "--listen", "127.0.0.1:"+strconv.Itoa(port), "--grace", "5s", "--backstop", "2m",
		"--result-file", s.result, "--",
		agentBin, "--endpoint", "127.0.0.1:"+strconv.Itoa(c.otlpHTTP), "--scenario", scenario,
		"--speed", strconv.FormatFloat(speed, 'g', -1, 64))
	return s
}

// resultLine is the supervisor's result line (the fields the test checks).
type resultLine struct {
	Status      string `json:"status"`
	Kind        string `json:"kind"`
	Reason      string `json:"reason"`
	Explanation string `json:"explanation"`
	Session     string `json:"session"`
	LoopSession string `json:"loop_session"`
	EventID     string `json:"event_id"`
	WebhookID   string `json:"webhook_id"`
	AgentPID    int    `json:"agent_pid"`
	Signal      string `json:"signal"`
	ExitCode    int    `json:"exit_code"`
	Watched     bool   `json:"watched"`
}

// TestSeed000LoopIsKilled: the whole story. The simulated agent falls into
// the 1,972-call bash loop; the collector judges it stuck at call 18 (the same
// call returned the same result twice in a row) and decides the kill at call
// 21 (same call x5 of the last 10); alert_sink delivers one signed kill; the
// supervisor verifies it, stops the agent's process group and writes the
// error result line; the exported traces carry both transition events.
//
//nolint:funlen // The whole story read top to bottom: its steps share the collector, supervisor and agent it starts.
func TestSeed000LoopIsKilled(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := testproc.NewSecret(t)
	supPort := testproc.FreePort(t)
	c := startCollector(t, dir, supPort, secret)
	s := startSupervised(t, dir, c, supPort, secret, "seed000", seed000Speed)

	// 1. The supervisor stops the agent on the kill and exits 86.
	if code := s.Wait(t, 40*time.Second); code != 86 {
		t.Fatalf("supervisor exit code %d, want 86 (stopped on a verified loop kill)\nsupervisor+agent log:\n%s\ncollector log:\n%s",
			code, s.LogText(), c.LogText())
	}
	log := s.LogText()

	// 2. Exactly one verified kill, nothing rejected.
	if n := strings.Count(log, "loopsupervisor: verified kill "); n != 1 {
		t.Errorf("supervisor logged %d verified kills, want exactly 1:\n%s", n, log)
	}
	if strings.Contains(log, "rejected webhook") {
		t.Errorf("supervisor rejected a webhook:\n%s", log)
	}

	// 3. The agent process is gone (the supervisor reaped it), and it did
	// not get to print an ok line.
	pid := agentPID(log)
	if pid <= 1 {
		t.Fatalf("no agent pid in the supervisor log:\n%s", log)
	}
	if alive(pid) || syscall.Kill(-pid, 0) == nil {
		t.Errorf("agent pid %d (or its process group) still alive after the kill", pid)
	}
	if !strings.Contains(log, "loopagent: terminated by signal") {
		t.Errorf("the agent did not report being terminated:\n%s", log)
	}
	if out := strings.TrimSpace(readFile(t, s.stdout)); out != "" {
		t.Errorf("the killed agent printed a result line of its own: %s", out)
	}

	// 4. The result line: one line, status error, the kill's reason and ids.
	lines := strings.Split(strings.TrimSpace(readFile(t, s.result)), "\n")
	if len(lines) != 1 || lines[0] == "" {
		t.Fatalf("result file has %d lines, want 1: %q", len(lines), lines)
	}
	var r resultLine
	if err := json.Unmarshal([]byte(lines[0]), &r); err != nil {
		t.Fatalf("result line %q: %v", lines[0], err)
	}
	want := resultLine{Status: "error", Kind: "loop_kill", Reason: "frequent_identical", AgentPID: pid, ExitCode: 86}
	got := resultLine{Status: r.Status, Kind: r.Kind, Reason: r.Reason, AgentPID: r.AgentPID, ExitCode: r.ExitCode}
	if got != want {
		t.Errorf("result line %s\n got  %+v\n want %+v", lines[0], got, want)
	}
	if r.Signal != "SIGTERM" && r.Signal != "SIGKILL" {
		t.Errorf("result line signal %q", r.Signal)
	}
	if !r.Watched {
		t.Errorf("result line %s: want watched, the collector announced the agent (loop.seen)", lines[0])
	}
	if r.EventID == "" || r.WebhookID != r.EventID+".kill" {
		t.Errorf("result line event_id %q webhook_id %q", r.EventID, r.WebhookID)
	}

	// 5. The transition events in the collector's exported traces: working
	// -> stuck at call 18, then the kill at call 21, on the tool spans that
	// caused them, and the kill is the one the supervisor acted on.
	var x exported
	var readErr error
	ok := testproc.Eventually(15*time.Second, func() bool {
		x, readErr = readExported(c.traces)
		return readErr == nil && len(x.transitions) >= 2
	})
	if !ok {
		t.Fatalf("transition events not in %s (read error %v):\n%s", c.traces, readErr, x)
	}
	if len(x.transitions) != 2 {
		t.Errorf("want exactly 2 transitions, got:\n%s", x)
	}
	first, kill := x.transitions[0], x.transitions[1]
	check := func(what string, tr transition, seq int64, from, reason string, call int64, wantKill bool) {
		t.Helper()
		got := fmt.Sprintf("seq=%d %s->%s reason=%s call=%d kill=%v span=%q", tr.Sequence, tr.From, tr.To, tr.Reason, tr.CallIndex, tr.Kill, tr.SpanName)
		exp := fmt.Sprintf("seq=%d %s->%s reason=%s call=%d kill=%v span=%q", seq, from, "stuck", reason, call, wantKill, "execute_tool bash")
		if got != exp {
			t.Errorf("%s transition:\n got  %s\n want %s", what, got, exp)
		}
	}
	check("detection", first, 1, "working", "unchanged_result", 18, false)
	check("kill", kill, 2, "stuck", "frequent_identical", 21, true)
	if kill.ID != r.EventID || kill.Session != r.LoopSession {
		t.Errorf("kill event %s (session %s) is not the one in the result line (%s, %s)", kill.ID, kill.Session, r.EventID, r.LoopSession)
	}
	if kill.Target.ServiceInstanceID != r.Session || kill.Target.PID != int64(pid) {
		t.Errorf("kill target %+v, want the supervised agent (instance %s, pid %d)", kill.Target, r.Session, pid)
	}

	// 6. The collector's side of "exactly one": one kill decided; three
	// webhooks delivered to the supervisor: the seen that says the agent is
	// watched, the warn of the response ladder (kill.warn_on: [stuck]) and
	// the kill.
	var kills, delivered float64
	var mErr error
	ok = testproc.Eventually(5*time.Second, func() bool {
		kills, mErr = c.metric("otelcol_loopdetect_kills", `dry_run="false"`)
		if mErr != nil {
			return false
		}
		delivered, mErr = c.metric("otelcol_alertsink_webhook_requests", `destination="kill"`, `result="delivered"`)
		return mErr == nil && kills == 1 && delivered == 3
	})
	if !ok {
		t.Errorf("collector metrics: loopdetect kills %v, alertsink kill-destination webhooks delivered %v (want 1, and 3: seen + warn + kill; err %v)", kills, delivered, mErr)
	}
}

// TestPaginationIsHealthy: an agent paging through a catalogue (distinct
// cursors, a growing row count) is never judged stuck, gets no kill, and
// finishes by itself with its ok line.
func TestPaginationIsHealthy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := testproc.NewSecret(t)
	supPort := testproc.FreePort(t)
	c := startCollector(t, dir, supPort, secret)
	s := startSupervised(t, dir, c, supPort, secret, "pagination", paginationSpeed)

	if code := s.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("supervisor exit code %d, want 0 (the agent finished by itself)\nlog:\n%s", code, s.LogText())
	}
	log := s.LogText()
	if !strings.Contains(log, "agent exited by itself with code 0") {
		t.Errorf("supervisor did not report a normal exit:\n%s", log)
	}
	if strings.Contains(log, "verified kill") {
		t.Errorf("supervisor received a kill:\n%s", log)
	}
	if res := readFile(t, s.result); res != "" {
		t.Errorf("supervisor wrote a result line for a healthy agent: %s", res)
	}

	// The agent's own result line.
	var ok struct {
		Status  string `json:"status"`
		Stop    string `json:"stop"`
		Calls   int    `json:"calls"`
		TraceID string `json:"trace_id"`
		Errors  int64  `json:"export_errors"`
	}
	out := strings.TrimSpace(readFile(t, s.stdout))
	if err := json.Unmarshal([]byte(out), &ok); err != nil {
		t.Fatalf("agent result line %q: %v", out, err)
	}
	if ok.Status != "ok" || ok.Calls != 5 || ok.Errors != 0 {
		t.Errorf("agent result line %s: want status ok, 5 calls, no export errors", out)
	}

	// Wait until the collector has exported the whole trace: the
	// invoke_agent root span ends last, and the agent's exports are
	// sequential, so once it is in the file every tool span went through
	// loop_detect before it.
	var x exported
	var readErr error
	done := testproc.Eventually(15*time.Second, func() bool {
		x, readErr = readExported(c.traces)
		if readErr != nil {
			return false
		}
		for name, n := range x.spanNames {
			if strings.HasPrefix(name, "invoke_agent") && n > 0 {
				return true
			}
		}
		return false
	})
	if !done {
		t.Fatalf("the agent's root span never reached the exported traces (read error %v):\n%s", readErr, x)
	}
	if got := x.spanNames["execute_tool list_catalog"] + x.spanNames["execute_tool write_file"]; got != ok.Calls {
		t.Errorf("exported %d tool spans, the agent made %d calls:\n%s", got, ok.Calls, x)
	}
	for _, tr := range x.transitions {
		if tr.To == "stuck" || tr.Kill {
			t.Errorf("healthy agent judged %s (reason %s, call %d, kill %v)", tr.To, tr.Reason, tr.CallIndex, tr.Kill)
		}
	}
	if kills, err := c.metric("otelcol_loopdetect_kills"); err != nil || kills != 0 {
		t.Errorf("collector kills metric %v (err %v), want 0", kills, err)
	}
}
