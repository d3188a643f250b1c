package engine

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
)

// retryOutcome judges a run of identical failing calls against the retry
// policy (the span's declared policy, else the configured one).
type retryOutcome uint8

const (
	retryNone retryOutcome = iota
	retryOK
	retryNonRetryable
	retryCollapsed
	retryExhausted
)

// retryRun is the run of identical failing calls that ends the history.
type retryRun struct {
	outcome         retryOutcome
	run             int
	attempt, budget int
}

// retry judges the run of identical failing calls that ends the history,
// like a workflow retrier: a matched error class, the attempt number and
// the real gaps between attempts.
func (e *Engine) retry(s *session) retryRun {
	h := s.hist
	n := len(h)
	if n == 0 || !h[n-1].has(fFailed) {
		return retryRun{}
	}
	last := &h[n-1]
	r := 1
	for i := n - 2; i >= 0 && h[i].sig == last.sig && h[i].has(fFailed); i-- {
		r++
	}
	if r < 2 {
		return retryRun{}
	}
	pol := e.cfg.Retry.RetryPolicy
	if s.extra != nil && s.extra.policy.MaxAttempts > 0 {
		pol = s.extra.policy
	}
	// The attribute may only add attempts: an agent reporting attempt 1
	// forever must not stretch the budget.
	attemptOf := func(pos, nth int) int {
		return max(int(h[pos].attempt), nth)
	}
	run := retryRun{run: r, attempt: attemptOf(n-1, r), budget: pol.MaxAttempts}
	switch {
	case !last.has(fRetryable):
		run.outcome = retryNonRetryable
		return run
	case run.attempt > pol.MaxAttempts:
		run.outcome = retryExhausted
		return run
	}
	for k := 1; k < r; k++ {
		pos := n - r + k
		a := attemptOf(pos, k+1)
		want := float64(pol.InitialInterval) * math.Pow(pol.BackoffRate, float64(max(a-2, 0)))
		gap := float64(h[pos].start - h[pos-1].start)
		if gap < want*(1-e.cfg.Retry.Tolerance) {
			run.outcome = retryCollapsed
			return run
		}
	}
	run.outcome = retryOK
	return run
}

// retryPolicyRule: identical calls failing with a retryable error class,
// within the attempt budget and keeping the backoff, are retrying (the
// provider-rate-limit case: three calls, 2 s then 4 s apart).
type retryPolicyRule struct{}

func (retryPolicyRule) evaluate(w *window, v *verdict) bool {
	rr := w.retryRun()
	if rr.outcome != retryOK {
		return false
	}
	n := len(w.history)
	*v = verdict{state: StateRetrying, reason: ReasonRetryPolicy, period: 1, reps: rr.run, loopStart: n - rr.run, window: n, attempt: rr.attempt, maxTry: rr.budget}
	return true
}

func (retryPolicyRule) explain(b *strings.Builder, w *window, v verdict) {
	fmt.Fprintf(b, "retrying: %s attempt %d of %d after %q, backoff kept", w.toolName(), v.attempt, v.maxTry, w.session.errClass())
}

// failedRepetitionRule: a loop (any stall rule) made of failing calls the
// retry policy does not explain is stuck with the failure's reason: a
// non-retryable error, retries faster than the backoff, or more attempts
// than the budget. The loop's shape (period, start) is the stall rule's.
type failedRepetitionRule struct{}

func (failedRepetitionRule) evaluate(w *window, v *verdict) bool {
	rr := w.retryRun()
	var reason Reason
	switch rr.outcome {
	case retryNonRetryable:
		reason = ReasonNonRetryableError
	case retryCollapsed:
		reason = ReasonBackoffCollapsed
	case retryExhausted:
		reason = ReasonRetryExhausted
	default:
		return false
	}
	for _, r := range &stallRules {
		if r.evaluate(w, v) {
			v.reason, v.count, v.attempt, v.maxTry = reason, rr.run, rr.attempt, rr.budget
			v.cycleKey = cycleKey(w.history, v.period)
			return true
		}
	}
	return false
}

func (failedRepetitionRule) explain(b *strings.Builder, w *window, v verdict) {
	switch v.reason {
	case ReasonNonRetryableError:
		fmt.Fprintf(b, "loop detected: %s failed x%d with non-retryable error %q", w.toolName(), v.count, w.session.errClass())
		w.session.quoteErrText(b)
	case ReasonBackoffCollapsed:
		fmt.Fprintf(b, "loop detected: %s retried x%d faster than the backoff policy after %q", w.toolName(), v.count, w.session.errClass())
	default:
		fmt.Fprintf(b, "loop detected: %s failed %d attempts, over the retry budget of %d", w.toolName(), v.attempt, v.maxTry)
	}
}

// RetryConfig is the default retry policy, for agents that declare none,
// and the retryable error classes (retry).
type RetryConfig struct {
	// RetryableClasses match error classes as case-insensitive substrings.
	// Default: rate_limit, 429, 503, timeout, unavailable, throttl, overloaded….
	RetryableClasses []string `mapstructure:"retryable_classes"`
	// RetryPolicy is the policy failures are held to.
	RetryPolicy `mapstructure:",squash"`
	// Tolerance is the fraction a gap may fall short. Default 0.2.
	Tolerance float64 `mapstructure:"tolerance"`
}

// DefaultRetryableClasses are the error classes retries are allowed for.
var DefaultRetryableClasses = []string{
	"rate_limit", "ratelimit", "rate limit", "429", "503", "502", "504", "timeout", "timed out",
	"unavailable", "throttl", "overloaded", "temporar", "connection reset",
}

func defaultRetry() RetryConfig {
	return RetryConfig{
		RetryableClasses: append([]string(nil), DefaultRetryableClasses...),
		RetryPolicy:      RetryPolicy{InitialInterval: 2 * time.Second, BackoffRate: 2, MaxAttempts: 5},
		Tolerance:        0.2,
	}
}

func (c RetryConfig) check() error {
	var errs []error
	if c.InitialInterval < 0 {
		errs = append(errs, fmt.Errorf("retry.initial_interval must not be negative, got %s", c.InitialInterval))
	}
	if c.BackoffRate < 1 {
		errs = append(errs, fmt.Errorf("retry.backoff_rate must be ≥ 1, got %v", c.BackoffRate))
	}
	if c.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("retry.max_attempts must be ≥ 1, got %d", c.MaxAttempts))
	}
	if c.Tolerance < 0 || c.Tolerance >= 1 {
		errs = append(errs, fmt.Errorf("retry.tolerance must be in [0,1), got %v", c.Tolerance))
	}
	return errors.Join(errs...)
}
