package engine

import (
	"fmt"
	"strings"
)

// failureStreakRule: one tool failing with one non-retryable error class
// again and again, whatever its arguments, with no successful new call
// between — the model varying its arguments around an error it does not
// fix (twelve read_file calls on twelve missing paths burned millions of
// tokens in one reported case). Calls of a tool that does not exist count
// the same way, with their own, lower threshold. Failures interleaved with
// successful calls that return new results are exploration, not a loop.
type failureStreakRule struct{}

func (failureStreakRule) evaluate(w *window, v *verdict) bool {
	if w.s.x == nil || w.s.x.streak.count == 0 {
		return false
	}
	f := &w.s.x.streak
	threshold, reason := w.e.cfg.FailureStreak, ReasonFailureStreak
	if f.unknown {
		threshold, reason = w.e.cfg.UnknownToolStreak, ReasonUnknownTool
	}
	if threshold <= 0 || int(f.count) < threshold {
		return false
	}
	n := len(w.h)
	loopStart := max(0, n-int(w.s.total-f.start+1))
	*v = verdict{state: StateStuck, reason: reason, count: int(f.count), period: 1, reps: int(f.count), loopStart: loopStart, window: n,
		cycleKey: mix(uint64(f.tool)<<32 | uint64(f.class))}
	return true
}

func (failureStreakRule) explain(b *strings.Builder, w *window, v verdict) {
	if v.reason == ReasonUnknownTool {
		fmt.Fprintf(b, "loop detected: %s called x%d but no such tool exists (%q)", w.sh.names.name(w.s.x.streak.tool), v.count, w.s.errClass())
		return
	}
	fmt.Fprintf(b, "loop detected: %s failed x%d in a row with %q", w.sh.names.name(w.s.x.streak.tool), v.count, w.s.errClass())
	w.s.quoteErrText(b)
	b.WriteString(", whatever its arguments")
}
