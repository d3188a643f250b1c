//go:build unix

package main

// Never unwatched: the collector announces each agent instance whose
// telemetry it receives (a signed loop.seen). An agent whose first tool
// call passed without one is running with no loop detection at all, and
// the user is told so in one line, with the settings that are likely
// missing, and in the result line ("watched": false).

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// watchGrace is how long after the agent's first tool call the collector
// has to announce it: ten export intervals of the SDKs' 200 ms the
// supervisor sets, and a loaded machine's pipeline, fit many times over.
const watchGrace = 10 * time.Second

// watchNoHookGrace replaces "the first tool call" when the agent has no
// hook to report one: most agents call a tool within their first minute.
const watchNoHookGrace = 60 * time.Second

// watch is what the supervisor knows of whether its agent is watched.
type watch struct {
	mu        sync.Mutex
	seen      bool
	firstCall time.Time
	warned    bool
}

// sawTelemetry records a verified loop.seen for our agent; it reports
// whether it was the first.
func (w *watch) sawTelemetry() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	first := !w.seen
	w.seen = true
	return first
}

// toolCall records the agent's tool call at now (the first one counts).
func (w *watch) toolCall(now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.firstCall.IsZero() {
		w.firstCall = now
	}
}

// watched reports whether the collector announced the agent.
func (w *watch) watched() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

// overdue reports, once, that the agent is unwatched at now: it started at
// started and made its first tool call (if its hook reported one) long
// enough ago.
func (w *watch) overdue(started, now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.seen || w.warned {
		return false
	}
	due := started.Add(watchNoHookGrace)
	if !w.firstCall.IsZero() {
		due = w.firstCall.Add(watchGrace)
	}
	if now.Before(due) {
		return false
	}
	w.warned = true
	return true
}

// unwatchedLine is the one line that says the agent is not watched, and
// which settings of its environment are likely why.
func unwatchedLine(env, argv []string, listen string, sinceCall bool) string {
	set := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		set[k] = v
	}
	var missing []string
	if set["OTEL_EXPORTER_OTLP_ENDPOINT"] == "" && set["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == "" && set["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"] == "" {
		missing = append(missing, "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 (where the collector listens)")
	}
	if isClaude(argv) {
		choseLogs := set["OTEL_LOGS_EXPORTER"] != "" && set["OTEL_TRACES_EXPORTER"] == ""
		for _, kv := range claudeTelemetry {
			k, v, _ := strings.Cut(kv, "=")
			if k != "OTEL_EXPORTER_OTLP_ENDPOINT" && set[k] != v && (!choseLogs || !claudeTracesOnly[k]) {
				missing = append(missing, kv)
			}
		}
	}
	missing = append(missing, fmt.Sprintf("the collector's alert_sink kill.endpoint = http://%s/kill (this supervisor)", listen))
	when := fmt.Sprintf("%.0fs after its start", watchNoHookGrace.Seconds())
	if sinceCall {
		when = fmt.Sprintf("%.0fs after its first tool call", watchGrace.Seconds())
	}
	return fmt.Sprintf("NOT WATCHED: the collector has not announced this agent's telemetry %s, so no loop of it can be detected or stopped. Likely missing: %s",
		when, strings.Join(missing, "; "))
}

// claudeTelemetry is what Claude Code needs to send its tool calls, with
// their results, to a collector on this machine (docs/clients.md): its
// traces beta with tool content. Its logs carry no result, and without a
// result the engine cannot tell a poll that waits on CI from a loop.
var claudeTelemetry = []string{
	"CLAUDE_CODE_ENABLE_TELEMETRY=1",
	"CLAUDE_CODE_ENHANCED_TELEMETRY_BETA=1",
	"OTEL_TRACES_EXPORTER=otlp",
	"OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
	"OTEL_LOG_TOOL_DETAILS=1",
	"OTEL_LOG_TOOL_CONTENT=1",
	"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318",
}

// claudeTracesOnly are the variables of claudeTelemetry that choose the
// traces beta: a user who chose Claude Code's logs gets none of them, or
// each call would reach the collector twice, apart, and be judged one
// copy at a time.
var claudeTracesOnly = map[string]bool{
	"CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": true,
	"OTEL_TRACES_EXPORTER":                true,
	"OTEL_LOG_TOOL_CONTENT":               true,
}

// isClaude reports an agent command that runs Claude Code.
func isClaude(argv []string) bool {
	if len(argv) == 0 {
		return false
	}
	b := filepath.Base(argv[0])
	return b == "claude" || b == "claude.exe"
}

// withClaudeTelemetry sets Claude Code's telemetry variables the
// environment leaves unset, for a Claude Code agent: without them it sends
// nothing and the supervisor would watch an unwatched agent. The endpoint
// is set only when no OTLP endpoint variable is.
func withClaudeTelemetry(env, argv []string) []string {
	if !isClaude(argv) {
		return env
	}
	set := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	anyEndpoint := set["OTEL_EXPORTER_OTLP_ENDPOINT"] || set["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] || set["OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"]
	choseLogs := set["OTEL_LOGS_EXPORTER"] && !set["OTEL_TRACES_EXPORTER"]
	for _, kv := range claudeTelemetry {
		k, _, _ := strings.Cut(kv, "=")
		if set[k] || (k == "OTEL_EXPORTER_OTLP_ENDPOINT" && anyEndpoint) || (choseLogs && claudeTracesOnly[k]) {
			continue
		}
		env = append(env, kv)
	}
	return env
}
