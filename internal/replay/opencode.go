package replay

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// OpenCode 1.18.33 keeps its sessions in an SQLite database,
// $XDG_DATA_HOME/opencode/opencode.db (~/.local/share/opencode), a table
// each of sessions, messages and parts whose rows hold JSON: no file per
// session to point at, and reading SQLite would take a database driver.
// `opencode export <session>` prints a session as one JSON document,
// {info, messages: [{info, parts}]}, the same JSON the database holds; a
// replay reads that. A tool call is a part {type: "tool", tool, callID,
// state}: the state's input, and once it ran its title, metadata and
// output (the output the model read, the nudge loopsupervisor's plugin
// appended included) or the error a call that failed or that the plugin
// refused ended with.
//
// Each call is replayed as the AI SDK's ai.toolCall span OpenCode exports
// with "experimental": {"openTelemetry": true}: the result is the tool's
// {title, metadata, output} as JSON, the same document the live span
// records (its keys come in the order each tool returns them, which the
// export does not keep; the result's digest ignores key order); a call
// that ended in an error has the span's error status and exception event.

// FormatOpenCodeExport is the `opencode export` session document format.
const FormatOpenCodeExport = "opencode_export"

// clientOpenCode marks a TranscriptCall read from an OpenCode export.
const clientOpenCode = "opencode"

// openCodeFormat is OpenCode's entry in sessionFormats.
var openCodeFormat = &sessionFormat{detect: looksLikeOpenCode, read: readOpenCodeFile}

// openCodeCutShort is openCodeFormat for data that opens as an export
// ({"info": …) but does not end, as a copy taken while it was written
// does: its reader then says so, where OTLP JSON's would name the wrong
// format. Nil for anything else.
func openCodeCutShort(data []byte) *sessionFormat {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	if t, err := dec.Token(); err != nil || t != "info" {
		return nil
	}
	return openCodeFormat
}

// looksLikeOpenCode reports whether a file's first JSON value is an
// `opencode export` document: a session info with an id, and messages.
func looksLikeOpenCode(first map[string]json.RawMessage) bool {
	var info struct {
		ID string `json:"id"`
	}
	_, msgs := first["messages"]
	return msgs && json.Unmarshal(first["info"], &info) == nil && info.ID != ""
}

type openCodeExport struct {
	Info struct {
		ID       string `json:"id"`
		ParentID string `json:"parentID"`
		Version  string `json:"version"`
	} `json:"info"`
	Messages []struct {
		Parts []openCodePart `json:"parts"`
	} `json:"messages"`
}

type openCodePart struct {
	Type   string `json:"type"`
	Tool   string `json:"tool"`
	CallID string `json:"callID"`
	State  struct {
		Status string          `json:"status"`
		Input  json.RawMessage `json:"input"`
		// Raw JSON text: the result is rebuilt from OpenCode's own.
		Title    json.RawMessage `json:"title"`
		Metadata json.RawMessage `json:"metadata"`
		Output   json.RawMessage `json:"output"`
		Error    string          `json:"error"`
		Time     struct {
			Start int64 `json:"start"`
			End   int64 `json:"end"`
		} `json:"time"`
	} `json:"state"`
}

