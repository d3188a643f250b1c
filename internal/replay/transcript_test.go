package replay

import (
	"bytes"
	"compress/gzip"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Transcript lines in the shapes Claude Code 2.1 writes: the session file
// (sessionId, uuid, timestamp on every message) and stream-json
// (session_id, parent_tool_use_id).
const (
	sessionUse    = `{"type":"assistant","sessionId":"s1","timestamp":"2026-12-02T03:42:28.736Z","version":"2.1.332","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]}}`
	sessionResult = `{"type":"user","sessionId":"s1","timestamp":"2026-12-02T03:42:29.495Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":false,"content":"a.txt"}]}}`
	sessionFail   = `{"type":"assistant","sessionId":"s1","timestamp":"2026-12-02T03:42:30.000Z","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"Read","input":{"file_path":"/x"}}]}}` + "\n" +
		`{"type":"user","sessionId":"s1","timestamp":"2026-12-02T03:42:30.100Z","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":[{"type":"text","text":"File does not exist."}]}]}}`
	streamInit = `{"type":"system","subtype":"init","session_id":"s2","tools":["Bash"]}`
	streamUse  = `{"type":"assistant","session_id":"s2","parent_tool_use_id":"toolu_task","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_9","name":"Grep","input":{"pattern":"TODO"}}]}}`
	streamRes  = `{"type":"user","session_id":"s2","parent_tool_use_id":"toolu_task","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":"cart.go:3: TODO"}]}}`
)

func TestReadTranscript(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return v
	}
	for _, tc := range []struct {
		name, input, format string
		want                []TranscriptCall
	}{
		{"a session file's call and result", sessionUse + "\n" + sessionResult, FormatClaudeSession, []TranscriptCall{{
			Session: "s1", ID: "toolu_1", Tool: "Bash", Input: []byte(`{"command":"ls"}`), Result: "a.txt", HasResult: true,
			Start: at("2026-12-02T03:42:28.736Z"), End: at("2026-12-02T03:42:29.495Z"), Version: "2.1.332", Source: "f:1",
		}}},
		{"is_error and text blocks", sessionFail, FormatClaudeSession, []TranscriptCall{{
			Session: "s1", ID: "toolu_2", Tool: "Read", Input: []byte(`{"file_path":"/x"}`), Result: "File does not exist.", HasResult: true, IsError: true,
			Start: at("2026-12-02T03:42:30Z"), End: at("2026-12-02T03:42:30.1Z"), Source: "f:1",
		}}},
		{"a call the session ended before answering", sessionUse, FormatClaudeSession, []TranscriptCall{{
			Session: "s1", ID: "toolu_1", Tool: "Bash", Input: []byte(`{"command":"ls"}`),
			Start: at("2026-12-02T03:42:28.736Z"), End: at("2026-12-02T03:42:28.736Z"), Version: "2.1.332", Source: "f:1",
		}}},
		{"stream-json: a subagent's call by its parent id, no timestamps", streamInit + "\n" + streamUse + "\n" + streamUse + "\n" + streamRes, FormatClaudeStreamJSON, []TranscriptCall{{
			Session: "s2/toolu_task", ParentSession: "s2", ID: "toolu_9", Parent: "toolu_task", Tool: "Grep", Input: []byte(`{"pattern":"TODO"}`), Result: "cart.go:3: TODO", HasResult: true,
			Start: time.Date(2000, 1, 1, 0, 0, 1, 0, time.UTC), End: time.Date(2000, 1, 1, 0, 0, 1, 0, time.UTC), Source: "f:2",
		}}},
		{"a result whose call is in an earlier file", sessionResult, FormatClaudeSession, nil},
		{"plain-text messages and other lines", `{"type":"summary","summary":"x","leafUuid":"u"}` + "\n" +
			`{"type":"user","sessionId":"s1","message":{"role":"user","content":"hello"}}`, FormatClaudeSession, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, format, err := readTranscript([]byte(tc.input), "f", "", "")
			require.NoError(t, err)
			require.Equal(t, tc.format, format)
			require.Equal(t, tc.want, calls)
		})
	}
}

