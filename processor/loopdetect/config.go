package loopdetect

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/config/configopaque"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// Config is the loop_detect processor's configuration. Every default is
// the one createDefaultConfig sets and the README lists.
type Config struct {
	// Attributes maps span attributes to tool-call facts. Each list replaces
	// its default when set; defaults in extract.DefaultKeys. Its `session`
	// list is rejected: the session key is Session.Keys.
	Attributes extract.Keys `mapstructure:"attributes"`
	// Session chooses the session key: attribute keys looked up on the
	// span, then the resource; none (default) means the trace id.
	Session SessionConfig `mapstructure:"session"`
	// Normalizer configures argument and result canonicalization.
	Normalizer NormalizerConfig `mapstructure:"normalizer"`
	// MaxSessions caps tracked sessions across the processor; nothing is
	// evicted before it is reached (then LRU). Default 100000.
	MaxSessions int `mapstructure:"max_sessions"`
	// IdleTimeout forgets sessions without calls for this long. Default 30m.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// HistorySize is the calls kept per session. Default 12.
	HistorySize int `mapstructure:"history_size"`
	// MaxPeriod is the longest cycle looked for. Default 3.
	MaxPeriod int `mapstructure:"max_period"`
	// MinRepetitions is how often a cycle must repeat. Default 2.
	MinRepetitions int `mapstructure:"min_repetitions"`
	// FrequentIdentical is the rule from the 1,972-call incident (the same
	// call repeated verbatim). Default 5 of the last 10.
	FrequentIdentical FrequentConfig `mapstructure:"frequent_identical"`
	// NameOnlyThreshold lets that many identical argument-less calls reach
	// stuck; 0 (default) keeps them at uncertain.
	NameOnlyThreshold int `mapstructure:"name_only_threshold"`
	// TerminalReread enables the terminal re-read rule (an agent re-reading a
	// completed async task result). Default true.
	TerminalReread bool `mapstructure:"terminal_reread"`
	// LongCycle is the rule for cycles longer than max_period (up to 24
	// calls) that bring nothing new.
	LongCycle LongCycleConfig `mapstructure:"long_cycle"`
	// CycleWithoutResults is the rule for short cycles repeated many times
	// by calls that record arguments but no results.
	CycleWithoutResults ResultlessCycleConfig `mapstructure:"cycle_without_results"`
	// FailureStreak is the rule for one tool failing the same way again and
	// again, whatever its arguments.
	FailureStreak FailureStreakConfig `mapstructure:"failure_streak"`
	// Backstop marks a session stuck after this long (0 disables). Default 2h.
	Backstop time.Duration `mapstructure:"backstop"`
	// Hysteresis is how many consecutive evaluations must agree before a
	// non-deterministic stuck verdict. Default 1 (off).
	Hysteresis int `mapstructure:"hysteresis"`
	// Retry is the default retry policy and the retryable error classes.
	Retry RetryConfig `mapstructure:"retry"`
	// Lease bounds wait leases.
	Lease LeaseConfig `mapstructure:"lease"`
	// Kill is the kill policy.
	Kill KillConfig `mapstructure:"kill"`
	// DigestKey keys the evidence digests written into events (HMAC).
	// Usually ${env:LOOPDETECT_DIGEST_KEY}. Default empty (digests still
	// keyed, but with an empty key: set one in production).
	DigestKey configopaque.String `mapstructure:"digest_key"`
	// RequireDigestKey makes an empty digest_key a configuration error
	// instead of unkeyed digests in events that leave the process. Default
	// false; every shipped configuration that is not loopback-only sets it.
	RequireDigestKey bool `mapstructure:"require_digest_key"`
	// TickInterval is how often timers (lease expiry, backstop, idle
	// expiry) are checked. Default 1s.
	TickInterval time.Duration `mapstructure:"tick_interval"`
	// EventTime makes the clock follow span end times instead of the wall
	// clock, for replaying recorded traces. Default false: the wall clock,
	// read once per batch, so the decisions of one batch share its time.
	EventTime bool `mapstructure:"event_time"`

	// observer, when set by ObserveCalls, sees every tool call read (replay audits).
	observer func(*Observation)
}

// SessionConfig chooses the session key.
type SessionConfig struct {
	// Keys are attribute keys for the session id (span first, then
	// resource), e.g. gen_ai.conversation.id. Default none: the trace id.
	Keys []string `mapstructure:"keys"`
}

