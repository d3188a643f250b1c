package agentcli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// GeminiCLIVersion is the Gemini CLI the tests run (make/agentcli.mk
// installs it from the npm registry; it runs on Node.js).
const GeminiCLIVersion = "0.61.0"

// GeminiBin returns the installed Gemini CLI ($GEMINI_CLI_BIN, set by
// `make test`). Without it the test is skipped, or fails under CI=true.
func GeminiBin(t testing.TB) string {
	return testproc.RequireTool(t, "GEMINI_CLI_BIN", "gemini-cli")
}

// GeminiProject is a working directory for one Gemini CLI run with its own
// HOME (so no user settings, credentials or history leak in or out).
type GeminiProject struct {
	// Dir is the project directory the CLI runs in.
	Dir string
	// Home is the CLI's HOME: it keeps its session files under
	// Home/.gemini/tmp/<project>/chats.
	Home string
}

// NewGeminiProject makes a project directory and a home under dir. The
// user settings choose Gemini API key auth, turn off usage statistics and
// update checks, trust the project folder (Gemini CLI ignores an untrusted
// project's settings.json, hooks included) and turn off the CLI's own loop
// detection, which would otherwise end a run of five identical calls
// before the collector's verdict is tested. hook, when not empty, is
// installed as the project's BeforeTool and AfterTool command hook for
// every tool: BeforeTool can refuse a call, only AfterTool can pass the
// model a hook's context (0.61.0 ignores BeforeTool's).
func NewGeminiProject(t testing.TB, dir, hook string) GeminiProject {
	t.Helper()
	p := GeminiProject{Dir: filepath.Join(dir, "project"), Home: filepath.Join(dir, "home")}
	for _, d := range []string{filepath.Join(p.Dir, ".gemini"), filepath.Join(p.Home, ".gemini")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	user := map[string]any{
		"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
		"privacy":  map[string]any{"usageStatisticsEnabled": false},
		"general":  map[string]any{"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
		"model":    map[string]any{"disableLoopDetection": true},
	}
	writeJSONFile(t, filepath.Join(p.Home, ".gemini", "settings.json"), user)
	writeJSONFile(t, filepath.Join(p.Home, ".gemini", "trustedFolders.json"), map[string]string{p.Dir: "TRUST_FOLDER"})
	if hook != "" {
		entry := []any{map[string]any{
			"matcher": ".*",
			"hooks":   []any{map[string]any{"type": "command", "command": hook}},
		}}
		settings := map[string]any{"hooks": map[string]any{"BeforeTool": entry, "AfterTool": entry}}
		writeJSONFile(t, filepath.Join(p.Dir, ".gemini", "settings.json"), settings)
	}
	return p
}

func writeJSONFile(t testing.TB, path string, v any) {
	t.Helper()
	b, _ := json.MarshalIndent(v, "", "  ")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// Env is the environment of a headless Gemini CLI run against model, with
// its telemetry (traces with tool-call arguments, logs, metrics) sent over
// OTLP/HTTP to otlp (none when empty).
func (p GeminiProject) Env(model *Server, otlp string) []string {
	env := []string{
		"HOME=" + p.Home,
		"PATH=" + os.Getenv("PATH"),
		"GOOGLE_GEMINI_BASE_URL=" + model.URL,
		"GEMINI_API_KEY=test-scripted-model",
	}
	if otlp != "" {
		env = append(env,
			"GEMINI_TELEMETRY_ENABLED=true",
			"GEMINI_TELEMETRY_TARGET=local",
			"GEMINI_TELEMETRY_OTLP_PROTOCOL=http",
			"GEMINI_TELEMETRY_OTLP_ENDPOINT="+otlp,
			"GEMINI_TELEMETRY_TRACES_ENABLED=true",
		)
	}
	return env
}

// GeminiArgs is `gemini -p prompt` in stream-json with every tool call
// approved (headless runs cannot ask) on a fixed model (no routing
// request).
func GeminiArgs(bin, prompt string) []string {
	return []string{bin, "-p", prompt, "--output-format", "stream-json", "--approval-mode", "yolo", "-m", "gemini-2.5-flash"}
}

// The Gemini API as Gemini CLI calls it (with a Gemini API key and
// GOOGLE_GEMINI_BASE_URL): POST /v1beta/models/<model>:generateContent,
// :streamGenerateContent?alt=sse (server-sent events, one
// GenerateContentResponse per event) and :countTokens. A tool call is a
// functionCall part of the model's content; the CLI answers it with a
// functionResponse part in the next request.

// Shell is a turn calling Gemini CLI's run_shell_command tool with command.
func Shell(command string) Turn {
	return Turn{Tool: &ToolUse{Name: "run_shell_command", Input: map[string]any{"command": command, "description": "run " + command}}}
}

// StartGemini serves model as a Gemini API on a free loopback port until
// the test ends; give its URL to the CLI as GOOGLE_GEMINI_BASE_URL.
func StartGemini(t testing.TB, model Model) *Server {
	return start(t, model, (*Server).serveGemini)
}

// geminiRequest is the part of a generateContent request the server reads.
type geminiRequest struct {
	Contents []struct {
		Role  string       `json:"role"`
		Parts []geminiPart `json:"parts"`
	} `json:"contents"`
	Tools []struct {
		FunctionDeclarations []json.RawMessage `json:"functionDeclarations"`
	} `json:"tools"`
}

type geminiPart struct {
	Text             string `json:"text,omitempty"`
	FunctionResponse *struct {
		ID       string         `json:"id"`
		Name     string         `json:"name"`
		Response map[string]any `json:"response"`
	} `json:"functionResponse,omitempty"`
}

// declaresTools reports whether the request offers the model functions:
// the agent's loop does, the CLI's side questions (routing, next speaker,
// titles) do not.
func (r geminiRequest) declaresTools() bool {
	for _, t := range r.Tools {
		if len(t.FunctionDeclarations) > 0 {
			return true
		}
	}
	return false
}

// conversation collects the function responses of every user content. A
// response is {"output": …} or, for a call that failed or was refused,
// {"error": …}.
func (r geminiRequest) conversation() Conversation {
	var c Conversation
	for _, m := range r.Contents {
		if m.Role != "user" {
			continue
		}
		for _, p := range m.Parts {
			fr := p.FunctionResponse
			if fr == nil {
				if p.Text != "" && len(c.Results) == 0 {
					// The user's text before any call: the prompt (a
					// subagent's is the one its invoke_agent call gave).
					c.Prompt = p.Text
				}
				continue
			}
			res := ToolResult{ID: fr.ID}
			if e, ok := fr.Response["error"]; ok {
				res.IsError = true
				res.Content = fmt.Sprint(e)
			} else if o, ok := fr.Response["output"].(string); ok {
				res.Content, res.Context = splitHookContext(o)
			} else {
				b, _ := json.Marshal(fr.Response)
				res.Content = string(b)
			}
			c.Results = append(c.Results, res)
		}
	}
	return c
}

// splitHookContext takes the hooks' additionalContext out of a function
// response's output: Gemini CLI 0.61.0 appends an AfterTool hook's
// context to the output as <hook_context>…</hook_context>.
func splitHookContext(output string) (content, context string) {
	const open, end = "<hook_context>", "</hook_context>"
	content = output
	for {
		i := strings.Index(content, open)
		if i < 0 {
			return content, context
		}
		j := strings.Index(content[i:], end)
		if j < 0 {
			return content, context
		}
		if context != "" {
			context += "\n"
		}
		context += content[i+len(open) : i+j]
		content = strings.TrimRight(content[:i], "\n") + content[i+j+len(end):]
	}
}

func (s *Server) serveGemini(w http.ResponseWriter, r *http.Request) {
	_, method, ok := strings.Cut(r.URL.Path, ":")
	if r.Method != http.MethodPost || !strings.Contains(r.URL.Path, "/models/") || !ok {
		http.NotFound(w, r)
		return
	}
	var req geminiRequest
	if !readRequest(w, r, &req) {
		return
	}
	switch method {
	case "countTokens":
		writeJSON(w, map[string]int{"totalTokens": 100})
		return
	case "generateContent", "streamGenerateContent":
	default:
		http.NotFound(w, r)
		return
	}
	turn, id := Done("ok"), ""
	if req.declaresTools() {
		turn, id = s.next(req.conversation())
	}
	part := map[string]any{"text": turn.Text}
	if turn.Tool != nil {
		part = map[string]any{"functionCall": map[string]any{"id": id, "name": turn.Tool.Name, "args": turn.Tool.Input}}
	}
	resp := map[string]any{
		"candidates": []any{map[string]any{
			"content":      map[string]any{"role": "model", "parts": []any{part}},
			"finishReason": "STOP",
			"index":        0,
		}},
		"usageMetadata": map[string]int{"promptTokenCount": 100, "candidatesTokenCount": 20, "totalTokenCount": 120},
		"modelVersion":  "scripted",
	}
	if method == "generateContent" {
		writeJSON(w, resp)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	b, _ := json.Marshal(resp)
	fmt.Fprintf(w, "data: %s\n\n", b)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}
