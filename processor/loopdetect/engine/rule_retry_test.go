package engine

import (
	"fmt"
	"testing"
	"time"
)

// TestRetryPolicyJudgesARunOfIdenticalFailures: identical calls failing
// with a retryable class, within the attempt budget and keeping the
// backoff (2 s doubling, 20% tolerance, 5 attempts by default), are
// retrying (retryPolicyRule); the same run over the budget, faster than
// the backoff or with a non-retryable class is stuck with that reason
// (failedRepetitionRule).
//
//nolint:funlen // one table of cases, read top to bottom
func TestRetryPolicyJudgesARunOfIdenticalFailures(t *testing.T) {
	// backoff is the default policy's schedule: 2 s, 4 s, 8 s, 16 s, 32 s apart.
	backoff := []time.Duration{0, 2 * time.Second, 6 * time.Second, 14 * time.Second, 30 * time.Second, 62 * time.Second}
	fetches := func(times []time.Duration, class string, edit func(i int, c *ToolCall)) func(b *callBuilder) []*ToolCall {
		return func(b *callBuilder) []*ToolCall {
			return nCalls(len(times), func(i int) *ToolCall {
				c := failing(b.call(times[i], "fetch", `{"u":"/api/items"}`, ""), class, "")
				if edit != nil {
					edit(i, c)
				}
				return c
			})
		}
	}
	everySecond := func(n int) []time.Duration {
		ts := make([]time.Duration, n)
		for i := range ts {
			ts[i] = time.Duration(i) * time.Second
		}
		return ts
	}
	quota := func(c *Config) { c.Retry.RetryableClasses = []string{"quota"} }
	tests := []struct {
		name         string
		mod          func(*Config)
		calls        func(b *callBuilder) []*ToolCall
		retryingAt   int64 // first retrying call, 0: never
		retryExplain string
		stuckAt      int64 // first stuck call, 0: never
		reason       Reason
		stuckExplain string
		killAt       int64 // first kill, 0: none
	}{
		{"retryable failures keeping the backoff: retrying from the 2nd, exhausted at the 6th", nil, fetches(backoff, "rate_limit", nil),
			2, `retrying: fetch attempt 2 of 5 after "rate_limit", backoff kept`,
			6, ReasonRetryExhausted, "loop detected: fetch failed 6 attempts, over the retry budget of 5", 6},
		// 0.8 × 2 s: the gap at the tolerance is kept, a nanosecond less is not.
		{"a gap of exactly 80% of the backoff is kept", nil, fetches([]time.Duration{0, 1600 * time.Millisecond}, "rate_limit", nil),
			2, "", 0, ReasonNone, "", 0},
		{"a gap a nanosecond short of 80% has collapsed the backoff", nil, fetches([]time.Duration{0, 1600*time.Millisecond - 1}, "rate_limit", nil),
			0, "", 2, ReasonBackoffCollapsed, `loop detected: fetch retried x2 faster than the backoff policy after "rate_limit"`, 0},
		// Not a kill reason: killed once the loop has lasted 5 calls.
		{"retries a second apart: collapsed at the 2nd, killed at the 5th", nil, fetches(everySecond(5), "rate_limit", nil),
			0, "", 2, ReasonBackoffCollapsed, "", 5},
		{"tolerance 0: a gap of 1.99 s has collapsed", func(c *Config) { c.Retry.Tolerance = 0 },
			fetches([]time.Duration{0, 1990 * time.Millisecond}, "rate_limit", nil), 0, "", 2, ReasonBackoffCollapsed, "", 0},
		// This case used to space the calls 1 s, 2 s, 4 s… apart, so its
		// second call collapsed the backoff (1 s < 1.6 s) and the budget was
		// never reached: it passed whatever the attempt attribute did. On
		// the policy's schedule only the budget can make it stuck: the
		// attempt is the larger of the attribute and the call's place in
		// the run (6), not the attribute (1).
		{"an attempt attribute stuck at 1 cannot stretch the retry budget", nil,
			fetches(backoff, "rate_limit", func(_ int, c *ToolCall) { c.Attempt = 1 }),
			2, "", 6, ReasonRetryExhausted, "loop detected: fetch failed 6 attempts, over the retry budget of 5", 6},
		{"an attempt attribute may add attempts: attempt 6 at the 2nd call is over the budget", nil,
			fetches(backoff[:2], "rate_limit", func(i int, c *ToolCall) { c.Attempt = 5 + i }),
			0, "", 2, ReasonRetryExhausted, "loop detected: fetch failed 6 attempts, over the retry budget of 5", 0},
		{"the span's declared policy replaces the configured one", nil,
			fetches(everySecond(4), "rate_limit", func(_ int, c *ToolCall) {
				c.Policy = RetryPolicy{InitialInterval: time.Second, BackoffRate: 1, MaxAttempts: 3}
			}),
			2, `retrying: fetch attempt 2 of 3 after "rate_limit", backoff kept`,
			4, ReasonRetryExhausted, "loop detected: fetch failed 4 attempts, over the retry budget of 3", 0},
		{"max_attempts 1: the second attempt is over the budget", func(c *Config) { c.Retry.MaxAttempts = 1 },
			fetches(backoff[:2], "rate_limit", nil), 0, "", 2, ReasonRetryExhausted, "", 0},
		{"the same call failing with a non-retryable class: stuck at the 2nd", nil, func(b *callBuilder) []*ToolCall {
			return nCalls(2, func(i int) *ToolCall {
				return failing(b.call(backoff[i], "read", `{"p":"x.txt"}`, ""), "FileNotFoundError", "no such file 'x.txt'")
			})
		}, 0, "", 2, ReasonNonRetryableError, `loop detected: read failed x2 with non-retryable error "FileNotFoundError": "no such file 'x.txt'"`, 0},
		// A failure's evidence is its class and its masked texts: a raw
		// request id in the result is not a new failure.
		{"changing error texts are not progress", nil, func(b *callBuilder) []*ToolCall {
			return nCalls(6, func(i int) *ToolCall {
				c := b.call(time.Duration(i)*time.Second, "read", `{"p":"/x"}`, fmt.Sprintf("Error: no such file (request %d)", i))
				return failing(c, "FileNotFoundError", "")
			})
		}, 0, "", 2, ReasonNonRetryableError, "", 5},
		{"retryable failures of different calls are no retry run", nil, func(b *callBuilder) []*ToolCall {
			return nCalls(6, func(i int) *ToolCall {
				return failing(b.call(backoff[i], "fetch", fmt.Sprintf(`{"u":"/api/items/%d"}`, i), ""), "rate_limit", "")
			})
		}, 0, "", 0, ReasonNone, "", 0},
		{"retryable_classes [quota]: QuotaExceeded is retried", quota, fetches(backoff[:3], "QuotaExceeded", nil),
			2, `retrying: fetch attempt 2 of 5 after "QuotaExceeded", backoff kept`, 0, ReasonNone, "", 0},
		{"retryable_classes [quota]: rate_limit is not", quota, fetches(backoff[:3], "rate_limit", nil),
			0, "", 2, ReasonNonRetryableError, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := mustEngine(t, tt.mod)
			tr := observeAll(e, tt.calls(newBuilder("s")))
			checkFirstTransition(t, tr, StateRetrying, tt.retryingAt, ReasonRetryPolicy, tt.retryExplain)
			checkFirstTransition(t, tr, StateStuck, tt.stuckAt, tt.reason, tt.stuckExplain)
			checkKillAt(t, tr, tt.killAt)
		})
	}
}

// TestRetryConfigNamesItsKey: the default retry policy is checked under
// retry.*.
func TestRetryConfigNamesItsKey(t *testing.T) {
	runConfigCases(t, []configCase{
		{"backoff below one", func(c *Config) { c.Retry.BackoffRate = 0.5 }, "backoff_rate"},
		{"backoff rate one: a constant interval", func(c *Config) { c.Retry.BackoffRate = 1 }, ""},
		{"tolerance one", func(c *Config) { c.Retry.Tolerance = 1 }, "retry.tolerance"},
		{"negative tolerance", func(c *Config) { c.Retry.Tolerance = -0.1 }, "retry.tolerance must be in [0,1), got -0.1"},
		{"tolerance zero", func(c *Config) { c.Retry.Tolerance = 0 }, ""},
		{"negative initial interval", func(c *Config) { c.Retry.InitialInterval = -time.Second }, "retry.initial_interval must not be negative, got -1s"},
		{"no attempts", func(c *Config) { c.Retry.MaxAttempts = 0 }, "retry.max_attempts must be ≥ 1, got 0"},
		{"one attempt", func(c *Config) { c.Retry.MaxAttempts = 1 }, ""},
	})
}