// NormalizerConfig configures the canonicalization of arguments and results.
type NormalizerConfig struct {
	// VolatileArgKeys are argument keys dropped at any depth; '*' suffix
	// matches a prefix. Default: request ids, timestamps, seeds, nonces,
	// trace/span ids, tool_call_id, run_id, langgraph_*, checkpoint_*.
	VolatileArgKeys []string `mapstructure:"volatile_arg_keys"`
	// VolatileResultKeys are dropped from results in addition. Default:
	// pid, session ids, durations, message ids, timestamps, receipts.
	VolatileResultKeys []string `mapstructure:"volatile_result_keys"`
	// ToolOverrides keeps or drops extra keys per tool name.
	ToolOverrides map[string]engine.KeyOverride `mapstructure:"tool_overrides"`
	// TerminalKeys are the top-level result keys whose value may mark a
	// terminal async result. Default: state, status.
	TerminalKeys []string `mapstructure:"terminal_keys"`
	// TerminalValues are the values of those keys that do. Default:
	// complete, completed, succeeded, success, done, failed, finished,
	// cancelled, canceled.
	TerminalValues []string `mapstructure:"terminal_values"`
	// MaxCanonicalBytes caps the size canonicalized as JSON. Default 65536.
	MaxCanonicalBytes int `mapstructure:"max_canonical_bytes"`
	// UnknownToolMarkers recognise, in a failed call's error class or text,
	// a call of a tool that does not exist. Default: the frameworks'
	// messages ("is not a valid tool", NoSuchToolError, "unknown tool", …).
	UnknownToolMarkers []string `mapstructure:"unknown_tool_markers"`
}

// LongCycleConfig is the long-cycle rule.
type LongCycleConfig struct {
	// MinCalls is the shortest run of calls, each repeating an earlier
	// (action, result) pair and together covering a whole cycle, that is
	// stuck; 0 disables. Default 4.
	MinCalls int `mapstructure:"min_calls"`
}

// ResultlessCycleConfig is the cycle-without-results rule.
type ResultlessCycleConfig struct {
	// MaxPeriod is the longest cycle looked for (1..5). Default 5.
	MaxPeriod int `mapstructure:"max_period"`
	// Repetitions is how often the cycle must repeat; 0 disables. Default 5.
	Repetitions int `mapstructure:"repetitions"`
}

// FailureStreakConfig is the failure-streak rule.
type FailureStreakConfig struct {
	// Threshold is how many non-retryable failures of one tool with one
	// error class in a row are stuck; 0 disables. Default 6.
	Threshold int `mapstructure:"threshold"`
	// UnknownToolThreshold is the same for calls of a tool that does not
	// exist; 0 disables. Default 3.
	UnknownToolThreshold int `mapstructure:"unknown_tool_threshold"`
}

// FrequentConfig is the frequent-identical-call rule.
type FrequentConfig struct {
	// Window is how many recent calls are looked at. Default 10.
	Window int `mapstructure:"window"`
	// Threshold is how many identical calls make a loop; 0 disables. Default 5.
	Threshold int `mapstructure:"threshold"`
}

// RetryConfig is the default retry policy, for agents that declare none.
type RetryConfig struct {
	// RetryableClasses match error classes as case-insensitive substrings.
	// Default: rate_limit, 429, 503, timeout, unavailable, throttl, overloaded….
	RetryableClasses []string `mapstructure:"retryable_classes"`
	// InitialInterval is the expected first gap. Default 2s.
	InitialInterval time.Duration `mapstructure:"initial_interval"`
	// BackoffRate multiplies each further gap. Default 2.
	BackoffRate float64 `mapstructure:"backoff_rate"`
	// MaxAttempts bounds attempts, the first included. Default 5.
	MaxAttempts int `mapstructure:"max_attempts"`
	// Tolerance is the fraction a gap may fall short. Default 0.2.
	Tolerance float64 `mapstructure:"tolerance"`
}

// LeaseConfig bounds wait leases.
type LeaseConfig struct {
	// MaxRenewals is how many later deadlines are honoured. Default 3.
	MaxRenewals int `mapstructure:"max_renewals"`
}

