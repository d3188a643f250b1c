package replay

import (
	"bytes"
	"encoding/json"
	"time"
)

// sessionFormat is one agent session format a replay reads: how a file of
// it is told from its first JSON value, and how its tool calls are read.
// A new CLI's format is one more entry in sessionFormats (and, when its
// calls are replayed as something other than Claude Code's log record,
// one in callRenderers).
type sessionFormat struct {
	// detect reports whether a file whose first JSON value is first is
	// of this format.
	detect func(first map[string]json.RawMessage) bool
	// read reads one file's calls (data is cleaned: see clean) and names
	// its format, Input.Formats' key.
	read func(data []byte, name string) (calls []TranscriptCall, format string, err error)
	// companions, when set, lists the files read with a file from disk:
	// Claude Code's subagent transcripts beside their session's.
	companions func(name string) []string
	// earliest, when set, is a quick look at a file's timestamps for a
	// time no later than its first call's start (false when it cannot
	// tell): an audit's first pass then need not read the file whole.
	earliest func(data []byte) (time.Time, bool)
}

// sessionFormats are tried in order on a file's first JSON value; OTLP
// JSON is what matches none. Claude Code's test (any string "type") is
// the loosest and stays last: a format with a "type" field of its own
// goes before it.
var sessionFormats = []*sessionFormat{
	{detect: looksLikeGemini, read: readGeminiFile, earliest: geminiEarliest},
	{detect: looksLikeCodex, read: readCodexFile, earliest: codexEarliest},
	{detect: looksLikeQwen, read: readQwenFile, earliest: qwenEarliest},
	openCodeFormat,
	{detect: looksLikeTranscript, read: readClaudeFile, companions: subagentFiles, earliest: claudeEarliest},
}

// formatOf is the session format of data from its first JSON value, nil
// for anything else, unreadable input included (but for an OpenCode
// export cut short), which is read as OTLP JSON, whose reader names the
// bad line.
func formatOf(data []byte) *sessionFormat {
	var first map[string]json.RawMessage
	if json.NewDecoder(bytes.NewReader(data)).Decode(&first) != nil {
		return openCodeCutShort(data)
	}
	for _, sf := range sessionFormats {
		if sf.detect(first) {
			return sf
		}
	}
	return nil
}

func readGeminiFile(data []byte, name string) ([]TranscriptCall, string, error) {
	calls, err := readGemini(data, name)
	return calls, FormatGeminiSession, err
}

// readClaudeFile reads a Claude Code session transcript or stream-json
// output; a subagent's transcript names its agent and the Task call that
// started it by its place and meta file.
func readClaudeFile(data []byte, name string) ([]TranscriptCall, string, error) {
	agent, parent := subagentOf(name)
	return readTranscript(data, name, agent, parent)
}

// claudeEarliest is the earliest "timestamp" in a Claude Code transcript.
// A call starts at its tool_use line's timestamp, so when every line that
// holds a tool_use has one, none starts earlier; a line without one (older
// stream-json) takes a time made up from the lines before it: false.
func claudeEarliest(data []byte) (time.Time, bool) {
	return earliestTimestamp(data, []byte(`"tool_use"`))
}

// geminiEarliest is the earliest "timestamp" in a Gemini CLI session file,
// whose calls start at their message's timestamp; a line with calls and no
// timestamp (which the CLI does not write) would start them at the zero
// time: false. The older one-document .json is read whole.
func geminiEarliest(data []byte) (time.Time, bool) {
	if _, whole := wholeDocument(data); whole {
		return time.Time{}, false
	}
	return earliestTimestamp(data, []byte(`"toolCalls"`))
}

// earliestTimestamp is the earliest "timestamp" of data's lines, false
// when a line holding calls (marked by calls) has none.
func earliestTimestamp(data, calls []byte) (time.Time, bool) {
	var first time.Time
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		t, ok := lineTimestamp(line)
		if !ok && bytes.Contains(line, calls) {
			return time.Time{}, false
		}
		if ok && (first.IsZero() || t.Before(first)) {
			first = t
		}
	}
	return first, !first.IsZero()
}

// lineTimestamp is the earliest "timestamp":"…" value of a line.
func lineTimestamp(line []byte) (time.Time, bool) {
	const key = `"timestamp":"`
	var first time.Time
	for {
		i := bytes.Index(line, []byte(key))
		if i < 0 {
			return first, !first.IsZero()
		}
		line = line[i+len(key):]
		end := bytes.IndexByte(line, '"')
		if end < 0 {
			return first, !first.IsZero()
		}
		if t, err := time.Parse(time.RFC3339Nano, string(line[:end])); err == nil && (first.IsZero() || t.Before(first)) {
			first = t
		}
		line = line[end:]
	}
}
