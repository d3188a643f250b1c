//go:build unix

package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/url"
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
	exit     int
	loopRuns int // times the loop's command actually ran
	// loopTimes are when it ran (Unix seconds), when it says.
	loopTimes []float64
	model     *agentcli.Server
	supLog    string
	result    string
	collector *localCollector
	dir       string
}

// agentSetup prepares one agent CLI run in dir: its scripted model, its
// project (with hook as its tool-call hook when not empty: a command line,
// or the URL of the supervisor's endpoint for the CLI's own HTTP hook),
// and returns the model, the project directory, the environment
// (telemetry to otlp) and the command line.
type agentSetup func(t *testing.T, dir, hook, otlp string) (model *agentcli.Server, projDir string, env, argv []string)

// runAgent runs an agent CLI under the supervisor, its telemetry going to
// a collector on config/local.yaml. hookCmd is the supervisor's hook
// command line after the binary, or, starting with "/", the path of the
// supervisor's endpoint an HTTP hook posts to (empty: no hook). The loop's
// command records each run of itself in the project's loop-runs file.
func runAgent(t *testing.T, setup agentSetup, hookCmd string, supArgs ...string) agentRun {
	t.Helper()
	_, supBin, _ := binaries(t)
	dir := runDir(t)
	secret := testproc.NewSecret(t)
	killPort := testproc.FreePort(t)
	col := startLocalCollector(t, dir, killPort, secret)
	hook := ""
	switch {
	case strings.HasPrefix(hookCmd, "/"):
		hook = fmt.Sprintf("http://127.0.0.1:%d%s", killPort, hookCmd)
	case hookCmd != "":
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
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) == 2 {
				if at, err := strconv.ParseFloat(f[1], 64); err == nil {
					r.loopTimes = append(r.loopTimes, at)
				}
			}
		}
	}
	return r
}

