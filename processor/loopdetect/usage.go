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
	tokens, ok := d.pre.Usage(span)
	if !ok {
		return
	}
	session := extract.UsageSession(d.x, pdataspan.Span{S: span, Res: res}, &st.sc)
	// The time matters only to a token kill; reading the clock was a sixth
	// of a model span's cost.
	var now time.Time
	if d.cfg.Kill.MaxLoopTokens > 0 {
		now = d.now()
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
