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
	r.exit = sup.Wait(t, 150*time.Second)
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
		if r.loopRuns > maxLoopRuns+1 {
			t.Errorf("the loop's call ran %d times, want ≤ %d\n%s", r.loopRuns, maxLoopRuns+1, r)
		}
		t.Logf("no hook, fast export: the loop's call ran %d times", r.loopRuns)
	})
}
