package agentcli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
	"github.com/otelcol-loop/otelcol-loop/internal/webhookbody"
)

// OpenCodeVersion is the OpenCode CLI the tests run (make/opencode.mk
// installs it from the npm registry; its package ships a native binary).
const OpenCodeVersion = "1.18.33"

// OpenCodeBin returns the installed OpenCode CLI ($OPENCODE_BIN, set by
// `make test`). Without it the test is skipped, or fails under CI=true.
func OpenCodeBin(t testing.TB) string {
	return testproc.RequireTool(t, "OPENCODE_BIN", "opencode")
}

// OpenCodeProviderID and OpenCodeModelID name the scripted model in the
// project's opencode.json: a custom provider on the AI SDK's
// OpenAI-compatible package, which the binary bundles (nothing is
// downloaded).
const (
	OpenCodeProviderID = "scripted"
	OpenCodeModelID    = "scripted-model"
)

// OpenCodeProject is a working directory for one OpenCode run with its own
// HOME and XDG directories (so no user config, credentials, database or
// cache leak in or out).
type OpenCodeProject struct {
	// Dir is the project directory the CLI runs in; its opencode.json
	// names the scripted model and its .opencode/plugins holds plugins.
	Dir string
	// Home is the CLI's HOME; its XDG data directory (Home/.local/share
	// /opencode) keeps the sessions and the log.
	Home string
}

// NewOpenCodeProject makes a project directory and a home under dir and
// writes the project's opencode.json: the scripted provider at model's
// URL, every tool allowed (a headless `opencode run` cannot ask), no
// autoupdate, no sharing, no snapshots (a git repository of the project
// per step), and the AI SDK's OpenTelemetry spans on (experimental
// openTelemetry: an ai.toolCall span per call with its arguments and
// result, exported only when OTEL_EXPORTER_OTLP_ENDPOINT is set).
func NewOpenCodeProject(t testing.TB, dir string, model *Server) OpenCodeProject {
	t.Helper()
	p := OpenCodeProject{Dir: filepath.Join(dir, "project"), Home: filepath.Join(dir, "home")}
	for _, d := range []string{p.Dir, p.Home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := map[string]any{
		"$schema":    "https://opencode.ai/config.json",
		"model":      OpenCodeProviderID + "/" + OpenCodeModelID,
		"autoupdate": false,
		"share":      "disabled",
		"snapshot":   false,
		"permission": map[string]any{"*": "allow", "bash": "allow", "edit": "allow", "external_directory": "allow"},
		"experimental": map[string]any{
			"openTelemetry": true,
		},
		"provider": map[string]any{
			OpenCodeProviderID: map[string]any{
				"npm":  "@ai-sdk/openai-compatible",
				"name": "Scripted model",
				"options": map[string]any{
					"baseURL": model.URL + "/v1",
					"apiKey":  "test-scripted-model",
				},
				"models": map[string]any{
					OpenCodeModelID: map[string]any{
						"name":      "Scripted model",
						"tool_call": true,
						"limit":     map[string]int{"context": 200000, "output": 8192},
					},
				},
			},
		},
	}
	writeJSONFile(t, filepath.Join(p.Dir, "opencode.json"), cfg)
	for _, d := range []string{filepath.Join(p.Home, ".config", "opencode"), filepath.Join(p.Dir, ".opencode")} {
		seedOpenCodeConfigDir(t, d)
	}
	return p
}

// seedOpenCodeConfigDir makes dir a config directory whose plugin
// dependencies look installed. OpenCode 1.18.33 installs its plugin SDK
// (@opencode-ai/plugin) from the npm registry into every config directory
// it reads (~/.config/opencode, the project's .opencode) at each start,
// unless the directory is read-only (root writes anyway) or node_modules
// exists and package-lock.json already lists every dependency: this
// satisfies that check, so a run makes no network request and does not
// wait for one (the session starts after the install: 46 s on this
// machine, 71 s to fail with the registry unreachable). loopsupervisor's
// plugin imports nothing from the SDK.
func seedOpenCodeConfigDir(t testing.TB, dir string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755); err != nil {
		t.Fatal(err)
	}
	deps := map[string]string{"@opencode-ai/plugin": OpenCodeVersion}
	writeJSONFile(t, filepath.Join(dir, "package.json"), map[string]any{"dependencies": deps})
	writeJSONFile(t, filepath.Join(dir, "package-lock.json"), map[string]any{
		"lockfileVersion": 3, "requires": true,
		"packages": map[string]any{"": map[string]any{"dependencies": deps}},
	})
}

