package agentcli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// CodexCLIVersion is the OpenAI Codex CLI the tests run (make/codex.mk
// installs it from the npm registry; its package ships a native binary).
const CodexCLIVersion = "0.169.0"

// CodexBin returns the installed Codex CLI ($CODEX_CLI_BIN, set by `make
// test`). Without it the test is skipped, or fails under CI=true.
func CodexBin(t testing.TB) string {
	return testproc.RequireTool(t, "CODEX_CLI_BIN", "codex-cli")
}

// codexAPIKeyVar is the variable the scripted provider reads its key from:
// Codex sends it as a bearer token, the scripted model ignores it.
const codexAPIKeyVar = "SCRIPTED_MODEL_API_KEY"

// CodexProject is a working directory for one Codex CLI run with its own
// HOME and CODEX_HOME (so no user config, credentials or sessions leak in
// or out).
type CodexProject struct {
	// Dir is the project directory the CLI runs in.
	Dir string
	// Home is the CLI's HOME and CODEX_HOME: it keeps config.toml,
	// hooks.json and its session files (sessions/YYYY/MM/DD/rollout-*.jsonl).
	Home string
}

// NewCodexProject makes a project directory and a CODEX_HOME under dir
// whose config.toml points the CLI at model: a model catalog naming the
// scripted model's tools, a model provider with the
// Responses API at model's URL (the only wire API 0.169.0 has), shell
// calls run without approval or sandbox (`codex exec` cannot ask), and,
// when otlp is not empty, its OTel log events (codex.tool_result with the
// call's arguments and output) sent over OTLP/HTTP to otlp. hook, when not
// empty, is installed in hooks.json as the PreToolUse command hook for
// every tool.
func NewCodexProject(t testing.TB, dir string, model *Server, hook, otlp string) CodexProject {
	t.Helper()
	p := CodexProject{Dir: filepath.Join(dir, "project"), Home: filepath.Join(dir, "home")}
	for _, d := range []string{p.Dir, p.Home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// A model Codex has no metadata for gets its shell alone; the catalog
	// gives the scripted model its apply_patch tool (a free-form custom
	// tool), as Codex's own models have.
	catalog := filepath.Join(p.Home, "models.json")
	writeJSONFile(t, catalog, map[string]any{"models": []any{map[string]any{
		"slug": "scripted", "display_name": "scripted", "supported_reasoning_levels": []any{},
		"shell_type": "default", "visibility": "list", "supported_in_api": true, "priority": 1,
		"support_verbosity": false, "truncation_policy": map[string]any{"mode": "tokens", "limit": 10000},
		"experimental_supported_tools": []any{}, "base_instructions": "You are a scripted model.",
		"apply_patch_tool_type": "freeform",
	}}})
	var cfg strings.Builder
	fmt.Fprintf(&cfg, `model = "scripted"
model_catalog_json = %s
model_provider = "scripted"
approval_policy = "never"
sandbox_mode = "danger-full-access"
check_for_update_on_startup = false

[model_providers.scripted]
name = "scripted model"
base_url = %s
env_key = %q
wire_api = "responses"
`, strconv.Quote(catalog), strconv.Quote(model.URL+"/v1"), codexAPIKeyVar)
	if otlp != "" {
		fmt.Fprintf(&cfg, `
[otel]
environment = "test"
log_user_prompt = false
exporter = { otlp-http = { endpoint = %s, protocol = "json" } }
`, strconv.Quote(otlp+"/v1/logs"))
	}
	if err := os.WriteFile(filepath.Join(p.Home, "config.toml"), []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if hook != "" {
		entry := []any{map[string]any{
			"matcher": ".*",
			"hooks":   []any{map[string]any{"type": "command", "command": hook}},
		}}
		writeJSONFile(t, filepath.Join(p.Home, "hooks.json"), map[string]any{"hooks": map[string]any{"PreToolUse": entry}})
	}
	return p
}

// Env is the environment of a headless Codex CLI run.
func (p CodexProject) Env() []string {
	return []string{
		"HOME=" + p.Home,
		"CODEX_HOME=" + p.Home,
		"PATH=" + os.Getenv("PATH"),
		codexAPIKeyVar + "=test-scripted-model",
	}
}

// CodexArgs is `codex exec prompt` printing JSONL events, outside a git
// repository, with the hooks of hooks.json run without the trust a user
// gives them interactively (0.169.0 skips hooks it was not told to trust).
func CodexArgs(bin, prompt string) []string {
	return []string{bin, "exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-hook-trust", prompt}
}

// The Responses API as Codex CLI 0.169.0 calls it: POST <base_url>/responses
// with stream true, answered with server-sent events (response.created,
// response.output_item.done per output item, response.completed with the
// usage). A tool call is a function_call output item; the CLI answers it
// with a function_call_output input item in the next request, which
// carries the whole conversation again.

// Exec is a turn calling Codex CLI's exec_command tool (its shell) with
// cmd.
func Exec(cmd string) Turn {
	return Turn{Tool: &ToolUse{Name: "exec_command", Input: map[string]any{"cmd": cmd}}}
}

// Patch is a turn calling Codex CLI's apply_patch tool with patch, in
// its own format (*** Begin Patch … *** End Patch).
func Patch(patch string) Turn {
	return Turn{Tool: &ToolUse{Name: "apply_patch", Input: map[string]any{"input": patch}}}
}

// AddFile is a Patch adding the file path with content.
func AddFile(path, content string) Turn {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Add File: " + path + "\n")
	for _, l := range strings.SplitAfter(content, "\n") {
		if l != "" {
			b.WriteString("+" + strings.TrimSuffix(l, "\n") + "\n")
		}
	}
	b.WriteString("*** End Patch\n")
	return Patch(b.String())
}

// StartCodex serves model as a Responses API on a free loopback port until
// the test ends; NewCodexProject points the CLI at it.
func StartCodex(t testing.TB, model Model) *Server {
	return start(t, model, (*Server).serveResponses)
}

// responsesRequest is the part of a Responses API request the server reads.
type responsesRequest struct {
	Model string            `json:"model"`
	Tools []json.RawMessage `json:"tools"`
	Input []responsesItem   `json:"input"`
}

type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	CallID  string          `json:"call_id"`
	Output  json.RawMessage `json:"output"`
	Content json.RawMessage `json:"content"`
}

// conversation collects the outputs of the model's calls. Codex CLI
// 0.169.0 sends a hook's additionalContext as a developer message between
// the call and its output; such a message after the first call is the
// context of the output that follows it (or, with none following, of the
// last one).
func (r responsesRequest) conversation() Conversation {
	var c Conversation
	var pending []string
	called := false
	for _, it := range r.Input {
		switch {
		case it.Type == "message" && it.Role == "user" && !called:
			if p := responsesText(it.Content); p != "" {
				c.Prompt = p // the last user message before any call: the prompt
			}
		case it.Type == "function_call" || it.Type == "custom_tool_call":
			called = true
		case it.Type == "message" && it.Role == "developer" && called:
			pending = append(pending, responsesText(it.Content))
		case it.Type == "function_call_output" || it.Type == "custom_tool_call_output":
			c.Results = append(c.Results, ToolResult{ID: it.CallID, Content: responsesText(it.Output)})
			for _, p := range pending {
				c.addContext(p)
			}
			pending = nil
		}
	}
	if len(c.Results) > 0 {
		for _, p := range pending {
			c.addContext(p)
		}
	}
	return c
}

// responsesText reads a message's content or a call's output: a string or
// a list of input_text / output_text items.
func responsesText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var items []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &items)
	var parts []string
	for _, it := range items {
		parts = append(parts, it.Text)
	}
	return strings.Join(parts, "\n")
}

