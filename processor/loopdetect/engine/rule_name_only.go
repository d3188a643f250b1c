package engine

import (
	"fmt"
	"strings"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
)

// nameOnlyThresholdRule: when NameOnlyThreshold is set, that many calls of
// one tool without recorded arguments (nothing new between them) are stuck
// with low confidence. Off by default: five web_search calls may be five
// different queries, so name-only evidence stays uncertain and never kills
// unless kill.allow_low_confidence says so.
type nameOnlyThresholdRule struct{}

func (nameOnlyThresholdRule) evaluate(w *window, v *verdict) bool {
	threshold := w.engine.cfg.NameOnly.Threshold
	if threshold <= 0 {
		return false
	}
	c, f := w.engine.frequent(w.history, true, len(w.history), 0)
	if c < threshold {
		return false
	}
	*v = verdict{state: StateStuck, reason: ReasonFrequentIdentical, count: c, loopStart: f, period: 1, reps: c, window: len(w.history), lowConf: true,
		cycleKey: hash64.Mix(uint64(w.history[f].sig) ^ hash64.Mix(uint64(w.history[f].fp)))}
	return true
}

func (nameOnlyThresholdRule) explain(b *strings.Builder, _ *window, v verdict) {
	fmt.Fprintf(b, "loop detected: same tool name x%d without arguments (name-only threshold)", v.count)
}

// NameOnlyConfig is the name-only rule's (name_only).
type NameOnlyConfig struct {
	// Threshold lets that many identical argument-less calls reach stuck;
	// 0 (default) keeps them at uncertain.
	Threshold int `mapstructure:"threshold"`
}

func (c NameOnlyConfig) check(historySize int) error {
	if c.Threshold < 0 || c.Threshold > historySize {
		return fmt.Errorf("name_only.threshold must be in 0..history_size (%d), got %d", historySize, c.Threshold)
	}
	return nil
}
