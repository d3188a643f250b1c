package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

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
	Batches []Batch
	// Spans and LogRecords count what the batches hold.
	Spans, LogRecords int64
	// OtherSignals counts requests of signals loop_detect does not read
	// (metrics, profiles), which a file exporter may have written too.
	OtherSignals int64
	// VerdictSpans are spans holding an earlier run's timer-driven
	// verdicts (a recorded collector export): the processor removes them.
	VerdictSpans int64
}

// ReadOTLPJSON reads OTLP JSON export requests, traces and logs alike: the
// collector file exporter's one request per line, pretty-printed
// documents, or any mix of the two. Errors name the file and line.
func ReadOTLPJSON(r io.Reader, name string) ([]Batch, error) {
	in, err := Read(r, name)
	if err != nil {
		return nil, err
	}
	return in.Batches, nil
}

// Read is ReadOTLPJSON with counts of what was read.
func Read(r io.Reader, name string) (*Input, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	in := &Input{}
	if err := in.add(data, name); err != nil {
		return nil, err
	}
	return in, nil
}

// Add reads one more file into in.
func (in *Input) Add(r io.Reader, name string) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return in.add(data, name)
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
