//go:build unix

package e2e

import (
	"math"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/agentcli"
)

// The real OpenCode CLI, headless (`opencode run`), on a scripted Chat
// Completions API, under loopsupervisor, its OpenTelemetry export (the AI
// SDK's ai.toolCall spans: tool name, arguments, result, session.id) going
// to the collector on config/local.yaml, with loopsupervisor's plugin in the
// project's .opencode/plugins asking the supervisor before every call.

// runOpenCode runs OpenCode on model under the supervisor, with the
// supervisor's plugin installed when withPlugin is set.
func runOpenCode(t *testing.T, model agentcli.Model, withPlugin bool, supArgs ...string) agentRun {
	t.Helper()
	bin := agentcli.OpenCodeBin(t)
	hook := ""
	if withPlugin {
		// The plugin finds the endpoint in the environment the supervisor
		// gives OpenCode; the URL only says that there is a hook.
		hook = "/hook"
	}
	return runAgent(t, func(t *testing.T, dir, hook, otlp string) (*agentcli.Server, string, []string, []string) {
		srv := agentcli.StartOpenCode(t, model)
		proj := agentcli.NewOpenCodeProject(t, dir, srv)
		if hook != "" {
			proj.InstallSupervisorPlugin(t)
		}
		return srv, proj.Dir, proj.Env(otlp), agentcli.OpenCodeArgs(bin, "Find the open issues of this repository and summarise them.")
	}, hook, supArgs...)
}

// The incident's loop in OpenCode's tools.
var (
	openCodeLoop = agentcli.OpenCodeBash("date '+run %s.%N' >> loop-runs; gh issue list")
	openCodeLead = []agentcli.Turn{
		agentcli.OpenCodeBash("ls -la"),
		agentcli.OpenCodeBash("cat README.md 2>/dev/null || echo no readme"),
		agentcli.Call("write", map[string]any{"filePath": "notes.md", "content": "issues to look at\n"}),
	}
	openCodeThen = []agentcli.Turn{agentcli.OpenCodeBash("echo 'gh is not installed here' >> notes.md")}
)

// TestOpenCodeLoopIsStoppedWithinACall: the incident's loop in OpenCode with
// loopsupervisor's plugin. The collector's warn reaches the model as a
// nudge appended to the next call's output; a model that obeys it changes
// course before the kill point and is never blocked, one that ignores it
// loops to the kill, then its repeats are refused by the plugin and it is
// killed. Each run logs its figures.
func TestOpenCodeLoopIsStoppedWithinACall(t *testing.T) {
	t.Parallel()
	t.Run("a model that obeys the nudge changes course and is not killed", func(t *testing.T) {
		t.Parallel()
		r := runOpenCode(t, agentcli.Loop{Lead: openCodeLead, Repeat: openCodeLoop, Obeys: true, MaxRepeats: 60, Then: openCodeThen}, true)
		o := measureLoop(t, r, len(openCodeLead))
		t.Logf("obeying model: %+v", o)
		holdObeyed(t, r, o)
		recordFigure(t, "opencode.obey.runs", float64(o.runs))
		recordFigure(t, "opencode.obey.blocked", float64(o.blocked))
	})
	t.Run("a model that ignores the nudge is blocked, then killed", func(t *testing.T) {
		t.Parallel()
		r := runOpenCode(t, agentcli.Loop{Lead: openCodeLead, Repeat: openCodeLoop, MaxRepeats: 60}, true)
		o := measureLoop(t, r, len(openCodeLead))
		t.Logf("ignoring model: %+v; result %s", o, r.result)
		reach := holdKilled(t, r, o)
		recordFigure(t, "opencode.decision.stuck_run", float64(o.stuckRun))
		recordFigure(t, "opencode.decision.kill_run", float64(o.killRun))
		recordFigure(t, "opencode.ignore.runs", float64(o.runs))
		recordFigure(t, "opencode.ignore.blocked", float64(o.blocked))
		recordFigure(t, "opencode.ignore.reach_s", math.Round(reach*100)/100)
	})
}

// openCodeSubagentMarker starts the prompt of the subagent the main agent
// delegates to, which tells the scripted model whose conversation it is
// answering.
const openCodeSubagentMarker = "[subagent: the open issues]"

// TestOpenCodeSubagentLoopIsStopped: the main agent hands the work to a
// subagent (OpenCode's task tool, its general agent), which loops on the
// incident's call in a session of its own. The collector judges that
// session by its own calls, the plugin hears the subagent's calls as the
// main agent's, and OpenCode is stopped as in the main agent's loop: the
// nudge, then blocks, then the kill.
func TestOpenCodeSubagentLoopIsStopped(t *testing.T) {
	t.Parallel()
	delegate := agentcli.Call("task", map[string]any{
		"description":   "list the open issues",
		"prompt":        openCodeSubagentMarker + " List the open issues of this repository with gh and report them.",
		"subagent_type": "general",
	})
	r := runOpenCode(t, agentcli.Delegating{
		Main:   agentcli.Script("the subagent reported back", delegate),
		Sub:    agentcli.Loop{Repeat: openCodeLoop, MaxRepeats: 60},
		Marker: openCodeSubagentMarker,
	}, true)
	holdSubagentKilled(t, "opencode", r)
}

// openCodeTools writes a healthy session in OpenCode's tool names and
// arguments.
var openCodeTools = toolset{
	shell: agentcli.OpenCodeBash,
	write: func(path, content string) agentcli.Turn {
		return agentcli.Call("write", map[string]any{"filePath": path, "content": content})
	},
	read: func(path string) agentcli.Turn { return agentcli.Call("read", map[string]any{"filePath": path}) },
	edit: func(path, old, new string) agentcli.Turn {
		return agentcli.Call("edit", map[string]any{"filePath": path, "oldString": old, "newString": new})
	},
	grep: func(pattern, path string) agentcli.Turn {
		return agentcli.Call("grep", map[string]any{"pattern": pattern, "path": path})
	},
}

// TestOpenCodeHealthySessionsAreNeverBlocked: healthy sessions that look
// like loops to a naive detector (healthy_test.go), in OpenCode with the
// supervisor's plugin: none may have a call blocked or be killed.
func TestOpenCodeHealthySessionsAreNeverBlocked(t *testing.T) {
	t.Parallel()
	for _, sc := range fixAndTest {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			checkHealthy(t, runOpenCode(t, sc.model(openCodeTools), true))
		})
	}
	t.Run("CI polled with a short sleep until it completes", func(t *testing.T) {
		t.Parallel()
		checkHealthy(t, runOpenCode(t, ciPolling(openCodeTools, ciPending), true))
	})
}

// TestOpenCodeCodingSessionIsNeverBlocked: 40 calls of ordinary coding
// work in OpenCode with the plugin; the collector never finds it stuck.
func TestOpenCodeCodingSessionIsNeverBlocked(t *testing.T) {
	t.Parallel()
	checkCodingSession(t, runOpenCode(t, codingSession(openCodeTools), true))
}
