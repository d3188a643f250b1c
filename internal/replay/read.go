package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
)

// Signal is the kind of telemetry a recorded batch holds.
type Signal uint8

// The signals a replay reads.
const (
	SignalTraces Signal = iota
	SignalLogs
)

func (s Signal) String() string {
	if s == SignalLogs {
		return "logs"
	}
	return "traces"
}

// Batch is one recorded export request and where it came from.
type Batch struct {
	// Signal says which of Traces and Logs holds the request.
	Signal Signal
	Traces ptrace.Traces
	Logs   plog.Logs
	// Source is "file:line" for error messages.
	Source string
}

// Input is what was read from the recorded files.
type Input struct {
	// Batches are the OTLP requests read, in file order; All adds the
	// tool calls of the agent transcripts read.
	Batches []Batch
	// Transcript holds the tool calls read from agent transcripts, in the
	// order read; All sorts them by start.
	Transcript []TranscriptCall
	// Formats counts the files read by format (FormatOTLPJSON,
	// FormatClaudeSession, FormatClaudeStreamJSON, FormatGeminiSession);
	// a session file's
	// subagent transcripts count as files of their own.
	Formats map[string]int
	// SessionFiles names, per transcript session, the first file that held
	// its calls, so a summary can say where to look.
	SessionFiles map[string]string
	// SessionParents links each subagent's session key to the agent that
	// started it.
	SessionParents map[string]SessionParent
	// Spans and LogRecords count what the batches hold.
	Spans, LogRecords int64
	// OtherSignals counts requests of signals loop_detect does not read
	// (metrics, profiles), which a file exporter may have written too.
	OtherSignals int64
	// VerdictSpans are spans holding an earlier run's timer-driven
	// verdicts (a recorded collector export): the processor removes them.
	VerdictSpans int64
	// TranscriptCalls counts the calls read from agent transcripts, kept
	// in Transcript or (in an audit) already replayed.
	TranscriptCalls int64
	// Cleanings name the files read in part: lines before their first
	// JSON line or a last line cut short left out.
	Cleanings []FileCleaning

	seen map[string]bool
	// skipped are the files an audit did not read.
	skipped []FileNote
}

// FileCleaning is what was left out of one file to read it.
type FileCleaning struct {
	File string
	Cleaning
}

// SessionParent is where a subagent's session came from.
type SessionParent struct {
	// Session is the parent agent's session key.
	Session string
	// ToolUseID is the parent's call that started the subagent (Claude
	// Code's Task or Agent call), when the transcript says.
	ToolUseID string
}

// ReadOTLPJSON reads OTLP JSON export requests, traces and logs alike: the
// collector file exporter's one request per line, pretty-printed
// documents, or any mix of the two. Errors name the file and line. An
// agent transcript is read too (see Input.Add).
func ReadOTLPJSON(r io.Reader, name string) ([]Batch, error) {
	in, err := Read(r, name)
	if err != nil {
		return nil, err
	}
	return in.All(), nil
}

// Read is ReadOTLPJSON with counts of what was read.
func Read(r io.Reader, name string) (*Input, error) {
	in := &Input{}
	if err := in.Add(r, name); err != nil {
		return nil, err
	}
	return in, nil
}

// All is what a replay feeds the processor: the OTLP requests in the order
// read, then every transcript call of every file, ordered by start, so
// sessions read from different files share one event clock.
func (in *Input) All() []Batch {
	if len(in.Transcript) == 0 {
		return in.Batches
	}
	calls := append([]TranscriptCall(nil), in.Transcript...)
	return append(append([]Batch(nil), in.Batches...), transcriptBatches(calls)...)
}

// Add reads one more file into in, its format found from its content:
// OTLP JSON or one of sessionFormats, any of them gzip-compressed. Lines
// before the first JSON line and a last line cut short are left out and
// noted in Cleanings.
func (in *Input) Add(r io.Reader, name string) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return in.addFile(data, name, false)
}

// AddFile reads the file name as Add does. A session transcript's
// subagent transcripts (<session>/subagents/agent-*.jsonl beside it) are
// read with it, and a file already read that way is not read again.
func (in *Input) AddFile(name string) error {
	data, err := os.ReadFile(name)
	if err != nil {
		return err
	}
	return in.addFile(data, name, true)
}

// addFile reads data; onDisk says name is a file, whose companions (the
// subagent transcripts of a Claude Code session) may lie beside it.
func (in *Input) addFile(data []byte, name string, onDisk bool) error {
	data, cleaning, err := clean(data)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if cleaning.Any() {
		in.Cleanings = append(in.Cleanings, FileCleaning{File: name, Cleaning: cleaning})
	}
	sf := formatOf(data)
	if sf != nil && sf.companions != nil && onDisk {
		if in.seen == nil {
			in.seen = map[string]bool{}
		}
		abs, _ := filepath.Abs(name)
		if in.seen[abs] {
			return nil // a subagent transcript already read with its session
		}
		in.seen[abs] = true
	}
	if err := in.addData(data, name, sf); err != nil {
		return err
	}
	if sf == nil || sf.companions == nil || !onDisk {
		return nil
	}
	for _, sub := range sf.companions(name) {
		if err := in.AddFile(sub); err != nil {
			return err
		}
	}
	return nil
}

