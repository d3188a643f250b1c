//go:build unix

package e2e

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/agentcli"
)

// The real OpenAI Codex CLI, headless (`codex exec`), on a scripted
// Responses API, under loopsupervisor, its OTel log events (codex.tool_result
// with the call's arguments and output) going to the collector on
// config/local.yaml, with the supervisor's hook installed in hooks.json as
// a PreToolUse command hook.

// runCodex runs Codex CLI on model under the supervisor.
func runCodex(t *testing.T, model agentcli.Model, withHook bool, supArgs ...string) agentRun {
	t.Helper()
	codex := agentcli.CodexBin(t)
	hook := ""
	if withHook {
		hook = "hook --format codex"
	}
	return runAgent(t, func(t *testing.T, dir, hook, otlp string) (*agentcli.Server, string, []string, []string) {
		srv := agentcli.StartCodex(t, model)
		proj := agentcli.NewCodexProject(t, dir, srv, hook, otlp)
		return srv, proj.Dir, proj.Env(), agentcli.CodexArgs(codex, "Find the open issues of this repository and summarise them.")
	}, hook, supArgs...)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// codexTools writes a session in Codex CLI's tools: new files come with
// apply_patch, as Codex's models write them; the rest goes through its
// shell (exec_command), where an edit needs no whole line to match.
var codexTools = toolset{
	shell: agentcli.Exec,
	write: agentcli.AddFile,
	read:  func(path string) agentcli.Turn { return agentcli.Exec("cat " + shellQuote(path)) },
	edit: func(path, old, new string) agentcli.Turn {
		// The strings reach perl through its environment, so nothing in
		// them is read as a pattern or an escape.
		return agentcli.Exec(fmt.Sprintf(`OLD=%s NEW=%s perl -0pi -e 's/\Q$ENV{OLD}\E/$ENV{NEW}/' %s`, shellQuote(old), shellQuote(new), shellQuote(path)))
	},
	grep: func(pattern, path string) agentcli.Turn {
		return agentcli.Exec(fmt.Sprintf("grep -rn %s %s", shellQuote(pattern), shellQuote(path)))
	},
}

// The incident's loop in Codex CLI's tools.
var (
	codexLoop = agentcli.Exec("date '+run %s.%N' >> loop-runs; gh issue list")
	codexLead = []agentcli.Turn{
		agentcli.Exec("ls -la"),
		agentcli.Exec("cat README.md 2>/dev/null || echo no readme"),
		codexTools.write("notes.md", "issues to look at\n"),
	}
	codexThen = []agentcli.Turn{agentcli.Exec("echo 'gh is not installed here' >> notes.md")}
)

// TestCodexCLILoopIsStoppedWithinACall: the incident's loop in Codex CLI
// with the supervisor's PreToolUse command hook. The collector's warn
// reaches the model as a nudge with the next call (Codex sends the hook's
// additionalContext as a developer message beside the call's output); a
// model that obeys it changes course before the kill point and is never
// blocked, one that ignores it loops to the kill at the 5th identical
// call, then its repeats are blocked (3, --hook-patience 2) and it is
// killed. Without the hook the kill comes with the telemetry.
func TestCodexCLILoopIsStoppedWithinACall(t *testing.T) {
	t.Parallel()
	t.Run("a model that obeys the nudge changes course and is not killed", func(t *testing.T) {
		t.Parallel()
		r := runCodex(t, agentcli.Loop{Lead: codexLead, Repeat: codexLoop, Obeys: true, MaxRepeats: 60, Then: codexThen}, true)
		o := measureLoop(t, r, len(codexLead))
		t.Logf("obeying model: %+v", o)
		holdObeyed(t, r, o)
		recordFigure(t, "codex.obey.runs", float64(o.runs))
		recordFigure(t, "codex.obey.blocked", float64(o.blocked))
	})
	t.Run("a model that ignores the nudge is blocked, then killed", func(t *testing.T) {
		t.Parallel()
		r := runCodex(t, agentcli.Loop{Lead: codexLead, Repeat: codexLoop, MaxRepeats: 60}, true)
		o := measureLoop(t, r, len(codexLead))
		t.Logf("ignoring model: %+v; result %s", o, r.result)
		reach := holdKilled(t, r, o)
		recordFigure(t, "codex.ignore.runs", float64(o.runs))
		recordFigure(t, "codex.ignore.blocked", float64(o.blocked)) // --hook-patience 2
		recordFigure(t, "codex.ignore.reach_s", math.Round(reach*100)/100)
	})
	t.Run("without the hook the collector's kill stops it", func(t *testing.T) {
		// Codex CLI skips a hook the user has not trusted: the kill then
		// comes with its telemetry, exported every 200 ms (the
		// supervisor's OTEL_BLRP_SCHEDULE_DELAY, which it honours).
		t.Parallel()
		r := runCodex(t, agentcli.Loop{Lead: codexLead, Repeat: codexLoop, MaxRepeats: 60}, false)
		o := measureLoop(t, r, len(codexLead))
		t.Logf("no hook: %+v; result %s", o, r.result)
		if r.exit != 86 {
			t.Fatalf("want exit 86 (killed on a verified loop kill), got %s", r)
		}
		if o.killRun == 0 || r.stuckKills() != 1 {
			t.Errorf("want one kill decided by the collector (at run %d; %d logged)\n%s", o.killRun, r.stuckKills(), r)
		}
		if o.blocked != 0 {
			t.Errorf("want nothing blocked without the hook, got %d blocked\n%s", o.blocked, r)
		}
		recordFigure(t, "codex.nohook.runs", float64(o.runs))
	})
}

func TestCodexCLIHealthySessionsAreNeverBlocked(t *testing.T) {
	t.Parallel()
	for _, sc := range fixAndTest {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			checkHealthy(t, runCodex(t, sc.model(codexTools), true))
		})
	}
	t.Run("CI polled with a short sleep until it completes", func(t *testing.T) {
		t.Parallel()
		checkHealthy(t, runCodex(t, ciPolling(codexTools, ciPending), true))
	})
}

func TestCodexCLICodingSessionIsNeverBlocked(t *testing.T) {
	t.Parallel()
	checkCodingSession(t, runCodex(t, codingSession(codexTools), true))
}
