//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/otelcol-loop/otelcol-loop/cmd/loopsupervisor/internal/webhook"
)

// codexInput is the PreToolUse input Codex CLI 0.169.0 writes to a hook's
// stdin for its exec_command tool (recorded from the real CLI; paths
// shortened).
func codexInput(session, command string) string {
	return fmt.Sprintf(`{"session_id":%q,"turn_id":"01a24c6d-cf6f-7461-a723-5156acdce455","transcript_path":"/h/sessions/2026/12/06/rollout-2026-12-06T17-36-34-%s.jsonl","cwd":"/w","hook_event_name":"PreToolUse","model":"scripted","permission_mode":"bypassPermissions","tool_name":"Bash","tool_input":{"command":%q},"tool_use_id":"call_0"}`, session, session, command)
}

// Codex CLI's hook names its shell "Bash", its telemetry "exec_command":
// the collector's kill names the loop's tools as the telemetry does, so
// only the codex format, which asks under the telemetry's name, blocks the
// loop's repeats; asked as "Bash", the call reads as a change of course.
func TestHookCommandCodexFormatAsksUnderTheTelemetrysToolName(t *testing.T) {
	const sess = "01a24c6d-ceaa-7201-af51-fceb98d26ab1"
	tests := []struct {
		format    string
		wantBlock bool
	}{
		{"codex", true},
		{"claude", false},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			var executed int
			b := newHookBook(2, func(webhook.Message) { executed++ }, func(string, ...any) {})
			env := map[string]string{envHookURL: hookServer(t, b, "tok"), envHookToken: "tok"}
			for range 2 {
				_, out, _ := runHookWith(t, env, codexInput(sess, "gh issue list"), "--format", tt.format)
				require.Empty(t, out, "no verdict yet: allowed")
			}
			b.warn(sess, warnBody(sess, "You ran gh issue list 5 times.", "exec_command"), t0)
			require.True(t, b.hold(killMsg(sess), t0))
			code, out, _ := runHookWith(t, env, codexInput(sess, "gh issue list"), "--format", tt.format)
			require.Zero(t, code)
			if !tt.wantBlock {
				assert.NotContains(t, out, `"deny"`)
				assert.Zero(t, b.blockedCalls())
				return
			}
			var blocked struct {
				HookSpecificOutput struct{ HookEventName, PermissionDecision, PermissionDecisionReason string }
			}
			require.NoError(t, json.Unmarshal([]byte(out), &blocked), out)
			assert.Equal(t, "PreToolUse", blocked.HookSpecificOutput.HookEventName)
			assert.Equal(t, "deny", blocked.HookSpecificOutput.PermissionDecision)
			assert.Contains(t, blocked.HookSpecificOutput.PermissionDecisionReason, "Blocked by loopsupervisor")
			assert.Contains(t, blocked.HookSpecificOutput.PermissionDecisionReason, "You ran gh issue list 5 times.")
			assert.Equal(t, 1, b.blockedCalls())
		})
	}
}

func TestRenameTool(t *testing.T) {
	names := map[string]string{"Bash": "exec_command"}
	tests := []struct{ name, in, wantTool string }{
		{"the shell is renamed", `{"session_id":"s","tool_name":"Bash","tool_input":{"command":"ls"}}`, "exec_command"},
		{"other tools stay", `{"session_id":"s","tool_name":"apply_patch"}`, "apply_patch"},
		{"no tool name", `{"session_id":"s"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var q hookQuery
			require.NoError(t, json.Unmarshal(renameTool([]byte(tt.in), names), &q))
			assert.Equal(t, tt.wantTool, q.ToolName)
			assert.Equal(t, "s", q.SessionID)
		})
	}
	assert.Equal(t, "not json", string(renameTool([]byte("not json"), names)), "input that is not JSON is passed on as it is")
}
