//go:build unix

package scaleout

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
)

// A small stand-in for Claude Code's telemetry (CLI 2.1.33x with
// CLAUDE_CODE_ENABLE_TELEMETRY=1 and OTEL_LOGS_EXPORTER=otlp): per tool call
// a claude_code.tool_decision and a claude_code.tool_result log record, no
// trace context, session.id on every record, numbers and booleans as
// strings, no tool results. With the traces beta on, the same call is also
// a claude_code.tool span (gen_ai.tool.call.id = tool_use_id, session.id)
// with a claude_code.tool.execution child, under a trace id per prompt.
// Sent as OTLP/HTTP protobuf, the way the CLI's exporter sends it.

// ccSession is one simulated Claude Code session.
type ccSession struct {
	id      string // session.id, UUID-shaped
	pid     int64
	loops   bool // after warmup healthy calls it repeats one call
	rereads bool // the repeated call: reading one file (else a failing test run)
	warmup  int
	spans   bool // traces beta on: every call is also a span
	prompt  string
	traceID pcommon.TraceID
	seq     int // event.sequence
}

// newCCSession derives a session's ids from its name, so runs are
// reproducible and names are readable in failures.
// A looping session does warmup healthy calls first (real loops start after
// some work).
func newCCSession(name string, idx int, loops, spans bool, warmup int) *ccSession {
	h := sha256.Sum256([]byte(name))
	x := hex.EncodeToString(h[:16])
	return &ccSession{id: x[0:8] + "-" + x[8:12] + "-4" + x[13:16] + "-a" + x[17:20] + "-" + x[20:32],
		pid: int64(40000 + idx), loops: loops, spans: spans, warmup: warmup}
}

// ccCall is one tool call as Claude Code reports it.
type ccCall struct {
	tool    string
	input   string // tool_input (JSON)
	params  string // tool_parameters (JSON, Bash only)
	command string // Bash full_command
	ok      bool
	errText string
}

// call returns the session's i-th tool call (from 0). Healthy sessions read,
// edit and type-check different files; a looping one, after its warm-up,
// runs the same failing test command again and again, or reads the same
// file again and again.
func (s *ccSession) call(i int) ccCall {
	bash := func(cmd string, ok bool, errText string) ccCall {
		in, _ := json.Marshal(map[string]string{"command": cmd, "description": "Run the tests"})
		argv0, _, _ := bytes.Cut([]byte(cmd), []byte(" "))
		p, _ := json.Marshal(map[string]string{"bash_command": string(argv0), "full_command": cmd, "description": "Run the tests"})
		return ccCall{tool: "Bash", input: string(in), params: string(p), command: cmd, ok: ok, errText: errText}
	}
	if s.loops && i >= s.warmup {
		if s.rereads {
			in, _ := json.Marshal(map[string]string{"file_path": "/work/app/src/cart.ts"})
			return ccCall{tool: "Read", input: string(in), ok: true}
		}
		return bash("npm test -- src/cart.test.ts", false,
			"Exit code 1\nFAIL src/cart.test.ts\n  ● cart › applies the discount\n    expected 90, received 100")
	}
	file := fmt.Sprintf("src/module_%02d.ts", i/3)
	switch i % 3 {
	case 0:
		in, _ := json.Marshal(map[string]string{"file_path": "/work/app/" + file})
		return ccCall{tool: "Read", input: string(in), ok: true}
	case 1:
		in, _ := json.Marshal(map[string]string{"file_path": "/work/app/" + file,
			"old_string": fmt.Sprintf("const limit = %d", i), "new_string": fmt.Sprintf("const limit = %d", i+1)})
		return ccCall{tool: "Edit", input: string(in), ok: true}
	default:
		return bash(fmt.Sprintf("npx tsc --noEmit %s", file), true, "")
	}
}

