package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
)

// Codex CLI keeps every session in
// $CODEX_HOME/sessions/YYYY/MM/DD/rollout-<start>-<id>.jsonl: a
// session_meta line whose payload names the session (id), then one line
// per item, each {timestamp, type, payload}. The model's calls are
// response_item lines whose payload is a function_call {name, arguments
// (JSON text), call_id} (or a custom_tool_call {name, input}: apply_patch's
// patch, free text), and their
// outputs the function_call_output (custom_tool_call_output) lines with the
// same call_id: the text the model read, a call its PreToolUse hook
// refused included ("Command blocked by PreToolUse hook: …").
//
// Each call is replayed as the codex.tool_result log record Codex CLI's own
// telemetry exports (0.169.0), so the collector's extraction reads it as
// it reads the live CLI. A call the hook refused has no such record live;
// replayed, it shows the model asking again.

// FormatCodexSession is the Codex CLI session (rollout) file format.
const FormatCodexSession = "codex_cli_session"

// clientCodex marks a TranscriptCall read from a Codex CLI session.
const clientCodex = "codex_cli"

// looksLikeCodex reports whether a file's first JSON value is a Codex CLI
// rollout's session_meta line with a session id.
func looksLikeCodex(first map[string]json.RawMessage) bool {
	var typ string
	var meta struct {
		ID string `json:"id"`
	}
	return json.Unmarshal(first["type"], &typ) == nil && typ == "session_meta" &&
		json.Unmarshal(first["payload"], &meta) == nil && meta.ID != ""
}

type codexLine struct {
	Timestamp string          `json:"timestamp"`
	Type      string          `json:"type"`
	Payload   json.RawMessage `json:"payload"`
}

type codexItem struct {
	Type      string          `json:"type"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Arguments string          `json:"arguments"`
	Input     *string         `json:"input"`
	CallID    string          `json:"call_id"`
	Output    json.RawMessage `json:"output"`
	Version   string          `json:"cli_version"`
}

// readCodex reads one Codex CLI rollout file.
func readCodex(data []byte, name string) ([]TranscriptCall, error) {
	var calls []TranscriptCall
	byID := map[string]int{}
	session, version := "", ""
	err := eachLine(data, func(text []byte, line int) error {
		var l codexLine
		var it codexItem
		if err := json.Unmarshal(text, &l); err != nil {
			return fmt.Errorf("%s:%d: not a Codex CLI session line: %w", name, line, err)
		}
		if l.Type != "session_meta" && l.Type != "response_item" {
			return nil
		}
		if err := json.Unmarshal(l.Payload, &it); err != nil {
			return fmt.Errorf("%s:%d: not a Codex CLI session line: %w", name, line, err)
		}
		at, err := geminiTime(l.Timestamp) // RFC 3339 too
		if err != nil {
			return fmt.Errorf("%s:%d: timestamp: %w", name, line, err)
		}
		switch it.Type {
		case "":
			if l.Type == "session_meta" && session == "" {
				session, version = it.ID, it.Version
			}
		case "function_call", "custom_tool_call":
			if it.CallID == "" || it.Name == "" {
				return fmt.Errorf("%s:%d: a tool call without a call_id or name", name, line)
			}
			input := json.RawMessage(it.Arguments)
			if it.Input != nil {
				// A custom tool's input is free text (apply_patch's
				// patch), kept as a JSON string.
				input, _ = json.Marshal(*it.Input)
			}
			if !json.Valid(input) {
				input, _ = json.Marshal(it.Arguments)
			}
			sess := session
			if sess == "" {
				sess = sessionFromName(name)
			}
			byID[it.CallID] = len(calls)
			calls = append(calls, TranscriptCall{
				Session: sess, ID: it.CallID, Tool: it.Name, Input: input, Start: at, End: at,
				Version: version, Source: fmt.Sprintf("%s:%d", name, line), Client: clientCodex,
			})
		case "function_call_output", "custom_tool_call_output":
			k, ok := byID[it.CallID]
			if !ok {
				return nil // the call went before the file's first line
			}
			c := &calls[k]
			c.HasResult, c.Result = true, codexOutput(it.Output)
			if at.After(c.Start) {
				c.End = at
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return calls, nil
}

// codexOutput is an output's text: a string, or a list of text items.
func codexOutput(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var items []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &items) == nil {
		var b bytes.Buffer
		for i, it := range items {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(it.Text)
		}
		return b.String()
	}
	return string(raw)
}

func readCodexFile(data []byte, name string) ([]TranscriptCall, string, error) {
	calls, err := readCodex(data, name)
	return calls, FormatCodexSession, err
}

// codexEarliest is the earliest "timestamp" of a rollout: every line has
// one, a call's is its start.
func codexEarliest(data []byte) (time.Time, bool) {
	return earliestTimestamp(data, []byte(`"function_call"`))
}

// codexRecord renders c as the codex.tool_result log record Codex CLI
// 0.169.0 exports: the call's JSON arguments and its output, keyed by the
// session's conversation.id.
func codexRecord(c *TranscriptCall) plog.Logs {
	ld, lr := callRecord(c, "codex_exec")
	m := lr.Attributes()
	m.PutStr("event.name", "codex.tool_result")
	m.PutStr("conversation.id", c.Session)
	m.PutStr("tool_name", c.Tool)
	m.PutStr("call_id", c.ID)
	args := string(c.Input)
	var text string
	if json.Unmarshal(c.Input, &text) == nil {
		args = text // a custom tool's free text, as the live record has it
	}
	m.PutStr("arguments", args)
	m.PutStr("duration_ms", fmt.Sprint(c.End.Sub(c.Start).Milliseconds()))
	if c.HasResult {
		// The live record says true for every call that ran, a command
		// that exits non-zero included.
		m.PutStr("success", "true")
		m.PutStr("output", c.Result)
	}
	return ld
}
