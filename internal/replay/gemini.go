package replay

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Gemini CLI keeps every session in
// ~/.gemini/tmp/<project>/chats/session-<start>-<id>.jsonl: a metadata
// line {sessionId, projectHash, startTime, …}, then one line per message
// ({id, timestamp, type: "user"|"gemini", content, toolCalls: [{id, name,
// args, result, status, timestamp}]}), "$set" metadata updates (which may
// restate the whole message list) and "$rewindTo" records. A message is
// written again under its id as it grows: the later copy wins, as when the
// CLI resumes a session. Older versions wrote the same object as one JSON
// document (session-*.json).
//
// Each call is replayed as the tool_call span Gemini CLI's own telemetry
// exports, so the collector's extraction reads it exactly as it reads the
// live CLI; its result is kept in the span as the CLI sends it, which the
// extraction does not read (the shell tool's output names a new process
// group every time and would read as progress).

// FormatGeminiSession is the Gemini CLI session file format.
const FormatGeminiSession = "gemini_cli_session"

// clientGemini marks a TranscriptCall read from a Gemini CLI session.
const clientGemini = "gemini_cli"

// looksLikeGemini reports whether a file's first JSON value is a Gemini
// CLI session's metadata: a string sessionId and projectHash, which the
// CLI itself looks for.
func looksLikeGemini(first map[string]json.RawMessage) bool {
	var id, hash string
	return json.Unmarshal(first["sessionId"], &id) == nil && id != "" &&
		json.Unmarshal(first["projectHash"], &hash) == nil && hash != ""
}

type geminiRecord struct {
	SessionID string          `json:"sessionId"`
	ID        *string         `json:"id"`
	Type      string          `json:"type"`
	Timestamp string          `json:"timestamp"`
	ToolCalls []geminiCall    `json:"toolCalls"`
	Messages  []geminiRecord  `json:"messages"`
	Set       *geminiRecord   `json:"$set"`
	Rewind    json.RawMessage `json:"$rewindTo"`
}

type geminiCall struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Args      json.RawMessage `json:"args"`
	Result    []geminiPart    `json:"result"`
	Status    string          `json:"status"`
	Timestamp string          `json:"timestamp"`
}

