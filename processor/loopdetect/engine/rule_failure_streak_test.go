package engine

import (
	"fmt"
	"testing"
	"time"
)

// TestFailureStreakIsOneToolFailingOneWay: one tool failing with one
// non-retryable error class, whatever its arguments, with no successful
// new call between, is stuck at the 6th failure (a tool that does not
// exist at the 3rd); a success that brings something new, another class
// or tool, a moved error and a retryable class all break the streak.
func TestFailureStreakIsOneToolFailingOneWay(t *testing.T) {
	at := func(i int) time.Duration { return time.Duration(i) * time.Second }
	// missing is the i-th read of a file that does not exist.
	missing := func(b *callBuilder, i int, tool, class string) *ToolCall {
		return failing(b.call(at(i), tool, fmt.Sprintf(`{"p":"f%d.go"}`, i), ""), class, fmt.Sprintf("no such file 'f%d.go'", i))
	}
	reads := func(from, n int, class string) func(b *callBuilder) []*ToolCall {
		return func(b *callBuilder) []*ToolCall {
			return nCalls(n, func(i int) *ToolCall { return missing(b, from+i, "read_file", class) })
		}
	}
	join := func(parts ...func(b *callBuilder) []*ToolCall) func(b *callBuilder) []*ToolCall {
		return func(b *callBuilder) []*ToolCall {
			var cs []*ToolCall
			for _, p := range parts {
				cs = append(cs, p(b)...)
			}
			return cs
		}
	}
	one := func(i int, tool, args, result string) func(b *callBuilder) []*ToolCall {
		return func(b *callBuilder) []*ToolCall { return []*ToolCall{b.call(at(i), tool, args, result)} }
	}
	unknown := func(n int) func(b *callBuilder) []*ToolCall {
		return func(b *callBuilder) []*ToolCall {
			return nCalls(n, func(i int) *ToolCall {
				c := failing(b.call(at(i), "web_search", fmt.Sprintf(`{"q":"query %d"}`, i), ""), "ToolException", "")
				c.UnknownTool = true
				return c
			})
		}
	}
	const notFound = "FileNotFoundError"
	runStuckCases(t, []stuckCase{
		// Not a kill reason: the 6 calls are kill.after_loop_calls (5) and more.
		{"one tool failing one way with new arguments each time: stuck and killed at the 6th", nil, reads(0, 8, notFound),
			6, ReasonFailureStreak, 6, `loop detected: read_file failed x6 in a row with "FileNotFoundError": "no such file 'f5.go'", whatever its arguments`},
		{"a tool that does not exist: unknown_tool at the 3rd call, killed at the 5th", nil, unknown(5),
			3, ReasonUnknownTool, 5, `loop detected: web_search called x3 but no such tool exists ("ToolException")`},
		{"a successful call with a new result between ends the streak", nil,
			join(reads(0, 5, notFound), one(5, "list_dir", `{"d":"."}`, `{"files":["main.go"]}`), reads(6, 5, notFound)),
			0, ReasonNone, 0, ""},
		// The listing at call 5 repeats call 1 and its result: nothing new,
		// so the streak runs on from call 2 to its 6th failure at call 8.
		{"a success that repeats an earlier call and result does not end it", nil,
			join(one(0, "list_dir", `{"d":"."}`, `{"files":["main.go"]}`), reads(1, 3, notFound),
				one(4, "list_dir", `{"d":"."}`, `{"files":["main.go"]}`), reads(5, 3, notFound)),
			8, ReasonFailureStreak, 8, ""},
		{"another error class starts a new streak: 5 then 6 is stuck at the 11th", nil,
			join(reads(0, 5, notFound), reads(5, 6, "PermissionError")),
			11, ReasonFailureStreak, 11, `loop detected: read_file failed x6 in a row with "PermissionError": "no such file 'f10.go'", whatever its arguments`},
		{"another tool's failure starts a new streak", nil, join(reads(0, 5, notFound), func(b *callBuilder) []*ToolCall {
			return []*ToolCall{missing(b, 5, "write_file", notFound)}
		}, reads(6, 5, notFound)), 0, ReasonNone, 0, ""},
		{"retryable failures are the retry policy's, not a streak", nil, reads(0, 8, "rate_limit"), 0, ReasonNone, 0, ""},
		// A syntax error that moves from line to line is a new result of
		// the same action each time: the fix is getting somewhere.
		{"the same action failing with a moved error is progress", nil, func(b *callBuilder) []*ToolCall {
			return nCalls(8, func(i int) *ToolCall {
				c := failing(b.call(at(i), "run", `{"f":"app.py"}`, ""), "SyntaxError", fmt.Sprintf("invalid syntax (line %d)", 10*(i+1)))
				c.Fingerprint, c.FingerprintSource = FailureDigest(c.ErrorClass, b.n.Failure(c.ErrorClass, c.ErrorText, "").Text), FingerprintError
				return c
			})
		}, 0, ReasonNone, 0, ""},
		{"threshold 0: eight failures stay working", func(c *Config) { c.FailureStreak.Threshold = 0 }, reads(0, 8, notFound), 0, ReasonNone, 0, ""},
		{"threshold 2: stuck at the 2nd failure", func(c *Config) { c.FailureStreak.Threshold = 2 }, reads(0, 2, notFound),
			2, ReasonFailureStreak, 0, ""},
		// A missing tool's failures count against their own threshold
		// alone: with it off, threshold (6) does not take over.
		{"unknown_tool_threshold 0: eight calls of a missing tool stay working", func(c *Config) { c.FailureStreak.UnknownToolThreshold = 0 },
			unknown(8), 0, ReasonNone, 0, ""},
	})
}

// TestFailureStreakConfigNamesItsKey: both thresholds are checked under
// failure_streak.
func TestFailureStreakConfigNamesItsKey(t *testing.T) {
	runConfigCases(t, []configCase{
		{"negative failure streak", func(c *Config) { c.FailureStreak.Threshold = -1 }, "failure_streak"},
		{"negative unknown-tool streak", func(c *Config) { c.FailureStreak.UnknownToolThreshold = -1 }, "unknown_tool_threshold"},
		{"both off", func(c *Config) { c.FailureStreak = FailureStreakConfig{} }, ""},
	})
}
