package loopdetect

import (
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/config/configopaque"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// Config is the loop_detect processor's configuration: the engine's
// settings (engine.Config: the session table's and each rule's, defined in
// the rule's file) with the processor's own around them. Every default is
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
	Normalizer canon.NormalizerConfig `mapstructure:"normalizer"`
	// Config holds the session table's and the rules' settings, their keys
	// at the top level (max_sessions, one key per rule, kill, …); defaults
	// in engine.DefaultConfig. confmap.Validate reaches its Validate, and
	// puts the field's name in front of its errors ("config: history_size
	// must be in 2..1024, got 1"): confmap names an embedded field so.
	engine.Config `mapstructure:",squash"`
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
	// deprecated lists the old keys the configuration used, for the
	// warnings the processor logs when it is created (warnDeprecated).
	deprecated []renamedKey
}

// SessionConfig chooses the session key.
type SessionConfig struct {
	// Keys are attribute keys for the session id (span first, then
	// resource), e.g. gen_ai.conversation.id. Default none: the trace id.
	Keys []string `mapstructure:"keys"`
}

func createDefaultConfig() *Config {
	return &Config{
		Attributes:   extract.DefaultKeys(),
		Normalizer:   canon.DefaultNormalizerConfig(),
		Config:       engine.DefaultConfig(),
		TickInterval: time.Second,
	}
}

// engineConfig is the engine's part with the digest key, which the
// processor reads as an opaque string so that it is never printed.
func (c *Config) engineConfig() engine.Config {
	ec := c.Config
	if c.DigestKey != "" {
		ec.DigestKey = []byte(c.DigestKey)
	}
	return ec
}

func (c *Config) keys() extract.Keys {
	k := c.Attributes
	k.Session = c.Session.Keys
	k.Waits = c.ImplicitWait
	return k
}

// Validate checks the processor's own settings; errors name the YAML key
// and value. It leaves the engine's, the normalizer's and the attribute
// lists' settings to their own Validate methods, which confmap.Validate
// calls as it walks the configuration: calling them here too would report
// each of their errors twice.
func (c *Config) Validate() error {
	var errs []error
	if c.Attributes.Session != nil {
		errs = append(errs, fmt.Errorf("attributes.session %q is not read: the session key is configured with session.keys (move the list there)", c.Attributes.Session))
	}
	if c.TickInterval <= 0 {
		errs = append(errs, fmt.Errorf("tick_interval must be positive, got %s", c.TickInterval))
	}
	if c.RequireDigestKey && c.DigestKey == "" {
		// Never the key itself: only that it is missing.
		errs = append(errs, errors.New("digest_key is empty but require_digest_key is true: set it, usually through ${env:LOOPDETECT_DIGEST_KEY}"))
	}
	return errors.Join(errs...)
}
