//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// hookFormat names the agent CLI whose hook protocol `loopsupervisor hook`
// speaks: its input is that CLI's JSON on stdin, its answer what the CLI
// reads back.
type hookFormat string

const (
	// formatClaude is Claude Code's PreToolUse hook: a block is a
	// permissionDecision "deny" with the reason shown to the model.
	formatClaude hookFormat = "claude"
	// formatGemini is Gemini CLI's BeforeTool hook: a block is decision
	// "deny" with the reason, which the model gets as the call's error
	// ("Tool execution blocked: <reason>"; Gemini CLI 0.61.0).
	formatGemini hookFormat = "gemini"
)

// hookTimeout bounds the whole question to the supervisor: the hook fails
// open, a slow supervisor must not hold the agent's tool call.
const hookTimeout = 500 * time.Millisecond

// runHook is `loopsupervisor hook`: read one tool call from the agent CLI on
// stdin, ask the supervisor that started the agent, and print a block in
// the CLI's format when the supervisor says so. Every failure allows the
// call (exit 0, nothing printed): the hook must never be why an agent stops
// working. It returns the exit code.
func runHook(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loopsupervisor hook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", string(formatClaude), "the agent CLI's hook protocol: claude (PreToolUse) or gemini (BeforeTool)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	f := hookFormat(*format)
	if f != formatClaude && f != formatGemini {
		fmt.Fprintf(stderr, "loopsupervisor hook: --format %q: want claude or gemini\n", *format)
		return exitUsage
	}
	url, token := os.Getenv(envHookURL), os.Getenv(envHookToken)
	if url == "" || token == "" {
		return 0 // not under a supervisor: nothing to ask
	}
	in, err := io.ReadAll(io.LimitReader(stdin, hookMaxBody+1))
	if err != nil || len(in) > hookMaxBody {
		return 0
	}
	a, err := askSupervisor(url, token, in)
	if err != nil {
		fmt.Fprintf(stderr, "loopsupervisor hook: %v (call allowed)\n", err)
		return 0
	}
	if a.Decision != decisionBlock {
		return 0
	}
	out, _ := json.Marshal(blockOutput(f, a.Reason))
	_, _ = stdout.Write(append(out, '\n'))
	return 0
}

// askSupervisor forwards the CLI's hook input as it is: the supervisor
// reads session_id, tool_name and tool_input, the fields every supported
// CLI sends, and ignores the rest.
func askSupervisor(url, token string, in []byte) (hookAnswer, error) {
	var a hookAnswer
	ctx, cancel := context.WithTimeout(context.Background(), hookTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(in))
	if err != nil {
		return a, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("supervisor answered %s", resp.Status)
	}
	err = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&a)
	return a, err
}

// blockOutput is the JSON a CLI reads as "do not run this call, tell the
// model why".
func blockOutput(f hookFormat, reason string) any {
	if f == formatGemini {
		return map[string]string{"decision": "deny", "reason": reason}
	}
	return map[string]any{"hookSpecificOutput": map[string]string{
		"hookEventName":            "PreToolUse",
		"permissionDecision":       "deny",
		"permissionDecisionReason": reason,
	}}
}
