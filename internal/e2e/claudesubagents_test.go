//go:build unix

package e2e

import (
	"fmt"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/agentcli"
)

// Claude Code's subagents (its Agent tool) share the main agent's
// session.id in its logs and often run side by side; its traces give each
// a conversation id of its own, and its hook names each by agent_id. The
// collector keys a subagent's calls by its agent_id either way
// (attributes.subagent_session), and so does the supervisor's hook.

// claudeSubagentMarker starts the prompt of every subagent the main agent
// starts, which tells the scripted model whose conversation it answers.
const claudeSubagentMarker = "[subagent]"

// claudeDelegate is the main agent's call of a general-purpose subagent.
func claudeDelegate(what string) agentcli.Turn {
	return agentcli.Call("Agent", map[string]any{
		"description":   "survey " + what,
		"prompt":        claudeSubagentMarker + " Survey the repository for " + what + " and report.",
		"subagent_type": "general-purpose",
	})
}

// TestClaudeCodeSubagentsSideBySideAreNeverBlocked: five subagents that
// Claude Code runs side by side, each making the same first reads, are
// five agents working, not one agent repeating itself: on the logs (which
// carry the main session.id on every subagent's call) and on the README's
// traces, none is blocked and no kill is decided.
func TestClaudeCodeSubagentsSideBySideAreNeverBlocked(t *testing.T) {
	t.Parallel()
	model := agentcli.Delegating{
		Main:   agentcli.Script(healthyDone, surveys(claudeDelegate)...),
		Sub:    agentcli.Script("survey done", surveyCalls(agentcli.Bash)...),
		Marker: claudeSubagentMarker,
	}
	for _, recipe := range []bool{false, true} {
		t.Run(fmt.Sprintf("README recipe %v", recipe), func(t *testing.T) {
			t.Parallel()
			checkHealthy(t, runClaudeTelemetry(t, model, httpHook, recipe))
		})
	}
}

// TestClaudeCodeSubagentLoopIsStopped: the main agent hands the work to a
// subagent that loops on the incident's call and ignores the nudge. The
// collector judges the subagent's own session, the hook hears its calls
// under the same key: the nudge reaches the subagent's model, its repeats
// are blocked, and Claude Code is killed.
func TestClaudeCodeSubagentLoopIsStopped(t *testing.T) {
	t.Parallel()
	r := runClaude(t, agentcli.Delegating{
		Main:   agentcli.Script("the subagent reported back", claudeDelegate("the open issues")),
		Sub:    agentcli.Loop{Repeat: ghLoop, MaxRepeats: 60},
		Marker: claudeSubagentMarker,
	}, httpHook)
	holdSubagentKilled(t, "claude", r)
}

// TestClaudeCodeDelegationLoopIsStopped: judging each subagent on its own
// must not hide a loop made of subagents. A main agent that hands the same
// task to a new subagent again and again (each runs the incident's call
// once and reports) repeats its own Agent call: the main agent's session
// is stuck and killed at its 5th delegation, its repeats blocked first.
func TestClaudeCodeDelegationLoopIsStopped(t *testing.T) {
	t.Parallel()
	r := runClaude(t, agentcli.Delegating{
		Main:   agentcli.Loop{Repeat: claudeDelegate("the open issues"), MaxRepeats: 30},
		Sub:    agentcli.Script("no issues found: gh is not installed", ghLoop),
		Marker: claudeSubagentMarker,
	}, httpHook)
	o := measureLoop(t, r, 0)
	t.Logf("delegation loop: %+v; result %s", o, r.result)
	if r.exit != 86 || r.stuckKills() != 1 || o.killRun != 5 {
		t.Fatalf("want one kill decided at the 5th delegation (at %d; %d logged) and carried out (exit 86)\n%s", o.killRun, r.stuckKills(), r)
	}
	if o.blocked != 3 {
		t.Errorf("want the main agent's repeats blocked first (3), got %d\n%s", o.blocked, r)
	}
}
