package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/confmap/confmaptest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/internal/replay"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect"
)

var update = flag.Bool("update", false, "rewrite the Claude Code recordings and their transitions from the code")

const claudeDir = "testdata/claude-code"

// claudeSession is the session.id of the recorded Claude Code run.
const claudeSession = "4f1c2b9e-7d3a-4c55-9a61-0b8e2f6d1a37"

// claudeCall is one tool call of the recorded run.
type claudeCall struct {
	tool, input, bashCommand, fullCommand, description string
	resultBytes                                        int
}

// claudeRun is a Claude Code session (CLI 2.1.33) on a repository: some
// varied work, then the 1,972-call incident's loop, the same `gh issue
// list` pipeline again and again.
func claudeRun() []claudeCall {
	bash := func(cmd, desc string, size int) claudeCall {
		in, _ := json.Marshal(map[string]string{"command": cmd, "description": desc})
		return claudeCall{tool: "Bash", input: string(in), bashCommand: strings.Fields(cmd)[0], fullCommand: cmd, description: desc, resultBytes: size}
	}
	tool := func(name string, in map[string]any, size int) claudeCall {
		b, _ := json.Marshal(in)
		return claudeCall{tool: name, input: string(b), resultBytes: size}
	}
	calls := []claudeCall{
		tool("Read", map[string]any{"file_path": "/home/dev/triage/README.md"}, 2210),
		tool("Glob", map[string]any{"pattern": "**/*.go"}, 412),
		tool("Grep", map[string]any{"pattern": "TODO", "path": "internal", "output_mode": "content"}, 978),
		bash("git status --short", "Show working tree status", 64),
		tool("Read", map[string]any{"file_path": "/home/dev/triage/internal/triage/triage.go"}, 5120),
		bash("go test ./...", "Run the tests", 356),
	}
	for i := 0; i < 14; i++ {
		calls = append(calls, bash("gh issue list --state open | awk '{print $1}' | sort -n", "List open issue numbers", 9))
	}
	return calls
}

