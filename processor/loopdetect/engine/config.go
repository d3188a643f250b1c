package engine

import (
	"errors"
	"fmt"
	"time"
)

// Config holds the engine's settings: the session table's here, each
// rule's in the rule's own file (rule_*.go), defined, defaulted and checked
// there. The mapstructure tags are the loop_detect processor's YAML keys:
// its Config embeds this one. Rule settings embedded with `squash` keep
// their keys at the top level of the processor's configuration.
type Config struct {
	// MaxSessions caps tracked sessions across the processor; nothing is
	// evicted before it is reached (then the least recently seen session
	// of the new one's shard). Default 100000.
	MaxSessions int `mapstructure:"max_sessions"`
	// IdleTimeout forgets sessions without calls for this long (0: never).
	// Default 30m.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// HistorySize is the calls kept per session. Default 12.
	HistorySize int `mapstructure:"history_size"`

	// The rules' settings, each defined in its rule's file.
	PeriodicLoopConfig   `mapstructure:",squash"`
	FrequentIdentical    FrequentIdenticalConfig `mapstructure:"frequent_identical"`
	NameOnlyConfig       `mapstructure:",squash"`
	TerminalRereadConfig `mapstructure:",squash"`
	LongCycle            LongCycleConfig           `mapstructure:"long_cycle"`
	CycleWithoutResults  CycleWithoutResultsConfig `mapstructure:"cycle_without_results"`
	FailureStreak        FailureStreakConfig       `mapstructure:"failure_streak"`
	BackstopConfig       `mapstructure:",squash"`
	HysteresisConfig     `mapstructure:",squash"`
	Retry                RetryConfig        `mapstructure:"retry"`
	Lease                LeaseConfig        `mapstructure:"lease"`
	ImplicitWait         ImplicitWaitConfig `mapstructure:"implicit_wait"`
	Kill                 KillPolicy         `mapstructure:"kill"`

	// DigestKey keys the digests that leave the process. Not a YAML key
	// here: the processor reads it as an opaque string (digest_key) so it
	// is never printed, and sets it.
	DigestKey []byte `mapstructure:"-"`
}

// DefaultConfig returns the documented defaults: each rule's from its file.
func DefaultConfig() Config {
	return Config{
		MaxSessions:          100_000,
		IdleTimeout:          30 * time.Minute,
		HistorySize:          12,
		PeriodicLoopConfig:   defaultPeriodicLoop(),
		FrequentIdentical:    defaultFrequentIdentical(),
		TerminalRereadConfig: defaultTerminalReread(),
		LongCycle:            defaultLongCycle(),
		CycleWithoutResults:  defaultCycleWithoutResults(),
		FailureStreak:        defaultFailureStreak(),
		BackstopConfig:       defaultBackstop(),
		HysteresisConfig:     defaultHysteresis(),
		Retry:                defaultRetry(),
		Lease:                defaultLease(),
		ImplicitWait:         defaultImplicitWait(),
		Kill:                 defaultKill(),
	}
}

// Check reports every inconsistent setting, each naming its YAML key and
// value. It is not called Validate so that confmap.Validate, which walks
// the processor's configuration and this embedded one with it, does not
// report the same errors a second time under the embedded field's name:
// the processor's Validate calls it.
func (c *Config) Check() error {
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
		c.PeriodicLoopConfig.check(c.HistorySize),
		c.FrequentIdentical.check(c.HistorySize),
		c.NameOnlyConfig.check(c.HistorySize),
		c.LongCycle.check(),
		c.CycleWithoutResults.check(),
		c.FailureStreak.check(),
		c.BackstopConfig.check(),
		c.HysteresisConfig.check(),
		c.Retry.check(),
		c.Lease.check(),
		c.ImplicitWait.check(),
		c.Kill.check(),
	)
	return errors.Join(errs...)
}
