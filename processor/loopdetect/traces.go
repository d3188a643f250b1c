package loopdetect

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/metadata"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/pdataspan"
)

// The traces adapter: a transition is added as an event to the span that
// caused it; a timer-driven one is a zero-duration span in the agent's
// trace.

// tracesSignal adapts ptrace.Traces to the walk (core.go).
type tracesSignal struct{ d *detector }

type tracesSide = side[ptrace.Traces, ptrace.SpanSlice]

var _ signal[ptrace.Traces, ptrace.SpanSlice] = tracesSignal{}

func (tracesSignal) resources(td ptrace.Traces) int { return td.ResourceSpans().Len() }

func (tracesSignal) scopes(td ptrace.Traces, i int) (pcommon.Map, int) {
	rs := td.ResourceSpans().At(i)
	return rs.Resource().Attributes(), rs.ScopeSpans().Len()
}

func (tracesSignal) records(td ptrace.Traces, i, j int) (ptrace.SpanSlice, int) {
	ss := td.ResourceSpans().At(i).ScopeSpans().At(j).Spans()
	return ss, ss.Len()
}

// scope: verdicts are this processor's to make (alert_sink turns them
// into signed kills), so a synthetic transition span from outside is
// forged and verdict events on a span are removed; the prefilter then
// tells tool spans from the rest in one pass over the attributes. A span
// that is neither a tool call nor a model span with usage costs no more
// than those checks: it is the common case.
func (a tracesSignal) scope(w *walk, ss ptrace.SpanSlice, res pcommon.Map) (forged bool) {
	d := a.d
	eventTime := d.cfg.EventTime
	for k := range ss.Len() {
		span := ss.At(k)
		if span.Name() == loopevent.SyntheticSpanName {
			forged = true
			continue
		}
		if eventTime {
			advance(&d.eventNow, int64(span.EndTimestamp()))
		}
		if hasVerdictEvent(span.Events()) {
			removeVerdictEvents(w, span.Events())
		}
		// The trace id, which a model span's usage needs, is read before
		// the screen so that its cache line arrives alongside the
		// attributes' rather than after them.
		tid := span.TraceID()
		sc := d.pre.Screen(span)
		if !sc.MaybeTool {
			// The next model spans of a trace whose session is not
			// tracked cost the memo's compare alone.
			if !sc.NoUsage && !w.state.trace.untracked(tid) {
				d.usage(w.ctx, w.state, span, tid, res, sc)
			}
			continue
		}
		switch readCall(w, d.x, pdataspan.Span{S: span, Res: res}, sc.Declared) {
		case notCall:
			// Extraction read the attributes since: the usage read starts over.
			d.usage(w.ctx, w.state, span, tid, res, pdataspan.Screening{})
		case callObserved:
			for t := range w.state.trans {
				ev := toEvent(&w.state.trans[t])
				attach(span.Events().AppendEmpty(), &ev)
			}
		}
	}
	return forged
}

// removeVerdictEvents removes the verdict events of a span, counting
// them; a function of its own so its closure is built only for the rare
// span that has any.
func removeVerdictEvents(w *walk, evs ptrace.SpanEventSlice) {
	evs.RemoveIf(func(e ptrace.SpanEvent) bool {
		if e.Name() == loopevent.EventName {
			w.counts.foreign++
			return true
		}
		return false
	})
}

func (tracesSignal) endScope(w *walk, ss ptrace.SpanSlice, forged bool) {
	if !forged {
		return
	}
	ss.RemoveIf(func(s ptrace.Span) bool {
		if s.Name() == loopevent.SyntheticSpanName {
			w.counts.foreign++
			return true
		}
		return false
	})
}

// timerBatch writes each transition as a zero-duration span in the
// agent's trace, under the agent's resource.
func (tracesSignal) timerBatch(trans []engine.Transition) ptrace.Traces {
	td := ptrace.NewTraces()
	for i := range trans {
		t := &trans[i]
		ev := toEvent(t)
		rs := td.ResourceSpans().AppendEmpty()
		putTarget(rs.Resource().Attributes(), t.Target)
		ss := rs.ScopeSpans().AppendEmpty()
		ss.Scope().SetName(metadata.ScopeName)
		span := ss.Spans().AppendEmpty()
		span.SetName(loopevent.SyntheticSpanName)
		span.SetTraceID(t.TraceID)
		span.SetParentSpanID(t.ParentSpanID)
		span.SetSpanID(syntheticSpanID(t.ID))
		ts := pcommon.NewTimestampFromTime(t.DecidedAt)
		span.SetStartTimestamp(ts)
		span.SetEndTimestamp(ts)
		span.Attributes().PutBool(loopevent.AttrSynthetic, true)
		attach(span.Events().AppendEmpty(), &ev)
	}
	return td
}

func hasVerdictEvent(evs ptrace.SpanEventSlice) bool {
	for i := 0; i < evs.Len(); i++ {
		if evs.At(i).Name() == loopevent.EventName {
			return true
		}
	}
	return false
}

func attach(ev ptrace.SpanEvent, e *loopevent.Event) {
	ev.SetName(loopevent.EventName)
	ev.SetTimestamp(pcommon.NewTimestampFromTime(e.DecidedAt))
	e.CopyTo(ev.Attributes())
}