// InstallPlugin writes a plugin's source as the project's
// .opencode/plugins/name, where OpenCode loads every *.js and *.ts file
// from without any config entry.
func (p OpenCodeProject) InstallPlugin(t testing.TB, name string, source []byte) {
	t.Helper()
	d := filepath.Join(p.Dir, ".opencode", "plugins")
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, name), source, 0o644); err != nil {
		t.Fatal(err)
	}
}

// SupervisorPluginPath is loopsupervisor's OpenCode plugin, relative to the
// repository's root: the file users copy into .opencode/plugins.
const SupervisorPluginPath = "cmd/loopsupervisor/opencode/loopsupervisor.js"

// InstallSupervisorPlugin installs the repository's loopsupervisor plugin
// into the project, as its documentation tells users to.
func (p OpenCodeProject) InstallSupervisorPlugin(t testing.TB) {
	t.Helper()
	root, err := testproc.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile(filepath.Join(root, SupervisorPluginPath))
	if err != nil {
		t.Fatal(err)
	}
	p.InstallPlugin(t, "loopsupervisor.js", src)
}

// Env is the environment of a headless OpenCode run: its own HOME and XDG
// directories, no models catalogue fetched (the scripted provider is in
// opencode.json), and, when otlp is not empty, its OpenTelemetry export
// (traces and logs over OTLP/HTTP JSON) to that endpoint.
func (p OpenCodeProject) Env(otlp string) []string {
	env := []string{
		"HOME=" + p.Home,
		// OpenCode takes its project from $PWD before the working
		// directory: an inherited PWD would make it work elsewhere.
		"PWD=" + p.Dir,
		"PATH=" + os.Getenv("PATH"),
		"XDG_CONFIG_HOME=" + filepath.Join(p.Home, ".config"),
		"XDG_DATA_HOME=" + filepath.Join(p.Home, ".local", "share"),
		"XDG_CACHE_HOME=" + filepath.Join(p.Home, ".cache"),
		"XDG_STATE_HOME=" + filepath.Join(p.Home, ".local", "state"),
		"OPENCODE_DISABLE_MODELS_FETCH=1",
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_PRUNE=1",
		"OPENCODE_DISABLE_TERMINAL_TITLE=1",
	}
	if otlp != "" {
		env = append(env, "OTEL_EXPORTER_OTLP_ENDPOINT="+otlp)
	}
	return env
}

// OpenCodeArgs is `opencode run prompt` on the scripted model, printing
// its events as JSON lines.
func OpenCodeArgs(bin, prompt string) []string {
	return []string{bin, "run", "--format", "json", "-m", OpenCodeProviderID + "/" + OpenCodeModelID, prompt}
}

// OpenCodeBash is a turn calling OpenCode's bash tool with command.
func OpenCodeBash(command string) Turn {
	return Turn{Tool: &ToolUse{Name: "bash", Input: map[string]any{"command": command, "description": "run " + command}}}
}

// openCodeChat is OpenCode's dialect of the chat completions API: its
// provider lists the models first and expects call_ ids; a failed call's
// output is its error text, and a plugin's refusal carries the block.
var openCodeChat = chatDialect{
	modelID:      OpenCodeModelID,
	callIDPrefix: "call_",
	failed: func(content string) bool {
		return strings.HasPrefix(content, "Error:") || strings.Contains(content, webhookbody.BlockedMarker)
	},
}

// StartOpenCode serves model as an OpenAI Chat Completions API on a free
// loopback port until the test ends; give it to NewOpenCodeProject.
func StartOpenCode(t testing.TB, model Model) *Server {
	return start(t, model, openCodeChat.serve)
}
