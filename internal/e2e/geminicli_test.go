//go:build unix

package e2e

import (
	"math"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/agentcli"
)

// The real Gemini CLI, headless (`gemini -p`), on a scripted Gemini API,
// under loopsupervisor, its telemetry (tool_call spans with arguments)
// going to the collector on config/local.yaml, with the supervisor's hook
// installed in the project's settings.json as a BeforeTool command hook.

// runGemini runs Gemini CLI on model under the supervisor.
func runGemini(t *testing.T, model agentcli.Model, withHook bool, supArgs ...string) agentRun {
	t.Helper()
	gemini := agentcli.GeminiBin(t)
	hook := ""
	if withHook {
		hook = "hook --format gemini"
	}
	return runAgent(t, func(t *testing.T, dir, hook, otlp string) (*agentcli.Server, string, []string, []string) {
		srv := agentcli.StartGemini(t, model)
		proj := agentcli.NewGeminiProject(t, dir, hook)
		return srv, proj.Dir, proj.Env(srv, otlp), agentcli.GeminiArgs(gemini, "Find the open issues of this repository and summarise them.")
	}, hook, supArgs...)
}

// The incident's loop in Gemini CLI's tools.
var (
	geminiLoop = agentcli.Shell("date '+run %s.%N' >> loop-runs; gh issue list")
	geminiLead = []agentcli.Turn{
		agentcli.Shell("ls -la"),
		agentcli.Shell("cat README.md 2>/dev/null || echo no readme"),
		agentcli.Call("write_file", map[string]any{"file_path": "notes.md", "content": "issues to look at\n"}),
	}
)

// geminiThen is the obeying model's change of course.
var geminiThen = []agentcli.Turn{agentcli.Shell("echo 'gh is not installed here' >> notes.md")}

// TestGeminiCLILoopIsStoppedWithinACall: the incident's loop in Gemini CLI
// with its BeforeTool and AfterTool command hooks. The collector's warn
// comes at the 2nd identical result and reaches the model as a nudge with
// the next call's result (AfterTool); a model that obeys it changes course
// before the kill point and is never blocked, one that ignores it loops to
// the kill at the 5th identical call, then its repeats are blocked and it
// is killed. Each run records its figures (figures_test.go).
func TestGeminiCLILoopIsStoppedWithinACall(t *testing.T) {
	t.Parallel()
	t.Run("a model that obeys the nudge changes course and is not killed", func(t *testing.T) {
		t.Parallel()
		r := runGemini(t, agentcli.Loop{Lead: geminiLead, Repeat: geminiLoop, Obeys: true, MaxRepeats: 60, Then: geminiThen}, true)
		o := measureLoop(t, r, len(geminiLead))
		t.Logf("obeying model: %+v", o)
		holdObeyed(t, r, o)
		recordFigure(t, "gemini.obey.runs", float64(o.runs))
		recordFigure(t, "gemini.obey.blocked", float64(o.blocked))
	})
	t.Run("a model that ignores the nudge is blocked, then killed", func(t *testing.T) {
		t.Parallel()
		r := runGemini(t, agentcli.Loop{Lead: geminiLead, Repeat: geminiLoop, MaxRepeats: 60}, true)
		o := measureLoop(t, r, len(geminiLead))
		t.Logf("ignoring model: %+v; result %s", o, r.result)
		reach := holdKilled(t, r, o)
		recordFigure(t, "gemini.decision.stuck_run", float64(o.stuckRun))
		recordFigure(t, "gemini.decision.kill_run", float64(o.killRun))
		recordFigure(t, "gemini.ignore.runs", float64(o.runs))
		recordFigure(t, "gemini.ignore.after_kill", float64(o.afterKill))
		recordFigure(t, "gemini.ignore.blocked", float64(o.blocked))
		recordFigure(t, "gemini.ignore.reach_s", math.Round(reach*100)/100)
	})
}

// geminiDelegate is the main agent's call of Gemini CLI's generalist
// subagent, whose prompt starts with marker.
func geminiDelegate(marker, what string) agentcli.Turn {
	return agentcli.Call("invoke_agent", map[string]any{
		"agent_name": "generalist",
		"prompt":     marker + " Survey the repository for " + what + " and report.",
	})
}

// geminiSubagent is a subagent that makes turns, then ends its task as
// Gemini CLI's subagents must (complete_task).
func geminiSubagent(turns ...agentcli.Turn) agentcli.Model {
	return agentcli.Script("surveyed", append(turns, agentcli.Call("complete_task", map[string]any{"result": "surveyed"}))...)
}

// TestGeminiCLISubagentsAreNeverBlocked: five subagents (Gemini CLI's
// invoke_agent, its generalist) one after another, each making the same
// three calls, are five agents working, not one cycling: each call's
// recorded request names the invoke_agent call that started its subagent
// (attributes.subagent_session). None is blocked, no kill decided.
func TestGeminiCLISubagentsAreNeverBlocked(t *testing.T) {
	t.Parallel()
	const marker = "[subagent]"
	delegate := func(what string) agentcli.Turn { return geminiDelegate(marker, what) }
	checkHealthy(t, runGemini(t, agentcli.Delegating{
		Main:   agentcli.Script(healthyDone, surveys(delegate)...),
		Sub:    geminiSubagent(surveyCalls(agentcli.Shell)...),
		Marker: marker,
	}, true))
}

// TestGeminiCLISubagentLoopIsKilled: a subagent that loops on the
// incident's call is its own session, stuck and killed as the main
// agent's loop is; the hook does not hear the subagent under the
// collector's key, so it cannot hold the kill for blocks, and the kill is
// carried out at once.
func TestGeminiCLISubagentLoopIsKilled(t *testing.T) {
	t.Parallel()
	const marker = "[subagent]"
	r := runGemini(t, agentcli.Delegating{
		Main:   agentcli.Script("reported", geminiDelegate(marker, "the open issues")),
		Sub:    agentcli.Loop{Repeat: geminiLoop, MaxRepeats: 60},
		Marker: marker,
	}, true)
	holdKilledAtOnce(t, r)
}
