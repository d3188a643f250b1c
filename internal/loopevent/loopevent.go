// Package loopevent defines the one attribute schema of a loop transition
// event. The loop_detect processor writes it (as a span event, a synthetic
// span's event, or a log record), and alert_sink, loopreplay and the tests
// read it back, so every producer and consumer agrees on names and types.
package loopevent

import (
	"errors"
	"fmt"
	"github.com/otelcol-loop/otelcol-loop/internal/target"
	"strconv"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// EventName is the name of the span event (and the log record event name)
// that carries a transition.
const EventName = "loopdetect.transition"

// SyntheticSpanName names the zero-duration span that carries a timer-driven
// transition (lease expiry, backstop) that has no tool span of its own.
const SyntheticSpanName = "loopdetect.transition"

// Attribute keys of a transition event. Every key lives under "loopdetect.".
const (
	AttrID                 = "loopdetect.event.id"
	AttrSequence           = "loopdetect.sequence"
	AttrSession            = "loopdetect.session"
	AttrSessionSource      = "loopdetect.session.source"
	AttrTraceID            = "loopdetect.trace_id"
	AttrFrom               = "loopdetect.from"
	AttrTo                 = "loopdetect.to"
	AttrReason             = "loopdetect.reason"
	AttrTrigger            = "loopdetect.trigger"
	AttrPeriod             = "loopdetect.period"
	AttrRepetitions        = "loopdetect.repetitions"
	AttrWindow             = "loopdetect.window"
	AttrCallIndex          = "loopdetect.call_index"
	AttrCycleTools         = "loopdetect.cycle.tools"
	AttrSignatures         = "loopdetect.evidence.signatures"
	AttrFingerprint        = "loopdetect.evidence.fingerprint"
	AttrFingerprintSource  = "loopdetect.evidence.fingerprint_source"
	AttrConfidence         = "loopdetect.evidence.confidence"
	AttrNormalizerVersion  = "loopdetect.normalizer.version"
	AttrFingerprintVersion = "loopdetect.fingerprint.version"
	AttrFirstLoopSpanID    = "loopdetect.loop.first_span_id"
	AttrTriggerSpanID      = "loopdetect.trigger.span_id"
	AttrDelayCalls         = "loopdetect.delay.calls"
	AttrDelaySeconds       = "loopdetect.delay.seconds"
	AttrKill               = "loopdetect.kill"
	AttrDryRun             = "loopdetect.dry_run"
	AttrExplanation        = "loopdetect.explanation"
	AttrDecidedAt          = "loopdetect.decided_at"
	AttrClient             = "loopdetect.client"
	AttrAgentName          = "loopdetect.agent.name"
	AttrTargetService      = "loopdetect.target.service.name"
	AttrTargetInstance     = "loopdetect.target.service.instance.id"
	AttrTargetPID          = "loopdetect.target.process.pid"
	AttrTargetHost         = "loopdetect.target.host.name"
	AttrSynthetic          = "loopdetect.synthetic"
	AttrTokensTotal        = "loopdetect.tokens.total"
	AttrTokensLoop         = "loopdetect.tokens.loop"
)

// Event is one state transition of one agent session, in the form it
// travels between components.
type Event struct {
	// ID is stable for (session, sequence), so a duplicate is recognisable.
	ID string `json:"id"`
	// Sequence counts the session's transitions from 1.
	Sequence int64 `json:"seq"`
	// Session is the session key the engine grouped the calls by.
	Session string `json:"session"`
	// SessionSource names what the session key was taken from.
	SessionSource string `json:"session_source,omitempty"`
	// TraceID is the hex trace id the event was emitted in.
	TraceID string `json:"trace_id"`
	// From is the state before the transition.
	From string `json:"from"`
	// To is the state after the transition.
	To string `json:"to"`
	// Reason is the reason code of the new state.
	Reason string `json:"reason"`
	// Trigger is "call" when a tool call caused it, "tick" when a timer did.
	Trigger string `json:"trigger,omitempty"`
	// Period is the length of the repeating cycle (0 when none).
	Period int64 `json:"period"`
	// Repetitions counts how often the cycle repeated.
	Repetitions int64 `json:"repetitions"`
	// Window is how many calls the decision looked at.
	Window int64 `json:"window,omitempty"`
	// CallIndex is the 1-based index of the triggering tool call in its
	// session, in start-time order after deduplication.
	CallIndex int64 `json:"call_index"`
	// CycleTools names the tools of the cycle in order.
	CycleTools []string `json:"cycle_tools,omitempty"`
	// Signatures are keyed digests of the cycle's action signatures.
	Signatures []string `json:"signatures,omitempty"`
	// Fingerprint is the keyed digest of the progress fingerprint.
	Fingerprint string `json:"fingerprint,omitempty"`
	// FingerprintSource says where the fingerprint came from.
	FingerprintSource string `json:"fingerprint_source,omitempty"`
	// Confidence is "high", or "low" for name-only signatures.
	Confidence string `json:"confidence,omitempty"`
	// NormalizerVersion is the version of the argument normalizer.
	NormalizerVersion string `json:"normalizer_version,omitempty"`
	// FingerprintVersion is the version of the fingerprint definition.
	FingerprintVersion string `json:"fingerprint_version,omitempty"`
	// FirstLoopSpanID is the hex span id of the loop's first call.
	FirstLoopSpanID string `json:"first_loop_span_id,omitempty"`
	// SpanID is the hex span id of the triggering call.
	SpanID string `json:"span_id"`
	// DelayCalls counts calls from the loop's start to its detection.
	DelayCalls int64 `json:"delay_calls,omitempty"`
	// DelaySeconds is the time from the loop's start to its detection.
	DelaySeconds float64 `json:"delay_seconds,omitempty"`
	// Kill is true when the transition asks the supervisor to stop the agent.
	Kill bool `json:"kill"`
	// DryRun is true when a kill was decided but only marked.
	DryRun bool `json:"dry_run,omitempty"`
	// Explanation is the human text, e.g. "loop detected: same tool call x5 of last 10".
	Explanation string `json:"explanation"`
	// DecidedAt is when the engine decided.
	DecidedAt time.Time `json:"decided_at"`
	// Client names the recognised client shape (e.g. "genai_semconv").
	Client string `json:"client,omitempty"`
	// Agent is the agent name, when known.
	Agent string `json:"agent,omitempty"`
	// Target identifies the process a kill must reach.
	Target target.Process `json:"target"`
	// TokensTotal is the model tokens (input + output) the session's LLM
	// calls used so far; 0 when the agent reports none.
	TokensTotal int64 `json:"tokens_total,omitempty"`
	// TokensLoop is the part of TokensTotal used since the current loop
	// began (0 outside a loop).
	TokensLoop int64 `json:"tokens_loop,omitempty"`
}

// CopyTo writes the event as attributes into m.
func (e *Event) CopyTo(m pcommon.Map) {
	m.EnsureCapacity(m.Len() + 38)
	m.PutStr(AttrID, e.ID)
	m.PutInt(AttrSequence, e.Sequence)
	m.PutStr(AttrSession, e.Session)
	putNonEmpty(m, AttrSessionSource, e.SessionSource)
	m.PutStr(AttrTraceID, e.TraceID)
	m.PutStr(AttrFrom, e.From)
	m.PutStr(AttrTo, e.To)
	m.PutStr(AttrReason, e.Reason)
	putNonEmpty(m, AttrTrigger, e.Trigger)
	m.PutInt(AttrPeriod, e.Period)
	m.PutInt(AttrRepetitions, e.Repetitions)
	m.PutInt(AttrWindow, e.Window)
	m.PutInt(AttrCallIndex, e.CallIndex)
	putSlice(m, AttrCycleTools, e.CycleTools)
	putSlice(m, AttrSignatures, e.Signatures)
	putNonEmpty(m, AttrFingerprint, e.Fingerprint)
	putNonEmpty(m, AttrFingerprintSource, e.FingerprintSource)
	putNonEmpty(m, AttrConfidence, e.Confidence)
	putNonEmpty(m, AttrNormalizerVersion, e.NormalizerVersion)
	putNonEmpty(m, AttrFingerprintVersion, e.FingerprintVersion)
	putNonEmpty(m, AttrFirstLoopSpanID, e.FirstLoopSpanID)
	m.PutStr(AttrTriggerSpanID, e.SpanID)
	m.PutInt(AttrDelayCalls, e.DelayCalls)
	m.PutDouble(AttrDelaySeconds, e.DelaySeconds)
	m.PutBool(AttrKill, e.Kill)
	m.PutBool(AttrDryRun, e.DryRun)
	m.PutStr(AttrExplanation, e.Explanation)
	m.PutStr(AttrDecidedAt, e.DecidedAt.UTC().Format(time.RFC3339Nano))
	putNonEmpty(m, AttrClient, e.Client)
	putNonEmpty(m, AttrAgentName, e.Agent)
	putNonEmpty(m, AttrTargetService, e.Target.ServiceName)
	putNonEmpty(m, AttrTargetInstance, e.Target.ServiceInstanceID)
	if e.Target.PID != 0 {
		m.PutInt(AttrTargetPID, e.Target.PID)
	}
	putNonEmpty(m, AttrTargetHost, e.Target.HostName)
	if e.TokensTotal != 0 {
		m.PutInt(AttrTokensTotal, e.TokensTotal)
	}
	if e.TokensLoop != 0 {
		m.PutInt(AttrTokensLoop, e.TokensLoop)
	}
}

func putNonEmpty(m pcommon.Map, k, v string) {
	if v != "" {
		m.PutStr(k, v)
	}
}

func putSlice(m pcommon.Map, k string, vs []string) {
	if len(vs) == 0 {
		return
	}
	s := m.PutEmptySlice(k)
	s.EnsureCapacity(len(vs))
	for _, v := range vs {
		s.AppendEmpty().SetStr(v)
	}
}

// ErrNotTransition reports attributes that do not hold a transition event.
var ErrNotTransition = errors.New("loopevent: attributes hold no transition event")

// FromAttributes reads an event back from attributes written by CopyTo.
// Strings are copied, so the result keeps no reference into pdata.
func FromAttributes(m pcommon.Map) (Event, error) {
	var e Event
	if _, ok := m.Get(AttrTo); !ok {
		return e, ErrNotTransition
	}
	r := attrReader{m}
	e.ID = r.str(AttrID)
	e.Sequence = r.num(AttrSequence)
	e.Session = r.str(AttrSession)
	e.SessionSource = r.str(AttrSessionSource)
	e.TraceID = r.str(AttrTraceID)
	e.From = r.str(AttrFrom)
	e.To = r.str(AttrTo)
	e.Reason = r.str(AttrReason)
	e.Trigger = r.str(AttrTrigger)
	e.Period = r.num(AttrPeriod)
	e.Repetitions = r.num(AttrRepetitions)
	e.Window = r.num(AttrWindow)
	e.CallIndex = r.num(AttrCallIndex)
	e.CycleTools = r.slice(AttrCycleTools)
	e.Signatures = r.slice(AttrSignatures)
	e.Fingerprint = r.str(AttrFingerprint)
	e.FingerprintSource = r.str(AttrFingerprintSource)
	e.Confidence = r.str(AttrConfidence)
	e.NormalizerVersion = r.str(AttrNormalizerVersion)
	e.FingerprintVersion = r.str(AttrFingerprintVersion)
	e.FirstLoopSpanID = r.str(AttrFirstLoopSpanID)
	e.SpanID = r.str(AttrTriggerSpanID)
	e.DelayCalls = r.num(AttrDelayCalls)
	if v, ok := m.Get(AttrDelaySeconds); ok {
		e.DelaySeconds = v.Double()
	}
	if v, ok := m.Get(AttrKill); ok {
		e.Kill = v.Bool()
	}
	if v, ok := m.Get(AttrDryRun); ok {
		e.DryRun = v.Bool()
	}
	e.Explanation = r.str(AttrExplanation)
	if s := r.str(AttrDecidedAt); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return e, fmt.Errorf("loopevent: %s: %w", AttrDecidedAt, err)
		}
		e.DecidedAt = t
	}
	e.Client = r.str(AttrClient)
	e.Agent = r.str(AttrAgentName)
	e.Target = target.Process{
		ServiceName:       r.str(AttrTargetService),
		ServiceInstanceID: r.str(AttrTargetInstance),
		PID:               r.num(AttrTargetPID),
		HostName:          r.str(AttrTargetHost),
	}
	e.TokensTotal = r.num(AttrTokensTotal)
	e.TokensLoop = r.num(AttrTokensLoop)
	return e, nil
}

