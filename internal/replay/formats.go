package replay

import (
	"bytes"
	"encoding/json"
)

// sessionFormat is one agent session format a replay reads: how a file of
// it is told from its first JSON value, and how its tool calls are read.
// A new CLI's format is one more entry in sessionFormats.
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
}

// sessionFormats are tried in order on a file's first JSON value; OTLP
// JSON is what matches none. Claude Code's test (any string "type") is
// the loosest and stays last: a format with a "type" field of its own
// goes before it.
var sessionFormats = []*sessionFormat{
	{detect: looksLikeGemini, read: readGeminiFile},
	{detect: looksLikeTranscript, read: readClaudeFile, companions: subagentFiles},
}

// formatOf is the session format of data from its first JSON value, nil
// for anything else, unreadable input included, which is read as OTLP
// JSON, whose reader names the bad line.
func formatOf(data []byte) *sessionFormat {
	var first map[string]json.RawMessage
	if json.NewDecoder(bytes.NewReader(data)).Decode(&first) != nil {
		return nil
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