func TestReadTranscriptErrorsNameTheLine(t *testing.T) {
	for _, tc := range []struct{ name, input, want string }{
		{"not JSON", sessionUse + "\n{not json\n", "f.jsonl:2: not a Claude Code transcript line"},
		{"no type", sessionUse + "\n\n" + `{"sessionId":"s1"}`, "f.jsonl:3: not a Claude Code transcript line: no \"type\""},
		{"bad timestamp", `{"type":"user","timestamp":"yesterday"}`, "f.jsonl:1: not a Claude Code transcript line: timestamp"},
		{"content of the wrong type", `{"type":"assistant","message":{"content":[1]}}`, "f.jsonl:1: not a Claude Code transcript line: message content"},
		{"tool_use without id", `{"type":"assistant","message":{"content":[{"type":"tool_use","name":"Bash"}]}}`, "f.jsonl:1: not a Claude Code transcript line: tool_use without an id"},
		// A cut line followed by more is no cut last line.
		{"a truncated line before the last", sessionUse + "\n" + sessionResult[:40] + "\n" + sessionResult, "f.jsonl:2: not a Claude Code transcript line"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{}
			err := in.Add(strings.NewReader(tc.input), "f.jsonl")
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func gz(t *testing.T, s string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, _ = zw.Write([]byte(s))
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// A session file is read with its subagents' transcripts, gzip or not, and
// each call becomes one claude_code.tool_result record the processor reads
// as a Claude Code call with its result.
func TestTranscriptReplaysThroughTheProcessor(t *testing.T) {
	dir := t.TempDir()
	main := filepath.Join(dir, "s1.jsonl.gz")
	require.NoError(t, os.WriteFile(main, gz(t, sessionUse+"\n"+sessionResult+"\n"+sessionFail+"\n"), 0o644))
	sub := filepath.Join(dir, "s1", "subagents")
	require.NoError(t, os.MkdirAll(sub, 0o755))
	subUse := strings.ReplaceAll(strings.ReplaceAll(sessionUse, "toolu_1", "toolu_7"), "28.736Z", "29.800Z")
	subRes := strings.ReplaceAll(strings.ReplaceAll(sessionResult, "toolu_1", "toolu_7"), "29.495Z", "29.900Z")
	require.NoError(t, os.WriteFile(filepath.Join(sub, "agent-a1.jsonl"), []byte(subUse+"\n"+subRes+"\n"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(sub, "agent-a1.meta.json"), []byte(`{"toolUseId":"toolu_task"}`), 0o644))

	in := &Input{}
	require.NoError(t, in.AddFile(main))
	// Named again (a ** glob): not read twice.
	require.NoError(t, in.AddFile(filepath.Join(sub, "agent-a1.jsonl")))
	require.Equal(t, map[string]int{FormatClaudeSession: 2}, in.Formats)
	require.Len(t, in.Transcript, 3)
	batches := in.All()
	require.Len(t, batches, 3)
	// Ordered by start across files: the subagent's call comes second.
	lr := batches[1].Logs.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords().At(0)
	parent, _ := lr.Attributes().Get("parent_tool_use_id")
	agent, _ := lr.Attributes().Get("agent_id")
	require.Equal(t, "toolu_task", parent.Str())
	require.Equal(t, "a1", agent.Str())

	cfg, err := Config(nil)
	require.NoError(t, err)
	res, err := Run(context.Background(), cfg, batches)
	require.NoError(t, err)
	require.Len(t, res.Calls, 3)
	// The subagent's call is tracked on its own, under a key of its own.
	for i, want := range []string{"s1", "a1", "s1"} {
		c := res.Calls[i]
		require.Equal(t, "claude_code", c.Client)
		require.Equal(t, want, c.Session)
		require.False(t, c.NameOnly)
	}
	require.True(t, res.Calls[2].Failed)
	require.NotEqual(t, res.Calls[0].Fingerprint, uint64(0), "the result is read as the call's evidence")
	sum := Summarize(cfg, in, res)
	require.Len(t, sum.Sessions, 2)
	byKey := map[string]SessionSummary{}
	for _, s := range sum.Sessions {
		byKey[s.Session] = s
	}
	require.Equal(t, main, byKey["s1"].Transcript)
	require.Equal(t, SessionSummary{Session: "a1", Client: "claude_code", Calls: 1, FinalState: "working",
		Transcript: filepath.Join(sub, "agent-a1.jsonl"), ParentSession: "s1", StartedBy: "toolu_task"}, byKey["a1"])
	require.Equal(t, int64(3), sum.Read.TranscriptCalls)
}

// FuzzReadTranscript: no input makes the reader panic, and what it accepts
// replays as one record per call.
func FuzzReadTranscript(f *testing.F) {
	for _, s := range []string{sessionUse + "\n" + sessionResult, sessionFail, streamInit + "\n" + streamUse + "\n" + streamRes, `{"type":"x"}`, "{}",
		geminiMeta + "\n" + geminiEarly + "\n" + geminiUse + "\n" + geminiSet + "\n" + geminiFail,
		qwenPrompt + "\n" + qwenSystem + "\n" + qwenUse + "\n" + qwenResult + "\n" + qwenDenyUse + "\n" + qwenDeny} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &Input{}
		if err := in.Add(bytes.NewReader(data), "fuzz"); err != nil {
			if !strings.HasPrefix(err.Error(), "fuzz") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if n := len(in.Transcript); n > 0 {
			if got := len(in.All()) - len(in.Batches); got != n {
				t.Fatalf("%d calls replayed as %d records", n, got)
			}
		}
	})
}

// Gemini CLI session lines in the shapes 0.61 writes: metadata, a gemini
// message written twice (the later copy with its tool calls), a $set
// update, a failed call.
const (
	geminiMeta  = `{"sessionId":"6a0c5d9e-dd2a-44ab-b336-9fc4cbcc0d45","projectHash":"p","startTime":"2026-12-02T04:43:21.730Z","kind":"main"}`
	geminiEarly = `{"id":"m1","timestamp":"2026-12-02T04:43:22.466Z","type":"gemini","content":"","model":"gemini-2.5-flash"}`
	geminiUse   = `{"id":"m1","timestamp":"2026-12-02T04:43:22.466Z","type":"gemini","content":"","toolCalls":[{"id":"run_shell_command__1","name":"run_shell_command","args":{"command":"ls"},"result":[{"functionResponse":{"id":"run_shell_command__1","name":"run_shell_command","response":{"output":"a.txt"}}}],"status":"success","timestamp":"2026-12-02T04:43:23.161Z"}]}`
	geminiSet   = `{"$set":{"lastUpdated":"2026-12-02T04:43:23.2Z"}}`
	geminiFail  = `{"id":"m2","timestamp":"2026-12-02T04:43:24Z","type":"gemini","toolCalls":[{"id":"read_file__2","name":"read_file","args":{"file_path":"x"},"result":[{"functionResponse":{"id":"read_file__2","name":"read_file","response":{"error":"File not found."}}}],"status":"error","timestamp":"2026-12-02T04:43:24.5Z"}]}`
)

func TestReadGemini(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		require.NoError(t, err)
		return v
	}
	const sid = "6a0c5d9e-dd2a-44ab-b336-9fc4cbcc0d45"
	shell := TranscriptCall{Session: sid, ID: "run_shell_command__1", Tool: "run_shell_command", Input: []byte(`{"command":"ls"}`),
		Result: "a.txt", HasResult: true, Start: at("2026-12-02T04:43:22.466Z"), End: at("2026-12-02T04:43:23.161Z"),
		Source: "f:2", Client: clientGemini, Status: "success"}
	for _, tc := range []struct {
		name, input string
		want        []TranscriptCall
	}{
		{"a message written twice keeps the later copy", geminiMeta + "\n" + geminiEarly + "\n" + geminiUse + "\n" + geminiSet, []TranscriptCall{func() TranscriptCall { c := shell; c.Source = "f:3"; return c }()}},
		{"a failed call", geminiMeta + "\n" + geminiFail, []TranscriptCall{{Session: sid, ID: "read_file__2", Tool: "read_file", Input: []byte(`{"file_path":"x"}`),
			Result: "File not found.", HasResult: true, IsError: true, Start: at("2026-12-02T04:43:24Z"), End: at("2026-12-02T04:43:24.5Z"),
			Source: "f:2", Client: clientGemini, Status: "error"}}},
		{"a $set restating the messages adds no second call", geminiMeta + "\n" + geminiUse + "\n" + `{"$set":{"messages":[` + geminiUse + `]}}`, []TranscriptCall{shell}},
		{"the older one-document .json", "{\n" + strings.TrimPrefix(strings.TrimSuffix(geminiMeta, "}"), "{") + ",\n\"messages\": [" + geminiUse + "]\n}", []TranscriptCall{func() TranscriptCall { c := shell; c.Source = "f:1"; return c }()}},
		{"no tool calls", geminiMeta + "\n" + geminiEarly + "\n" + `{"$rewindTo":"m1"}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls, err := readGemini([]byte(tc.input), "f")
			require.NoError(t, err)
			require.Equal(t, tc.want, calls)
		})
	}
	for _, tc := range []struct{ name, input, want string }{
		{"not JSON", geminiMeta + "\n{not json\n", "f:2: not a Gemini CLI session line"},
		{"bad timestamp", geminiMeta + "\n" + strings.Replace(geminiUse, "2026-12-02T04:43:22.466Z", "later", 1), "f:2: not a Gemini CLI session line: timestamp"},
		{"a call without an id", geminiMeta + "\n" + `{"id":"m","type":"gemini","toolCalls":[{"name":"glob"}]}`, "f:2: not a Gemini CLI session line: a tool call without an id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := &Input{}
			require.ErrorContains(t, in.Add(strings.NewReader(tc.input), "f"), tc.want)
		})
	}
}