// claudeRecording renders the run as Claude Code exports it: log records
// (claude_code.tool_decision and claude_code.tool_result per call, with
// api_request records between) and, withTraces, the traces beta's spans
// (claude_code.interaction > claude_code.tool > claude_code.tool.execution),
// one OTLP JSON request per line as the collector's file exporter writes
// them, flushed every few calls like the SDK's batch processors.
//
//nolint:funlen // one recording written out call by call, read top to bottom like the CLI wrote it
func claudeRecording(withTraces bool) []byte {
	start := time.Date(2026, 11, 28, 21, 4, 10, 0, time.UTC)
	calls := claudeRun()
	var out bytes.Buffer
	var lm plog.JSONMarshaler
	var tm ptrace.JSONMarshaler
	seq := 0
	newLogs := func() (plog.Logs, plog.LogRecordSlice) {
		ld := plog.NewLogs()
		rl := ld.ResourceLogs().AppendEmpty()
		claudeResource(rl.Resource().Attributes())
		sl := rl.ScopeLogs().AppendEmpty()
		sl.Scope().SetName("com.anthropic.claude_code.events")
		sl.Scope().SetVersion("2.1.33")
		return ld, sl.LogRecords()
	}
	newTraces := func() (ptrace.Traces, ptrace.SpanSlice) {
		td := ptrace.NewTraces()
		rs := td.ResourceSpans().AppendEmpty()
		claudeResource(rs.Resource().Attributes())
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName("com.anthropic.claude_code.tracing")
		ss.Scope().SetVersion("2.1.33")
		return td, ss.Spans()
	}
	record := func(lrs plog.LogRecordSlice, at time.Time, name string, attrs map[string]string) {
		seq++
		lr := lrs.AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
		lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(at))
		lr.Body().SetStr("claude_code." + name)
		m := lr.Attributes()
		m.PutStr("user.id", "a3f9d1c07b2e4f5a8c6d9e0b1a2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e")
		m.PutStr("session.id", claudeSession)
		m.PutStr("app.version", "2.1.33")
		m.PutStr("terminal.type", "xterm-256color")
		m.PutStr("event.name", name)
		m.PutStr("event.timestamp", at.Format("2006-01-02T15:04:05.000Z"))
		m.PutStr("event.sequence", fmt.Sprint(seq))
		m.PutStr("prompt.id", "b7e3c9a1-52d4-4f86-9e0a-3c1d2b4a5f60")
		keys := make([]string, 0, len(attrs))
		for k := range attrs {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			m.PutStr(k, attrs[k])
		}
	}
	traceID := pcommon.TraceID{0x5c, 0x1e, 0x7a, 0x90, 0x3b, 0x44, 0x21, 0x8d, 0xc2, 0x06, 0x6f, 0x13, 0xa8, 0x5e, 0x09, 0xb7}
	spanID := func(n int) pcommon.SpanID {
		var id pcommon.SpanID
		binary.BigEndian.PutUint64(id[:], 0x7c00000000000000|uint64(n))
		return id
	}
	root := spanID(1)
	span := func(ss ptrace.SpanSlice, id, parent pcommon.SpanID, name string, from, to time.Time) ptrace.Span {
		s := ss.AppendEmpty()
		s.SetTraceID(traceID)
		s.SetSpanID(id)
		s.SetParentSpanID(parent)
		s.SetName(name)
		s.SetKind(ptrace.SpanKindInternal)
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(from))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(to))
		s.Attributes().PutStr("session.id", claudeSession)
		return s
	}

	ld, lrs := newLogs()
	td, spans := newTraces()
	flush := func() {
		if lrs.Len() > 0 {
			b, _ := lm.MarshalLogs(ld)
			out.Write(b)
			out.WriteByte('\n')
		}
		if withTraces && spans.Len() > 0 {
			b, _ := tm.MarshalTraces(td)
			out.Write(b)
			out.WriteByte('\n')
		}
		ld, lrs = newLogs()
		td, spans = newTraces()
	}
	record(lrs, start, "user_prompt", map[string]string{"prompt_length": "64"})
	at := start.Add(2 * time.Second)
	for i, c := range calls {
		useID := fmt.Sprintf("toolu_01%020d", 7310+i)
		record(lrs, at, "api_request", map[string]string{
			"model": "claude-sonnet-4-5", "cost_usd": "0.0121", "duration_ms": "2310",
			"input_tokens": fmt.Sprint(18000 + 300*i), "output_tokens": "96",
			"cache_read_tokens": "17200", "cache_creation_tokens": "0",
		})
		begin := at.Add(2400 * time.Millisecond)
		record(lrs, begin, "tool_decision", map[string]string{
			"tool_name": c.tool, "tool_use_id": useID, "decision": "accept", "source": "config",
		})
		dur := time.Duration(300+37*(i%7)) * time.Millisecond
		result := map[string]string{
			"tool_name": c.tool, "tool_use_id": useID, "success": "true",
			"duration_ms": fmt.Sprint(dur.Milliseconds()), "tool_result_size_bytes": fmt.Sprint(c.resultBytes),
			"tool_input": c.input,
		}
		if c.tool == "Bash" {
			p, _ := json.Marshal(map[string]string{"bash_command": c.bashCommand, "full_command": c.fullCommand, "description": c.description})
			result["tool_parameters"] = string(p)
		}
		// The record is written as the tool returns, inside its span.
		record(lrs, begin.Add(dur-time.Millisecond), "tool_result", result)
		if withTraces {
			s := span(spans, spanID(100+2*i), root, "claude_code.tool", begin, begin.Add(dur+4*time.Millisecond))
			s.Attributes().PutStr("gen_ai.tool.name", c.tool)
			s.Attributes().PutStr("gen_ai.tool.call.id", useID)
			if c.tool == "Bash" {
				s.Attributes().PutStr("full_command", c.fullCommand)
				s.Attributes().PutStr("bash_argv0", c.bashCommand)
			}
			ev := s.Events().AppendEmpty()
			ev.SetName("tool.output")
			ev.SetTimestamp(pcommon.NewTimestampFromTime(begin.Add(dur)))
			ev.Attributes().PutStr("tool_result_size_bytes", fmt.Sprint(c.resultBytes))
			span(spans, spanID(101+2*i), spanID(100+2*i), "claude_code.tool.execution", begin.Add(time.Millisecond), begin.Add(dur))
		}
		at = at.Add(9 * time.Second)
		if i%3 == 2 {
			flush()
		}
	}
	if withTraces {
		span(spans, root, pcommon.SpanID{}, "claude_code.interaction", start, at)
	}
	flush()
	return out.Bytes()
}

func claudeResource(m pcommon.Map) {
	m.PutStr("service.name", "claude-code")
	m.PutStr("service.version", "2.1.33")
	m.PutStr("os.type", "linux")
	m.PutStr("os.version", "6.8.0-49-generic")
	m.PutStr("host.arch", "amd64")
}

// checkOrUpdate compares path with got, or writes it under -update.
func checkOrUpdate(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./cmd/loopreplay -run Claude -update")
	require.Equal(t, string(want), string(got), "%s is out of date: run with -update", path)
}

