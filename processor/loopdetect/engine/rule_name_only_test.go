package engine

import (
	"fmt"
	"testing"
	"time"
)

// TestNameOnlyThresholdIsOffByDefaultAndNeverKillsAlone: argument-less
// calls of one tool may be different queries, so they reach stuck only
// when name_only_threshold is set, then with low confidence, and are
// killed only when kill.allow_low_confidence says so. A new action or a
// new result between them ends their run.
func TestNameOnlyThresholdIsOffByDefaultAndNeverKillsAlone(t *testing.T) {
	at := func(i int) time.Duration { return time.Duration(i) * time.Second }
	searches := func(n int) []*ToolCall {
		b := newBuilder("s")
		return nCalls(n, func(i int) *ToolCall { return b.call(at(i), "web_search", "", "") })
	}
	threshold := func(n int) func(*Config) { return func(c *Config) { c.NameOnly.Threshold = n } }
	tests := []struct {
		name    string
		mod     func(*Config)
		calls   []*ToolCall
		stuckAt int64 // first stuck call, 0: never stuck
		killAt  int64 // first kill, 0: none
		explain string
	}{
		{"off by default: twelve argument-less calls are never stuck nor killed", nil, searches(12), 0, 0, ""},
		{"threshold 8: stuck with low confidence at the 8th, not killed", threshold(8), searches(8),
			8, 0, "loop detected: same tool name x8 without arguments (name-only threshold)"},
		{"threshold 8, seven calls: not yet", threshold(8), searches(7), 0, 0, ""},
		// frequent_identical, the verdict's reason, is a kill reason.
		{"threshold 8 and kill.allow_low_confidence: killed at the 8th", func(c *Config) { c.NameOnly.Threshold, c.Kill.AllowLowConfidence = 8, true },
			searches(10), 8, 8, ""},
		{"threshold 12, the history's size: the 12th call", threshold(12), searches(14), 12, 0, ""},
		{"a new action between ends the run", threshold(5), func() []*ToolCall {
			b := newBuilder("s")
			return nCalls(9, func(i int) *ToolCall {
				if i == 4 {
					return b.call(at(i), "read_file", `{"p":"notes.md"}`, `{"lines":3}`)
				}
				return b.call(at(i), "web_search", "", "")
			})
		}(), 0, 0, ""},
		{"a new result each time ends the run", threshold(3), func() []*ToolCall {
			b := newBuilder("s")
			return nCalls(8, func(i int) *ToolCall { return b.call(at(i), "web_search", "", fmt.Sprintf(`{"hits":%d}`, i)) })
		}(), 0, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := mustEngine(t, tt.mod)
			tr := observeAll(e, tt.calls)
			checkFirstTransition(t, tr, StateStuck, tt.stuckAt, ReasonFrequentIdentical, tt.explain)
			checkKillAt(t, tr, tt.killAt)
			if s := firstTransitionTo(tr, StateStuck); s != nil && !s.LowConfidence {
				t.Fatalf("name-only stuck verdict without low confidence: %+v", s)
			}
		})
	}
}

// TestNameOnlyConfigNamesItsKey: name_only_threshold is bounded by the
// history it counts in.
func TestNameOnlyConfigNamesItsKey(t *testing.T) {
	runConfigCases(t, []configCase{
		{"name-only over history", func(c *Config) { c.NameOnly.Threshold = 99 }, "name_only.threshold"},
		{"name-only at history", func(c *Config) { c.NameOnly.Threshold = c.HistorySize }, ""},
		{"negative name-only", func(c *Config) { c.NameOnly.Threshold = -1 }, "name_only.threshold must be in 0..history_size (12), got -1"},
	})
}
