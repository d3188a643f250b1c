//go:build unix

package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWatchIsOverdueOnceAfterTheFirstCall(t *testing.T) {
	start := t0
	tests := []struct {
		name      string
		firstCall time.Duration // after start; < 0: the hook reported none
		seen      bool
		at        time.Duration
		want      bool
	}{
		{"announced: never overdue", 2 * time.Second, true, time.Hour, false},
		{"within the grace of the first call", 2 * time.Second, false, 11 * time.Second, false},
		{"past the grace of the first call", 2 * time.Second, false, 12 * time.Second, true},
		{"no hook: the start's longer grace", -1, false, 30 * time.Second, false},
		{"no hook: past the start's grace", -1, false, 61 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w watch
			if tt.firstCall >= 0 {
				w.toolCall(start.Add(tt.firstCall))
				w.toolCall(start.Add(tt.firstCall + time.Second)) // only the first counts
			}
			if tt.seen {
				w.sawTelemetry()
			}
			assert.Equal(t, tt.want, w.overdue(start, start.Add(tt.at)))
			if tt.want {
				assert.False(t, w.overdue(start, start.Add(tt.at+time.Hour)), "said once")
			}
		})
	}
}

func TestUnwatchedLineNamesWhatIsMissing(t *testing.T) {
	claude := []string{"/opt/bin/claude", "-p", "fix it"}
	line := unwatchedLine([]string{"PATH=/bin"}, claude, "127.0.0.1:8787", true)
	for _, want := range []string{"NOT WATCHED", "10s after its first tool call", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318", "CLAUDE_CODE_ENABLE_TELEMETRY=1", "OTEL_TRACES_EXPORTER=otlp", "OTEL_LOG_TOOL_CONTENT=1", "http://127.0.0.1:8787/kill"} {
		assert.Contains(t, line, want)
	}
	assert.NotContains(t, line, "\n", "one line")
	line = unwatchedLine(withClaudeTelemetry([]string{"PATH=/bin"}, claude), claude, "127.0.0.1:8787", false)
	assert.NotContains(t, line, "CLAUDE_CODE_ENABLE_TELEMETRY", "set by the supervisor: not what is missing")
	assert.Contains(t, line, "60s after its start")
	line = unwatchedLine([]string{"OTEL_LOGS_EXPORTER=otlp"}, claude, "127.0.0.1:8787", true)
	assert.NotContains(t, line, "OTEL_TRACES_EXPORTER", "the user chose Claude Code's logs: traces are not missing")
	other := unwatchedLine([]string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318"}, []string{"python3", "agent.py"}, "127.0.0.1:9000", true)
	assert.NotContains(t, other, "OTEL_EXPORTER_OTLP_ENDPOINT=", "set")
	assert.NotContains(t, other, "CLAUDE_CODE")
}

func TestClaudeTelemetryIsSetUnlessTheUserSetIt(t *testing.T) {
	claude := []string{"claude", "-p", "x"}
	tests := []struct {
		name string
		env  []string
		argv []string
		want []string
	}{
		{"not Claude Code: unchanged", []string{"PATH=/bin"}, []string{"python3"}, []string{"PATH=/bin"}},
		{"Claude Code: all of them", []string{"PATH=/bin"}, claude, append([]string{"PATH=/bin"}, claudeTelemetry...)},
		{"Claude Code on its traces: its choice of endpoint stands", []string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:9999/v1/traces"}, claude,
			[]string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=http://127.0.0.1:9999/v1/traces", "CLAUDE_CODE_ENABLE_TELEMETRY=1", "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA=1", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_LOG_TOOL_DETAILS=1", "OTEL_LOG_TOOL_CONTENT=1"}},
		{"Claude Code on its logs: no traces beside them", []string{"OTEL_LOGS_EXPORTER=otlp"}, claude,
			[]string{"OTEL_LOGS_EXPORTER=otlp", "CLAUDE_CODE_ENABLE_TELEMETRY=1", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_LOG_TOOL_DETAILS=1", "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318"}},
		{"the user's settings stand", []string{"OTEL_LOGS_EXPORTER=console", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=http://10.0.0.1:4318/v1/logs"}, claude,
			[]string{"OTEL_LOGS_EXPORTER=console", "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT=http://10.0.0.1:4318/v1/logs", "CLAUDE_CODE_ENABLE_TELEMETRY=1", "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_LOG_TOOL_DETAILS=1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, withClaudeTelemetry(tt.env, tt.argv))
		})
	}
}

// A verified loop.seen for our agent marks the run watched (the result
// line says so); one for another agent does not.
func TestSeenNoticeMarksTheRunWatched(t *testing.T) {
	for _, tc := range []struct {
		name        string
		instance    string
		wantReply   string
		wantWatched bool
	}{
		{"our agent", "", "watched", true},
		{"another agent", "someone-else", "not_running", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, `echo "$$ 0" > "$1/pids"; exec sleep 300`, "--grace", "1s")
			h.pids()
			inst := tc.instance
			if inst == "" {
				inst = "inst-" + strings.ReplaceAll(t.Name(), "/", "-")
			}
			code, res := h.send(killSpec{id: "seen_1", instance: inst, typ: "loop.seen", action: "seen"})
			require.Equal(t, 200, code)
			assert.Equal(t, tc.wantReply, res)
			code, _ = h.send(killSpec{id: "ld_k_1", instance: "inst-" + strings.ReplaceAll(t.Name(), "/", "-"), action: "kill"})
			require.Equal(t, 200, code)
			var r result
			require.NoError(t, json.Unmarshal([]byte(waitFile(t, h.result, 10*time.Second)), &r))
			assert.Equal(t, tc.wantWatched, r.Watched)
			assert.Contains(t, mustJSON(t, r), `"watched":`, "the field is always there")
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func TestAgentNamesItsSupervisorInItsResource(t *testing.T) {
	env := agentEnv([]string{"OTEL_RESOURCE_ATTRIBUTES=team=a,loopsupervisor.listen=127.0.0.1:1"}, "inst-x", "")
	env = withRoute(env, "127.0.0.1:8788")
	assert.Contains(t, env, "OTEL_RESOURCE_ATTRIBUTES=team=a,service.instance.id=inst-x,loopsupervisor.listen=127.0.0.1:8788", "an inherited name is replaced")
}

// A result file that was there before, readable by others, is private
// once the result line (which holds the instance id) is in it.
func TestPreExistingResultFileBecomesPrivate(t *testing.T) {
	h := start(t, `echo "$$ 0" > "$1/pids"; exec sleep 300`, "--grace", "1s")
	h.pids()
	require.NoError(t, os.WriteFile(h.result, nil, 0o644))
	require.NoError(t, os.Chmod(h.result, 0o644))
	code, _ := h.send(killSpec{id: "ld_rf_1", instance: "inst-" + t.Name(), action: "kill"})
	require.Equal(t, 200, code)
	waitFile(t, h.result, 10*time.Second)
	fi, err := os.Stat(h.result)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
}

func TestAgentKeepsItsInstanceIDUnderTheSupervisorsName(t *testing.T) {
	env := agentEnv([]string{"OTEL_RESOURCE_ATTRIBUTES=team=a,loopsupervisor.instance.id=old"}, "inst-x", "")
	env = withInstanceAttr(env, "inst-x")
	assert.Contains(t, env, "OTEL_RESOURCE_ATTRIBUTES=team=a,service.instance.id=inst-x,loopsupervisor.instance.id=inst-x", "an inherited copy is replaced")
}
