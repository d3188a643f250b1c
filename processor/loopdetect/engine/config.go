package engine

import (
	"errors"
	"fmt"
	"time"
)

// Config holds the engine's thresholds. DefaultConfig documents each default.
type Config struct {
	// MaxSessions caps tracked sessions across the engine; once reached,
	// the least recently seen session of the new one's shard is evicted.
	MaxSessions int
	// IdleTimeout forgets a session with no call for this long (0: never).
	IdleTimeout time.Duration
	// HistorySize is how many calls per session are kept (bounded memory).
	HistorySize int
	// MaxPeriod is the longest cycle the periodicity check looks for.
	MaxPeriod int
	// MinRepetitions is how often a cycle must repeat to be loop-shaped.
	MinRepetitions int
	// FrequentWindow and FrequentThreshold: ≥ threshold identical calls among
	// the last window calls is stuck (the 1,972-call incident's rule). Threshold 0 disables it.
	FrequentWindow    int
	FrequentThreshold int
	// NameOnlyThreshold lets name-only signatures reach stuck when that many
	// identical ones are in the history (0: never; they stay uncertain).
	NameOnlyThreshold int
	// TerminalReread enables the async-task rule: re-reading a terminal result.
	// (The other async-task rule, an identical result twice in a row, is the
	// period-1 case of the periodic rule, reported as unchanged_result.)
	TerminalReread bool
	// LongCycleMinCalls: a run of at least this many calls, each repeating
	// an (action, result) pair of the session's recent past and together
	// covering a whole cycle, is stuck as long_cycle (0: off).
	LongCycleMinCalls int
	// ResultlessCycleMaxPeriod and ResultlessCycleRepetitions: a cycle of
	// period up to the first, repeated the second times by calls with
	// arguments but no results, is stuck as cycle_without_results
	// (repetitions 0: off).
	ResultlessCycleMaxPeriod   int
	ResultlessCycleRepetitions int
	// FailureStreak: this many non-retryable failures in a row of one tool
	// with one error class, whatever the arguments and with no successful
	// new call between, is stuck as failure_streak (0: off).
	FailureStreak int
	// UnknownToolStreak is the same for calls of a tool that does not
	// exist, reported as unknown_tool (0: off).
	UnknownToolStreak int
	// Backstop marks a session stuck when it has been active this long (0: off).
	Backstop time.Duration
	// Hysteresis is how many consecutive evaluations must show the same
	// cycle before a non-deterministic stuck verdict (1: at once).
	Hysteresis int
	// RetryableClasses are matched, case-insensitively, as substrings of the
	// error class.
	RetryableClasses []string
	// RetryPolicy is the default policy failures are held to.
	RetryPolicy RetryPolicy
	// BackoffTolerance is the fraction a gap may fall short of the policy.
	BackoffTolerance float64
	// MaxLeaseRenewals is how many renewals of a wait lease are honoured.
	MaxLeaseRenewals int
	// Kill is the kill policy.
	Kill KillPolicy
	// DigestKey keys the digests that leave the process.
	DigestKey []byte
}

// KillPolicy bounds when a stuck verdict becomes a kill request.
type KillPolicy struct {
	// Enabled turns kill decisions on.
	Enabled bool
	// DryRun marks kills in events without asking for them.
	DryRun bool
	// Reasons kill as soon as they make a session stuck.
	Reasons []Reason
	// AfterLoopCalls kills any stuck loop that has lasted this many calls (0: off).
	AfterLoopCalls int
	// AllowLowConfidence lets name-only evidence kill.
	AllowLowConfidence bool
	// MaxLoopTokens kills a stuck loop once its model calls have used this
	// many tokens since it began (0: off, the default).
	MaxLoopTokens int64
}

// DefaultRetryableClasses are the error classes retries are allowed for.
var DefaultRetryableClasses = []string{
	"rate_limit", "ratelimit", "rate limit", "429", "503", "502", "504", "timeout", "timed out",
	"unavailable", "throttl", "overloaded", "temporar", "connection reset",
}

// DefaultConfig returns the documented defaults (docs/design.md).
func DefaultConfig() Config {
	return Config{
		MaxSessions:       100_000,
		IdleTimeout:       30 * time.Minute,
		HistorySize:       12,
		MaxPeriod:         3,
		MinRepetitions:    2,
		FrequentWindow:    10,
		FrequentThreshold: 5,
		TerminalReread:    true,
		// Periods 4..24: the periodic rule covers 1..3 earlier.
		LongCycleMinCalls: 4,
		// Gemini CLI stops a cycle of up to 5 calls repeated 5 times.
		ResultlessCycleMaxPeriod:   5,
		ResultlessCycleRepetitions: 5,
		FailureStreak:              6,
		UnknownToolStreak:          3,
		Backstop:                   2 * time.Hour,
		Hysteresis:                 1,
		RetryableClasses:           append([]string(nil), DefaultRetryableClasses...),
		RetryPolicy:                RetryPolicy{InitialInterval: 2 * time.Second, BackoffRate: 2, MaxAttempts: 5},
		BackoffTolerance:           0.2,
		MaxLeaseRenewals:           3,
		Kill: KillPolicy{
			Enabled:        true,
			Reasons:        []Reason{ReasonFrequentIdentical, ReasonBackstop},
			AfterLoopCalls: 5,
		},
	}
}

