// Package replay runs recorded OTLP traces and logs through the loop_detect
// processor factory in event-time mode and reports the transitions, what
// was read, and a timeline page. The
// loopreplay command and the golden tests share it, so both exercise the
// exact processor users deploy.
package replay

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

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
	// Output is every traces batch the processor forwarded, timer spans
	// included; OutputLogs every logs batch.
	Output     []ptrace.Traces
	OutputLogs []plog.Logs
	// Calls are the tool calls the processor read, in the order read.
	Calls []Call
	// Counts are the processor's own counters at the end of the replay.
	Counts Counts
}

// Call is one tool call the processor read.
type Call struct {
	Session, SessionSource, Client, Tool string
	SpanID                               string
	Start                                time.Time
	// Signature and Fingerprint are unkeyed digests, used only to tell
	// equal calls and results apart on the page; they are never shown.
	Signature, Fingerprint uint64
	NameOnly, Failed       bool
	// Counted is false for another delivery of a call already counted.
	Counted bool
}

// Run feeds batches, in order, through a traces and a logs processor
// created from one config by the loop_detect factory, as a collector with
// both pipelines would, and returns what they forwarded and counted. cfg
// is not modified.
func Run(ctx context.Context, cfg *loopdetect.Config, batches []Batch) (*Result, error) {
	res := &Result{}
	// The observation's strings may point into the processor's scratch
	// space (a trace-id session key does): keep copies, one per value.
	var in interner
	r, err := newReplayer(ctx, cfg, func(o *loopdetect.Observation) {
		res.Calls = append(res.Calls, Call{
			Session: in.get(o.Session), SessionSource: in.get(o.SessionSource), Client: in.get(o.Client), Tool: in.get(o.Tool),
			SpanID: hex.EncodeToString(o.SpanID[:]), Start: o.Start,
			Signature: uint64(o.Signature), Fingerprint: uint64(o.Fingerprint),
			NameOnly: o.NameOnly, Failed: o.Failed, Counted: o.Counted,
		})
	}, func(evs []loopevent.Event) { res.Events = append(res.Events, evs...) })
	if err != nil {
		return nil, err
	}
	r.sink.keep = res
	for i := range batches {
		if err := r.feed(ctx, &batches[i]); err != nil {
			_ = r.shutdown()
			return nil, err
		}
	}
	counts, err := r.close(ctx)
	if err != nil {
		return nil, err
	}
	res.Counts = counts
	return res, nil
}

// interner keeps one copy of each string value.
type interner map[string]string

func (in *interner) get(s string) string {
	if v, ok := (*in)[s]; ok {
		return v
	}
	if *in == nil {
		*in = map[string]string{}
	}
	v := strings.Clone(s)
	(*in)[v] = v
	return v
}

// replayer is a traces and a logs processor created from one config, as a
// collector with both pipelines has them, with its counters' reader.
type replayer struct {
	tp     processor.Traces
	lp     processor.Logs
	sink   *collector
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	ctx    context.Context
}

// newReplayer starts the processors; observe sees every tool call read,
// events every batch of transitions forwarded.
func newReplayer(ctx context.Context, cfg *loopdetect.Config, observe func(*loopdetect.Observation), events func([]loopevent.Event)) (*replayer, error) {
	c := *cfg // the components of one processor share the config pointer
	loopdetect.ObserveCalls(&c, observe)
	r := &replayer{reader: sdkmetric.NewManualReader(), sink: &collector{events: events}, ctx: ctx}
	r.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	f := loopdetect.NewFactory()
	set := processortest.NewNopSettings(f.Type())
	set.MeterProvider = r.mp
	var err error
	if r.tp, err = f.CreateTraces(ctx, set, &c, r.sink); err != nil {
		_ = r.mp.Shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	if r.lp, err = f.CreateLogs(ctx, set, &c, r.sink); err != nil {
		_ = r.tp.Shutdown(ctx)
		_ = r.mp.Shutdown(context.WithoutCancel(ctx))
		return nil, err
	}
	for _, p := range []component.Component{r.tp, r.lp} {
		if err := p.Start(ctx, componenttest.NewNopHost()); err != nil {
			_ = r.shutdown()
			return nil, err
		}
	}
	return r, nil
}

// feed hands one recorded request to its processor.
func (r *replayer) feed(ctx context.Context, b *Batch) error {
	var err error
	if b.Signal == SignalLogs {
		err = r.lp.ConsumeLogs(ctx, b.Logs)
	} else {
		err = r.tp.ConsumeTraces(ctx, b.Traces)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", b.Source, err)
	}
	return nil
}

// shutdown stops the processors: in event-time mode the timers fire at
// the last event time, and what they decide is forwarded.
func (r *replayer) shutdown() error {
	defer func() { _ = r.mp.Shutdown(context.WithoutCancel(r.ctx)) }()
	return errors.Join(r.tp.Shutdown(r.ctx), r.lp.Shutdown(r.ctx))
}

// close shuts the processors down and returns their counters.
func (r *replayer) close(ctx context.Context) (Counts, error) {
	var rm metricdata.ResourceMetrics
	err := errors.Join(r.tp.Shutdown(ctx), r.lp.Shutdown(ctx))
	if err == nil {
		if err = r.reader.Collect(ctx, &rm); err != nil {
			err = fmt.Errorf("reading the processor's counters: %w", err)
		}
	}
	_ = r.mp.Shutdown(context.WithoutCancel(ctx))
	if err == nil {
		err = r.sink.err
	}
	return countsOf(&rm), err
}

// collector is the processors' next consumer: it reads the transitions
// out of what they forward and, for Run, keeps the batches.
type collector struct {
	events func([]loopevent.Event)
	keep   *Result
	err    error
}

func (c *collector) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (c *collector) ConsumeTraces(_ context.Context, td ptrace.Traces) error {
	evs, err := loopevent.FromTraces(td)
	if err != nil && c.err == nil {
		c.err = err
	}
	if len(evs) > 0 {
		c.events(evs)
	}
	if c.keep != nil {
		c.keep.Output = append(c.keep.Output, td)
	}
	return nil
}

func (c *collector) ConsumeLogs(_ context.Context, ld plog.Logs) error {
	evs, err := loopevent.FromLogs(ld)
	if err != nil && c.err == nil {
		c.err = err
	}
	if len(evs) > 0 {
		c.events(evs)
	}
	if c.keep != nil {
		c.keep.OutputLogs = append(c.keep.OutputLogs, ld)
	}
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
