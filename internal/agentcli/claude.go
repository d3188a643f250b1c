package agentcli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/otelcol-loop/otelcol-loop/internal/testproc"
)

// ClaudeCodeVersion is the Claude Code CLI the tests run (make/agentcli.mk
// installs it from the npm registry; its package ships a native binary).
const ClaudeCodeVersion = "2.1.332"

// ClaudeBin returns the installed Claude Code CLI ($CLAUDE_CODE_BIN, set by
// `make test`). Without it the test is skipped, or fails under CI=true.
func ClaudeBin(t testing.TB) string {
	return testproc.RequireTool(t, "CLAUDE_CODE_BIN", "claude-code")
}

// ClaudeProject is a working directory for one Claude Code run with its
// own HOME (so no user settings, credentials or history leak in or out).
type ClaudeProject struct {
	// Dir is the project directory the CLI runs in.
	Dir string
	// Home is the CLI's HOME: it writes its session transcripts under
	// Home/.claude/projects.
	Home string
}

// NewClaudeProject makes a project directory and a home under dir. hook,
// when not empty, is installed as the project's PreToolUse command hook
// for every tool, as the README tells users of CLIs without HTTP hooks to.
func NewClaudeProject(t testing.TB, dir, hook string) ClaudeProject {
	t.Helper()
	p := ClaudeProject{Dir: filepath.Join(dir, "project"), Home: filepath.Join(dir, "home")}
	for _, d := range []string{filepath.Join(p.Dir, ".claude"), p.Home} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if hook != "" {
		p.InstallHooks(t, ClaudeHook{Event: "PreToolUse", Command: hook})
	}
	return p
}

// ClaudeHook is one hook in a Claude Code project's settings: a command
// hook (Command) or an HTTP hook (URL).
type ClaudeHook struct {
	// Event is the hook event: PreToolUse, PostToolUse…
	Event string
	// Matcher picks the tools it runs for (default "*": every tool).
	Matcher string
	// Command is a command hook's command line.
	Command string
	// URL is where an HTTP hook posts the event.
	URL string
	// Headers are an HTTP hook's request headers; $NAME in a value is
	// the variable of the CLI's environment, if AllowedEnvVars lists it.
	Headers        map[string]string
	AllowedEnvVars []string
}

// SupervisorHTTPHook is loopsupervisor's Claude Code endpoint on listen
// (host:port) as an HTTP hook on event, with the run's token the
// supervisor puts in the agent's environment: the README's recipe.
func SupervisorHTTPHook(event, listen string) ClaudeHook {
	return ClaudeHook{
		Event:          event,
		URL:            "http://" + listen + "/hook/claude",
		Headers:        map[string]string{"Authorization": "Bearer $LOOPSUPERVISOR_HOOK_TOKEN"},
		AllowedEnvVars: []string{"LOOPSUPERVISOR_HOOK_TOKEN"},
	}
}

// InstallHooks writes hooks as the project's .claude/settings.json
// (replacing earlier ones); the hooks of one event and matcher run side by
// side.
func (p ClaudeProject) InstallHooks(t testing.TB, hooks ...ClaudeHook) {
	t.Helper()
	type group struct {
		matcher string
		hooks   []any
	}
	byEvent := map[string][]*group{}
	for _, h := range hooks {
		matcher := h.Matcher
		if matcher == "" {
			matcher = "*"
		}
		entry := map[string]any{"type": "command", "command": h.Command}
		if h.URL != "" {
			entry = map[string]any{"type": "http", "url": h.URL}
			if len(h.Headers) > 0 {
				entry["headers"] = h.Headers
			}
			if len(h.AllowedEnvVars) > 0 {
				entry["allowedEnvVars"] = h.AllowedEnvVars
			}
		}
		var g *group
		for _, have := range byEvent[h.Event] {
			if have.matcher == matcher {
				g = have
			}
		}
		if g == nil {
			g = &group{matcher: matcher}
			byEvent[h.Event] = append(byEvent[h.Event], g)
		}
		g.hooks = append(g.hooks, entry)
	}
	events := map[string]any{}
	for ev, groups := range byEvent {
		var list []any
		for _, g := range groups {
			list = append(list, map[string]any{"matcher": g.matcher, "hooks": g.hooks})
		}
		events[ev] = list
	}
	b, _ := json.MarshalIndent(map[string]any{"hooks": events}, "", "  ")
	if err := os.WriteFile(filepath.Join(p.Dir, ".claude", "settings.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Env is the environment of a headless Claude Code run against model,
// with its logs sent to the OTLP/HTTP endpoint otlp (none when empty).
func (p ClaudeProject) Env(model *Server, otlp string) []string {
	env := p.baseEnv(model)
	if otlp != "" {
		env = append(env, otlpEnv(otlp)...)
		env = append(env, "OTEL_LOGS_EXPORTER=otlp")
	}
	return env
}

// RecipeEnv is the environment of a headless Claude Code run against
// model as the README's recipe leaves it: only the collector's endpoint,
// otlp. loopsupervisor sets the rest (Claude Code's traces beta with tool
// content: each call a claude_code.tool span whose tool.output event
// carries the call's result, the only telemetry of Claude Code that does).
func (p ClaudeProject) RecipeEnv(model *Server, otlp string) []string {
	return append(p.baseEnv(model), "OTEL_EXPORTER_OTLP_ENDPOINT="+otlp)
}

func (p ClaudeProject) baseEnv(model *Server) []string {
	return []string{
		"HOME=" + p.Home,
		"PATH=" + os.Getenv("PATH"),
		"ANTHROPIC_BASE_URL=" + model.URL,
		"ANTHROPIC_API_KEY=sk-ant-test-scripted-model",
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
	}
}

func otlpEnv(otlp string) []string {
	return []string{
		"CLAUDE_CODE_ENABLE_TELEMETRY=1",
		"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp,
		"OTEL_LOG_TOOL_DETAILS=1",
	}
}

// ClaudeArgs is `claude -p prompt` in stream-json, with the tools the scripted
// models use allowed (headless runs cannot ask for permission).
func ClaudeArgs(bin, prompt string) []string {
	return []string{bin, "-p", prompt, "--output-format", "stream-json", "--verbose",
		"--allowedTools", "Bash,Read,Edit,Write,Grep,Glob"}
}
