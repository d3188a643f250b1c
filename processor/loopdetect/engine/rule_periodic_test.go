package engine

import (
	"fmt"
	"testing"
	"time"
)

// TestPeriodicLoopNeedsAnUnchangedFingerprint: the newest calls repeating a
// cycle of period 1..max_period min_repetitions times with an unchanged
// progress fingerprint are stuck — period 1 with a result fingerprint as
// unchanged_result — while a fingerprint that moves anywhere in the cycle
// is progress.
func TestPeriodicLoopNeedsAnUnchangedFingerprint(t *testing.T) {
	at := func(i int) time.Duration { return time.Duration(i) * time.Second }
	cycle := func(n int, steps ...[3]string) func(b *callBuilder) []*ToolCall {
		return func(b *callBuilder) []*ToolCall {
			return nCalls(n, func(i int) *ToolCall {
				s := steps[i%len(steps)]
				return b.call(at(i), s[0], s[1], s[2])
			})
		}
	}
	a := [3]string{"read_file", `{"p":"config.go"}`, `{"lines":120}`}
	bb := [3]string{"grep", `{"q":"LoadConfig"}`, `{"hits":3}`}
	c := [3]string{"list_dir", `{"d":"."}`, `{"n":14}`}
	d := [3]string{"git_status", `{}`, `{"clean":true}`}
	runStuckCases(t, []stuckCase{
		{"the same call and result twice: unchanged_result at call 2", nil, cycle(3, [3]string{"bash", `{"c":"ls"}`, "a.go\nb.go"}),
			2, ReasonUnchangedResult, 0, "loop detected: same tool call bash returned an identical result x2 in a row"},
		// Not a kill reason: the loop is killed once it has lasted
		// kill.after_loop_calls (5) calls, as decideKill's comment says.
		{"A-B-A-B with unchanged results: period 2 at call 4, killed at 5", nil, cycle(5, a, bb),
			4, ReasonPeriodicLoop, 5, "loop detected: cycle read_file → grep repeated x2 (period 2) with unchanged progress fingerprint"},
		{"A-B-C-A-B-C: period 3 at call 6, killed there", nil, cycle(6, a, bb, c),
			6, ReasonPeriodicLoop, 6, "loop detected: cycle read_file → grep → list_dir repeated x2 (period 3) with unchanged progress fingerprint"},
		{"an unchanged progress attribute: periodic_loop, not unchanged_result", nil, func(b *callBuilder) []*ToolCall {
			return nCalls(2, func(i int) *ToolCall {
				c := b.call(at(i), "poll", `{"job":7}`, "")
				c.Fingerprint, c.FingerprintSource = Digest(42), FingerprintAttribute
				return c
			})
		}, 2, ReasonPeriodicLoop, 0, "loop detected: same tool call poll x2 with unchanged progress fingerprint"},
		{"the same call with a new result each time is progress", nil, func(b *callBuilder) []*ToolCall {
			return nCalls(10, func(i int) *ToolCall {
				return b.call(at(i), "tail_log", `{"f":"job.log"}`, fmt.Sprintf(`{"lines":%d}`, i))
			})
		}, 0, ReasonNone, 0, ""},
		{"A-B-A-B where B's result moves is progress", nil, func(b *callBuilder) []*ToolCall {
			return nCalls(10, func(i int) *ToolCall {
				if i%2 == 0 {
					return b.call(at(i), a[0], a[1], a[2])
				}
				return b.call(at(i), "tail_log", `{"f":"job.log"}`, fmt.Sprintf(`{"lines":%d}`, i))
			})
		}, 0, ReasonNone, 0, ""},
		// The async-task post-mortem's advice: the two identical results
		// are stuck, and the calls after them record no result — no new
		// evidence to leave stuck by, so the verdict is kept, and a kept
		// verdict never kills.
		{"left the polling loop after two identical results, as the async-task post-mortem advises", nil, func(b *callBuilder) []*ToolCall {
			return []*ToolCall{
				b.call(0, "get_task", `{"t":1}`, `{"state":"running"}`),
				b.call(time.Second, "get_task", `{"t":1}`, `{"state":"running"}`),
				b.call(2*time.Second, "file_ticket", `{"a":1}`, ""),
				b.call(3*time.Second, "notify", `{"b":1}`, ""),
				b.call(4*time.Second, "write_note", `{"c":1}`, ""),
				b.call(5*time.Second, "write_note", `{"c":2}`, ""),
			}
		}, 2, ReasonUnchangedResult, 0, "loop detected: same tool call get_task returned an identical result x2 in a row"},
		{"min_repetitions 3: the third identical result, not the second", func(c *Config) { c.PeriodicLoop.MinRepetitions = 3 },
			cycle(3, [3]string{"bash", `{"c":"ls"}`, "a.go"}),
			3, ReasonUnchangedResult, 0, "loop detected: same tool call bash returned an identical result x3 in a row"},
		// Past max_period a 4-cycle is the long-cycle rule's, which sees it
		// at the same call (its run of 4 repeats covers the cycle).
		{"A-B-C-D is beyond max_period 3: long_cycle decides at call 8", nil, cycle(8, a, bb, c, d),
			8, ReasonLongCycle, 8, ""},
		{"max_period 4: A-B-C-D twice is a periodic loop at call 8", func(c *Config) { c.PeriodicLoop.MaxPeriod = 4 }, cycle(8, a, bb, c, d),
			8, ReasonPeriodicLoop, 8, "loop detected: cycle read_file → grep → list_dir → git_status repeated x2 (period 4) with unchanged progress fingerprint"},
	})
}

// TestPeriodicLoopConfigNamesItsKey: max_period and min_repetitions are
// checked against each other and history_size.
func TestPeriodicLoopConfigNamesItsKey(t *testing.T) {
	runConfigCases(t, []configCase{
		{"history too small for periods", func(c *Config) {
			c.HistorySize, c.FrequentIdentical.Window, c.FrequentIdentical.Threshold, c.PeriodicLoop.MaxPeriod = 5, 5, 5, 3
		}, "periodic_loop.max_period × periodic_loop.min_repetitions"},
		{"history exactly max_period × min_repetitions", func(c *Config) { c.HistorySize, c.FrequentIdentical.Window = 6, 6 }, ""},
		{"max_period 0", func(c *Config) { c.PeriodicLoop.MaxPeriod = 0 }, "periodic_loop.max_period must be in 1..16, got 0"},
		{"max_period 16 in a history of 32", func(c *Config) { c.HistorySize, c.PeriodicLoop.MaxPeriod = 32, 16 }, ""},
		{"max_period 17", func(c *Config) { c.HistorySize, c.PeriodicLoop.MaxPeriod = 64, 17 }, "periodic_loop.max_period must be in 1..16, got 17"},
		{"min_repetitions 1", func(c *Config) { c.PeriodicLoop.MinRepetitions = 1 }, "periodic_loop.min_repetitions must be ≥ 2, got 1"},
	})
}
