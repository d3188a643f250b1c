//go:build unix

package e2e

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/agentcli"
	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// The real Qwen Code, headless (`qwen -p`), on a scripted OpenAI chat
// completions API, under loopsupervisor, its telemetry (qwen-code.tool
// spans with arguments and results) going to the collector on
// config/local.yaml, with the supervisor's hook installed in the project's
// settings.json as a PreToolUse and PostToolUse command hook.

// runQwen runs Qwen Code on model under the supervisor.
func runQwen(t *testing.T, model agentcli.Model, withHook bool, supArgs ...string) agentRun {
	t.Helper()
	qwen := agentcli.QwenBin(t)
	hook := ""
	if withHook {
		hook = "hook --format qwen"
	}
	return runAgent(t, func(t *testing.T, dir, hook, otlp string) (*agentcli.Server, string, []string, []string) {
		proj := agentcli.NewQwenProject(t, dir, hook)
		srv := agentcli.StartOpenAI(t, proj.Model(model))
		return srv, proj.Dir, proj.Env(srv, otlp), agentcli.QwenArgs(qwen, "Find the open issues of this repository and summarise them.")
	}, hook, supArgs...)
}

// qwenTools writes a session in Qwen Code's tool names.
var qwenTools = toolset{
	shell: agentcli.Shell,
	write: func(path, content string) agentcli.Turn {
		return agentcli.Call("write_file", map[string]any{"file_path": path, "content": content})
	},
	read: func(path string) agentcli.Turn { return agentcli.Call("read_file", map[string]any{"file_path": path}) },
	edit: func(path, old, new string) agentcli.Turn {
		return agentcli.Call("edit", map[string]any{"file_path": path, "old_string": old, "new_string": new})
	},
	grep: func(pattern, path string) agentcli.Turn {
		return agentcli.Call("grep_search", map[string]any{"pattern": pattern, "path": path})
	},
}

// The incident's loop in Qwen Code's tools (Gemini CLI's names). Qwen Code
// 0.24.4 ends a headless run itself (exit 1) when the model asks for the
// same call a 5th time in a row, before the collector's kill at the 5th
// run; the loop it does not see is one whose calls vary: qwenCycle runs
// the incident's command with and without a flag, each run recorded.
var (
	qwenLoop  = agentcli.Shell("date '+run %s.%N' >> loop-runs; gh issue list")
	qwenCycle = []agentcli.Turn{qwenLoop, agentcli.Shell("date '+run %s.%N' >> loop-runs; gh issue list --state open")}
	qwenLead  = []agentcli.Turn{
		agentcli.Shell("ls -la"),
		agentcli.Shell("cat README.md 2>/dev/null || echo no readme"),
		agentcli.Call("write_file", map[string]any{"file_path": "notes.md", "content": "issues to look at\n"}),
	}
	qwenThen = []agentcli.Turn{agentcli.Shell("echo 'gh is not installed here' >> notes.md")}
)

// cycling is a model that makes the lead calls, then the cycle's calls in
// turn, never heeding the supervisor, until max calls of the cycle.
func cycling(lead, cycle []agentcli.Turn, max int) agentcli.Model {
	return agentcli.ModelFunc(func(c agentcli.Conversation) agentcli.Turn {
		n := len(c.Results)
		if n < len(lead) {
			return lead[n]
		}
		if k := n - len(lead); k < max {
			return cycle[k%len(cycle)]
		}
		return agentcli.Done("gave up")
	})
}