// runDir is a run's directory: the test's own, or with LOOP_E2E_KEEP=1 one
// that outlives the test (the collector's file, the processes' logs, the
// project), for reading a run afterwards.
func runDir(t *testing.T) string {
	t.Helper()
	if os.Getenv("LOOP_E2E_KEEP") != "1" {
		return t.TempDir()
	}
	dir, err := os.MkdirTemp("", "loop-e2e-run-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("LOOP_E2E_KEEP: this run's files stay in %s", dir)
	return dir
}

// supervisorHook is how a Claude Code run's hook reaches the supervisor.
type supervisorHook string

const (
	noHook supervisorHook = ""
	// commandHook is `loopsupervisor hook`, a PreToolUse command hook: a
	// process per call, for CLIs without HTTP hooks.
	commandHook supervisorHook = "hook"
	// httpHook is Claude Code's own PreToolUse HTTP hook posting to the
	// supervisor's /hook/claude with the run's token: the README's recipe.
	httpHook supervisorHook = "/hook/claude"
)

func (h supervisorHook) String() string {
	switch h {
	case commandHook:
		return "command hook"
	case httpHook:
		return "HTTP hook"
	}
	return "no hook"
}

// runClaude runs Claude Code on model under the supervisor, its logs going
// to the collector.
func runClaude(t *testing.T, model agentcli.Model, hook supervisorHook, supArgs ...string) agentRun {
	t.Helper()
	return runClaudeTelemetry(t, model, hook, false, supArgs...)
}

// runClaudeTelemetry is runClaude, with the README's recipe when recipe is
// set: only the collector's endpoint, and the telemetry loopsupervisor
// chooses for a claude agent (its traces beta with tool content: the calls'
// results, which a poll's verdict needs).
func runClaudeTelemetry(t *testing.T, model agentcli.Model, hook supervisorHook, recipe bool, supArgs ...string) agentRun {
	t.Helper()
	claude := agentcli.ClaudeBin(t)
	return runAgent(t, func(t *testing.T, dir, hook, otlp string) (*agentcli.Server, string, []string, []string) {
		srv := agentcli.Start(t, model)
		proj := agentcli.NewClaudeProject(t, dir, "")
		switch {
		case strings.HasPrefix(hook, "http://"):
			u, err := url.Parse(hook)
			if err != nil {
				t.Fatal(err)
			}
			proj.InstallHooks(t, agentcli.SupervisorHTTPHook("PreToolUse", u.Host))
		case hook != "":
			proj.InstallHooks(t, agentcli.ClaudeHook{Event: "PreToolUse", Command: hook})
		}
		env := proj.Env(srv, otlp)
		if recipe {
			env = proj.RecipeEnv(srv, otlp)
		}
		return srv, proj.Dir, env, agentcli.ClaudeArgs(claude, "Find the open issues of this repository and summarise them.")
	}, string(hook), supArgs...)
}

func blockedCalls(result string) int {
	var r struct {
		BlockedCalls int `json:"blocked_calls"`
	}
	_ = json.Unmarshal([]byte(result), &r)
	return r.BlockedCalls
}

// blocked is the number of calls the hook blocked: the result line's
// count when the supervisor stopped the agent, else its exit log line's.
func (r agentRun) blocked() int {
	if r.result != "" {
		return blockedCalls(r.result)
	}
	_, rest, ok := strings.Cut(r.supLog, "its hook blocked ")
	if !ok {
		return -1
	}
	n, _ := strconv.Atoi(strings.Fields(rest)[0])
	return n
}

// killed reports whether the supervisor stopped the agent on a loop kill.
func (r agentRun) killed() bool {
	return r.exit == 86 || strings.Contains(r.supLog, "stopping agent group")
}

// transitions are the collector's verdicts on the run, once the file
// exporter wrote those that satisfy done (or after 10 s: what it wrote by
// then); a nil done takes what is written now.
func (r agentRun) transitions(t *testing.T, done func([]transition) bool) []transition {
	t.Helper()
	var x exported
	var err error
	testproc.Eventually(10*time.Second, func() bool {
		x, err = readExported(r.collector.traces)
		return err == nil && (done == nil || done(x.transitions))
	})
	if err != nil {
		t.Fatalf("reading the collector's verdicts: %v", err)
	}
	return x.transitions
}

// decisions are the call indexes (1-based, of the session's calls) where
// the collector found the session stuck (its warn) and decided the kill;
// 0 where it did not.
func decisions(trs []transition) (stuckAt, killAt int) {
	for _, tr := range trs {
		if tr.To == "stuck" && stuckAt == 0 {
			stuckAt = int(tr.CallIndex)
		}
		if tr.Kill && killAt == 0 {
			killAt = int(tr.CallIndex)
		}
	}
	return stuckAt, killAt
}

// stuckKills is the collector log's "Agent session stuck" lines that
// decided a kill.
func (r agentRun) stuckKills() int {
	n := 0
	for _, line := range strings.Split(r.collector.LogText(), "\n") {
		if strings.Contains(line, "Agent session stuck") && strings.Contains(line, `"kill": true`) {
			n++
		}
	}
	return n
}

// heardAt is how many results the model had read when the supervisor's
// word (a nudge or a blocked call) first reached it, or 0.
func (r agentRun) heardAt() int {
	ex := r.model.Exchanges()
	for _, e := range ex {
		if i := e.Conversation.HeardSupervisorAt(); i >= 0 {
			return i + 1
		}
	}
	return 0
}

func (r agentRun) String() string {
	return fmt.Sprintf("exit %d, loop ran %d times, %d calls blocked\nsupervisor+agent log (tail):\n%s\ncollector log (tail):\n%s",
		r.exit, r.loopRuns, r.blocked(), testproc.Tail(r.supLog, 4000), testproc.Tail(r.collector.LogText(), 4000))
}

// The incident's loop: `gh issue list` on a machine without gh, the same
// failing call again and again. The command records each run of itself,
// and when.
var (
	ghLoop = agentcli.Bash("date '+run %s.%N' >> loop-runs; gh issue list")
	ghLead = []agentcli.Turn{
		agentcli.Bash("ls -la"),
		agentcli.Bash("cat README.md 2>/dev/null || echo no readme"),
		agentcli.Call("Write", map[string]any{"file_path": "notes.md", "content": "issues to look at\n"}),
	}
	ghThen = []agentcli.Turn{agentcli.Bash("echo 'gh is not installed here' >> notes.md")}
)

// killReach is how long after the start of the run that decided the kill
// the loop may still start runs, at the supervisor's 200 ms export: that
// run's record waits up to the export interval, then the collector's
// batch, the webhook and the hook's check take the rest. make test runs
// every agent CLI at once on 2 cores, where Gemini CLI's took up to 0.8 s.
const killReach = 1.5 // seconds

// lateRuns counts the loop's runs that started more than reach seconds
// after the start of the run that decided the kill (killRun, from 1), and
// says how long after it the last run started. Every run must have
// recorded its time.
func lateRuns(t *testing.T, r agentRun, killRun int, reach float64) (late int, last float64) {
	t.Helper()
	if len(r.loopTimes) != r.loopRuns || killRun < 1 || killRun > len(r.loopTimes) {
		t.Errorf("the loop's %d runs recorded %d times; the kill decided at run %d\n%s", r.loopRuns, len(r.loopTimes), killRun, r)
		return 0, 0
	}
	at := r.loopTimes[killRun-1]
	for _, ts := range r.loopTimes[killRun:] {
		if ts-at > reach {
			late++
		}
	}
	return late, r.loopTimes[len(r.loopTimes)-1] - at
}

// holdKillReach fails t when the loop started a run more than killReach
// after the run that decided the kill, and returns how long after it the
// last run started.
func holdKillReach(t *testing.T, r agentRun, o loopOutcome) float64 {
	t.Helper()
	late, last := lateRuns(t, r, o.killRun, killReach)
	if late > 0 {
		t.Errorf("%d runs of the loop started more than %.1f s after the run that decided the kill (run %d of %d; the last %.2f s after it)\n%s",
			late, killReach, o.killRun, o.runs, last, r)
	}
	return last
}

// holdObeyed fails t unless the agent finished by itself (exit 0, not
// killed) after the collector's warn reached the model as a nudge with a
// run of the loop.
func holdObeyed(t *testing.T, r agentRun, o loopOutcome) {
	t.Helper()
	if r.exit != 0 || r.killed() {
		t.Fatalf("want the agent to finish by itself (exit 0), got %s", r)
	}
	if o.stuckRun == 0 || o.heardAfter == 0 || o.heardAfter != o.runs {
		t.Errorf("want the collector's warn (stuck at run %d) to reach the model as a nudge with a run of the loop (heard after run %d of %d)\n%s", o.stuckRun, o.heardAfter, o.runs, r)
	}
}

// holdKilled fails t unless the agent was killed on one loop kill the
// collector decided, after its nudge had reached the model, with no run
// of the loop started later than killReach after the kill's run; it
// returns how long after that run the last one started.
func holdKilled(t *testing.T, r agentRun, o loopOutcome) float64 {
	t.Helper()
	if r.exit != 86 {
		t.Fatalf("want exit 86 (killed on a verified loop kill), got %s", r)
	}
	if o.killRun == 0 || r.stuckKills() != 1 {
		t.Errorf("want one kill decided by the collector (at run %d; %d logged)\n%s", o.killRun, r.stuckKills(), r)
	}
	if o.heardAfter == 0 || o.heardAfter > o.killRun+1 {
		t.Errorf("want the nudge to have reached the model before the kill (heard after run %d, kill at %d)\n%s", o.heardAfter, o.killRun, r)
	}
	return holdKillReach(t, r, o)
}

// maxLoopRunsNoHook is the looser bound other agent CLIs' tests hold
// without the hook, where their telemetry's own delays add to the kill's.
const maxLoopRunsNoHook = 10

// loopOutcome is what one looping run measured.
type loopOutcome struct {
	runs, blocked         int
	stuckRun, killRun     int // the loop's run at the collector's warn and kill (0: none)
	heardAfter            int // loop runs whose result the model had read when the supervisor's word reached it
	afterStuck, afterKill int
}

// measureLoop reads a looping run's figures: the loop's runs, the calls
// blocked, and where the collector's decisions fell among the loop's runs
// (the lead calls come first).
func measureLoop(t *testing.T, r agentRun, lead int) loopOutcome {
	t.Helper()
	killed := r.killed()
	stuckAt, killAt := decisions(r.transitions(t, func(trs []transition) bool {
		stuck, kill := decisions(trs)
		return stuck > 0 && (kill > 0 || !killed)
	}))
	o := loopOutcome{runs: r.loopRuns, blocked: r.blocked()}
	if stuckAt > 0 {
		o.stuckRun = stuckAt - lead
		o.afterStuck = o.runs - o.stuckRun
	}
	if killAt > 0 {
		o.killRun = killAt - lead
		o.afterKill = o.runs - o.killRun
	}
	if h := r.heardAt(); h > 0 {
		o.heardAfter = h - lead
	}
	return o
}

// TestClaudeCodeLoopIsStoppedWithinACall: the incident's loop in Claude
// Code under the supervisor. With the hook (the README's HTTP hook, and
// the command hook for CLIs without HTTP hooks) the collector's warn
// reaches the model as a nudge with its next call: a model that obeys it
// changes course before the kill point and is never blocked; one that
// ignores it loops until the engine's kill, then its repeats are blocked
// (3, --hook-patience 2) and it is killed. Without the hook the kill comes
// with the export delay: 200 ms (the supervisor's default) against the
// SDK's 5 s. Each run records its figures (figures_test.go).
func TestClaudeCodeLoopIsStoppedWithinACall(t *testing.T) {
	t.Parallel()
	for _, hook := range []supervisorHook{httpHook, commandHook} {
		key := "claude." + map[supervisorHook]string{httpHook: "http", commandHook: "command"}[hook]
		t.Run(hook.String()+": a model that obeys the nudge changes course and is not killed", func(t *testing.T) {
			t.Parallel()
			r := runClaude(t, agentcli.Loop{Lead: ghLead, Repeat: ghLoop, Obeys: true, MaxRepeats: 60, Then: ghThen}, hook)
			o := measureLoop(t, r, len(ghLead))
			t.Logf("obeying model, %s: %+v", hook, o)
			holdObeyed(t, r, o)
			recordFigure(t, key+".obey.runs", float64(o.runs))
			recordFigure(t, key+".obey.after_warn", float64(o.afterStuck))
			recordFigure(t, key+".obey.blocked", float64(o.blocked))
		})
		t.Run(hook.String()+": a model that ignores the nudge is blocked, then killed", func(t *testing.T) {
			t.Parallel()
			r := runClaude(t, agentcli.Loop{Lead: ghLead, Repeat: ghLoop, MaxRepeats: 60}, hook)
			o := measureLoop(t, r, len(ghLead))
			t.Logf("ignoring model, %s: %+v; result %s", hook, o, r.result)
			reach := holdKilled(t, r, o)
			recordFigure(t, "claude.decision.stuck_run", float64(o.stuckRun))
			recordFigure(t, "claude.decision.kill_run", float64(o.killRun))
			recordFigure(t, key+".ignore.runs", float64(o.runs))
			recordFigure(t, key+".ignore.after_kill", float64(o.afterKill))
			recordFigure(t, key+".ignore.reach_s", math.Round(reach*100)/100)
			recordFigure(t, key+".ignore.blocked", float64(o.blocked))
			if hook != commandHook {
				return
			}
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
	}
	t.Run("no hook, the supervisor's 200 ms export", func(t *testing.T) {
		t.Parallel()
		r := runClaude(t, agentcli.Loop{Lead: ghLead, Repeat: ghLoop, MaxRepeats: 60}, noHook)
		o := measureLoop(t, r, len(ghLead))
		t.Logf("no hook, 200 ms export: %+v", o)
		if r.exit != 86 {
			t.Fatalf("want exit 86, got %s", r)
		}
		holdKillReach(t, r, o)
		recordFigure(t, "claude.nohook.export_200ms.runs", float64(o.runs))
	})
	t.Run("no hook, the SDK's 5 s export", sdkExportKill)
}

// sdkExportKill: without the hook and with the SDK's own 5 s export, the
// kill comes with the decisive call's record.
func sdkExportKill(t *testing.T) {
	t.Parallel()
	// At 0.1 s a call some 50 calls fit in the 5 s wait: the model must
	// not run out of repeats before the kill.
	r := runClaude(t, agentcli.Loop{Lead: ghLead, Repeat: ghLoop, MaxRepeats: 200}, noHook, "--export-interval", "0")
	o := measureLoop(t, r, len(ghLead))
	if r.exit != 86 {
		t.Fatalf("want exit 86, got %s", r)
	}
	if len(r.loopTimes) != r.loopRuns || r.loopRuns < 2 {
		t.Fatalf("the loop's %d runs recorded %d times\n%s", r.loopRuns, len(r.loopTimes), r)
	}
	pace := (r.loopTimes[len(r.loopTimes)-1] - r.loopTimes[0]) / float64(len(r.loopTimes)-1)
	t.Logf("no hook, 5 s export: %+v, %.2f s a call", o, pace)
	// The kill waits for the decisive call's record, held up to 5 s by
	// the SDK; the calls that start in that wait (and in the kill's
	// reach at the 200 ms export) run meanwhile.
	if late, last := lateRuns(t, r, o.killRun, 5+killReach); late > 0 {
		t.Errorf("%d runs of the loop started more than %.1f s after the run that decided the kill (the last %.2f s after it)\n%s", late, 5+killReach, last, r)
	}
	recordFigure(t, "claude.nohook.export_5s.runs", float64(o.runs))
	recordFigure(t, "claude.nohook.export_5s.call_s", math.Round(pace*10)/10)
}

// TestClaudeCodeREADMERecipeIsWatched: the README's recipe sets only the
// collector's endpoint; loopsupervisor sets Claude Code's telemetry (the
// traces beta with tool content, its 200 ms export), so the run is watched
// and a model that ignores the nudge is killed within the usual bound.
func TestClaudeCodeREADMERecipeIsWatched(t *testing.T) {
	t.Parallel()
	r := runClaudeTelemetry(t, agentcli.Loop{Lead: ghLead, Repeat: ghLoop, MaxRepeats: 60}, httpHook, true)
	o := measureLoop(t, r, len(ghLead))
	t.Logf("README's recipe, ignoring model: %+v; result %s", o, r.result)
	if r.exit != 86 || o.killRun == 0 {
		t.Fatalf("want exit 86 on the collector's kill (decided at run %d), got %s", o.killRun, r)
	}
	holdKillReach(t, r, o)
	if !strings.Contains(r.result, `"watched":true`) {
		t.Errorf("want the result line to say the run was watched: %s", r.result)
	}
}