// Validate reports the first inconsistent setting.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxSessions < 1 {
		errs = append(errs, fmt.Errorf("max_sessions must be ≥ 1, got %d", c.MaxSessions))
	}
	if c.HistorySize < 2 || c.HistorySize > 1024 {
		errs = append(errs, fmt.Errorf("history_size must be in 2..1024, got %d", c.HistorySize))
	}
	if c.MaxPeriod < 1 || c.MaxPeriod > 16 {
		errs = append(errs, fmt.Errorf("max_period must be in 1..16, got %d", c.MaxPeriod))
	}
	if c.MinRepetitions < 2 {
		errs = append(errs, fmt.Errorf("min_repetitions must be ≥ 2, got %d", c.MinRepetitions))
	}
	if c.MaxPeriod*c.MinRepetitions > c.HistorySize {
		errs = append(errs, fmt.Errorf("history_size (%d) must hold max_period × min_repetitions (%d) calls", c.HistorySize, c.MaxPeriod*c.MinRepetitions))
	}
	if c.FrequentThreshold < 0 || (c.FrequentThreshold > 0 && (c.FrequentWindow < c.FrequentThreshold || c.FrequentWindow > c.HistorySize)) {
		errs = append(errs, fmt.Errorf("frequent_identical: threshold (%d) must be ≤ window (%d) ≤ history_size (%d)", c.FrequentThreshold, c.FrequentWindow, c.HistorySize))
	}
	if c.NameOnlyThreshold < 0 || c.NameOnlyThreshold > c.HistorySize {
		errs = append(errs, fmt.Errorf("name_only_threshold must be in 0..history_size (%d), got %d", c.HistorySize, c.NameOnlyThreshold))
	}
	if c.LongCycleMinCalls < 0 || c.LongCycleMinCalls > recentCalls {
		errs = append(errs, fmt.Errorf("long_cycle.min_calls must be in 0..%d, got %d", recentCalls, c.LongCycleMinCalls))
	}
	if c.ResultlessCycleRepetitions != 0 && (c.ResultlessCycleRepetitions < 2 || c.ResultlessCycleMaxPeriod < 1 || c.ResultlessCycleMaxPeriod > maxResultlessPeriod) {
		errs = append(errs, fmt.Errorf("cycle_without_results: repetitions (%d) must be 0 or ≥ 2 and max_period (%d) in 1..%d", c.ResultlessCycleRepetitions, c.ResultlessCycleMaxPeriod, maxResultlessPeriod))
	}
	if c.FailureStreak < 0 || c.UnknownToolStreak < 0 {
		errs = append(errs, fmt.Errorf("failure_streak: threshold (%d) and unknown_tool_threshold (%d) must not be negative", c.FailureStreak, c.UnknownToolStreak))
	}
	if c.Backstop < 0 || c.IdleTimeout < 0 {
		errs = append(errs, errors.New("backstop and idle_timeout must not be negative"))
	}
	if c.Hysteresis < 1 {
		errs = append(errs, fmt.Errorf("hysteresis must be ≥ 1, got %d", c.Hysteresis))
	}
	if c.RetryPolicy.InitialInterval < 0 || c.RetryPolicy.BackoffRate < 1 || c.RetryPolicy.MaxAttempts < 1 {
		errs = append(errs, errors.New("retry: initial_interval ≥ 0, backoff_rate ≥ 1 and max_attempts ≥ 1 are required"))
	}
	if c.BackoffTolerance < 0 || c.BackoffTolerance >= 1 {
		errs = append(errs, fmt.Errorf("retry.tolerance must be in [0,1), got %v", c.BackoffTolerance))
	}
	if c.MaxLeaseRenewals < 0 {
		errs = append(errs, fmt.Errorf("lease.max_renewals must be ≥ 0, got %d", c.MaxLeaseRenewals))
	}
	if c.Kill.MaxLoopTokens < 0 {
		errs = append(errs, fmt.Errorf("kill.max_loop_tokens must be ≥ 0, got %d", c.Kill.MaxLoopTokens))
	}
	if c.Kill.AfterLoopCalls < 0 {
		errs = append(errs, fmt.Errorf("kill.after_loop_calls must be ≥ 0, got %d", c.Kill.AfterLoopCalls))
	}
	return errors.Join(errs...)
}
