package loopdetect

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/metadata"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/pdataspan"
)

// The traces adapter: a transition is added as an event to the span that
// caused it; a timer-driven one is a zero-duration span in the agent's
// trace.

// tracesSignal adapts ptrace.Traces to the walk (core.go).
type tracesSignal struct{ d *detector }

type tracesSide = side[ptrace.Traces, ptrace.SpanSlice, pdataspan.Span]

var _ signal[ptrace.Traces, ptrace.SpanSlice, pdataspan.Span] = tracesSignal{}

func (tracesSignal) resources(td ptrace.Traces) int { return td.ResourceSpans().Len() }

func (tracesSignal) scopes(td ptrace.Traces, i int) (pcommon.Map, int) {
	rs := td.ResourceSpans().At(i)
	return rs.Resource().Attributes(), rs.ScopeSpans().Len()
}

func (tracesSignal) records(td ptrace.Traces, i, j int) (ptrace.SpanSlice, int) {
	ss := td.ResourceSpans().At(i).ScopeSpans().At(j).Spans()
	return ss, ss.Len()
}

// screen: verdicts are this processor's to make (alert_sink turns them
// into signed kills), so a synthetic transition span from outside is
// forged and verdict events on a span are removed; the prefilter then
// tells tool spans from the rest in one pass over the attributes.
func (a tracesSignal) screen(w *walk, ss ptrace.SpanSlice, k int, res pcommon.Map) (pdataspan.Span, step) {
	span := ss.At(k)
	rec := pdataspan.Span{S: span, Res: res}
	if span.Name() == loopevent.SyntheticSpanName {
		return rec, stepForged
	}
	if hasVerdictEvent(span.Events()) {
		span.Events().RemoveIf(func(e ptrace.SpanEvent) bool {
			if e.Name() == loopevent.EventName {
				w.n.foreign++
				return true
			}
			return false
		})
	}
	sc := a.d.pre.Screen(span)
	switch {
	case sc.MaybeTool && sc.Declared:
		return rec, stepDeclared
	case sc.MaybeTool:
		return rec, stepCall
	case sc.NoUsage:
		return rec, stepSeen
	}
	return rec, stepUsage
}

func (a tracesSignal) usage(w *walk, rec pdataspan.Span) { a.d.usage(w.ctx, w.st, rec.S, rec.Res) }

func (a tracesSignal) extractor() *extract.Extractor { return a.d.x }

func (a tracesSignal) emit(w *walk, _ ptrace.SpanSlice, rec pdataspan.Span) {
	for t := range w.st.trans {
		ev := toEvent(&w.st.trans[t])
		attach(rec.S.Events().AppendEmpty(), &ev)
	}
}

func (tracesSignal) endScope(w *walk, ss ptrace.SpanSlice, forged bool) {
	if !forged {
		return
	}
	ss.RemoveIf(func(s ptrace.Span) bool {
		if s.Name() == loopevent.SyntheticSpanName {
			w.n.foreign++
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
