package engine

import (
	"fmt"
	"strings"
)

// longCycleRule: a run of calls that brings nothing new — each repeats an
// (action, result) pair of the session's recent past — and covers a whole
// cycle, of any period up to recentCalls. It catches what the periodic
// rule's 1..3 cannot: a 4-step polling cycle with identical results, or a
// paging sweep that wraps around and re-reads the same pages with the same
// results. At least LongCycle.MinCalls calls, so re-reading two files after
// an edit is not a loop.
type longCycleRule struct{}

func (longCycleRule) evaluate(w *window, v *verdict) bool {
	t := &w.session.cycles
	minCalls := w.engine.cfg.LongCycle.MinCalls
	run, span := int(t.seenRun), int(t.seenSpan)
	if minCalls <= 0 || span == 0 || run < max(minCalls, span) {
		return false
	}
	n := len(w.history)
	*v = verdict{state: StateStuck, reason: ReasonLongCycle, period: span, reps: (run + span) / span,
		loopStart: max(0, n-run-span), window: n, cycleKey: cycleKey(w.history, min(span, n))}
	return true
}

func (longCycleRule) explain(b *strings.Builder, w *window, v verdict) {
	fmt.Fprintf(b, "loop detected: the last %d calls repeated earlier calls with identical results (a cycle of %d calls, ending %s)", int(w.session.cycles.seenRun), v.period, w.cycle(min(v.period, 3)))
}

// LongCycleConfig is the long-cycle rule's (long_cycle).
type LongCycleConfig struct {
	// MinCalls is the shortest run of calls, each repeating an earlier
	// (action, result) pair and together covering a whole cycle, that is
	// stuck; 0 disables. Default 4.
	MinCalls int `mapstructure:"min_calls"`
}

// Periods 4..recentCalls: the periodic rule covers 1..3 before it.
func defaultLongCycle() LongCycleConfig { return LongCycleConfig{MinCalls: 4} }

func (c LongCycleConfig) check() error {
	if c.MinCalls < 0 || c.MinCalls > recentCalls {
		return fmt.Errorf("long_cycle.min_calls must be in 0..%d, got %d", recentCalls, c.MinCalls)
	}
	return nil
}