// TestClaudeCodeSessionReplaysAsTheCollectorSeesIt: a recorded Claude Code
// session, logs alone and logs with the traces beta, gives loopreplay the
// transitions that a collector's traces and logs pipelines (both made by
// the loop_detect factory from one config) emit for the same requests:
// one kill, in the recorded session.
func TestClaudeCodeSessionReplaysAsTheCollectorSeesIt(t *testing.T) {
	cfgPath := filepath.Join(claudeDir, "config.yaml")
	for _, tc := range []struct {
		name       string
		withTraces bool
	}{
		{"logs", false},
		{"logs-and-traces", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			input := filepath.Join(claudeDir, tc.name+".jsonl")
			checkOrUpdate(t, input, claudeRecording(tc.withTraces))

			var out, errOut bytes.Buffer
			require.Equal(t, 0, run([]string{"--config", cfgPath, "--summary", input}, nil, &out, &errOut), errOut.String())
			checkOrUpdate(t, filepath.Join(claudeDir, tc.name+".transitions.golden.jsonl"), out.Bytes())

			collected := collectorTransitions(t, cfgPath, input)
			require.Equal(t, collected, sortedLines(t, out.String()))

			kills := 0
			for _, l := range collected {
				require.Equal(t, claudeSession, l.Session)
				if l.Kill {
					kills++
					require.Equal(t, "claude_code", l.Client)
				}
			}
			require.Equal(t, 1, kills, "transitions: %s", out.String())
			require.Contains(t, errOut.String(), `"final_state": "stuck"`)
			require.Contains(t, errOut.String(), `"claude_code": `)
		})
	}
}

// collectorTransitions runs input through what a collector with a traces
// and a logs pipeline holding loop_detect builds, config from the
// collector's YAML, and returns the transitions its exporters would
// receive, sorted by session and sequence.
func collectorTransitions(t *testing.T, cfgPath, input string) []replay.Line {
	t.Helper()
	conf, err := confmaptest.LoadConf(cfgPath)
	require.NoError(t, err)
	sub, err := conf.Sub("processors::loop_detect")
	require.NoError(t, err)
	f := loopdetect.NewFactory()
	cfg := f.CreateDefaultConfig()
	require.NoError(t, sub.Unmarshal(cfg))
	ctx := context.Background()
	set := processortest.NewNopSettings(f.Type())
	traces, logs := new(consumertest.TracesSink), new(consumertest.LogsSink)
	tp, err := f.CreateTraces(ctx, set, cfg, traces)
	require.NoError(t, err)
	lp, err := f.CreateLogs(ctx, set, cfg, logs)
	require.NoError(t, err)
	require.NoError(t, tp.Start(ctx, nil))
	require.NoError(t, lp.Start(ctx, nil))
	data, err := os.ReadFile(input)
	require.NoError(t, err)
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		if bytes.Contains(line[:min(len(line), 20)], []byte("resourceLogs")) {
			ld, err := (&plog.JSONUnmarshaler{}).UnmarshalLogs(line)
			require.NoError(t, err)
			require.NoError(t, lp.ConsumeLogs(ctx, ld))
			continue
		}
		td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(line)
		require.NoError(t, err)
		require.NoError(t, tp.ConsumeTraces(ctx, td))
	}
	require.NoError(t, tp.Shutdown(ctx))
	require.NoError(t, lp.Shutdown(ctx))

	var lines []replay.Line
	for _, td := range traces.AllTraces() {
		evs, err := loopevent.FromTraces(td)
		require.NoError(t, err)
		for i := range evs {
			lines = append(lines, replay.LineOf(&evs[i]))
		}
	}
	for _, ld := range logs.AllLogs() {
		evs, err := loopevent.FromLogs(ld)
		require.NoError(t, err)
		for i := range evs {
			lines = append(lines, replay.LineOf(&evs[i]))
		}
	}
	sortLines(lines)
	return lines
}

func sortedLines(t *testing.T, out string) []replay.Line {
	t.Helper()
	var lines []replay.Line
	for _, s := range strings.Split(strings.TrimSpace(out), "\n") {
		if s == "" {
			continue
		}
		var l replay.Line
		require.NoError(t, json.Unmarshal([]byte(s), &l))
		lines = append(lines, l)
	}
	sortLines(lines)
	return lines
}

func sortLines(lines []replay.Line) {
	sort.Slice(lines, func(i, j int) bool {
		if lines[i].Session != lines[j].Session {
			return lines[i].Session < lines[j].Session
		}
		return lines[i].Seq < lines[j].Seq
	})
}