// addData reads data, cleaned, in the format sf (OTLP JSON when nil).
func (in *Input) addData(data []byte, name string, sf *sessionFormat) error {
	if in.Formats == nil {
		in.Formats = map[string]int{}
	}
	if sf == nil {
		in.Formats[FormatOTLPJSON]++
		return in.add(data, name)
	}
	calls, format, err := sf.read(data, name)
	if err != nil {
		return err
	}
	in.Formats[format]++
	in.addCalls(calls, name)
	return nil
}

// addCalls adds the calls read from the transcript name.
func (in *Input) addCalls(calls []TranscriptCall, name string) {
	if in.SessionFiles == nil {
		in.SessionFiles = map[string]string{}
	}
	in.TranscriptCalls += int64(len(calls))
	for i := range calls {
		calls[i].order = len(in.Transcript)
		// The engine's key with the default config, and the session id,
		// its key when session.keys reads it (config/replay.yaml).
		for _, key := range [...]string{engineSession(&calls[i]), calls[i].Session} {
			if in.SessionFiles[key] == "" {
				in.SessionFiles[key] = name
			}
		}
		if p := calls[i].ParentSession; p != "" {
			if in.SessionParents == nil {
				in.SessionParents = map[string]SessionParent{}
			}
			if link := in.SessionParents[calls[i].Session]; link.ToolUseID == "" {
				in.SessionParents[calls[i].Session] = SessionParent{Session: p, ToolUseID: calls[i].Parent}
			}
		}
		in.Transcript = append(in.Transcript, calls[i])
	}
}

func (in *Input) add(data []byte, name string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var tu ptrace.JSONUnmarshaler
	var lu plog.JSONUnmarshaler
	for {
		start := skipSpace(data, int(dec.InputOffset()))
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s:%d: not OTLP JSON: %w", name, lineAt(data, errorOffset(err, start)), err)
		}
		src := fmt.Sprintf("%s:%d", name, lineAt(data, start))
		switch requestKind(raw) {
		case "resourceSpans":
			td, err := tu.UnmarshalTraces(raw)
			if err != nil {
				return fmt.Errorf("%s: not an OTLP JSON traces request: %w", src, err)
			}
			in.Spans += int64(td.SpanCount())
			in.VerdictSpans += verdictSpans(td)
			in.Batches = append(in.Batches, Batch{Signal: SignalTraces, Traces: td, Source: src})
		case "resourceLogs":
			ld, err := lu.UnmarshalLogs(raw)
			if err != nil {
				return fmt.Errorf("%s: not an OTLP JSON logs request: %w", src, err)
			}
			in.LogRecords += int64(ld.LogRecordCount())
			in.Batches = append(in.Batches, Batch{Signal: SignalLogs, Logs: ld, Source: src})
		case "resourceMetrics", "resourceProfiles":
			in.OtherSignals++
		default:
			return fmt.Errorf("%s: not an OTLP JSON traces or logs request (no resourceSpans or resourceLogs)", src)
		}
	}
}

func verdictSpans(td ptrace.Traces) int64 {
	var n int64
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				if spans.At(k).Name() == loopevent.SyntheticSpanName {
					n++
				}
			}
		}
	}
	return n
}

// requestKind names the request's top-level resource list.
func requestKind(raw json.RawMessage) string {
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return ""
	}
	for _, k := range [...]string{"resourceSpans", "resourceLogs", "resourceMetrics", "resourceProfiles"} {
		if _, ok := top[k]; ok {
			return k
		}
	}
	// An empty request ({}) is a valid traces request with nothing in it.
	if len(top) == 0 {
		return "resourceSpans"
	}
	return ""
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// errorOffset is where a decoding error was found, else the value's start.
func errorOffset(err error, start int) int {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return int(se.Offset) - 1
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return int(te.Offset)
	}
	return start
}

// lineAt is the 1-based line of byte offset off.
func lineAt(data []byte, off int) int {
	off = min(max(off, 0), len(data))
	return bytes.Count(data[:off], []byte{'\n'}) + 1
}

// eachLine calls fn with every non-blank line of data and its number.
func eachLine(data []byte, fn func(text []byte, n int) error) error {
	for n := 1; len(data) > 0; n++ {
		text := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			text, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		if text = bytes.TrimSpace(text); len(text) == 0 {
			continue
		}
		if err := fn(text, n); err != nil {
			return err
		}
	}
	return nil
}
