package engine

import (
	"errors"
	"fmt"
	"time"
)

// Config holds the engine's settings: the session table's here, each
// rule's in the rule's own file (rule_*.go), defined, defaulted and checked
// there. The mapstructure tags are the loop_detect processor's YAML keys:
// its Config embeds this one, so the table's keys and one key per rule sit
// at the top level of the processor's configuration.
type Config struct {
	// MaxSessions caps tracked sessions across the processor; nothing is
	// evicted before it is reached (then a session without a call for 5
	// minutes, else the newest session of the sender holding the most
	// sessions of a shard). Default 100000.
	MaxSessions int `mapstructure:"max_sessions"`
	// IdleTimeout forgets sessions without calls for this long (0: never).
	// Default 30m.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// HistorySize is the calls kept per session. Default 12.
	HistorySize int `mapstructure:"history_size"`

	// PeriodicLoop is the periodic-loop rule's (rule_periodic.go). Default
	// max_period 3, min_repetitions 2.
	PeriodicLoop PeriodicLoopConfig `mapstructure:"periodic_loop"`
	// FrequentIdentical is the frequent-identical rule's
	// (rule_frequent_identical.go). Default window 10, threshold 5.
	FrequentIdentical FrequentIdenticalConfig `mapstructure:"frequent_identical"`
	// NameOnly is the name-only rule's (rule_name_only.go). Default
	// threshold 0 (off).
	NameOnly NameOnlyConfig `mapstructure:"name_only"`
	// TerminalReread is the terminal re-read rule's (rule_terminal.go).
	// Default enabled.
	TerminalReread TerminalRereadConfig `mapstructure:"terminal_reread"`
	// LongCycle is the long-cycle rule's (rule_long_cycle.go). Default
	// min_calls 4.
	LongCycle LongCycleConfig `mapstructure:"long_cycle"`
	// CycleWithoutResults is the cycle-without-results rule's
	// (rule_cycle_without_results.go). Default max_period 5, repetitions 5.
	CycleWithoutResults CycleWithoutResultsConfig `mapstructure:"cycle_without_results"`
	// FailureStreak is the failure-streak rule's (rule_failure_streak.go).
	// Default threshold 6, unknown_tool_threshold 3.
	FailureStreak FailureStreakConfig `mapstructure:"failure_streak"`
	// Backstop is the backstop rule's (rule_backstop.go). Default
	// max_duration 2h.
	Backstop BackstopConfig `mapstructure:"backstop"`
	// Hysteresis delays non-deterministic stuck verdicts (hysteresis.go).
	// Default evaluations 1 (off).
	Hysteresis HysteresisConfig `mapstructure:"hysteresis"`
	// Retry is the default retry policy and its rules' (rule_retry.go).
	// Defaults in defaultRetry.
	Retry RetryConfig `mapstructure:"retry"`
	// Lease bounds wait leases (rule_lease.go). Default max_renewals 3.
	Lease LeaseConfig `mapstructure:"lease"`
	// ImplicitWait bounds implicit wait leases (rule_implicit_wait.go).
	// Defaults in defaultImplicitWait.
	ImplicitWait ImplicitWaitConfig `mapstructure:"implicit_wait"`
	// Kill is the kill policy (killpolicy.go). Default off.
	Kill KillPolicy `mapstructure:"kill"`

	// DigestKey keys the digests that leave the process. Not a YAML key
	// here: the processor reads it as an opaque string (digest_key) so it
	// is never printed, and sets it.
	DigestKey []byte `mapstructure:"-"`
}

// DefaultConfig returns the documented defaults: each rule's from its file.
func DefaultConfig() Config {
	return Config{
		MaxSessions:         100_000,
		IdleTimeout:         30 * time.Minute,
		HistorySize:         12,
		PeriodicLoop:        defaultPeriodicLoop(),
		FrequentIdentical:   defaultFrequentIdentical(),
		TerminalReread:      defaultTerminalReread(),
		LongCycle:           defaultLongCycle(),
		CycleWithoutResults: defaultCycleWithoutResults(),
		FailureStreak:       defaultFailureStreak(),
		Backstop:            defaultBackstop(),
		Hysteresis:          defaultHysteresis(),
		Retry:               defaultRetry(),
		Lease:               defaultLease(),
		ImplicitWait:        defaultImplicitWait(),
		Kill:                defaultKill(),
	}
}

// Validate reports every inconsistent setting, each naming its YAML key
// and value. The rules' checks are here rather than Validate methods of
// their own because three of them depend on history_size.
func (c *Config) Validate() error {
	var errs []error
	if c.MaxSessions < 1 {
		errs = append(errs, fmt.Errorf("max_sessions must be ≥ 1, got %d", c.MaxSessions))
	}
	if c.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("idle_timeout must not be negative (0 never forgets), got %s", c.IdleTimeout))
	}
	if c.HistorySize < 2 || c.HistorySize > 1024 {
		errs = append(errs, fmt.Errorf("history_size must be in 2..1024, got %d", c.HistorySize))
	}
	errs = append(errs,
		c.PeriodicLoop.check(c.HistorySize),
		c.FrequentIdentical.check(c.HistorySize),
		c.NameOnly.check(c.HistorySize),
		c.LongCycle.check(),
		c.CycleWithoutResults.check(),
		c.FailureStreak.check(),
		c.Backstop.check(),
		c.Hysteresis.check(),
		c.Retry.check(),
		c.Lease.check(),
		c.ImplicitWait.check(),
		c.Kill.check(),
	)
	return errors.Join(errs...)
}
