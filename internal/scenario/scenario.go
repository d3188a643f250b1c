// Package scenario expands a compact, human-written scenario.yaml into OTLP
// traces: batches in arrival order, with deterministic ids and times. The
// golden tests commit the expansion as input.jsonl (the collector file
// exporter's format) so loopreplay and users can read it without this code.
package scenario

import (
	"encoding/binary"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.yaml.in/yaml/v3"
)

// Scenario is one scenario.yaml.
type Scenario struct {
	// Description says what the scenario shows and which seed case it is.
	Description string `yaml:"description"`
	// Config holds loop_detect settings that differ from the defaults.
	Config map[string]any `yaml:"config"`
	// Start is the time of offset 0 (default 2026-01-01T00:00:00Z).
	Start time.Time `yaml:"start"`
	// Resource attributes, for every trace unless a trace overrides them.
	Resource map[string]any `yaml:"resource"`
	// Traces lists per-trace resource overrides, by trace number (1-based).
	Traces map[int]map[string]any `yaml:"traces"`
	// Spans are emitted in list order (arrival order).
	Spans []Span `yaml:"spans"`
	// Expect holds the behaviour a person asserts, beside the golden file.
	Expect Expect `yaml:"expect"`
}

// Span describes one span, or several with Repeat.
type Span struct {
	// Label names the span for Resend and Parent.
	Label string `yaml:"label"`
	// Tool makes an OTel GenAI execute_tool span for this tool.
	Tool string `yaml:"tool"`
	// Args and Result fill gen_ai.tool.call.arguments / .result; "{{i}}" is
	// replaced by the repetition index (from 1).
	Args   *string `yaml:"args"`
	Result *string `yaml:"result"`
	// Kind makes a non-tool GenAI span (gen_ai.operation.name=Kind).
	Kind string `yaml:"kind"`
	// Raw: only Name, Attrs and Events, no GenAI defaults (client shapes).
	Raw bool `yaml:"raw"`
	// Name overrides the span name.
	Name string `yaml:"name"`
	// Attrs are extra span attributes ("{{i}}" replaced in strings).
	Attrs map[string]any `yaml:"attrs"`
	// Events are span events.
	Events []Event `yaml:"events"`
	// Error marks a failure of this class (status ERROR + error.type).
	Error string `yaml:"error"`
	// StatusError sets only an ERROR status with this description.
	StatusError string `yaml:"status_error"`
	// At is the start offset; default: previous start + Every (or 1s).
	At *Duration `yaml:"at"`
	// Dur is the span duration (default 100ms).
	Dur *Duration `yaml:"dur"`
	// Repeat emits the span this many times, Every apart (default 1s).
	Repeat int       `yaml:"repeat"`
	Every  *Duration `yaml:"every"`
	// Trace is the trace number (default 1).
	Trace int `yaml:"trace"`
	// CallID overrides the generated gen_ai.tool.call.id ("" keeps it,
	// "none" omits it).
	CallID string `yaml:"call_id"`
	// Parent is the label of the parent span (default: the trace's root).
	Parent string `yaml:"parent"`
	// Resend delivers the labelled span again (a duplicate delivery).
	Resend string `yaml:"resend"`
}

// Event is one span event.
type Event struct {
	Name  string         `yaml:"name"`
	Attrs map[string]any `yaml:"attrs"`
}

// Duration reads "1.5s" style durations.
type Duration struct{ time.Duration }

// UnmarshalYAML parses a Go duration.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	d.Duration = v
	return nil
}

// Expect is what the scenario must show.
type Expect struct {
	// Final maps trace number to the final state of its session.
	Final map[int]string `yaml:"final"`
	// Transitions must appear in this order (other fields may differ;
	// unset fields are not compared).
	Transitions []ExpectedTransition `yaml:"transitions"`
	// NoState lists states that must never be entered.
	NoState []string `yaml:"no_state"`
	// Kills is the exact number of kill requests.
	Kills *int `yaml:"kills"`
}