// TestQwenCodeLoopIsStoppedWithinACall: the incident's loop in Qwen Code
// with its PreToolUse, PostToolUse and PostToolUseFailure command hooks.
// The collector's warn comes at the 2nd failed run and reaches the model
// as a nudge with the next run's result (PostToolUseFailure: the command
// exits 127); a model that obeys it changes course and is never blocked.
// One that ignores it, varying the command so that Qwen Code's own guard
// does not end the run, loops to the collector's kill; its repeats are
// then blocked and it is killed. One that ignores it repeating the same
// call is ended by Qwen Code itself.
func TestQwenCodeLoopIsStoppedWithinACall(t *testing.T) {
	t.Parallel()
	t.Run("a model that obeys the nudge changes course and is not killed", func(t *testing.T) {
		t.Parallel()
		r := runQwen(t, agentcli.Loop{Lead: qwenLead, Repeat: qwenLoop, Obeys: true, MaxRepeats: 60, Then: qwenThen}, true)
		o := measureLoop(t, r, len(qwenLead))
		t.Logf("obeying model: %+v", o)
		if r.exit != 0 || r.killed() {
			t.Fatalf("want the agent to finish by itself (exit 0), got %s", r)
		}
		if o.stuckRun == 0 || o.heardAfter == 0 || o.heardAfter != o.runs || o.blocked != 0 {
			t.Errorf("want the collector's warn (stuck at run %d) to reach the model as a nudge with a run of the loop (heard after run %d of %d), nothing blocked (%d)\n%s", o.stuckRun, o.heardAfter, o.runs, o.blocked, r)
		}
		recordFigure(t, "qwen.obey.stuck_run", float64(o.stuckRun))
		recordFigure(t, "qwen.obey.runs", float64(o.runs))
		recordFigure(t, "qwen.obey.blocked", float64(o.blocked))
	})
	t.Run("a model that ignores the nudge is blocked, then killed", func(t *testing.T) {
		t.Parallel()
		r := runQwen(t, cycling(qwenLead, qwenCycle, 60), true)
		o := measureLoop(t, r, len(qwenLead))
		t.Logf("ignoring model: %+v; result %s", o, r.result)
		if r.exit != 86 {
			t.Fatalf("want exit 86 (killed on a verified loop kill), got %s", r)
		}
		if o.killRun == 0 || r.stuckKills() != 1 || o.blocked == 0 {
			t.Errorf("want one kill decided by the collector (at run %d; %d logged), calls blocked first (%d)\n%s", o.killRun, r.stuckKills(), o.blocked, r)
		}
		reach := holdKillReach(t, r, o)
		recordFigure(t, "qwen.cycle.stuck_run", float64(o.stuckRun))
		recordFigure(t, "qwen.cycle.kill_run", float64(o.killRun))
		recordFigure(t, "qwen.cycle.blocked", float64(o.blocked))
		recordFigure(t, "qwen.cycle.reach_s", math.Round(reach*100)/100)
		// As for every CLI (holdKilled): Qwen Code takes context only after
		// a call, so a warn decided with the kill (telemetry of two runs in
		// one export) reaches the model with the first blocked call, whose
		// reason carries the nudge.
		if o.heardAfter == 0 || o.heardAfter > o.killRun+1 {
			t.Errorf("want the nudge to have reached the model by the first blocked call (heard after run %d, kill at %d)\n%s", o.heardAfter, o.killRun, r)
		}
	})
	t.Run("a model that repeats the same call is ended by Qwen Code itself", func(t *testing.T) {
		t.Parallel()
		r := runQwen(t, agentcli.Loop{Lead: qwenLead, Repeat: qwenLoop, MaxRepeats: 60}, true)
		o := measureLoop(t, r, len(qwenLead))
		t.Logf("repeating model: %+v", o)
		if r.exit != 1 || r.killed() {
			t.Fatalf("want Qwen Code's own guard to end the run (exit 1) before the collector's kill at the 5th run; got %d runs, %s", o.runs, r)
		}
		recordFigure(t, "qwen.repeat.runs", float64(o.runs))
		if out := readFile(t, filepath.Join(r.dir, "supervisor.stdout")); !strings.Contains(out, "consecutive_identical_tool_calls") {
			t.Errorf("want Qwen Code's own loop guard named as the run's end in its stream-json result\n%s", testproc.Tail(out, 2000))
		}
		if o.stuckRun == 0 || o.heardAfter == 0 {
			t.Errorf("want the collector's warn (stuck at run %d) to have reached the model (heard after run %d)\n%s", o.stuckRun, o.heardAfter, r)
		}
	})
}

func TestQwenCodeHealthySessionsAreNeverBlocked(t *testing.T) {
	t.Parallel()
	for _, sc := range fixAndTest {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			checkHealthy(t, runQwen(t, sc.model(qwenTools), true))
		})
	}
	t.Run("a coding session", func(t *testing.T) {
		t.Parallel()
		checkCodingSession(t, runQwen(t, codingSession(qwenTools), true))
	})
}

// qwenDelegate is the main agent's call of Qwen Code's general-purpose
// subagent, whose prompt starts with marker.
func qwenDelegate(marker, what string) agentcli.Turn {
	return agentcli.Call("agent", map[string]any{
		"description":       "survey " + what,
		"prompt":            marker + " Survey the repository for " + what + " and report.",
		"subagent_type":     "general-purpose",
		"run_in_background": false,
	})
}

// TestQwenCodeSubagentLoopIsKilled: a subagent that varies its loop's call
// (Qwen Code ends a repeated one itself) is its own session, stuck and
// killed as the main agent's loop is; the hook cannot hold the kill for
// blocks, since it hears the subagent under Qwen Code's agent_id, not the
// collector's key, so the kill is carried out at once.
func TestQwenCodeSubagentLoopIsKilled(t *testing.T) {
	t.Parallel()
	const marker = "[subagent]"
	r := runQwen(t, agentcli.Delegating{
		Main:   agentcli.Script("reported", qwenDelegate(marker, "the open issues")),
		Sub:    cycling(nil, qwenCycle, 60),
		Marker: marker,
	}, true)
	holdKilledAtOnce(t, r)
}

// TestQwenCodeSubagentsAreNeverBlocked: five subagents (Qwen Code's agent
// tool, its general-purpose agent) one after another, each making the same
// three calls, are five agents working, not one repeating itself: their
// spans carry the main agent's session.id, each subagent's under a span of
// its own (attributes.subagent_spans). None is blocked, no kill decided.
func TestQwenCodeSubagentsAreNeverBlocked(t *testing.T) {
	t.Parallel()
	const marker = "[subagent]"
	delegate := func(what string) agentcli.Turn { return qwenDelegate(marker, what) }
	checkHealthy(t, runQwen(t, agentcli.Delegating{
		Main:   agentcli.Script(healthyDone, surveys(delegate)...),
		Sub:    agentcli.Script("survey done", surveyCalls(agentcli.Shell)...),
		Marker: marker,
	}, true))
}