// geminiPart is a part of a Gemini-style message: Qwen Code's messages
// hold the model's functionCall parts too.
type geminiPart struct {
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		ID       string          `json:"id"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
	Text *string `json:"text"`
}

// geminiReader collects the calls of one Gemini CLI session file.
type geminiReader struct {
	name    string
	session string
	calls   []TranscriptCall
	byID    map[string]int
}

// readGemini reads one Gemini CLI session file. Every call the session
// made is kept, rewound or restated ones too: a rewind or a compressed
// history does not undo what a tool call did.
func readGemini(data []byte, name string) ([]TranscriptCall, error) {
	r := &geminiReader{name: name, byID: map[string]int{}}
	if doc, ok := wholeDocument(data); ok {
		// The older one-document session-*.json.
		if err := r.record(doc, 1); err != nil {
			return nil, fmt.Errorf("%s:1: not a Gemini CLI session: %w", name, err)
		}
		return r.calls, nil
	}
	err := eachLine(data, func(text []byte, line int) error {
		if err := r.record(text, line); err != nil {
			return fmt.Errorf("%s:%d: not a Gemini CLI session line: %w", name, line, err)
		}
		return nil
	})
	return r.calls, err
}

// wholeDocument returns data when it is one JSON object spread over
// several lines, which a line-by-line read would reject.
func wholeDocument(data []byte) ([]byte, bool) {
	first, _, _ := bytes.Cut(bytes.TrimSpace(data), []byte{'\n'})
	if json.Valid(bytes.TrimSpace(first)) || !json.Valid(data) {
		return nil, false
	}
	return data, true
}

func (r *geminiReader) record(text []byte, n int) error {
	var rec geminiRecord
	if err := json.Unmarshal(text, &rec); err != nil {
		return err
	}
	if rec.SessionID != "" && r.session == "" {
		r.session = rec.SessionID
	}
	if rec.Set != nil {
		rec.Messages = append(rec.Messages, rec.Set.Messages...)
	}
	if rec.ID != nil {
		rec.Messages = append(rec.Messages, rec)
	}
	for i := range rec.Messages {
		if err := r.message(&rec.Messages[i], n); err != nil {
			return err
		}
	}
	return nil
}

func (r *geminiReader) message(m *geminiRecord, n int) error {
	if m.Type != "gemini" || len(m.ToolCalls) == 0 {
		return nil
	}
	start, err := geminiTime(m.Timestamp)
	if err != nil {
		return fmt.Errorf("timestamp: %w", err)
	}
	for _, tc := range m.ToolCalls {
		if tc.ID == "" || tc.Name == "" {
			return fmt.Errorf("a tool call without an id or name")
		}
		end, err := geminiTime(tc.Timestamp)
		if err != nil {
			return fmt.Errorf("tool call %s: timestamp: %w", tc.ID, err)
		}
		if end.Before(start) {
			end = start
		}
		args := tc.Args
		if len(args) == 0 || string(args) == "null" {
			args = json.RawMessage("{}")
		}
		c := TranscriptCall{
			Session: r.session, ID: tc.ID, Tool: tc.Name, Input: args, Start: start, End: end,
			Source: fmt.Sprintf("%s:%d", r.name, n), Client: clientGemini, Status: tc.Status,
		}
		if c.Session == "" {
			c.Session = sessionFromName(r.name)
		}
		if tc.Status != "" {
			c.HasResult = true
			c.IsError = tc.Status != "success"
			c.Result = geminiResult(tc.Result)
		}
		if k, ok := r.byID[tc.ID]; ok {
			// A later copy of the message: it knows more (the result).
			c.Source = r.calls[k].Source
			r.calls[k] = c
			continue
		}
		r.byID[tc.ID] = len(r.calls)
		r.calls = append(r.calls, c)
	}
	return nil
}

// geminiTime parses a record's timestamp; none reads as the zero time,
// which the replay orders first.
func geminiTime(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	return time.Parse(time.RFC3339Nano, s)
}

// geminiResult is the text the model read: the functionResponse's output,
// or its error.
func geminiResult(parts []geminiPart) string {
	var out []string
	for _, p := range parts {
		switch {
		case p.FunctionResponse != nil:
			var resp map[string]json.RawMessage
			if json.Unmarshal(p.FunctionResponse.Response, &resp) != nil {
				out = append(out, string(p.FunctionResponse.Response))
				continue
			}
			for _, k := range []string{"output", "error"} {
				var s string
				if json.Unmarshal(resp[k], &s) == nil && s != "" {
					out = append(out, s)
				}
			}
		case p.Text != nil:
			out = append(out, *p.Text)
		}
	}
	return strings.Join(out, "\n")
}

// geminiSpan renders c as the tool_call span Gemini CLI exports with
// GEMINI_TELEMETRY_TRACES_ENABLED: the request and the response as JSON.
func geminiSpan(c *TranscriptCall) ptrace.Traces {
	td, sp := callSpan(c, "gemini-cli", "", "tool_call")
	if c.HasResult && c.IsError {
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage(firstLine(c.Result))
	}
	a := sp.Attributes()
	a.PutStr("gen_ai.operation.name", "tool_call")
	a.PutStr("gen_ai.agent.name", "gemini-cli")
	a.PutStr("gen_ai.tool.name", c.Tool)
	a.PutStr("gen_ai.tool.call_id", c.ID)
	a.PutStr("gen_ai.conversation.id", c.Session)
	req, _ := json.Marshal(map[string]any{"callId": c.ID, "name": c.Tool, "args": c.Input, "prompt_id": c.Session})
	a.PutStr("gen_ai.input.messages", string(req))
	if c.HasResult {
		resp, _ := json.Marshal(map[string]any{"status": c.Status, "response": map[string]any{
			"callId": c.ID, "responseParts": []any{map[string]any{"functionResponse": map[string]any{
				"id": c.ID, "name": c.Tool, "response": map[string]string{"output": c.Result},
			}}},
		}})
		a.PutStr("gen_ai.output.messages", string(resp))
	}
	return td
}

// callSpan is a one-span trace of c, a span named name from service
// (version when not empty) over the call's time.
func callSpan(c *TranscriptCall, service, version, name string) (ptrace.Traces, ptrace.Span) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	if version != "" {
		rs.Resource().Attributes().PutStr("service.version", version)
	}
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("github.com/otelcol-loop/otelcol-loop/internal/replay/transcript")
	sp := ss.Spans().AppendEmpty()
	sp.SetName(name)
	sp.SetKind(ptrace.SpanKindInternal)
	// Ids derived from the session and the call keep a replay
	// deterministic and tell repeated deliveries from new calls.
	sp.SetTraceID(geminiTraceID(c.Session))
	sp.SetSpanID(pcommon.SpanID(hash8(c.Session + "\x00" + c.ID)))
	sp.SetStartTimestamp(pcommon.NewTimestampFromTime(c.Start))
	sp.SetEndTimestamp(pcommon.NewTimestampFromTime(c.End))
	return td, sp
}

// geminiTraceID is the trace a session's spans share, which the collector
// keys them by: the session id's own bytes when it is a UUID (as the CLI
// writes it), so the key a replay names is the id in the file's name.
func geminiTraceID(session string) pcommon.TraceID {
	var id pcommon.TraceID
	if b, err := hex.DecodeString(strings.ReplaceAll(session, "-", "")); err == nil && len(b) == len(id) {
		copy(id[:], b)
		return id
	}
	return pcommon.TraceID(hash16(session))
}

// engineSession is the key the collector tracks c under: a span's trace
// by default.
func engineSession(c *TranscriptCall) string {
	if c.Client == clientGemini || c.Client == clientQwen || c.Client == clientOpenCode {
		id := geminiTraceID(c.Session)
		return hex.EncodeToString(id[:])
	}
	return c.Session
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

func hash8(s string) [8]byte {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	var b [8]byte
	copy(b[:], h.Sum(nil))
	return b
}

func hash16(s string) [16]byte {
	h := fnv.New128a()
	_, _ = h.Write([]byte(s))
	var b [16]byte
	copy(b[:], h.Sum(nil))
	return b
}
