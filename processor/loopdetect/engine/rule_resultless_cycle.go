package engine

import (
	"fmt"
	"strings"
)

// resultlessCycleRule: a cycle of up to ResultlessCycleMaxPeriod calls with
// recorded arguments but no results, repeated ResultlessCycleRepetitions
// times, is stuck. Without results nothing shows progress, so a short
// repetition stays uncertain; Gemini CLI's bound — five repetitions of a
// cycle of up to five calls — is where an agent that repeats its actions
// verbatim is stopped all the same. Name-only calls never get here.
type resultlessCycleRule struct{}

func (resultlessCycleRule) evaluate(w *window, v *verdict) bool {
	reps := w.e.cfg.ResultlessCycleRepetitions
	if reps <= 0 {
		return false
	}
	t := &w.s.cycles
	for p := 1; p <= w.e.cfg.ResultlessCycleMaxPeriod; p++ {
		if int(t.resultless[p-1]) >= (reps-1)*p {
			n := len(w.h)
			*v = verdict{state: StateStuck, reason: ReasonResultlessCycle, period: p, reps: reps,
				loopStart: max(0, n-reps*p), window: n, cycleKey: cycleKey(w.h, min(p, n))}
			return true
		}
	}
	return false
}

func (resultlessCycleRule) explain(b *strings.Builder, w *window, v verdict) {
	fmt.Fprintf(b, "loop detected: cycle %s repeated x%d with the same arguments and no results recorded", w.cycle(v.period), v.reps)
}
