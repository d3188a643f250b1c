//go:build unix

package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
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
	// formatQwen is Qwen Code's PreToolUse and PostToolUse hooks: Claude
	// Code's output, but Qwen Code 0.24.4 drops a PreToolUse hook's
	// additionalContext (only PostToolUse's reaches the model, appended to
	// the result), so the query says a nudge must wait for PostToolUse.
	formatQwen hookFormat = "qwen"
	// formatCodex is OpenAI Codex CLI's PreToolUse hook (0.169.0): its
	// input and output are Claude Code's (a block is permissionDecision
	// "deny" with the reason, which the model gets as the call's output;
	// additionalContext reaches the model as a developer message), but its
	// shell tool is "Bash" to the hook and "exec_command" in its telemetry.
	formatCodex hookFormat = "codex"
)

// codexToolNames are the names Codex CLI's telemetry gives the tools its
// hooks name otherwise. The supervisor blocks only the tools of the loop
// the collector named, so the hook asks under the collector's name.
var codexToolNames = map[string]string{"Bash": "exec_command"}

// hookTimeout bounds the whole question to the supervisor: the hook fails
// open, a slow supervisor must not hold the agent's tool call.
const hookTimeout = 500 * time.Millisecond

// hookStdinTimeout bounds reading the CLI's hook input: a CLI that never
// closes stdin must not hold the tool call either.
const hookStdinTimeout = 2 * time.Second

// The answer's proof: the hook sends a fresh nonce, the supervisor answers
// with an HMAC-SHA256 under the run's hook token over the nonce and the
// answer's body. A process squatting on a dead supervisor's port holds no
// token, so its answer is ignored (the call is allowed).
const (
	headerHookNonce = "Loopsupervisor-Hook-Nonce"
	headerHookMAC   = "Loopsupervisor-Hook-Mac"
)

// answerMAC is the proof of an answer body to the query that sent nonce.
func answerMAC(token []byte, nonce string, body []byte) string {
	m := hmac.New(sha256.New, token)
	_, _ = m.Write([]byte(nonce))
	_, _ = m.Write([]byte{0})
	_, _ = m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// runHook is `loopsupervisor hook`: read one tool call from the agent CLI on
// stdin, ask the supervisor that started the agent, and print a block in
// the CLI's format when the supervisor says so. Every failure allows the
// call (exit 0, nothing printed): the hook must never be why an agent stops
// working. It returns the exit code.
func runHook(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loopsupervisor hook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", string(formatClaude), "the agent CLI's hook protocol: claude (PreToolUse), gemini (BeforeTool), qwen (PreToolUse, PostToolUse) or codex (PreToolUse)")
	if err := fs.Parse(args); err != nil {
		return exitUsage
	}
	f := hookFormat(*format)
	if f != formatClaude && f != formatGemini && f != formatQwen && f != formatCodex {
		fmt.Fprintf(stderr, "loopsupervisor hook: --format %q: want claude, gemini, qwen or codex\n", *format)
		return exitUsage
	}
	url, token := os.Getenv(envHookURL), os.Getenv(envHookToken)
	if url == "" || token == "" {
		return 0 // not under a supervisor: nothing to ask
	}
	in, err := readStdin(stdin, hookStdinTimeout)
	if err != nil {
		fmt.Fprintf(stderr, "loopsupervisor hook: %v (call allowed)\n", err)
		return 0
	}
	switch f {
	case formatQwen:
		in = markAfterToolContextOnly(in)
	case formatCodex:
		in = renameTool(in, codexToolNames)
	}
	a, err := askSupervisor(url, token, in)
	if err != nil {
		fmt.Fprintf(stderr, "loopsupervisor hook: %v (call allowed)\n", err)
		return 0
	}
	var event struct {
		Name string `json:"hook_event_name"`
	}
	_ = json.Unmarshal(in, &event)
	if out := cliOutput(f, event.Name, a); out != nil {
		b, _ := json.Marshal(out)
		_, _ = stdout.Write(append(b, '\n'))
	}
	return 0
}

// renameTool returns the hook input in with its tool_name replaced by its
// entry in names; input that is not a JSON object, or names no tool
// there, is returned as it is.
func renameTool(in []byte, names map[string]string) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(in, &m) != nil {
		return in
	}
	var tool string
	if json.Unmarshal(m["tool_name"], &tool) != nil {
		return in
	}
	renamed, ok := names[tool]
	if !ok {
		return in
	}
	m["tool_name"], _ = json.Marshal(renamed)
	out, err := json.Marshal(m)
	if err != nil {
		return in
	}
	return out
}

// readStdin reads the CLI's hook input, at most hookMaxBody bytes, within
// limit.
func readStdin(r io.Reader, limit time.Duration) ([]byte, error) {
	type read struct {
		b   []byte
		err error
	}
	done := make(chan read, 1)
	go func() {
		b, err := io.ReadAll(io.LimitReader(r, hookMaxBody+1))
		done <- read{b, err}
	}()
	select {
	case got := <-done:
		if got.err == nil && len(got.b) > hookMaxBody {
			got.err = fmt.Errorf("hook input larger than %d bytes", hookMaxBody)
		}
		return got.b, got.err
	case <-time.After(limit):
		return nil, fmt.Errorf("no hook input on stdin within %s", limit)
	}
}

// markAfterToolContextOnly adds to a hook input the field that tells the
// supervisor this CLI reads context only after a tool; an input that is
// not a JSON object is forwarded as it is (the supervisor refuses it).
func markAfterToolContextOnly(in []byte) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(in, &m) != nil || m == nil {
		return in
	}
	m[afterToolContextOnlyField] = json.RawMessage("true")
	b, err := json.Marshal(m)
	if err != nil {
		return in
	}
	return b
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
	nonce := newUUID()
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerHookNonce, nonce)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return a, fmt.Errorf("supervisor answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return a, err
	}
	want := answerMAC([]byte(token), nonce, body)
	if !hmac.Equal([]byte(resp.Header.Get(headerHookMAC)), []byte(want)) {
		return a, errors.New("the answer is not proven to come from this run's supervisor")
	}
	err = json.Unmarshal(body, &a)
	return a, err
}

// cliOutput is the JSON the CLI reads for an answer to its event: for a
// block "do not run this call, tell the model why", for a nudge "run it and
// give the model this text"; nil (print nothing) for a plain allow.
func cliOutput(f hookFormat, event string, a hookAnswer) any {
	switch a.Decision {
	case decisionBlock:
		if f == formatGemini {
			return map[string]string{"decision": "deny", "reason": a.Reason}
		}
		return map[string]any{"hookSpecificOutput": map[string]string{
			"hookEventName":            "PreToolUse",
			"permissionDecision":       "deny",
			"permissionDecisionReason": a.Reason,
		}}
	case decisionNudge:
		if event == "" {
			event = "PreToolUse"
		}
		return map[string]any{"hookSpecificOutput": map[string]string{
			"hookEventName":     event,
			"additionalContext": a.Reason,
		}}
	}
	return nil
}
