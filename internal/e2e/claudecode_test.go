//go:build unix

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/otelcol-loop/otelcol-loop/internal/agentcli"
	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// The real Claude Code CLI, headless (`claude -p`), on a scripted model,
// under loopsupervisor, its logs going to the collector on
// config/local.yaml, with the supervisor's hook installed in the project's
// settings.json as the README says.

// localCollector runs config/local.yaml on free ports, kills going to
// 127.0.0.1:killPort.
type localCollector struct {
	*testproc.Proc
	otlpHTTP, health, metrics int
	traces                    string
}

func startLocalCollector(t *testing.T, dir string, killPort int, secret string) *localCollector {
	t.Helper()
	bin, _, _ := binaries(t)
	root, err := testproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	c := &localCollector{otlpHTTP: testproc.FreePort(t), health: testproc.FreePort(t), metrics: testproc.FreePort(t),
		traces: filepath.Join(dir, "traces.jsonl")}
	env := []string{
		"LOOPDETECT_WEBHOOK_SECRET=" + secret,
		"LOOPSUPERVISOR_PORT=" + strconv.Itoa(killPort),
		"LOOP_OTLP_HTTP_PORT=" + strconv.Itoa(c.otlpHTTP),
		"LOOP_OTLP_GRPC_PORT=" + strconv.Itoa(testproc.FreePort(t)),
		"LOOP_HEALTH_PORT=" + strconv.Itoa(c.health),
		"LOOP_METRICS_PORT=" + strconv.Itoa(c.metrics),
		"LOOP_TRACES_FILE=" + c.traces,
	}
	c.Proc = testproc.Start(t, dir, "collector", env, "", bin, "--config", filepath.Join(root, "config", "local.yaml"))
	c.LogTail = 6000
	c.WaitHealthy(t, c.health, 30*time.Second)
	return c
}

// agentRun is one supervised agent CLI run and what came of it.
type agentRun struct {
	exit      int
	loopRuns  int // times the loop's command actually ran
	model     *agentcli.Server
	supLog    string
	result    string
	collector *localCollector
	dir       string
}

// agentSetup prepares one agent CLI run in dir: its scripted model, its
// project (with hook as its tool-call hook when not empty), and returns
// the model, the project directory, the environment (telemetry to otlp)
// and the command line.
type agentSetup func(t *testing.T, dir, hook, otlp string) (model *agentcli.Server, projDir string, env, argv []string)

