package engine

import (
	"fmt"
	"testing"
	"time"
)

// TestLongCycleIsARunOfRepeatsCoveringACycle: a run of at least
// long_cycle.min_calls calls, each repeating an (action, result) pair of
// the last recentCalls calls and together covering a whole cycle, is
// stuck — the loops longer than max_period (a 4-step poll, a paging sweep
// that wraps). A new result anywhere, name-only calls and a cycle longer
// than the ring are not.
func TestLongCycleIsARunOfRepeatsCoveringACycle(t *testing.T) {
	at := func(i int) time.Duration { return time.Duration(i) * time.Second }
	tools := []string{"read_file", "grep", "list_dir", "git_status"}
	// poll repeats the four tools, each with its own unchanged result.
	poll := func(n int) func(b *callBuilder) []*ToolCall {
		return func(b *callBuilder) []*ToolCall {
			return nCalls(n, func(i int) *ToolCall {
				k := i % len(tools)
				return b.call(at(i), tools[k], fmt.Sprintf(`{"k":%d}`, k), fmt.Sprintf(`{"r":%d}`, k))
			})
		}
	}
	// pages sweeps n pages again and again, each page with its own content.
	pages := func(pages, n int) func(b *callBuilder) []*ToolCall {
		return func(b *callBuilder) []*ToolCall {
			return nCalls(n, func(i int) *ToolCall {
				p := i % pages
				return b.call(at(i), "get_page", fmt.Sprintf(`{"page":%d}`, p), fmt.Sprintf(`{"items":["item-%d"]}`, p))
			})
		}
	}
	runStuckCases(t, []stuckCase{
		// Calls 5..8 repeat calls 1..4: a run of 4 covering the cycle of 4.
		// Not a kill reason: killed as the loop has lasted 8 calls (≥ 5).
		{"a 4-step poll with unchanged results: stuck and killed at call 8", nil, poll(10),
			8, ReasonLongCycle, 8, "loop detected: the last 4 calls repeated earlier calls with identical results (a cycle of 4 calls, ending grep → list_dir → git_status)"},
		{"a sweep of 10 pages that wraps: stuck at call 20, once the run covers the cycle", nil, pages(10, 22),
			20, ReasonLongCycle, 20, "loop detected: the last 10 calls repeated earlier calls with identical results (a cycle of 10 calls, ending get_page → get_page → get_page)"},
		{"a cycle of six: stuck at call 12, not at 10 where the run is 4", nil, pages(6, 14),
			12, ReasonLongCycle, 12, ""},
		{"re-reading two files after an edit is not a loop", nil, func(b *callBuilder) []*ToolCall {
			return []*ToolCall{
				b.call(0, "read_file", `{"p":"a.go"}`, `{"lines":10}`),
				b.call(at(1), "read_file", `{"p":"b.go"}`, `{"lines":20}`),
				b.call(at(2), "edit", `{"p":"c.go"}`, `{"ok":true}`),
				b.call(at(3), "read_file", `{"p":"a.go"}`, `{"lines":10}`),
				b.call(at(4), "read_file", `{"p":"b.go"}`, `{"lines":20}`),
			}
		}, 0, ReasonNone, 0, ""},
		{"a 4-step poll whose last step brings a new result each time is progress", nil, func(b *callBuilder) []*ToolCall {
			return nCalls(24, func(i int) *ToolCall {
				k := i % len(tools)
				if k == 3 {
					return b.call(at(i), "tail_log", `{"f":"job.log"}`, fmt.Sprintf(`{"lines":%d}`, i))
				}
				return b.call(at(i), tools[k], fmt.Sprintf(`{"k":%d}`, k), fmt.Sprintf(`{"r":%d}`, k))
			})
		}, 0, ReasonNone, 0, ""},
		{"a name-only 4-step poll is not tracked", nil, func(b *callBuilder) []*ToolCall {
			return nCalls(16, func(i int) *ToolCall {
				k := i % len(tools)
				return b.call(at(i), tools[k], "", fmt.Sprintf(`{"r":%d}`, k))
			})
		}, 0, ReasonNone, 0, ""},
		// The ring holds the 24 newest pairs: page 1 is gone when it comes
		// round again. A limit of the rule, documented in its comment.
		{"a sweep of 25 pages wraps beyond the ring: never seen", nil, pages(25, 60), 0, ReasonNone, 0, ""},
		// min_calls above the cycle: a 3-cycle (past max_period 2) is
		// stuck at the 4th repeat, not the 3rd.
		{"min_calls 4 over a 3-cycle: call 7", func(c *Config) { c.PeriodicLoop.MaxPeriod = 2 }, pages(3, 9), 7, ReasonLongCycle, 7, ""},
		{"min_calls 8: the 4-step poll at call 12", func(c *Config) { c.LongCycle.MinCalls = 8 }, poll(14), 12, ReasonLongCycle, 12, ""},
		{"min_calls 24, the ring's size: the 4-step poll at call 28", func(c *Config) { c.LongCycle.MinCalls = recentCalls }, poll(30),
			28, ReasonLongCycle, 28, ""},
		{"min_calls 0: the 4-step poll stays working", func(c *Config) { c.LongCycle.MinCalls = 0 }, poll(24), 0, ReasonNone, 0, ""},
	})
}

// TestLongCycleConfigNamesItsKey: min_calls is bounded by the ring it reads.
func TestLongCycleConfigNamesItsKey(t *testing.T) {
	runConfigCases(t, []configCase{
		{"long cycle over the ring", func(c *Config) { c.LongCycle.MinCalls = recentCalls + 1 }, "long_cycle.min_calls"},
		{"long cycle at the ring", func(c *Config) { c.LongCycle.MinCalls = recentCalls }, ""},
		{"negative long cycle", func(c *Config) { c.LongCycle.MinCalls = -1 }, "long_cycle.min_calls must be in 0..24, got -1"},
		{"long cycle off", func(c *Config) { c.LongCycle.MinCalls = 0 }, ""},
	})
}
