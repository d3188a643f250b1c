package engine

import (
	"testing"
	"time"
)

// TestTerminalRereadIsTheSameFinishedResultInARow: reading a finished
// task's result again, unchanged and with nothing in between, is stuck at
// the second read (the async-task incident), before any hysteresis; a
// result that is not final, that changed, or a read with other calls
// between is not this rule's.
func TestTerminalRereadIsTheSameFinishedResultInARow(t *testing.T) {
	at := func(i int) time.Duration { return time.Duration(i) * time.Second }
	reads := func(n int, args, result string) func(b *callBuilder) []*ToolCall {
		return func(b *callBuilder) []*ToolCall {
			return nCalls(n, func(i int) *ToolCall { return b.call(at(i), "get_task", args, result) })
		}
	}
	const done = `{"status":"done","output":"42"}`
	runStuckCases(t, []stuckCase{
		// Not a kill reason: killed once the loop has lasted
		// kill.after_loop_calls (5) calls.
		{"a finished task read again: stuck at the 2nd read, killed at the 5th", nil, reads(5, `{"t":1}`, done),
			2, ReasonTerminalReread, 5, "loop detected: terminal result of get_task re-read (x2)"},
		{"a running task read again is an unchanged result, not a terminal re-read", nil, reads(2, `{"t":1}`, `{"status":"running"}`),
			2, ReasonUnchangedResult, 0, ""},
		{"a finished result whose output changed is progress", nil, func(b *callBuilder) []*ToolCall {
			return []*ToolCall{
				b.call(0, "get_task", `{"t":1}`, `{"status":"done","output":"41"}`),
				b.call(time.Second, "get_task", `{"t":1}`, `{"status":"done","output":"42"}`),
			}
		}, 0, ReasonNone, 0, ""},
		{"the same finished result with another call between: not in a row", nil, func(b *callBuilder) []*ToolCall {
			return []*ToolCall{
				b.call(0, "get_task", `{"t":1}`, done),
				b.call(time.Second, "notify", `{"msg":"task 1 done"}`, `{"sent":true}`),
				b.call(2*time.Second, "get_task", `{"t":1}`, done),
			}
		}, 0, ReasonNone, 0, ""},
		{"status-bearing result read again after edits (not a terminal re-read)", nil, func(b *callBuilder) []*ToolCall {
			return []*ToolCall{
				b.call(0, "read_file", `{"p":"a"}`, `{"status":"done","content":"v1"}`),
				b.call(time.Second, "edit", `{"p":"a","x":1}`, `{"ok":1}`),
				b.call(2*time.Second, "edit", `{"p":"a","x":2}`, `{"ok":2}`),
				b.call(3*time.Second, "run_tests", `{}`, `{"failed":1}`),
				b.call(4*time.Second, "read_file", `{"p":"a"}`, `{"status":"done","content":"v2"}`),
			}
		}, 0, ReasonNone, 0, ""},
		// A name-only read may be of another task: uncertain, never stuck.
		{"name-only reads of a finished result are not a re-read", nil, reads(4, "", done), 0, ReasonNone, 0, ""},
		// terminal_reread is deterministic: hysteresis never delays it (an
		// unchanged result would wait for three agreeing evaluations).
		{"hysteresis 3 does not delay it", func(c *Config) { c.Hysteresis.Evaluations = 3 }, reads(2, `{"t":1}`, done),
			2, ReasonTerminalReread, 0, ""},
		{"hysteresis 3 with terminal_reread off: two reads are not yet stuck", func(c *Config) { c.Hysteresis.Evaluations, c.TerminalReread.Enabled = 3, false },
			reads(2, `{"t":1}`, done), 0, ReasonNone, 0, ""},
		{"terminal_reread off: the second read is an unchanged result", func(c *Config) { c.TerminalReread.Enabled = false }, reads(2, `{"t":1}`, done),
			2, ReasonUnchangedResult, 0, "loop detected: same tool call get_task returned an identical result x2 in a row"},
	})
}
