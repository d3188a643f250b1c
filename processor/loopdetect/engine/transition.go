package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/cespare/xxhash/v2"
)

// evaluate decides the session's verdict, applies recovery, hysteresis and
// the kill policy, and appends a transition when the state changes or a
// kill is decided — never one per repetition.
func (e *Engine) evaluate(sh *shard, s *session, now int64, trig Trigger, span [8]byte, out []Transition) []Transition {
	// The window lives in the shard, whose lock is held: built on the
	// stack it would escape through the rules' interface calls.
	w := &sh.win
	w.reset(e, sh, s, now)
	v := e.decide(w)
	n := len(s.hist)
	kept := keepStuck(s, v, trig)
	if e.holdForHysteresis(s, v) {
		return out
	}
	from := s.state
	if v.state == StateStuck && from != StateStuck {
		s.startLoop(v, n)
	}
	var loop *loopState
	if v.state == StateStuck {
		loop = &s.extra.loop
		if v.reason == ReasonBackstop {
			loop.backstop = true
		}
	}
	kill := e.decideKill(sh, s, v, loop, kept)
	if v.state == from && !kill {
		if v.state != StateStuck {
			s.reason = v.reason
		}
		return out
	}
	if from == StateStuck && v.state != StateStuck {
		s.extra.loop = loopState{}
	}
	s.state = v.state
	s.reason = v.reason
	s.seq++
	key := s.keyString()
	t := Transition{
		ID:            eventID(xxhash.Sum64String(key), s.seq),
		Seq:           s.seq,
		Session:       key,
		SessionSource: s.desc.source,
		TraceID:       s.traceID,
		ParentSpanID:  s.lastParent,
		From:          from,
		To:            v.state,
		Reason:        v.reason,
		Trigger:       trig,
		Period:        v.period,
		Repetitions:   v.reps,
		Window:        v.window,
		CallIndex:     s.total,
		TriggerSpanID: span,
		LowConfidence: v.lowConf,
		Kill:          kill && !e.cfg.Kill.DryRun,
		DryRun:        kill && e.cfg.Kill.DryRun,
		DecidedAt:     time.Unix(0, now).UTC(),
		Agent:         s.desc.agent,
		Client:        s.desc.client,
		Target:        s.desc.target,
	}
	if trig == TriggerCall {
		t.CallIndex = callIndexOf(s, n, span)
	}
	e.describeEvidence(sh, s, *v, &t)
	if loop != nil {
		fillLoopDelay(s, n, loop, v, now, trig, &t)
	}
	t.Explanation = explain(w, *v, from, trig, now)
	s.fillTokens(loop, sh.tokens(s), &t)
	return append(out, t)
}

// callIndexOf is the session-wide index of the call whose span triggered
// the transition: the newest of the history's n calls with that span id,
// else the last call seen.
func callIndexOf(s *session, n int, span [8]byte) int64 {
	for i := n - 1; i >= 0; i-- {
		if s.hist[i].spanID == span {
			return s.total - int64(n-1-i)
		}
	}
	return s.total
}

// fillLoopDelay sets how long the loop ran before this transition, in
// calls and seconds, and its period when the verdict has none; n is the
// history's length when the verdict was decided.
func fillLoopDelay(s *session, n int, loop *loopState, v *verdict, now int64, trig Trigger, t *Transition) {
	t.FirstLoopSpanID = loop.firstSpan
	t.DelayCalls = t.CallIndex - loop.startIndex + 1
	if loop.startTime > 0 {
		end := now
		if trig == TriggerCall && n > 0 {
			end = s.hist[n-1].start
		}
		t.DelaySeconds = float64(end-loop.startTime) / 1e9
	}
	if v.period == 0 {
		t.Period = loop.period
	}
}

func (e *Engine) describeEvidence(sh *shard, s *session, v verdict, t *Transition) {
	n := len(s.hist)
	if n == 0 {
		return
	}
	p := max(v.period, 1)
	for i := max(0, n-p); i < n; i++ {
		r := &s.hist[i]
		t.CycleTools = append(t.CycleTools, sh.names.name(r.tool))
		t.Signatures = append(t.Signatures, e.keyer.Keyed("sig", r.sig))
	}
	last := &s.hist[n-1]
	t.FingerprintSource = last.fpSource()
	if last.hasFP() {
		t.Fingerprint = e.keyer.Keyed("fp", last.fp)
	}
}

// explain is the rule's own explanation, prefixed by the expired lease a
// timer transition out of waiting follows.
func explain(w *window, v verdict, from State, trig Trigger, now int64) string {
	var b strings.Builder
	switch {
	case from != StateWaiting || v.state == StateWaiting:
	case trig == TriggerTick && !w.session.waitHeld():
		fmt.Fprintf(&b, "wait lease of %q expired; ", w.session.extra.lease.owner)
	default:
		explainRunOut(&b, w.session, trig, now)
	}
	if v.by != nil {
		v.by.explain(&b, w, v)
	}
	return b.String()
}
