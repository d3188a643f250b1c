package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
)

// Qwen Code (a Gemini CLI fork) keeps every session in
// ~/.qwen/projects/<project>/chats/<session>.jsonl: one record a line,
// each {uuid, parentUuid, sessionId, timestamp, type, provenance, cwd,
// version, …}. The model's calls are functionCall parts ({id, name,
// args}) of an "assistant" record's Gemini-style message {role, parts};
// each answer is a "tool_result" record whose message holds the
// functionResponse part the model read ({output} or {error}) and whose
// toolCallResult says how the call ended (status, errorType,
// executionStatus). "system" records (telemetry, snapshots) hold no calls.
// A subagent's chat is not recorded (0.24.4 gives it no recorder): the
// file has no sidechain, only the main agent's call that started it.
//
// Each call is replayed as the qwen-code.tool span Qwen Code's own
// telemetry exports (0.24.4, with
// QWEN_TELEMETRY_INCLUDE_SENSITIVE_SPAN_ATTRIBUTES), so the collector's
// extraction reads it as it reads the live CLI: a call that failed has no
// result, one its PreToolUse hook refused is marked pre_hook_blocked and
// one cancelled before it ran is marked cancelled, neither with its
// arguments (the CLI adds them when the tool starts).

// FormatQwenSession is the Qwen Code session (chats/*.jsonl) file format.
const FormatQwenSession = "qwen_code_session"

// clientQwen marks a TranscriptCall read from a Qwen Code session.
const clientQwen = "qwen_code"

// How a Qwen Code call ended, as its span's tool.failure_kind says it
// (TranscriptCall.Status; qwenOK for a call that succeeded).
const (
	qwenOK        = "success"
	qwenFailed    = "tool_error"
	qwenBlocked   = "pre_hook_blocked"
	qwenCancelled = "cancelled"
)

// looksLikeQwen reports whether a file's first JSON value is a Qwen Code
// session record: a string uuid, sessionId and provenance, which the CLI
// writes on every record and Claude Code's transcripts (uuid, sessionId)
// do not have.
func looksLikeQwen(first map[string]json.RawMessage) bool {
	var uuid, session, provenance string
	return json.Unmarshal(first["uuid"], &uuid) == nil && uuid != "" &&
		json.Unmarshal(first["sessionId"], &session) == nil && session != "" &&
		json.Unmarshal(first["provenance"], &provenance) == nil && provenance != ""
}

type qwenRecord struct {
	SessionID string `json:"sessionId"`
	Timestamp string `json:"timestamp"`
	Type      string `json:"type"`
	Version   string `json:"version"`
	Message   *struct {
		Parts []geminiPart `json:"parts"`
	} `json:"message"`
	ToolCallResult *struct {
		CallID          string `json:"callId"`
		Status          string `json:"status"`
		ErrorType       string `json:"errorType"`
		ExecutionStatus string `json:"executionStatus"`
	} `json:"toolCallResult"`
}

// qwenReader collects the calls of one Qwen Code session file.
type qwenReader struct {
	name  string
	calls []TranscriptCall
	byID  map[string]int
}

// readQwen reads one Qwen Code session file. Every call the session made
// is kept, once, whatever branch of the uuid chain it is on: a rewind does
// not undo what a tool call did.
func readQwen(data []byte, name string) ([]TranscriptCall, error) {
	r := &qwenReader{name: name, byID: map[string]int{}}
	err := eachLine(data, func(text []byte, n int) error {
		if err := r.record(text, n); err != nil {
			return fmt.Errorf("%s:%d: not a Qwen Code session line: %w", name, n, err)
		}
		return nil
	})
	return r.calls, err
}

func (r *qwenReader) record(text []byte, n int) error {
	var rec qwenRecord
	if err := json.Unmarshal(text, &rec); err != nil {
		return err
	}
	if rec.Message == nil || (rec.Type != "assistant" && rec.Type != "tool_result") {
		return nil
	}
	at, err := geminiTime(rec.Timestamp)
	if err != nil {
		return fmt.Errorf("timestamp: %w", err)
	}
	for i := range rec.Message.Parts {
		p := &rec.Message.Parts[i]
		switch {
		case p.FunctionCall != nil && rec.Type == "assistant":
			if err := r.call(p, &rec, at, n); err != nil {
				return err
			}
		case p.FunctionResponse != nil && rec.Type == "tool_result":
			r.result(p, &rec, at)
		}
	}
	return nil
}

