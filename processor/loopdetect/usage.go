package loopdetect

import (
	"context"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/pdataspan"
)

// usage feeds the token usage of a span that is not a tool call (an LLM
// span), screened as sc, to the engine. A kill it causes
// (kill.max_loop_tokens) is attached to that span, as a tool call's
// transitions are to the tool span.
func (d *detector) usage(ctx context.Context, st *batchState, span ptrace.Span, tid pcommon.TraceID, res pcommon.Map, sc pdataspan.Screening) {
	ps := pdataspan.Span{S: span, Res: res}
	if d.traceSessions && !d.traceTracked(st, ps, tid) {
		return // the engine would drop the tokens: they are not read
	}
	tokens, ok := d.pre.UsageAfter(span, sc)
	if !ok {
		return
	}
	// Without a token kill AddTokens only adds, so a trace's model spans
	// are summed in the batch and added once (flushTokens): one shard lock
	// and session look-up per trace and batch, not per model span.
	if d.traceSessions && d.cfg.Kill.MaxLoopTokens <= 0 {
		st.trace.pending += tokens
		return
	}
	session := extract.UsageSession(d.x, ps, &st.sc)
	// The time matters only to a token kill; reading the clock was a sixth
	// of a model span's cost.
	var now time.Time
	if d.cfg.Kill.MaxLoopTokens > 0 {
		now = d.batchNow(st)
	}
	st.trans = d.eng.AddTokens(session, tokens, now, st.trans[:0])
	for i := range st.trans {
		d.record(ctx, &st.trans[i])
		ev := toEvent(&st.trans[i])
		attach(span.Events().AppendEmpty(), &ev)
	}
	st.batch = append(st.batch, st.trans...)
}

// recordLoopTokens counts the tokens a loop had burned when it was
// detected (its transition into stuck).
func (d *detector) recordLoopTokens(ctx context.Context, t *engine.Transition) {
	if t.To == engine.StateStuck && t.From != engine.StateStuck && t.TokensLoop > 0 {
		d.telemetry.LoopdetectLoopTokens.Add(ctx, t.TokensLoop)
	}
}

// traceTracked reports whether the engine tracks the session of s, its
// trace id, remembering the answer for the trace's next model spans.
func (d *detector) traceTracked(st *batchState, s pdataspan.Span, tid pcommon.TraceID) bool {
	if !st.trace.ok || st.trace.id != tid {
		d.flushTokens(st)
		session := extract.UsageSession(d.x, s, &st.sc)
		st.trace = traceMemo{id: tid, ok: true, session: session, tracked: d.eng.Tracks(session)}
	}
	return st.trace.tracked
}

// flushTokens adds the tokens summed for the memo's trace to its session.
// It runs when the batch moves to another trace, before a tool span
// (forgetTrace) and at the batch's end, so the engine sees the same sums,
// in the same order relative to the calls, as span by span.
func (d *detector) flushTokens(st *batchState) {
	if st.trace.pending <= 0 {
		return
	}
	// Only summed when no token kill is configured, so AddTokens returns
	// no transition here.
	_ = d.eng.AddTokens(st.trace.session, st.trace.pending, time.Time{}, nil)
	st.trace.pending = 0
}

// forgetTrace flushes the memo's tokens and forgets the memo, before a
// tool span: its call may create the memo's session, and extracting it
// rewrites the scratch the memo's session key points into (the trace id's
// hex text), so the next model span must look its trace up again.
func (d *detector) forgetTrace(st *batchState) {
	d.flushTokens(st)
	st.trace = traceMemo{}
}

// traceMemo is whether the engine tracked the session of the trace of the
// batch's last model span. Agents send a trace's spans together, and the
// engine drops the tokens of sessions without a tool call (chat-only
// agents, or before an agent's first call): their model spans are skipped
// without reading their usage. The answer holds until the batch moves to
// another trace or meets a tool span (forgetTrace); a session another
// batch creates meanwhile counts from that batch on, as if it had come
// after this one. A tracked answer only lets the usage be read: AddTokens
// looks the session up again.
type traceMemo struct {
	id          [16]byte
	ok, tracked bool
	// session is the trace's session key, pointing into the batch's
	// scratch (valid until the next tool span or trace change), and
	// pending the tokens summed for it and not yet added.
	session string
	pending int64
}

// untracked reports that the memo is of trace tid and its session is not
// tracked: the span's usage is not read.
func (m *traceMemo) untracked(tid pcommon.TraceID) bool {
	return m.ok && !m.tracked && m.id == tid
}