// KillConfig is the kill policy.
type KillConfig struct {
	// Enabled turns kill decisions on. Default true.
	Enabled bool `mapstructure:"enabled"`
	// DryRun marks kills in events (loopdetect.dry_run) without requesting
	// them. Default false.
	DryRun bool `mapstructure:"dry_run"`
	// Reasons kill as soon as they make a session stuck. Default
	// [frequent_identical, backstop].
	Reasons []string `mapstructure:"reasons"`
	// AfterLoopCalls kills any stuck loop that lasted this many calls (0
	// disables). Default 5.
	AfterLoopCalls int `mapstructure:"after_loop_calls"`
	// AllowLowConfidence lets name-only evidence kill. Default false.
	AllowLowConfidence bool `mapstructure:"allow_low_confidence"`
	// MaxLoopTokens kills a stuck loop once the agent's model calls have
	// used this many tokens (gen_ai.usage.* and the OpenInference / Vercel
	// equivalents) since the loop began (0 disables). Default 0.
	MaxLoopTokens int64 `mapstructure:"max_loop_tokens"`
}

func createDefaultConfig() *Config {
	ec := engine.DefaultConfig()
	nc := engine.DefaultNormalizerConfig()
	reasons := make([]string, 0, len(ec.Kill.Reasons))
	for _, r := range ec.Kill.Reasons {
		reasons = append(reasons, r.String())
	}
	return &Config{
		Attributes: extract.DefaultKeys(),
		Normalizer: NormalizerConfig{
			VolatileArgKeys:    nc.VolatileArgKeys,
			VolatileResultKeys: nc.VolatileResultKeys,
			TerminalKeys:       nc.TerminalKeys,
			TerminalValues:     nc.TerminalValues,
			MaxCanonicalBytes:  nc.MaxCanonicalBytes,
			UnknownToolMarkers: nc.UnknownToolMarkers,
		},
		MaxSessions:       ec.MaxSessions,
		IdleTimeout:       ec.IdleTimeout,
		HistorySize:       ec.HistorySize,
		MaxPeriod:         ec.MaxPeriod,
		MinRepetitions:    ec.MinRepetitions,
		FrequentIdentical: FrequentConfig{Window: ec.FrequentWindow, Threshold: ec.FrequentThreshold},
		TerminalReread:    ec.TerminalReread,
		LongCycle:         LongCycleConfig{MinCalls: ec.LongCycleMinCalls},
		CycleWithoutResults: ResultlessCycleConfig{
			MaxPeriod:   ec.ResultlessCycleMaxPeriod,
			Repetitions: ec.ResultlessCycleRepetitions,
		},
		FailureStreak: FailureStreakConfig{Threshold: ec.FailureStreak, UnknownToolThreshold: ec.UnknownToolStreak},
		Backstop:      ec.Backstop,
		Hysteresis:    ec.Hysteresis,
		Retry: RetryConfig{
			RetryableClasses: ec.RetryableClasses,
			InitialInterval:  ec.RetryPolicy.InitialInterval,
			BackoffRate:      ec.RetryPolicy.BackoffRate,
			MaxAttempts:      ec.RetryPolicy.MaxAttempts,
			Tolerance:        ec.BackoffTolerance,
		},
		Lease: LeaseConfig{MaxRenewals: ec.MaxLeaseRenewals},
		Kill: KillConfig{
			Enabled:        ec.Kill.Enabled,
			Reasons:        reasons,
			AfterLoopCalls: ec.Kill.AfterLoopCalls,
		},
		TickInterval: time.Second,
	}
}