func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasSuffix(r.URL.Path, "/responses") {
		http.NotFound(w, r)
		return
	}
	var req responsesRequest
	if !readRequest(w, r, &req) {
		return
	}
	turn, id := Done("ok"), ""
	if len(req.Tools) > 0 {
		// Requests without tools are the CLI's side questions; only the
		// agent's loop is scripted.
		turn, id = s.next(req.conversation())
	}
	n := len(s.Exchanges())
	item := map[string]any{
		"type": "message", "id": fmt.Sprintf("msg_%04d", n), "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": turn.Text, "annotations": []any{}}},
	}
	if turn.Tool != nil && turn.Tool.Name == "apply_patch" {
		// A custom tool: its input is free text, not JSON arguments.
		item = map[string]any{
			"type": "custom_tool_call", "id": "ctc_" + id, "call_id": "call_" + id, "status": "completed",
			"name": turn.Tool.Name, "input": fmt.Sprint(turn.Tool.Input["input"]),
		}
	} else if turn.Tool != nil {
		args, _ := json.Marshal(turn.Tool.Input)
		item = map[string]any{
			"type": "function_call", "id": "fc_" + id, "call_id": "call_" + id, "status": "completed",
			"name": turn.Tool.Name, "arguments": string(args),
		}
	}
	respID := fmt.Sprintf("resp_%04d", n)
	usage := map[string]any{
		"input_tokens": 100, "input_tokens_details": map[string]int{"cached_tokens": 0},
		"output_tokens": 20, "output_tokens_details": map[string]int{"reasoning_tokens": 0}, "total_tokens": 120,
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	ev := func(typ string, data map[string]any) {
		data["type"] = typ
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
	}
	ev("response.created", map[string]any{"response": map[string]any{"id": respID, "status": "in_progress", "model": req.Model}})
	ev("response.output_item.added", map[string]any{"output_index": 0, "item": item})
	ev("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	ev("response.completed", map[string]any{"response": map[string]any{
		"id": respID, "status": "completed", "model": req.Model, "output": []any{item}, "usage": usage,
	}})
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
