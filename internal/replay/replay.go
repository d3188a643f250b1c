// Package replay runs recorded OTLP traces through the loop_detect
// processor factory in event-time mode and reports the transitions. The
// loopreplay command and the golden tests share it, so both exercise the
// exact processor users deploy.
package replay

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect"
)

// Line is one transition in loopreplay's output contract. Fields may be
// added; none may be renamed.
type Line struct {
	Session      string  `json:"session"`
	TraceID      string  `json:"trace_id"`
	Seq          int64   `json:"seq"`
	From         string  `json:"from"`
	To           string  `json:"to"`
	Reason       string  `json:"reason"`
	Period       int64   `json:"period"`
	Repetitions  int64   `json:"repetitions"`
	CallIndex    int64   `json:"call_index"`
	SpanID       string  `json:"span_id"`
	Kill         bool    `json:"kill"`
	Explanation  string  `json:"explanation"`
	DryRun       bool    `json:"dry_run,omitempty"`
	Trigger      string  `json:"trigger,omitempty"`
	DelayCalls   int64   `json:"delay_calls,omitempty"`
	DelaySeconds float64 `json:"delay_seconds,omitempty"`
	Client       string  `json:"client,omitempty"`
	ID           string  `json:"id"`
}

// LineOf renders an event as a contract line.
func LineOf(e *loopevent.Event) Line {
	return Line{
		Session: e.Session, TraceID: e.TraceID, Seq: e.Sequence, From: e.From, To: e.To,
		Reason: e.Reason, Period: e.Period, Repetitions: e.Repetitions, CallIndex: e.CallIndex,
		SpanID: e.SpanID, Kill: e.Kill, Explanation: e.Explanation, DryRun: e.DryRun,
		Trigger: e.Trigger, DelayCalls: e.DelayCalls, DelaySeconds: e.DelaySeconds,
		Client: e.Client, ID: e.ID,
	}
}

// Batch is one recorded export request and where it came from.
type Batch struct {
	Traces ptrace.Traces
	// Source is "file:line" for error messages.
	Source string
}

// ReadOTLPJSON reads the collector file exporter's JSON lines, or one
// ExportTraceServiceRequest document spanning the whole input.
func ReadOTLPJSON(r io.Reader, name string) ([]Batch, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	var u ptrace.JSONUnmarshaler
	var out []Batch
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		td, err := u.UnmarshalTraces(b)
		if err != nil {
			if len(out) == 0 {
				// Perhaps one pretty-printed document.
				if td, err2 := u.UnmarshalTraces(data); err2 == nil {
					return []Batch{{Traces: td, Source: name + ":1"}}, nil
				}
			}
			return nil, fmt.Errorf("%s:%d: not an OTLP JSON traces request: %w", name, line, err)
		}
		out = append(out, Batch{Traces: td, Source: fmt.Sprintf("%s:%d", name, line)})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s:%d: %w", name, line+1, err)
	}
	return out, nil
}

// Config builds a loop_detect config in event-time mode from overrides
// (a loop_detect block; nil for the defaults).
func Config(overrides *confmap.Conf) (*loopdetect.Config, error) {
	f := loopdetect.NewFactory()
	cfg := f.CreateDefaultConfig().(*loopdetect.Config)
	if overrides != nil {
		if err := overrides.Unmarshal(cfg); err != nil {
			return nil, fmt.Errorf("loop_detect config: %w", err)
		}
	}
	cfg.EventTime = true
	if err := confmap.Validate(cfg); err != nil {
		return nil, fmt.Errorf("loop_detect config: %w", err)
	}
	return cfg, nil
}

// Result is what one replay produced.
type Result struct {
	// Events are the transition events in emission order.
	Events []loopevent.Event
	// Output is every batch the processor forwarded, timer spans included.
	Output []ptrace.Traces
}

// Run feeds batches through a fresh processor and returns its output.
func Run(ctx context.Context, cfg *loopdetect.Config, batches []Batch) (*Result, error) {
	res := &Result{}
	sink := &collector{res: res}
	f := loopdetect.NewFactory()
	p, err := f.CreateTraces(ctx, processortest.NewNopSettings(f.Type()), cfg, sink)
	if err != nil {
		return nil, err
	}
	if err := p.Start(ctx, nil); err != nil {
		return nil, err
	}
	for _, b := range batches {
		if err := p.ConsumeTraces(ctx, b.Traces); err != nil {
			_ = p.Shutdown(ctx)
			return nil, fmt.Errorf("%s: %w", b.Source, err)
		}
	}
	if err := p.Shutdown(ctx); err != nil {
		return nil, err
	}
	return res, sink.err
}

type collector struct {
	res *Result
	err error
}

func (c *collector) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (c *collector) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	evs, err := loopevent.FromTraces(td)
	if err != nil && c.err == nil {
		c.err = err
	}
	c.res.Events = append(c.res.Events, evs...)
	c.res.Output = append(c.res.Output, td)
	return nil
}

// WriteLines writes one JSON line per event.
func WriteLines(w io.Writer, events []loopevent.Event) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range events {
		if err := enc.Encode(LineOf(&events[i])); err != nil {
			return err
		}
	}
	return nil
}

// SessionSummary is the per-session part of --summary.
type SessionSummary struct {
	Session      string  `json:"session"`
	FinalState   string  `json:"final_state"`
	Transitions  int     `json:"transitions"`
	Kills        int     `json:"kills"`
	DelayCalls   int64   `json:"detection_delay_calls,omitempty"`
	DelaySeconds float64 `json:"detection_delay_seconds,omitempty"`
}

// Summary is loopreplay's --summary output.
type Summary struct {
	Sessions []SessionSummary `json:"sessions"`
	// States counts sessions by final state.
	States map[string]int `json:"final_states"`
	// Transitions counts transitions by target state.
	Transitions map[string]int `json:"transitions_by_state"`
}

// Summarize reduces events to a Summary.
func Summarize(events []loopevent.Event) Summary {
	by := map[string]*SessionSummary{}
	sum := Summary{States: map[string]int{}, Transitions: map[string]int{}}
	for i := range events {
		e := &events[i]
		s, ok := by[e.Session]
		if !ok {
			s = &SessionSummary{Session: e.Session}
			by[e.Session] = s
		}
		s.FinalState = e.To
		s.Transitions++
		sum.Transitions[e.To]++
		if e.Kill {
			s.Kills++
		}
		if e.To == "stuck" && e.From != "stuck" && s.DelayCalls == 0 {
			s.DelayCalls, s.DelaySeconds = e.DelayCalls, e.DelaySeconds
		}
	}
	for _, s := range by {
		sum.Sessions = append(sum.Sessions, *s)
		sum.States[s.FinalState]++
	}
	sort.Slice(sum.Sessions, func(i, j int) bool { return sum.Sessions[i].Session < sum.Sessions[j].Session })
	return sum
}
