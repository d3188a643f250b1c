package engine

import (
	"fmt"
	"strings"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
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
	if w.session.extra == nil || w.session.extra.streak.count == 0 {
		return false
	}
	f := &w.session.extra.streak
	threshold, reason := w.engine.cfg.FailureStreak.Threshold, ReasonFailureStreak
	if f.unknown {
		threshold, reason = w.engine.cfg.FailureStreak.UnknownToolThreshold, ReasonUnknownTool
	}
	if threshold <= 0 || int(f.count) < threshold {
		return false
	}
	n := len(w.history)
	loopStart := max(0, n-int(w.session.total-f.start+1))
	*v = verdict{state: StateStuck, reason: reason, count: int(f.count), period: 1, reps: int(f.count), loopStart: loopStart, window: n,
		cycleKey: hash64.Mix(uint64(f.tool)<<32 | uint64(f.class))}
	return true
}

func (failureStreakRule) explain(b *strings.Builder, w *window, v verdict) {
	if v.reason == ReasonUnknownTool {
		fmt.Fprintf(b, "loop detected: %s called x%d but no such tool exists (%q)", w.shard.names.name(w.session.extra.streak.tool), v.count, w.session.errClass())
		return
	}
	fmt.Fprintf(b, "loop detected: %s failed x%d in a row with %q", w.shard.names.name(w.session.extra.streak.tool), v.count, w.session.errClass())
	w.session.quoteErrText(b)
	b.WriteString(", whatever its arguments")
}

// FailureStreakConfig is the failure-streak rule's (failure_streak).
type FailureStreakConfig struct {
	// Threshold is how many non-retryable failures of one tool with one
	// error class in a row are stuck; 0 disables. Default 6.
	Threshold int `mapstructure:"threshold"`
	// UnknownToolThreshold is the same for calls of a tool that does not
	// exist, reported as unknown_tool; 0 disables. Default 3.
	UnknownToolThreshold int `mapstructure:"unknown_tool_threshold"`
}

func defaultFailureStreak() FailureStreakConfig {
	return FailureStreakConfig{Threshold: 6, UnknownToolThreshold: 3}
}

func (c FailureStreakConfig) check() error {
	if c.Threshold < 0 || c.UnknownToolThreshold < 0 {
		return fmt.Errorf("failure_streak: threshold (%d) and unknown_tool_threshold (%d) must not be negative", c.Threshold, c.UnknownToolThreshold)
	}
	return nil
}
