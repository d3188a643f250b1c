package replay

import (
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
)

// Agent transcripts: Claude Code writes every session to
// ~/.claude/projects/<project>/<session>.jsonl (subagents to
// <session>/subagents/agent-<id>.jsonl), and `claude -p --output-format
// stream-json` prints the same messages. Each holds the tool calls with
// their input and the result the model saw, richer than the telemetry. A
// replay turns every call into the claude_code.tool_result log record
// Claude Code's own telemetry exports, with the result added, so the
// collector's extraction and engine read it: there is no second detector.

// The transcript formats a replay reads (Input.Formats counts files by
// these names).
const (
	FormatOTLPJSON         = "otlp_json"
	FormatClaudeSession    = "claude_code_session"
	FormatClaudeStreamJSON = "claude_code_stream_json"
)

// TranscriptResultKey is the record attribute that carries a transcript
// call's result text: one of the extractor's default result keys.
const TranscriptResultKey = "tool_response"

// TranscriptCall is one tool call read from an agent transcript: the
// model's tool_use and the tool_result that answered it.
type TranscriptCall struct {
	// Session is the key the engine tracks the call under: the
	// transcript's session id (its file name when it has none), and for a
	// subagent's call its agent id, as the collector keys it live
	// ("<session>/<Task call id>" when the transcript names none). Each
	// agent loops on its own: a subagent reading a file its parent just
	// read is not the parent reading it twice.
	Session string
	// ParentSession is the session id of the agent that started a
	// subagent, empty for the main agent's calls.
	ParentSession string
	// ID is the tool_use id; Parent the id of the Task (Agent) call whose
	// subagent made the call, empty for the main agent's calls.
	ID, Parent string
	// AgentID names the subagent, when the transcript says.
	AgentID string
	Tool    string
	// Input is the tool's input object as the model sent it.
	Input json.RawMessage
	// Result is the tool_result's text; HasResult is false when the
	// transcript ends before the result (an interrupted session).
	Result    string
	HasResult bool
	IsError   bool
	// Start is the tool_use's timestamp, End the tool_result's.
	Start, End time.Time
	// Version is the CLI version that wrote the transcript.
	Version string
	// Source is "file:line" of the tool_use.
	Source string
	// Client is "gemini_cli" for a Gemini CLI call, replayed as its
	// tool_call span; empty for Claude Code's, replayed as its
	// tool_result record. Status is Gemini CLI's status of the call, or
	// how a Qwen Code call ended (its span's failure kind).
	Client, Status string
	// order breaks ties between calls of equal start: file, then line.
	order int
}

// transcriptLine is the part of a transcript line the reader uses: the
// session file spells the session "sessionId", stream-json "session_id".
type transcriptLine struct {
	Type            *string         `json:"type"`
	SessionID       string          `json:"sessionId"`
	StreamSessionID string          `json:"session_id"`
	Timestamp       string          `json:"timestamp"`
	ParentToolUseID *string         `json:"parent_tool_use_id"`
	AgentID         string          `json:"agentId"`
	StreamAgentID   string          `json:"agent_id"`
	Version         string          `json:"version"`
	Message         json.RawMessage `json:"message"`
}

type transcriptMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type transcriptBlock struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   *bool           `json:"is_error"`
	Text      string          `json:"text"`
}

// subagentMeta is Claude Code's <agent>.meta.json next to a subagent's
// transcript: the Task call that started it.
type subagentMeta struct {
	ToolUseID string `json:"toolUseId"`
}

// looksLikeTranscript reports whether the first JSON value of a file is a
// transcript line: an object with a string "type" (OTLP requests have
// none).
func looksLikeTranscript(first map[string]json.RawMessage) bool {
	var t string
	return json.Unmarshal(first["type"], &t) == nil && t != ""
}

// transcriptReader collects the calls of one transcript file.
type transcriptReader struct {
	name    string
	calls   []TranscriptCall
	byID    map[string]int
	stream  bool
	clock   time.Time
	agentID string
	parent  string
}

