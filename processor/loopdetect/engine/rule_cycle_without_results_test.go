package engine

import (
	"fmt"
	"testing"
	"time"
)

// TestCycleWithoutResultsStopsAVerbatimRepetition: a cycle of up to
// cycle_without_results.max_period calls with arguments and no results,
// repeated cycle_without_results.repetitions times (5 and 5, Gemini CLI's
// bound), is stuck at the call that completes the last repetition; a call
// that records a result, name-only calls and a longer cycle are not.
func TestCycleWithoutResultsStopsAVerbatimRepetition(t *testing.T) {
	at := func(i int) time.Duration { return time.Duration(i) * time.Second }
	tools := []string{"read_file", "grep", "list_dir", "git_status", "open_page", "search"}
	// cycle repeats the first period tools with arguments and no results.
	cycle := func(period, n int) func(b *callBuilder) []*ToolCall {
		return func(b *callBuilder) []*ToolCall {
			return nCalls(n, func(i int) *ToolCall {
				k := i % period
				return b.call(at(i), tools[k], fmt.Sprintf(`{"k":%d}`, k), "")
			})
		}
	}
	runStuckCases(t, []stuckCase{
		// Periods 1 and 2 reach frequent_identical first (5 of 10), and a
		// 3-cycle's 15th call is in TestFrequentIdenticalCountsACycleFromItsFirstCall.
		// Not a kill reason: killed as the loop has lasted ≥ 5 calls.
		{"a 4-cycle without results: stuck and killed at call 20", nil, cycle(4, 22),
			20, ReasonCycleWithoutResults, 20, "loop detected: cycle read_file → grep → list_dir → git_status repeated x5 with the same arguments and no results recorded"},
		{"a 5-cycle without results: call 25", nil, cycle(5, 27), 25, ReasonCycleWithoutResults, 25,
			"loop detected: cycle read_file → grep → list_dir → git_status → open_page repeated x5 with the same arguments and no results recorded"},
		{"frequent_identical off: the same call 5 times is this rule's at call 5", func(c *Config) { c.FrequentIdentical.Threshold = 0 },
			cycle(1, 6), 5, ReasonCycleWithoutResults, 5, "loop detected: cycle read_file repeated x5 with the same arguments and no results recorded"},
		{"frequent_identical off: A-B 5 times is this rule's at call 10", func(c *Config) { c.FrequentIdentical.Threshold = 0 },
			cycle(2, 12), 10, ReasonCycleWithoutResults, 10, ""},
		{"a 6-cycle is past max_period 5: never", nil, cycle(6, 40), 0, ReasonNone, 0, ""},
		// Any recorded result resets the counts, whatever its value: a
		// cycle with results is the long-cycle rule's to judge, and this
		// one's results move.
		{"a 4-cycle whose last step records a new result each time is progress", nil, func(b *callBuilder) []*ToolCall {
			return nCalls(30, func(i int) *ToolCall {
				if k := i % 4; k != 3 {
					return b.call(at(i), tools[k], fmt.Sprintf(`{"k":%d}`, k), "")
				}
				return b.call(at(i), "tail_log", `{"f":"job.log"}`, fmt.Sprintf(`{"lines":%d}`, i))
			})
		}, 0, ReasonNone, 0, ""},
		{"a name-only 4-cycle never gets here", nil, func(b *callBuilder) []*ToolCall {
			return nCalls(30, func(i int) *ToolCall { return b.call(at(i), tools[i%4], "", "") })
		}, 0, ReasonNone, 0, ""},
		{"repetitions 2: the 4-cycle at call 8", func(c *Config) { c.CycleWithoutResults.Repetitions = 2 }, cycle(4, 10),
			8, ReasonCycleWithoutResults, 8, "loop detected: cycle read_file → grep → list_dir → git_status repeated x2 with the same arguments and no results recorded"},
		{"repetitions 0: the 4-cycle stays working", func(c *Config) { c.CycleWithoutResults.Repetitions = 0 }, cycle(4, 30), 0, ReasonNone, 0, ""},
		{"max_period 3: a 4-cycle is never this rule's", func(c *Config) { c.CycleWithoutResults.MaxPeriod = 3 }, cycle(4, 30), 0, ReasonNone, 0, ""},
		{"max_period 4: a 4-cycle at call 20", func(c *Config) { c.CycleWithoutResults.MaxPeriod = 4 }, cycle(4, 22), 20, ReasonCycleWithoutResults, 20, ""},
	})
}

// TestCycleWithoutResultsConfigNamesItsKey: repetitions and max_period are
// checked together under cycle_without_results; with the rule off
// max_period is not read.
func TestCycleWithoutResultsConfigNamesItsKey(t *testing.T) {
	runConfigCases(t, []configCase{
		{"cycle without results: one repetition", func(c *Config) { c.CycleWithoutResults.Repetitions = 1 }, "cycle_without_results"},
		{"cycle without results: period too long", func(c *Config) { c.CycleWithoutResults.MaxPeriod = maxCycleWithoutResultsPeriod + 1 }, "cycle_without_results"},
		{"cycle without results: period 0", func(c *Config) { c.CycleWithoutResults.MaxPeriod = 0 },
			"cycle_without_results: repetitions (5) must be 0 or ≥ 2 and max_period (0) in 1..5"},
		{"cycle without results: two repetitions of period 1", func(c *Config) { c.CycleWithoutResults = CycleWithoutResultsConfig{MaxPeriod: 1, Repetitions: 2} }, ""},
		{"cycle without results off", func(c *Config) { c.CycleWithoutResults.Repetitions = 0 }, ""},
		{"cycle without results off ignores max_period", func(c *Config) { c.CycleWithoutResults = CycleWithoutResultsConfig{MaxPeriod: 99} }, ""},
	})
}