// ccResource fills the resource the CLI sends with.
func (s *ccSession) ccResource(r pcommon.Resource) {
	a := r.Attributes()
	a.PutStr("service.name", "claude-code")
	a.PutStr("service.version", "2.1.33")
	a.PutStr("os.type", "linux")
	a.PutStr("host.arch", "amd64")
	a.PutInt("process.pid", s.pid)
}

// appendLogs appends call i's two records, stamped at end, to ld (one
// resource per session, as each CLI process sends its own).
func (s *ccSession) appendLogs(ld plog.Logs, i int, c ccCall, start, end time.Time) {
	rl := ld.ResourceLogs().AppendEmpty()
	s.ccResource(rl.Resource())
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("com.anthropic.claude_code.events")
	sl.Scope().SetVersion("2.1.33")
	useID := fmt.Sprintf("toolu_01%s%04d", s.id[:8], i)
	common := func(name string, at time.Time) pcommon.Map {
		lr := sl.LogRecords().AppendEmpty()
		lr.SetTimestamp(pcommon.NewTimestampFromTime(at))
		lr.SetObservedTimestamp(pcommon.NewTimestampFromTime(at))
		lr.Body().SetStr("claude_code." + name)
		a := lr.Attributes()
		s.seq++
		a.PutStr("event.name", name)
		a.PutStr("event.timestamp", at.UTC().Format(time.RFC3339Nano))
		a.PutStr("event.sequence", fmt.Sprint(s.seq))
		a.PutStr("session.id", s.id)
		a.PutStr("prompt.id", s.prompt)
		a.PutStr("user.id", "9f1c0de4a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c")
		a.PutStr("terminal.type", "tmux")
		a.PutStr("tool_name", c.tool)
		a.PutStr("tool_use_id", useID)
		return a
	}
	d := common("tool_decision", start)
	d.PutStr("decision", "accept")
	d.PutStr("source", "config")
	r := common("tool_result", end)
	r.PutStr("success", fmt.Sprint(c.ok))
	r.PutStr("duration_ms", fmt.Sprint(end.Sub(start).Milliseconds()))
	r.PutStr("tool_result_size_bytes", fmt.Sprint(200+len(c.errText)))
	r.PutStr("decision_type", "accept")
	r.PutStr("decision_source", "config")
	r.PutStr("tool_input", c.input)
	if c.params != "" {
		r.PutStr("tool_parameters", c.params)
	}
	if !c.ok {
		r.PutStr("error", c.errText)
		r.PutStr("error_type", "shell_error")
	}
}

// appendSpans appends call i as the traces beta reports it: a
// claude_code.tool span and its claude_code.tool.execution child (where a
// failure is recorded), in the prompt's trace.
func (s *ccSession) appendSpans(td ptrace.Traces, i int, c ccCall, start, end time.Time) {
	rs := td.ResourceSpans().AppendEmpty()
	s.ccResource(rs.Resource())
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("com.anthropic.claude_code.tracing")
	ss.Scope().SetVersion("2.1.33")
	id := func(tag byte) pcommon.SpanID {
		h := sha256.Sum256([]byte(fmt.Sprintf("%s/%d/%c", s.id, i, tag)))
		return pcommon.SpanID(h[:8])
	}
	tool := ss.Spans().AppendEmpty()
	tool.SetTraceID(s.traceID)
	tool.SetSpanID(id('t'))
	tool.SetName("claude_code.tool")
	tool.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	tool.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
	a := tool.Attributes()
	a.PutStr("session.id", s.id)
	a.PutStr("gen_ai.tool.name", c.tool)
	a.PutStr("gen_ai.tool.call.id", fmt.Sprintf("toolu_01%s%04d", s.id[:8], i))
	if c.command != "" {
		a.PutStr("full_command", c.command)
		argv0, _, _ := bytes.Cut([]byte(c.command), []byte(" "))
		a.PutStr("bash_argv0", string(argv0))
	}
	ev := tool.Events().AppendEmpty()
	ev.SetName("tool.output")
	ev.SetTimestamp(pcommon.NewTimestampFromTime(end))
	exec := ss.Spans().AppendEmpty()
	exec.SetTraceID(s.traceID)
	exec.SetSpanID(id('e'))
	exec.SetParentSpanID(tool.SpanID())
	exec.SetName("claude_code.tool.execution")
	exec.SetStartTimestamp(pcommon.NewTimestampFromTime(start.Add(time.Millisecond)))
	exec.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
	exec.Attributes().PutStr("session.id", s.id)
	if !c.ok {
		exec.Status().SetCode(ptrace.StatusCodeError)
		exec.Status().SetMessage(c.errText)
	}
}

