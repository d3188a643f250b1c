//go:build unix

package e2e

import (
	"strings"
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
	geminiLoop = agentcli.Shell("echo run >> loop-runs; gh issue list")
	geminiLead = []agentcli.Turn{
		agentcli.Shell("ls -la"),
		agentcli.Shell("cat README.md 2>/dev/null || echo no readme"),
		agentcli.Call("write_file", map[string]any{"file_path": "notes.md", "content": "issues to look at\n"}),
	}
)

func TestGeminiCLILoopIsStoppedWithinACall(t *testing.T) {
	t.Parallel()
	t.Run("a model that obeys the nudge changes course and is not killed", func(t *testing.T) {
		t.Parallel()
		r := runGemini(t, agentcli.Loop{Lead: geminiLead, Repeat: geminiLoop, Obeys: true, MaxRepeats: 60,
			Then: []agentcli.Turn{agentcli.Shell("echo 'gh is not installed here' >> notes.md")}}, true)
		if r.exit != 0 {
			t.Fatalf("want the agent to finish by itself (exit 0), got %s", r)
		}
		if r.loopRuns > maxLoopRunsWithoutResults {
			t.Errorf("the loop's call ran %d times, want ≤ %d\n%s", r.loopRuns, maxLoopRunsWithoutResults, r)
		}
		if !strings.Contains(r.supLog, "exited by itself with code 0; its hook blocked ") || strings.Contains(r.supLog, "its hook blocked 0 calls") {
			t.Errorf("want the hook to have blocked the loop's calls\n%s", r)
		}
		if strings.Contains(r.supLog, "stopping agent group") {
			t.Errorf("an obeying agent was killed\n%s", r)
		}
		if strings.Contains(r.supLog, "kill ") && strings.Contains(r.supLog, " held:") && !strings.Contains(r.supLog, "withdrawn: the model changed course") {
			t.Errorf("a held kill was not withdrawn\n%s", r)
		}
		// The model read the hook's reason as the result of its call.
		saw := false
		for _, e := range r.model.Exchanges() {
			if strings.Contains(e.Conversation.Last().Content, agentcli.BlockedMarker) && e.Conversation.Last().IsError {
				saw = true
			}
		}
		if !saw {
			t.Errorf("the model never saw the hook's reason as a failed call\n%s", r)
		}
		t.Logf("obeying model: the loop's call ran %d times", r.loopRuns)
	})
	t.Run("a model that ignores the nudge is killed", func(t *testing.T) {
		t.Parallel()
		r := runGemini(t, agentcli.Loop{Lead: geminiLead, Repeat: geminiLoop, MaxRepeats: 60}, true)
		if r.exit != 86 {
			t.Fatalf("want exit 86 (killed on a verified loop kill), got %s", r)
		}
		if r.loopRuns > maxLoopRunsWithoutResults {
			t.Errorf("the loop's call ran %d times, want ≤ %d\n%s", r.loopRuns, maxLoopRunsWithoutResults, r)
		}
		t.Logf("ignoring model: the loop's call ran %d times; result %s", r.loopRuns, r.result)
	})
}