// readTranscript reads one Claude Code transcript (session JSONL or
// stream-json). agent and parent, when set, are the subagent's id and the
// Task call that started it (from the file's location and meta file).
func readTranscript(data []byte, name, agent, parent string) ([]TranscriptCall, string, error) {
	r := &transcriptReader{name: name, byID: map[string]int{}, agentID: agent, parent: parent}
	err := eachLine(data, func(text []byte, line int) error {
		if err := r.line(text, line); err != nil {
			return fmt.Errorf("%s:%d: not a Claude Code transcript line: %w", name, line, err)
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	format := FormatClaudeSession
	if r.stream {
		format = FormatClaudeStreamJSON
	}
	return r.calls, format, nil
}

func (r *transcriptReader) line(text []byte, n int) error {
	var l transcriptLine
	if err := json.Unmarshal(text, &l); err != nil {
		return err
	}
	if l.Type == nil {
		return fmt.Errorf(`no "type"`)
	}
	if l.StreamSessionID != "" {
		r.stream = true
	}
	at := r.clock
	if l.Timestamp != "" {
		t, err := time.Parse(time.RFC3339Nano, l.Timestamp)
		if err != nil {
			return fmt.Errorf("timestamp: %w", err)
		}
		at = t
		r.clock = t
	}
	blocks, err := contentBlocks(&l)
	if err != nil || len(blocks) == 0 {
		return err
	}
	who := r.speaker(&l)
	for i := range blocks {
		if err := r.block(&blocks[i], &l, who, &at, n); err != nil {
			return err
		}
	}
	return nil
}

// contentBlocks are the content blocks of an assistant or user message;
// none for other lines (prompts, attachments, summaries, results) and
// plain-text messages.
func contentBlocks(l *transcriptLine) ([]transcriptBlock, error) {
	if len(l.Message) == 0 || (*l.Type != "assistant" && *l.Type != "user") {
		return nil, nil
	}
	var m transcriptMessage
	if err := json.Unmarshal(l.Message, &m); err != nil {
		return nil, fmt.Errorf("message: %w", err)
	}
	if len(m.Content) == 0 || m.Content[0] != '[' {
		return nil, nil
	}
	var blocks []transcriptBlock
	if err := json.Unmarshal(m.Content, &blocks); err != nil {
		return nil, fmt.Errorf("message content: %w", err)
	}
	return blocks, nil
}

// lineSpeaker is the agent a line belongs to: its session, and for a
// subagent the session and Task call that started it.
type lineSpeaker struct {
	session, parentSession, parent, agent string
}

func (r *transcriptReader) speaker(l *transcriptLine) lineSpeaker {
	session := cmp.Or(l.SessionID, l.StreamSessionID, sessionFromName(r.name))
	parent, agent := r.parent, r.agentID
	if l.ParentToolUseID != nil && *l.ParentToolUseID != "" {
		parent = *l.ParentToolUseID
	}
	agent = cmp.Or(l.AgentID, l.StreamAgentID, agent)
	parentSession := ""
	if agent != "" {
		// A subagent is the session its agent_id names, as the collector
		// keys its calls live (attributes.subagent_session).
		parentSession, session = session, agent
	} else if parent != "" {
		// stream-json from CLIs older than its agent_id names a subagent
		// only by the Task call that started it.
		parentSession, session = session, session+"/"+parent
	}
	return lineSpeaker{session: session, parentSession: parentSession, parent: parent, agent: agent}
}

// block records a tool_use as a call, or a tool_result as its call's result.
func (r *transcriptReader) block(b *transcriptBlock, l *transcriptLine, who lineSpeaker, at *time.Time, n int) error {
	switch b.Type {
	case "tool_use":
		if b.ID == "" {
			return fmt.Errorf("tool_use without an id")
		}
		if _, seen := r.byID[b.ID]; seen {
			return nil // stream-json repeats a message per content block
		}
		if at.IsZero() {
			// No timestamps (older stream-json): a second per call keeps
			// the order and gives the timers something to read.
			*at = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
		}
		if l.Timestamp == "" {
			*at = at.Add(time.Second)
			r.clock = *at
		}
		input := b.Input
		if len(input) == 0 {
			input = json.RawMessage("{}")
		}
		r.byID[b.ID] = len(r.calls)
		r.calls = append(r.calls, TranscriptCall{
			Session: who.session, ParentSession: who.parentSession, ID: b.ID, Parent: who.parent, AgentID: who.agent, Tool: b.Name,
			Input: input, Start: *at, End: *at, Version: l.Version,
			Source: fmt.Sprintf("%s:%d", r.name, n),
		})
	case "tool_result":
		k, ok := r.byID[b.ToolUseID]
		if !ok || r.calls[k].HasResult {
			return nil // its call is in an earlier file (a resumed session)
		}
		c := &r.calls[k]
		c.HasResult = true
		c.Result = resultText(b.Content)
		c.IsError = b.IsError != nil && *b.IsError
		if at.After(c.Start) {
			c.End = *at
		}
	}
	return nil
}

// sessionFromName is the session a file names: its base name without
// its extensions.
func sessionFromName(name string) string {
	s := strings.TrimSuffix(filepath.Base(name), ".gz")
	s = strings.TrimSuffix(s, ".jsonl")
	return strings.TrimSuffix(s, ".json")
}

// resultText is a tool_result's content as the model read it: a string, or
// text blocks joined by newlines (an image block reads "[image]").
func resultText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []transcriptBlock
	if json.Unmarshal(raw, &blocks) != nil {
		return string(raw)
	}
	parts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		} else {
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// subagentFiles lists the transcripts of the subagents of the session file
// name: Claude Code writes them to <session>/subagents/agent-<id>.jsonl.
func subagentFiles(name string) []string {
	base := strings.TrimSuffix(strings.TrimSuffix(name, ".gz"), ".jsonl")
	if base == name {
		return nil
	}
	var files []string
	for _, pat := range []string{"*.jsonl", "*.jsonl.gz"} {
		m, _ := filepath.Glob(filepath.Join(base, "subagents", pat))
		files = append(files, m...)
	}
	sort.Strings(files)
	return files
}

// subagentOf reads the agent id and the Task call that started it from a
// subagent transcript's name and its meta file, when there is one.
func subagentOf(name string) (agent, parent string) {
	base := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(name), ".gz"), ".jsonl")
	agent, ok := strings.CutPrefix(base, "agent-")
	if !ok {
		return "", ""
	}
	dir := filepath.Dir(name)
	if b, err := os.ReadFile(filepath.Join(dir, base+".meta.json")); err == nil {
		var m subagentMeta
		if json.Unmarshal(b, &m) == nil {
			parent = m.ToolUseID
		}
	}
	return agent, parent
}

// transcriptBatches renders calls, ordered by start, one request per
// call so the event clock and its timers move as they did in the session.
func transcriptBatches(calls []TranscriptCall) []Batch {
	sortCalls(calls)
	batches := make([]Batch, 0, len(calls))
	for i := range calls {
		batches = append(batches, callBatch(&calls[i]))
	}
	return batches
}

// sortCalls orders calls by start, then as read (file, then line).
func sortCalls(calls []TranscriptCall) {
	sort.SliceStable(calls, func(i, j int) bool {
		if !calls[i].Start.Equal(calls[j].Start) {
			return calls[i].Start.Before(calls[j].Start)
		}
		return calls[i].order < calls[j].order
	})
}

// callBatch renders c as its CLI's telemetry sends it (callRenderers),
// Claude Code's claude_code.tool_result log record when none is listed.
func callBatch(c *TranscriptCall) Batch {
	if render, ok := callRenderers[c.Client]; ok {
		return render(c)
	}
	return Batch{Signal: SignalLogs, Logs: transcriptRecord(c), Source: c.Source}
}

// callRenderers render the calls of a CLI (TranscriptCall.Client) other
// than Claude Code: a new CLI's format adds its own beside its entry in
// sessionFormats.
var callRenderers = map[string]func(*TranscriptCall) Batch{
	clientGemini: func(c *TranscriptCall) Batch {
		return Batch{Signal: SignalTraces, Traces: geminiSpan(c), Source: c.Source}
	},
	clientCodex: func(c *TranscriptCall) Batch {
		return Batch{Signal: SignalLogs, Logs: codexRecord(c), Source: c.Source}
	},
	clientQwen: func(c *TranscriptCall) Batch {
		return Batch{Signal: SignalTraces, Traces: qwenSpan(c), Source: c.Source}
	},
	clientOpenCode: func(c *TranscriptCall) Batch {
		return Batch{Signal: SignalTraces, Traces: openCodeSpan(c), Source: c.Source}
	},
}

// callRecord is the log record a replayed call c becomes, under the
// resource of service (the CLI's service.name, and its version when the
// file names one), stamped at the call's end; the caller fills its
// attributes, duration_ms among them: it is how the record's reader finds
// the call's start.
func callRecord(c *TranscriptCall, service string) (plog.Logs, plog.LogRecord) {
	ld := plog.NewLogs()
	rl := ld.ResourceLogs().AppendEmpty()
	res := rl.Resource().Attributes()
	res.PutStr("service.name", service)
	if c.Version != "" {
		res.PutStr("service.version", c.Version)
	}
	sl := rl.ScopeLogs().AppendEmpty()
	sl.Scope().SetName("github.com/otelcol-loop/otelcol-loop/internal/replay/transcript")
	lr := sl.LogRecords().AppendEmpty()
	end := pcommon.NewTimestampFromTime(c.End)
	lr.SetTimestamp(end)
	lr.SetObservedTimestamp(end)
	return ld, lr
}

// transcriptRecord is c as Claude Code's telemetry logs it with
// OTEL_LOG_TOOL_DETAILS=1 (tool_input), plus its result.
func transcriptRecord(c *TranscriptCall) plog.Logs {
	ld, lr := callRecord(c, "claude-code")
	lr.Body().SetStr("claude_code.tool_result")
	m := lr.Attributes()
	m.PutStr("event.name", "tool_result")
	session := c.Session
	if c.AgentID != "" {
		// A subagent's record carries the main agent's session.id and its
		// own agent_id, as Claude Code's do.
		session = c.ParentSession
	}
	m.PutStr("session.id", session)
	m.PutStr("tool_name", c.Tool)
	m.PutStr("tool_use_id", c.ID)
	m.PutStr("tool_input", string(c.Input))
	m.PutStr("duration_ms", fmt.Sprint(c.End.Sub(c.Start).Milliseconds()))
	if c.HasResult {
		m.PutStr("success", fmt.Sprint(!c.IsError))
		m.PutStr(TranscriptResultKey, c.Result)
	}
	if c.Parent != "" {
		m.PutStr("parent_tool_use_id", c.Parent)
	}
	if c.AgentID != "" {
		m.PutStr("agent_id", c.AgentID)
	}
	return ld
}
