package agentcli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// QwenCodeVersion is the Qwen Code CLI the tests run (make/qwen.mk
// installs it from the npm registry; a JavaScript bundle run by Node.js).
const QwenCodeVersion = "0.24.4"

// QwenBin returns the installed Qwen Code CLI ($QWEN_CODE_BIN, set by
// `make test`). Without it the test is skipped, or fails under CI=true.
func QwenBin(t testing.TB) string {
	return testproc.RequireTool(t, "QWEN_CODE_BIN", "qwen-code")
}

// QwenProject is a working directory for one Qwen Code run with its own
// HOME (so no user settings, credentials or history leak in or out).
type QwenProject struct {
	// Dir is the project directory the CLI runs in.
	Dir string
	// Home is the CLI's HOME: it keeps its session files under
	// Home/.qwen/projects/<project>/chats.
	Home string
}

// NewQwenProject makes a project directory and a home under dir. The user
// settings turn off usage statistics, update checks and the background
// memory agents (their requests declare tools too, and would be answered
// as the agent's loop). hook, when not empty, is installed as the
// project's PreToolUse, PostToolUse and PostToolUseFailure command hook for
// every tool: PreToolUse can refuse a call, only the events after it can
// pass the model a hook's context (0.24.4 drops PreToolUse's outside its
// ACP mode), and a call that failed (a command that exited non-zero) gets
// PostToolUseFailure instead of PostToolUse.
func NewQwenProject(t testing.TB, dir, hook string) QwenProject {
	t.Helper()
	p := QwenProject{Dir: filepath.Join(dir, "project"), Home: filepath.Join(dir, "home")}
	for _, d := range []string{filepath.Join(p.Dir, ".qwen"), filepath.Join(p.Home, ".qwen")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	user := map[string]any{
		"privacy": map[string]any{"usageStatisticsEnabled": false},
		"general": map[string]any{"enableAutoUpdate": false},
		"memory":  map[string]any{"enableManagedAutoMemory": false, "enableManagedAutoDream": false},
	}
	writeJSONFile(t, filepath.Join(p.Home, ".qwen", "settings.json"), user)
	if hook != "" {
		entry := []any{map[string]any{
			"matcher": ".*",
			"hooks":   []any{map[string]any{"type": "command", "command": hook}},
		}}
		settings := map[string]any{"hooks": map[string]any{"PreToolUse": entry, "PostToolUse": entry, "PostToolUseFailure": entry}}
		writeJSONFile(t, filepath.Join(p.Dir, ".qwen", "settings.json"), settings)
	}
	return p
}

// Model is m with the file paths of its calls made absolute against the
// project directory: Qwen Code's file tools refuse a relative one ("File
// path must be absolute: notes.md"), and a script is written before the
// project's directory exists.
func (p QwenProject) Model(m Model) Model {
	return ModelFunc(func(c Conversation) Turn {
		turn := m.Next(c)
		if turn.Tool == nil {
			return turn
		}
		for _, k := range []string{"file_path", "path"} {
			if v, ok := turn.Tool.Input[k].(string); ok && !filepath.IsAbs(v) {
				in := make(map[string]any, len(turn.Tool.Input))
				for ik, iv := range turn.Tool.Input {
					in[ik] = iv
				}
				in[k] = filepath.Join(p.Dir, v)
				turn.Tool = &ToolUse{Name: turn.Tool.Name, Input: in}
			}
		}
		return turn
	})
}

// QwenTelemetryEnv is the environment that sends Qwen Code's telemetry
// over OTLP/HTTP to otlp, with the tool calls' arguments and results on
// their spans (without the last variable, name only).
func QwenTelemetryEnv(otlp string) []string {
	return []string{
		"QWEN_TELEMETRY_ENABLED=true",
		"QWEN_TELEMETRY_TARGET=local",
		"QWEN_TELEMETRY_OTLP_PROTOCOL=http",
		"QWEN_TELEMETRY_OTLP_ENDPOINT=" + otlp,
		"QWEN_TELEMETRY_INCLUDE_SENSITIVE_SPAN_ATTRIBUTES=true",
	}
}

// Env is the environment of a headless Qwen Code run against model (an
// OpenAI chat completions API, StartOpenAI), with its telemetry sent to
// otlp (none when empty).
func (p QwenProject) Env(model *Server, otlp string) []string {
	env := []string{
		"HOME=" + p.Home,
		"PATH=" + os.Getenv("PATH"),
		"OPENAI_BASE_URL=" + model.URL + "/v1",
		"OPENAI_API_KEY=test-scripted-model",
		"OPENAI_MODEL=scripted",
		// Headless yolo prints a warning per run otherwise.
		"QWEN_CODE_SUPPRESS_YOLO_WARNING=1",
	}
	if otlp != "" {
		env = append(env, QwenTelemetryEnv(otlp)...)
	}
	return env
}

// QwenArgs is `qwen -p prompt` in stream-json with every tool call
// approved (headless runs cannot ask) on the OpenAI-compatible API.
func QwenArgs(bin, prompt string) []string {
	return []string{bin, "-p", prompt, "--output-format", "stream-json", "--approval-mode", "yolo", "--auth-type", "openai", "-m", "scripted"}
}