// readOpenCode reads one `opencode export` document.
func readOpenCode(data []byte, name string) ([]TranscriptCall, error) {
	var doc openCodeExport
	if err := json.Unmarshal(data, &doc); err != nil {
		at := errorOffset(err, 0)
		if at >= len(bytes.TrimRight(data, " \t\r\n"))-1 {
			return nil, fmt.Errorf("%s:%d: an OpenCode session export cut short (not complete JSON): %w", name, lineAt(data, at), err)
		}
		return nil, fmt.Errorf("%s:%d: not an OpenCode session export: %w", name, lineAt(data, at), err)
	}
	var calls []TranscriptCall
	off := 0 // where the next part's callID is looked for, to name its line
	for _, m := range doc.Messages {
		for i := range m.Parts {
			p := &m.Parts[i]
			if p.Type != "tool" {
				continue
			}
			if p.CallID == "" || p.Tool == "" {
				return nil, fmt.Errorf("%s: a tool part without a callID or tool", name)
			}
			source := name
			if k := bytes.Index(data[off:], []byte(`"callID"`)); k >= 0 {
				off += k + 1
				source = fmt.Sprintf("%s:%d", name, lineAt(data, off))
			}
			if p.State.Status == "pending" || p.State.Status == "" {
				// Not run, its input not even parsed (a kill's last call):
				// the live CLI exported nothing for it.
				continue
			}
			calls = append(calls, openCodeCall(p, doc.Info.ID, doc.Info.ParentID, doc.Info.Version, source))
		}
	}
	return calls, nil
}

// openCodeCall is a tool part that ran (or was running when the session
// ended) as a call.
func openCodeCall(p *openCodePart, session, parent, version, source string) TranscriptCall {
	st := &p.State
	input := compactJSON(st.Input)
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	c := TranscriptCall{
		Session: session, ParentSession: parent, ID: p.CallID, Tool: p.Tool, Input: input,
		Start: time.UnixMilli(st.Time.Start).UTC(), Version: version, Source: source,
		Client: clientOpenCode, Status: st.Status,
	}
	c.End = c.Start
	if st.Time.End > st.Time.Start {
		c.End = time.UnixMilli(st.Time.End).UTC()
	}
	switch st.Status {
	case "completed":
		c.HasResult, c.Result = true, openCodeResult(st.Title, st.Metadata, st.Output)
	case "error":
		c.HasResult, c.IsError, c.Result = true, true, st.Error
	}
	return c
}

// openCodeResult is the ai.toolCall.result the AI SDK records: the tool's
// {title, metadata, output}, a missing one left out, each value as the
// export wrote it (JavaScript's escapes).
func openCodeResult(title, metadata, output json.RawMessage) string {
	var b bytes.Buffer
	b.WriteByte('{')
	for _, kv := range []struct {
		key string
		raw json.RawMessage
	}{{"title", title}, {"metadata", metadata}, {"output", output}} {
		v := compactJSON(kv.raw)
		if len(v) == 0 {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q:", kv.key)
		b.Write(v)
	}
	b.WriteByte('}')
	return b.String()
}

// compactJSON is raw without the export's indentation; its strings keep
// their escapes.
func compactJSON(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

func readOpenCodeFile(data []byte, name string) ([]TranscriptCall, string, error) {
	calls, err := readOpenCode(data, name)
	return calls, FormatOpenCodeExport, err
}

// openCodeSpan renders c as the ai.toolCall span OpenCode 1.18.33 exports:
// its arguments, its session as session.id, and its result, or for a call
// that ended in an error the span's error status and exception event.
func openCodeSpan(c *TranscriptCall) ptrace.Traces {
	// A session's calls share a trace, the key of the default config.
	td, sp := callSpan(c, "opencode", c.Version, "ai.toolCall")
	a := sp.Attributes()
	a.PutStr("ai.operationId", "ai.toolCall")
	a.PutStr("ai.toolCall.name", c.Tool)
	a.PutStr("ai.toolCall.id", c.ID)
	a.PutStr("ai.toolCall.args", string(c.Input))
	a.PutStr("session.id", c.Session)
	switch {
	case c.HasResult && c.IsError:
		sp.Status().SetCode(ptrace.StatusCodeError)
		sp.Status().SetMessage(c.Result)
		ev := sp.Events().AppendEmpty()
		ev.SetName("exception")
		ev.SetTimestamp(pcommon.NewTimestampFromTime(c.End))
		ev.Attributes().PutStr("exception.type", "Error")
		ev.Attributes().PutStr("exception.message", c.Result)
	case c.HasResult:
		a.PutStr("ai.toolCall.result", c.Result)
	}
	return td
}
