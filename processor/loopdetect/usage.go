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
// span) to the engine. A kill it causes (kill.max_loop_tokens) is attached
// to that span, as a tool call's transitions are to the tool span.
func (d *detector) usage(ctx context.Context, st *batchState, span ptrace.Span, res pcommon.Map) {
	ps := pdataspan.Span{S: span, Res: res}
	if d.traceSessions && !d.traceTracked(st, ps) {
		return // the engine would drop the tokens: they are not read
	}
	tokens, ok := d.pre.Usage(span)
	if !ok {
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
		d.attach(span.Events().AppendEmpty(), &ev)
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
func (d *detector) traceTracked(st *batchState, s pdataspan.Span) bool {
	tid := s.S.TraceID()
	if !st.trace.ok || st.trace.id != tid {
		st.trace = traceMemo{id: tid, ok: true, tracked: d.eng.Tracks(extract.UsageSession(d.x, s, &st.sc))}
	}
	return st.trace.tracked
}

// traceMemo is whether the engine tracked the session of the trace of the
// batch's last model span. Agents send a trace's spans together, and the
// engine drops the tokens of sessions without a tool call (chat-only
// agents, or before an agent's first call): their model spans are skipped
// without reading their usage. An
// untracked answer holds until the batch observes a tool call (which may
// create the session); a session another batch creates meanwhile counts
// from that batch on, as if it had come after this one. A tracked answer
// only lets the usage be read: AddTokens looks the session up again.
type traceMemo struct {
	id          [16]byte
	ok, tracked bool
}

// observed forgets an untracked answer: a tool call was observed.
func (m *traceMemo) observed() {
	if !m.tracked {
		m.ok = false
	}
}