func (r *qwenReader) call(p *geminiPart, rec *qwenRecord, at time.Time, n int) error {
	fc := p.FunctionCall
	if fc.ID == "" || fc.Name == "" {
		return fmt.Errorf("a tool call without an id or name")
	}
	if _, ok := r.byID[fc.ID]; ok {
		return nil // the same call on another branch of the chain
	}
	args := fc.Args
	if len(args) == 0 || string(args) == "null" {
		args = json.RawMessage("{}")
	}
	session := rec.SessionID
	if session == "" {
		session = sessionFromName(r.name)
	}
	r.byID[fc.ID] = len(r.calls)
	r.calls = append(r.calls, TranscriptCall{
		Session: session, ID: fc.ID, Tool: fc.Name, Input: args, Start: at, End: at,
		Version: rec.Version, Source: fmt.Sprintf("%s:%d", r.name, n), Client: clientQwen,
	})
	return nil
}

func (r *qwenReader) result(p *geminiPart, rec *qwenRecord, at time.Time) {
	k, ok := r.byID[p.FunctionResponse.ID]
	if !ok {
		return // the call went before the file's first line
	}
	c := &r.calls[k]
	c.HasResult, c.Result = true, geminiResult([]geminiPart{*p})
	if at.After(c.Start) {
		c.End = at
	}
	var resp struct {
		Error *string `json:"error"`
	}
	_ = json.Unmarshal(p.FunctionResponse.Response, &resp)
	c.Status = qwenOK
	if resp.Error != nil {
		c.Status = qwenFailed
	}
	if tr := rec.ToolCallResult; tr != nil && tr.CallID == c.ID {
		c.Status = qwenStatus(tr.Status, tr.ErrorType, tr.ExecutionStatus)
	}
	c.IsError = c.Status != qwenOK
}

// qwenStatus is the failure kind Qwen Code's span gives a call that ended
// with status, errorType and executionStatus: a call refused before it ran
// (execution_denied: its PreToolUse hook) is pre_hook_blocked.
func qwenStatus(status, errorType, execution string) string {
	switch {
	case status == qwenOK:
		return qwenOK
	case status == qwenCancelled:
		return qwenCancelled
	case errorType == "execution_denied" && execution == "not_started":
		return qwenBlocked
	}
	return qwenFailed
}

func readQwenFile(data []byte, name string) ([]TranscriptCall, string, error) {
	calls, err := readQwen(data, name)
	return calls, FormatQwenSession, err
}

// qwenEarliest is the earliest "timestamp" of a session file: every record
// has one, a call's is its start.
func qwenEarliest(data []byte) (time.Time, bool) {
	return earliestTimestamp(data, []byte(`"functionCall"`))
}

// qwenSpan renders c as the qwen-code.tool span Qwen Code 0.24.4 exports:
// the arguments and the result as the JSON the CLI writes (the result
// only for a call that succeeded), a failure as its kind and status.
func qwenSpan(c *TranscriptCall) ptrace.Traces {
	td, sp := callSpan(c, "qwen-code", c.Version, "qwen-code.tool")
	a := sp.Attributes()
	a.PutStr("session.id", c.Session)
	a.PutStr("gen_ai.operation.name", "execute_tool")
	a.PutStr("gen_ai.agent.name", "qwen-code")
	a.PutStr("gen_ai.tool.name", c.Tool)
	a.PutStr("gen_ai.tool.type", "function")
	a.PutStr("gen_ai.tool.call.id", c.ID)
	a.PutStr("tool.call_id", c.ID)
	a.PutStr("duration_ms", fmt.Sprint(c.End.Sub(c.Start).Milliseconds()))
	// The CLI adds the arguments when the tool starts: a refusal of the
	// hook has none, nor had the cancels seen (before the tool ran).
	if c.Status != qwenBlocked && c.Status != qwenCancelled {
		a.PutStr("gen_ai.tool.call.arguments", string(c.Input))
	}
	if !c.HasResult {
		return td
	}
	a.PutBool("success", c.Status == qwenOK)
	switch c.Status {
	case qwenOK:
		a.PutStr("gen_ai.tool.call.result", qwenOutput(c.Result))
	case qwenCancelled:
		a.PutStr("tool.failure_kind", c.Status)
	default:
		a.PutStr("tool.failure_kind", c.Status)
		a.PutStr("error.type", c.Status)
		msg := "Tool execution failed"
		if c.Status == qwenBlocked {
			msg = "Tool execution blocked by hook"
		}
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage(msg)
	}
	return td
}

// qwenOutput is a result as the CLI's span writes it, {"output": …}, with
// JavaScript's escaping (none for <, > and &).
func qwenOutput(text string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(map[string]string{"output": text})
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