// runAgent runs an agent CLI under the supervisor, its telemetry going to
// a collector on config/local.yaml. hookCmd is the supervisor's hook
// command line after the binary (empty: no hook). The loop's command
// records each run of itself in the project's loop-runs file.
func runAgent(t *testing.T, setup agentSetup, hookCmd string, supArgs ...string) agentRun {
	t.Helper()
	_, supBin, _ := binaries(t)
	dir := t.TempDir()
	secret := testproc.NewSecret(t)
	killPort := testproc.FreePort(t)
	col := startLocalCollector(t, dir, killPort, secret)
	hook := ""
	if hookCmd != "" {
		hook = supBin + " " + hookCmd
	}
	srv, projDir, env, agentArgv := setup(t, dir, hook, fmt.Sprintf("http://127.0.0.1:%d", col.otlpHTTP))
	secrets := filepath.Join(dir, "loopsupervisor.secrets")
	if err := os.WriteFile(secrets, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	argv := append([]string{supBin, "--listen", "127.0.0.1:" + strconv.Itoa(killPort), "--secrets-file", secrets}, supArgs...)
	argv = append(append(argv, "--"), agentArgv...)
	resultPath := filepath.Join(dir, "supervisor.stdout")
	sup := testproc.StartIn(t, projDir, dir, "supervisor", env, resultPath, argv...)
	t.Cleanup(func() {
		if pid := agentPID(sup.LogText()); pid > 1 && syscall.Kill(-pid, 0) == nil {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
		}
	})
	r := agentRun{model: srv, collector: col, dir: dir}
	r.exit = sup.Wait(t, 300*time.Second)
	r.supLog = sup.LogText()
	// The agent shares the supervisor's stdout (its stream-json and, for
	// Gemini CLI, its exporters' complaints); the supervisor's result line
	// is the last that starts with its first field.
	for _, line := range strings.Split(readFile(t, resultPath), "\n") {
		if strings.HasPrefix(line, `{"status":`) {
			r.result = line
		}
	}
	if b, err := os.ReadFile(filepath.Join(projDir, "loop-runs")); err == nil {
		r.loopRuns = strings.Count(string(b), "\n")
	}
	return r
}

// runClaude runs Claude Code on model under the supervisor.
func runClaude(t *testing.T, model agentcli.Model, withHook bool, supArgs ...string) agentRun {
	t.Helper()
	claude := agentcli.ClaudeBin(t)
	hook := ""
	if withHook {
		hook = "hook"
	}
	return runAgent(t, func(t *testing.T, dir, hook, otlp string) (*agentcli.Server, string, []string, []string) {
		srv := agentcli.Start(t, model)
		proj := agentcli.NewClaudeProject(t, dir, hook)
		return srv, proj.Dir, proj.Env(srv, otlp), agentcli.ClaudeArgs(claude, "Find the open issues of this repository and summarise them.")
	}, hook, supArgs...)
}

func blockedCalls(result string) int {
	var r struct {
		BlockedCalls int `json:"blocked_calls"`
	}
	_ = json.Unmarshal([]byte(result), &r)
	return r.BlockedCalls
}

func (r agentRun) String() string {
	return fmt.Sprintf("exit %d, loop ran %d times\nsupervisor+agent log (tail):\n%s\ncollector log (tail):\n%s",
		r.exit, r.loopRuns, testproc.Tail(r.supLog, 4000), testproc.Tail(r.collector.LogText(), 4000))
}

// The incident's loop: `gh issue list` on a machine without gh, the same
// failing call again and again. The command records each run of itself.
var (
	ghLoop = agentcli.Bash("echo run >> loop-runs; gh issue list")
	ghLead = []agentcli.Turn{
		agentcli.Bash("ls -la"),
		agentcli.Bash("cat README.md 2>/dev/null || echo no readme"),
		agentcli.Call("Write", map[string]any{"file_path": "notes.md", "content": "issues to look at\n"}),
	}
)

// maxLoopRuns is how many times the loop's call may run after it starts
// before the hook blocks it or the supervisor stops the agent: the
// collector decides at the 5th identical call; the 6th may start while
// that verdict is still on its way (the agent exports every 200 ms under
// the supervisor).
const maxLoopRuns = 6

// Without the hook the kill needs the loop to last 5 calls and the verdict
// to travel: 5–7 runs here at 200 ms export, 17–25 at the SDKs' 5 s. The
// bound leaves a loaded machine room and still fails without fast export.
const maxLoopRunsNoHook = 10

// Gemini CLI reports no tool results, so the collector needs 5 identical
// calls before its verdict (Claude Code's failing call: 2); a few more may
// run on a loaded machine while the verdict travels.
const maxLoopRunsWithoutResults = 9

func TestClaudeCodeLoopIsStoppedWithinACall(t *testing.T) {
	t.Parallel()
	t.Run("a model that obeys the nudge changes course and is not killed", func(t *testing.T) {
		t.Parallel()
		r := runClaude(t, agentcli.Loop{Lead: ghLead, Repeat: ghLoop, Obeys: true, MaxRepeats: 60,
			Then: []agentcli.Turn{agentcli.Bash("echo 'gh is not installed here' >> notes.md")}}, true)
		if r.exit != 0 {
			t.Fatalf("want the agent to finish by itself (exit 0), got %s", r)
		}
		if r.loopRuns > maxLoopRuns {
			t.Errorf("the loop's call ran %d times, want ≤ %d\n%s", r.loopRuns, maxLoopRuns, r)
		}
		if strings.Contains(r.supLog, "stopping agent group") {
			t.Errorf("an obeying agent was killed\n%s", r)
		}
		if strings.Contains(r.supLog, "kill ") && strings.Contains(r.supLog, " held:") && !strings.Contains(r.supLog, "withdrawn: the model changed course") {
			t.Errorf("a held kill was not withdrawn\n%s", r)
		}
		t.Logf("obeying model: the loop's call ran %d times", r.loopRuns)
	})
	t.Run("a model that ignores the nudge is killed", func(t *testing.T) {
		t.Parallel()
		r := runClaude(t, agentcli.Loop{Lead: ghLead, Repeat: ghLoop, MaxRepeats: 60}, true)
		if r.exit != 86 {
			t.Fatalf("want exit 86 (killed on a verified loop kill), got %s", r)
		}
		if r.loopRuns > maxLoopRuns {
			t.Errorf("the loop's call ran %d times, want ≤ %d\n%s", r.loopRuns, maxLoopRuns, r)
		}
		// The hook blocks the loop's calls from the warn on; the collector
		// counts the refused calls (Claude Code's rejected tool_decision
		// records) as the loop going on, and its kill is carried out at
		// once or after the hook's patience of 2.
		if n := blockedCalls(r.result); n < 1 {
			t.Errorf("result line %q: want the hook's blocked calls counted", r.result)
		}
		t.Logf("ignoring model: the loop's call ran %d times; result %s", r.loopRuns, r.result)
		// The README's third terminal: demowatch on the collector's file
		// shows the verdicts decided on Claude Code's logs and the calls
		// its hook refused.
		watch, err := exec.Command(bins.demowatch, "--file", r.collector.traces).CombinedOutput()
		if err != nil {
			t.Fatalf("demowatch: %v\n%s", err, watch)
		}
		for _, want := range []string{"working -> stuck", ">>> KILL REQUESTED", "refused  Bash call not run: rejected by the agent's hook"} {
			if !strings.Contains(string(watch), want) {
				t.Errorf("demowatch output lacks %q:\n%s", want, watch)
			}
		}
	})
	t.Run("without the hook the kill comes within a call too", func(t *testing.T) {
		t.Parallel()
		r := runClaude(t, agentcli.Loop{Lead: ghLead, Repeat: ghLoop, MaxRepeats: 60}, false)
		if r.exit != 86 {
			t.Fatalf("want exit 86, got %s", r)
		}
		if r.loopRuns > maxLoopRunsNoHook {
			t.Errorf("the loop's call ran %d times, want ≤ %d\n%s", r.loopRuns, maxLoopRunsNoHook, r)
		}
		t.Logf("no hook, fast export: the loop's call ran %d times", r.loopRuns)
	})
}

// healthySession is 40 calls of ordinary coding work: reading around,
// editing, running the tests after every edit (the same command, a
// different outcome each time as the code changes), a failing then passing
// build, grepping.
func healthySession() agentcli.Model {
	turns := []agentcli.Turn{
		agentcli.Bash("mkdir -p src && printf 'package main\\n\\nfunc add(a, b int) int { return a - b }\\n' > src/add.go"),
		agentcli.Bash("printf '#!/bin/sh\\ngrep -q \"a + b\" src/add.go && echo PASS || { echo FAIL: add; exit 1; }\\n' > test.sh && chmod +x test.sh"),
		agentcli.Bash("ls -la"),
		agentcli.Bash("./test.sh"),
		agentcli.Call("Read", map[string]any{"file_path": "src/add.go"}),
		agentcli.Call("Grep", map[string]any{"pattern": "func ", "path": "src"}),
	}
	for i := range 8 {
		f := fmt.Sprintf("src/f%d.go", i)
		turns = append(turns,
			agentcli.Call("Write", map[string]any{"file_path": f, "content": fmt.Sprintf("package main\n\nfunc f%d() int { return %d }\n", i, i)}),
			agentcli.Bash("./test.sh"),
			agentcli.Bash(fmt.Sprintf("wc -l %s", f)),
		)
	}
	turns = append(turns,
		agentcli.Call("Edit", map[string]any{"file_path": "src/add.go", "old_string": "a - b", "new_string": "a + b"}),
		agentcli.Bash("./test.sh"),
		agentcli.Bash("git init -q . && git add -A && git commit -qm 'fix add' -c user.name=t -c user.email=t@example.com || true"),
		agentcli.Bash("ls src | wc -l"),
		agentcli.Call("Grep", map[string]any{"pattern": "return", "path": "src", "output_mode": "count"}),
		agentcli.Bash("cat src/add.go"),
		agentcli.Bash("./test.sh"),
		agentcli.Bash("for i in 1 2 3; do echo page $i; done"),
		agentcli.Call("Read", map[string]any{"file_path": "test.sh"}),
		agentcli.Bash("echo done > STATUS"),
	)
	return agentcli.Script("The add bug is fixed and the tests pass.", turns...)
}

func TestClaudeCodeHealthySessionIsNeverBlocked(t *testing.T) {
	t.Parallel()
	r := runClaude(t, healthySession(), true)
	if r.exit != 0 {
		t.Fatalf("want the healthy agent to finish by itself (exit 0), got %s", r)
	}
	calls := 0
	for _, e := range r.model.Exchanges() {
		if e.Turn.Tool != nil {
			calls++
		}
	}
	if calls != 40 {
		t.Errorf("the session made %d tool calls, want 40", calls)
	}
	if strings.Contains(r.supLog, "verified warn") || blockedCalls(r.supLog) > 0 || !strings.Contains(r.supLog, "its hook blocked 0 calls") {
		t.Errorf("a healthy session was warned or blocked\n%s", r)
	}
	if strings.Contains(r.collector.LogText(), "Agent session stuck") {
		t.Errorf("the collector found a healthy session stuck\n%s", r)
	}
}

// TestClaudeCodeCallsBeforeKill measures (it checks nothing) how many times
// an instant model's loop call runs before the kill, without the hook, with
// the SDK's 5 s export delay and with the supervisor's 200 ms default:
//
//	LOOP_E2E_MEASURE_EXPORT=5 go test -run TestClaudeCodeCallsBeforeKill -v ./internal/e2e/
func TestClaudeCodeCallsBeforeKill(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("LOOP_E2E_MEASURE_EXPORT"))
	if runs <= 0 {
		t.Skip("a measurement: set LOOP_E2E_MEASURE_EXPORT=<runs>")
	}
	for _, interval := range []string{"0", "200ms"} {
		var counts []int
		for range runs {
			r := runClaude(t, agentcli.Loop{Lead: ghLead, Repeat: ghLoop, MaxRepeats: 500}, false, "--export-interval", interval)
			if r.exit != 86 {
				t.Fatalf("--export-interval %s: want exit 86, got %s", interval, r)
			}
			counts = append(counts, r.loopRuns)
		}
		t.Logf("--export-interval %s: the loop's call ran %v times before the kill", interval, counts)
	}
}
