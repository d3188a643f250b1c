package engine

import (
	"fmt"
	"strings"
)

// nameOnlyThresholdRule: when NameOnlyThreshold is set, that many calls of
// one tool without recorded arguments (nothing new between them) are stuck
// with low confidence. Off by default: five web_search calls may be five
// different queries, so name-only evidence stays uncertain and never kills
// unless kill.allow_low_confidence says so.
type nameOnlyThresholdRule struct{}

func (nameOnlyThresholdRule) evaluate(w *window, v *verdict) bool {
	threshold := w.e.cfg.NameOnlyThreshold
	if threshold <= 0 {
		return false
	}
	c, f := w.e.frequent(w.h, true, len(w.h), 0)
	if c < threshold {
		return false
	}
	*v = verdict{state: StateStuck, reason: ReasonFrequentIdentical, count: c, loopStart: f, period: 1, reps: c, window: len(w.h), lowConf: true,
		cycleKey: mix(uint64(w.h[f].sig) ^ mix(uint64(w.h[f].fp)))}
	return true
}

func (nameOnlyThresholdRule) explain(b *strings.Builder, _ *window, v verdict) {
	fmt.Fprintf(b, "loop detected: same tool name x%d without arguments (name-only threshold)", v.count)
}

// NameOnlyConfig is the name-only rule's; its key is at the top level.
type NameOnlyConfig struct {
	// NameOnlyThreshold lets that many identical argument-less calls reach
	// stuck; 0 (default) keeps them at uncertain.
	NameOnlyThreshold int `mapstructure:"name_only_threshold"`
}

func (c NameOnlyConfig) check(historySize int) error {
	if c.NameOnlyThreshold < 0 || c.NameOnlyThreshold > historySize {
		return fmt.Errorf("name_only_threshold must be in 0..history_size (%d), got %d", historySize, c.NameOnlyThreshold)
	}
	return nil
}