// newPrompt starts a new user prompt: a new prompt.id, and with the traces
// beta a new trace.
func (s *ccSession) newPrompt(n int) {
	s.prompt = fmt.Sprintf("%s-p%d", s.id[:8], n)
	h := sha256.Sum256([]byte(s.prompt))
	s.traceID = pcommon.TraceID(h[:16])
}

// ccEmitter sends rounds of calls for a set of sessions to the gateway's
// OTLP/HTTP receiver.
type ccEmitter struct {
	url      string // http://127.0.0.1:<port>
	client   *http.Client
	sessions []*ccSession
	group    int // sessions per request (a node collector's batch)

	mu              sync.Mutex
	records, spans  int
	requests, fails int
	lastErr         string
}

// round sends call i of every session: one logs request (and one traces
// request) per group of sessions, as a node-level collector batching
// several CLI processes would. A new prompt starts every 4 calls.
func (e *ccEmitter) round(ctx context.Context, i int) {
	end := time.Now()
	start := end.Add(-800 * time.Millisecond)
	var wg sync.WaitGroup
	for g := 0; g < len(e.sessions); g += e.group {
		grp := e.sessions[g:min(g+e.group, len(e.sessions))]
		ld, td := plog.NewLogs(), ptrace.NewTraces()
		for _, s := range grp {
			if i%4 == 0 {
				s.newPrompt(i / 4)
			}
			c := s.call(i)
			s.appendLogs(ld, i, c, start, end)
			if s.spans {
				s.appendSpans(td, i, c, start, end)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Spans first: the CLI ends the tool span before it emits the
			// tool_result event.
			if td.SpanCount() > 0 {
				b, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
				e.post(ctx, "/v1/traces", b, 0, td.SpanCount())
			}
			b, _ := plogotlp.NewExportRequestFromLogs(ld).MarshalProto()
			e.post(ctx, "/v1/logs", b, ld.LogRecordCount(), 0)
		}()
	}
	wg.Wait()
}

// post sends one request, retrying a refused one a few times as the SDK's
// exporter does.
func (e *ccEmitter) post(ctx context.Context, path string, body []byte, records, spans int) {
	var last string
	for attempt := range 4 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+path, bytes.NewReader(body))
		if err != nil {
			last = err.Error()
			continue
		}
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Authorization", "Bearer "+otlpToken)
		resp, err := e.client.Do(req)
		if err != nil {
			last = err.Error()
			continue
		}
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			e.mu.Lock()
			e.requests++
			e.records += records
			e.spans += spans
			e.mu.Unlock()
			return
		}
		last = fmt.Sprintf("%s: %s %s", path, resp.Status, msg)
	}
	if ctx.Err() != nil {
		return
	}
	e.mu.Lock()
	e.fails++
	e.lastErr = last
	e.mu.Unlock()
}

// run sends rounds 0..calls-1 every interval (all rounds when calls is 0
// and until ctx is done).
func (e *ccEmitter) run(ctx context.Context, calls int, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for i := 0; calls == 0 || i < calls; i++ {
		e.round(ctx, i)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (e *ccEmitter) stats() (requests, records, spans, fails int, lastErr string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.requests, e.records, e.spans, e.fails, e.lastErr
}