// engineConfig maps the YAML config onto the engine's.
func (c *Config) engineConfig() (engine.Config, error) {
	ec := engine.Config{
		MaxSessions:                c.MaxSessions,
		IdleTimeout:                c.IdleTimeout,
		HistorySize:                c.HistorySize,
		MaxPeriod:                  c.MaxPeriod,
		MinRepetitions:             c.MinRepetitions,
		FrequentWindow:             c.FrequentIdentical.Window,
		FrequentThreshold:          c.FrequentIdentical.Threshold,
		NameOnlyThreshold:          c.NameOnlyThreshold,
		TerminalReread:             c.TerminalReread,
		LongCycleMinCalls:          c.LongCycle.MinCalls,
		ResultlessCycleMaxPeriod:   c.CycleWithoutResults.MaxPeriod,
		ResultlessCycleRepetitions: c.CycleWithoutResults.Repetitions,
		FailureStreak:              c.FailureStreak.Threshold,
		UnknownToolStreak:          c.FailureStreak.UnknownToolThreshold,
		Backstop:                   c.Backstop,
		Hysteresis:                 c.Hysteresis,
		RetryableClasses:           c.Retry.RetryableClasses,
		RetryPolicy: engine.RetryPolicy{
			InitialInterval: c.Retry.InitialInterval,
			BackoffRate:     c.Retry.BackoffRate,
			MaxAttempts:     c.Retry.MaxAttempts,
		},
		BackoffTolerance: c.Retry.Tolerance,
		MaxLeaseRenewals: c.Lease.MaxRenewals,
		Kill: engine.KillPolicy{
			Enabled:            c.Kill.Enabled,
			DryRun:             c.Kill.DryRun,
			AfterLoopCalls:     c.Kill.AfterLoopCalls,
			AllowLowConfidence: c.Kill.AllowLowConfidence,
			MaxLoopTokens:      c.Kill.MaxLoopTokens,
		},
	}
	if c.DigestKey != "" {
		ec.DigestKey = []byte(c.DigestKey)
	}
	for _, s := range c.Kill.Reasons {
		r, ok := engine.ParseReason(s)
		if !ok {
			return ec, fmt.Errorf("kill.reasons: unknown reason %q", s)
		}
		ec.Kill.Reasons = append(ec.Kill.Reasons, r)
	}
	return ec, nil
}

func (c *Config) normalizerConfig() engine.NormalizerConfig {
	return engine.NormalizerConfig{
		VolatileArgKeys:    c.Normalizer.VolatileArgKeys,
		VolatileResultKeys: c.Normalizer.VolatileResultKeys,
		ToolOverrides:      c.Normalizer.ToolOverrides,
		TerminalKeys:       c.Normalizer.TerminalKeys,
		TerminalValues:     c.Normalizer.TerminalValues,
		MaxCanonicalBytes:  c.Normalizer.MaxCanonicalBytes,
		UnknownToolMarkers: c.Normalizer.UnknownToolMarkers,
	}
}

func (c *Config) keys() extract.Keys {
	k := c.Attributes
	k.Session = c.Session.Keys
	return k
}

// Validate checks the configuration; errors name the YAML key. The
// attribute lists validate themselves (extract.Keys.Validate), reached by
// confmap.Validate like every nested config.
func (c *Config) Validate() error {
	var errs []error
	if c.Attributes.Session != nil {
		errs = append(errs, fmt.Errorf("attributes.session %q is not read: the session key is configured with session.keys (move the list there)", c.Attributes.Session))
	}
	ec, err := c.engineConfig()
	if err != nil {
		errs = append(errs, err)
	}
	// The engine's own messages for these leave the value out; report them
	// here with it, and let the engine check the rest with sane stand-ins.
	if c.Backstop < 0 {
		errs = append(errs, fmt.Errorf("backstop must not be negative (0 disables it), got %s", c.Backstop))
		ec.Backstop = 0
	}
	if c.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("idle_timeout must not be negative, got %s", c.IdleTimeout))
		ec.IdleTimeout = 0
	}
	if c.Retry.InitialInterval < 0 {
		errs = append(errs, fmt.Errorf("retry.initial_interval must not be negative, got %s", c.Retry.InitialInterval))
		ec.RetryPolicy.InitialInterval = 0
	}
	if c.Retry.BackoffRate < 1 {
		errs = append(errs, fmt.Errorf("retry.backoff_rate must be ≥ 1, got %v", c.Retry.BackoffRate))
		ec.RetryPolicy.BackoffRate = 1
	}
	if c.Retry.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("retry.max_attempts must be ≥ 1, got %d", c.Retry.MaxAttempts))
		ec.RetryPolicy.MaxAttempts = 1
	}
	if err := ec.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.TickInterval <= 0 {
		errs = append(errs, fmt.Errorf("tick_interval must be positive, got %s", c.TickInterval))
	}
	if c.RequireDigestKey && c.DigestKey == "" {
		// Never the key itself: only that it is missing.
		errs = append(errs, errors.New("digest_key is empty but require_digest_key is true: set it, usually through ${env:LOOPDETECT_DIGEST_KEY}"))
	}
	if c.Normalizer.MaxCanonicalBytes < 1 {
		errs = append(errs, fmt.Errorf("normalizer.max_canonical_bytes must be ≥ 1, got %d", c.Normalizer.MaxCanonicalBytes))
	}
	return errors.Join(errs...)
}