// ExpectedTransition is a partial transition to match.
type ExpectedTransition struct {
	Trace     int    `yaml:"trace"`
	To        string `yaml:"to"`
	Reason    string `yaml:"reason"`
	Period    *int   `yaml:"period"`
	CallIndex *int   `yaml:"call_index"`
	Kill      *bool  `yaml:"kill"`
	// DelaySeconds is the time from the loop's first call to the decision.
	DelaySeconds *float64 `yaml:"delay_seconds"`
}

// Load reads a scenario file.
func Load(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var s Scenario
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if s.Start.IsZero() {
		s.Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	return &s, nil
}

// ConfMap returns the scenario's loop_detect overrides as a confmap.
func (s *Scenario) ConfMap() *confmap.Conf {
	return confmap.NewFromStringMap(s.Config)
}

// TraceID is the deterministic trace id of trace number n.
func TraceID(n int) pcommon.TraceID {
	var t pcommon.TraceID
	copy(t[:], "loopdetect-trace")
	binary.BigEndian.PutUint32(t[12:], uint32(n))
	return t
}

func spanID(n uint64) pcommon.SpanID {
	var s pcommon.SpanID
	binary.BigEndian.PutUint64(s[:], n)
	return s
}

func rootID(trace int) pcommon.SpanID { return spanID(uint64(0xA0000000 + trace)) }

type built struct {
	trace int
	span  ptrace.Span
}

// Batches expands the scenario into one Traces per delivered span, in
// arrival order, followed by each trace's invoke_agent root span (roots end,
// and arrive, after their children).
func (s *Scenario) Batches() ([]ptrace.Traces, error) {
	var out []ptrace.Traces
	labels := map[string]built{}
	last := time.Duration(0)
	first := true
	var seq uint64
	traceEnd := map[int]time.Duration{}
	traceOrder := []int{}
	for idx, sp := range s.Spans {
		if sp.Resend != "" {
			b, ok := labels[sp.Resend]
			if !ok {
				return nil, fmt.Errorf("spans[%d]: resend of unknown label %q", idx, sp.Resend)
			}
			out = append(out, s.wrap(b.trace, b.span))
			continue
		}
		n := max(sp.Repeat, 1)
		every := time.Second
		if sp.Every != nil {
			every = sp.Every.Duration
		}
		for i := 1; i <= n; i++ {
			switch {
			case sp.At != nil && i == 1:
				last = sp.At.Duration
			case first:
				last = 0
			default:
				last += every
			}
			first = false
			trace := max(sp.Trace, 1)
			if _, ok := traceEnd[trace]; !ok {
				traceOrder = append(traceOrder, trace)
			}
			seq++
			span := ptrace.NewSpan()
			if err := s.fill(span, sp, i, seq, trace, last, labels); err != nil {
				return nil, fmt.Errorf("spans[%d]: %w", idx, err)
			}
			end := last + durOr(sp.Dur, 100*time.Millisecond)
			traceEnd[trace] = max(traceEnd[trace], end)
			if sp.Label != "" {
				labels[sp.Label] = built{trace: trace, span: span}
			}
			out = append(out, s.wrap(trace, span))
		}
	}
	for _, trace := range traceOrder {
		root := ptrace.NewSpan()
		root.SetTraceID(TraceID(trace))
		root.SetSpanID(rootID(trace))
		root.SetName("invoke_agent agent")
		root.SetKind(ptrace.SpanKindInternal)
		root.SetStartTimestamp(pcommon.NewTimestampFromTime(s.Start))
		root.SetEndTimestamp(pcommon.NewTimestampFromTime(s.Start.Add(traceEnd[trace] + 50*time.Millisecond)))
		root.Attributes().PutStr("gen_ai.operation.name", "invoke_agent")
		root.Attributes().PutStr("gen_ai.agent.name", "agent")
		out = append(out, s.wrap(trace, root))
	}
	return out, nil
}

func durOr(d *Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return d.Duration
}

func subst(v string, i int) string { return strings.ReplaceAll(v, "{{i}}", strconv.Itoa(i)) }

func (s *Scenario) fill(span ptrace.Span, sp Span, i int, seq uint64, trace int, at time.Duration, labels map[string]built) error {
	span.SetTraceID(TraceID(trace))
	span.SetSpanID(spanID(seq))
	span.SetParentSpanID(rootID(trace))
	if sp.Parent != "" {
		p, ok := labels[sp.Parent]
		if !ok {
			return fmt.Errorf("parent %q not defined before use", sp.Parent)
		}
		span.SetParentSpanID(p.span.SpanID())
	}
	span.SetKind(ptrace.SpanKindInternal)
	start := s.Start.Add(at)
	span.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	span.SetEndTimestamp(pcommon.NewTimestampFromTime(start.Add(durOr(sp.Dur, 100*time.Millisecond))))
	a := span.Attributes()
	switch {
	case sp.Raw:
	case sp.Kind != "":
		span.SetName(sp.Kind)
		a.PutStr("gen_ai.operation.name", sp.Kind)
	case sp.Tool != "":
		span.SetName("execute_tool " + sp.Tool)
		a.PutStr("gen_ai.operation.name", "execute_tool")
		a.PutStr("gen_ai.tool.name", sp.Tool)
		switch sp.CallID {
		case "":
			a.PutStr("gen_ai.tool.call.id", fmt.Sprintf("call_%d", seq))
		case "none":
		default:
			a.PutStr("gen_ai.tool.call.id", subst(sp.CallID, i))
		}
		if sp.Args != nil {
			a.PutStr("gen_ai.tool.call.arguments", subst(*sp.Args, i))
		}
		if sp.Result != nil {
			a.PutStr("gen_ai.tool.call.result", subst(*sp.Result, i))
		}
	default:
		return fmt.Errorf("a span needs tool, kind or raw")
	}
	if sp.Name != "" {
		span.SetName(subst(sp.Name, i))
	}
	if err := putAll(a, sp.Attrs, i); err != nil {
		return err
	}
	for _, ev := range sp.Events {
		e := span.Events().AppendEmpty()
		e.SetName(ev.Name)
		e.SetTimestamp(span.EndTimestamp())
		if err := putAll(e.Attributes(), ev.Attrs, i); err != nil {
			return err
		}
	}
	if sp.Error != "" {
		span.Status().SetCode(ptrace.StatusCodeError)
		span.Status().SetMessage(sp.Error + ": tool failed")
		a.PutStr("error.type", sp.Error)
	}
	if sp.StatusError != "" {
		span.Status().SetCode(ptrace.StatusCodeError)
		span.Status().SetMessage(subst(sp.StatusError, i))
	}
	return nil
}

// putAll inserts in key order, so the expansion is byte-for-byte stable.
func putAll(m pcommon.Map, attrs map[string]any, i int) error {
	for _, k := range slices.Sorted(maps.Keys(attrs)) {
		v := attrs[k]
		if s, ok := v.(string); ok {
			v = subst(s, i)
		}
		if t, ok := v.(time.Time); ok {
			v = t.UTC().Format(time.RFC3339Nano)
		}
		if err := m.PutEmpty(k).FromRaw(v); err != nil {
			return fmt.Errorf("attribute %s: %w", k, err)
		}
	}
	return nil
}

func (s *Scenario) wrap(trace int, span ptrace.Span) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	res := rs.Resource().Attributes()
	attrs := map[string]any{"service.name": "agent"}
	for k, v := range s.Resource {
		attrs[k] = v
	}
	for k, v := range s.Traces[trace] {
		attrs[k] = v
	}
	_ = putAll(res, attrs, 0)
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("loopdetect-scenario")
	span.CopyTo(ss.Spans().AppendEmpty())
	return td
}
