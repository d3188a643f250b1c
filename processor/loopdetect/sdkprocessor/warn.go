package sdkprocessor

import (
	"github.com/otelcol-loop/otelcol-loop/internal/loopevent"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// Warning is the response ladder's step before a kill: a session has just
// become stuck. The agent can act on it, typically by adding Nudge to its
// next model request, before the kill policy stops it.
type Warning struct {
	// Transition is the verdict that entered stuck.
	Transition engine.Transition
	// Nudge is a suggested text for the agent naming what it repeats, e.g.
	// "You called bash with the same arguments 3 times and got the same
	// result; try a different approach."
	Nudge string
	// KillFollows is true when the same verdict also kills (or, in
	// dry-run mode, marks a kill): there is no time left to act.
	KillFollows bool
}

// WithWarn sets the function called when a session becomes stuck, before
// any kill of that session is acted on (the collector's kill.warn_on:
// [stuck]). It runs synchronously inside span.End, ahead of the kill that
// the same span may decide, so it must be quick and must not block: record
// the nudge for the agent's next turn, do not call the model from it.
func WithWarn(fn func(Warning)) Option {
	return func(o *options) { o.warn = fn }
}

// warnFor calls the warn callback when t enters stuck.
func (p *Processor) warnFor(t *engine.Transition) {
	if p.warn == nil || t.To != engine.StateStuck || t.From == engine.StateStuck {
		return
	}
	p.warns.Add(1)
	p.warn(Warning{
		Transition:  *t,
		Nudge:       loopevent.Nudge(t.Reason.String(), t.CycleTools, int64(t.Repetitions)),
		KillFollows: t.Kill || t.DryRun,
	})
}

// usage feeds the token usage of an LLM span (not a tool call) to the
// engine; a kill it causes (engine KillPolicy.MaxLoopTokens) is handled
// like any other.
func (p *Processor) usage(w *work) {
	u, ok := extract.ExtractUsage(p.x, &w.span, &w.sc)
	if !ok {
		return
	}
	w.trans = p.eng.AddTokens(u.Session, u.Tokens, p.now(), w.trans[:0])
	p.handle(w.trans)
	clear(w.trans)
}