// attrReader reads an event's attributes leniently: a missing attribute
// is the zero value, a number may be written as a double or a string.
type attrReader struct{ m pcommon.Map }

func (r attrReader) str(k string) string {
	if v, ok := r.m.Get(k); ok {
		return v.AsString()
	}
	return ""
}

func (r attrReader) num(k string) int64 {
	if v, ok := r.m.Get(k); ok {
		switch v.Type() {
		case pcommon.ValueTypeInt:
			return v.Int()
		case pcommon.ValueTypeDouble:
			return int64(v.Double())
		case pcommon.ValueTypeStr:
			n, _ := strconv.ParseInt(v.Str(), 10, 64)
			return n
		}
	}
	return 0
}

func (r attrReader) slice(k string) []string {
	v, ok := r.m.Get(k)
	if !ok || v.Type() != pcommon.ValueTypeSlice {
		return nil
	}
	out := make([]string, 0, v.Slice().Len())
	for i := 0; i < v.Slice().Len(); i++ {
		out = append(out, v.Slice().At(i).AsString())
	}
	return out
}

// Visit calls fn for every transition event in td with the span that
// carries it, in span order. Events that do not decode are skipped and
// returned, joined, as the error.
func Visit(td ptrace.Traces, fn func(e Event, span ptrace.Span)) error {
	var errs []error
	rss := td.ResourceSpans()
	for i := 0; i < rss.Len(); i++ {
		sss := rss.At(i).ScopeSpans()
		for j := 0; j < sss.Len(); j++ {
			spans := sss.At(j).Spans()
			for k := 0; k < spans.Len(); k++ {
				evs := spans.At(k).Events()
				for l := 0; l < evs.Len(); l++ {
					if evs.At(l).Name() != EventName {
						continue
					}
					e, err := FromAttributes(evs.At(l).Attributes())
					if err != nil {
						errs = append(errs, fmt.Errorf("span %s: %w", spans.At(k).SpanID(), err))
						continue
					}
					fn(e, spans.At(k))
				}
			}
		}
	}
	return errors.Join(errs...)
}

// FromTraces returns the transition events in td, in span order.
func FromTraces(td ptrace.Traces) ([]Event, error) {
	var out []Event
	err := Visit(td, func(e Event, _ ptrace.Span) { out = append(out, e) })
	return out, err
}

// FromLogs returns the transition events in ld (log records named
// EventName), in record order. Records that do not decode are skipped and
// returned, joined, as the error.
func FromLogs(ld plog.Logs) ([]Event, error) {
	var (
		out  []Event
		errs []error
	)
	rls := ld.ResourceLogs()
	for i := 0; i < rls.Len(); i++ {
		sls := rls.At(i).ScopeLogs()
		for j := 0; j < sls.Len(); j++ {
			lrs := sls.At(j).LogRecords()
			for k := 0; k < lrs.Len(); k++ {
				if lrs.At(k).EventName() != EventName {
					continue
				}
				e, err := FromAttributes(lrs.At(k).Attributes())
				if err != nil {
					errs = append(errs, fmt.Errorf("log record: %w", err))
					continue
				}
				out = append(out, e)
			}
		}
	}
	return out, errors.Join(errs...)
}
