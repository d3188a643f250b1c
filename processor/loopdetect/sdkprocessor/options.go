package sdkprocessor

import (
	"errors"
	"fmt"
	"time"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/canon"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/engine"
	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// DefaultTickInterval is how often the timers run by default; it is the
// collector processor's tick_interval default.
const DefaultTickInterval = time.Second

// DefaultCallbackQueue is the default capacity of the callback queue.
const DefaultCallbackQueue = 256

// Option configures a Processor. Options apply in order: WithEngineConfig
// replaces every threshold, so put it before the convenience options that
// change one of them.
type Option func(*options)

type options struct {
	engine      engine.Config
	normalizer  canon.NormalizerConfig
	keys        extract.Keys
	sessionKeys []string
	sessionSet  bool
	callback    func(engine.Transition)
	warn        func(Warning)
	queue       int
	tick        time.Duration
	clock       func() time.Time
}

// defaultOptions are the collector's defaults (createDefaultConfig): the
// same engine, normalizer and attribute key defaults, session by trace id.
func defaultOptions() options {
	return options{
		engine:     engine.DefaultConfig(),
		normalizer: canon.DefaultNormalizerConfig(),
		keys:       extract.DefaultKeys(),
		queue:      DefaultCallbackQueue,
		tick:       DefaultTickInterval,
		clock:      time.Now,
	}
}

// validate mirrors the collector Config.Validate checks that the engine
// does not make itself.
func (o *options) validate() error {
	var errs []error
	if o.tick < 0 {
		errs = append(errs, fmt.Errorf("tick interval must not be negative, got %s", o.tick))
	}
	if o.queue < 0 {
		errs = append(errs, fmt.Errorf("callback queue must not be negative, got %d", o.queue))
	}
	if o.clock == nil {
		errs = append(errs, errors.New("clock must not be nil"))
	}
	if o.normalizer.MaxCanonicalBytes < 1 {
		errs = append(errs, fmt.Errorf("normalizer max canonical bytes must be ≥ 1, got %d", o.normalizer.MaxCanonicalBytes))
	}
	if err := o.keys.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("keys: %w", err))
	}
	return errors.Join(errs...)
}

// WithCallback sets the function called once per transition (every state
// change of a session, and the kill escalation of a stuck loop). By
// default it runs on the processor's own goroutine, in order, fed by a
// bounded queue (see WithCallbackQueue), so a slow callback never blocks
// span.End. The Transition is the callback's to keep.
func WithCallback(fn func(engine.Transition)) Option {
	return func(o *options) { o.callback = fn }
}

// WithCallbackQueue sets the callback queue's capacity (default
// DefaultCallbackQueue). When it is full, transitions are dropped for the
// callback and counted in Stats.CallbacksDropped; kills still cancel the
// registered contexts. Size 0 runs the callback synchronously inside
// OnEnd (and Tick): only for a callback that is cheap and never blocks.
func WithCallbackQueue(size int) Option {
	return func(o *options) { o.queue = size }
}

// WithEngineConfig replaces all engine thresholds and the kill policy
// (the collector's max_sessions … kill, digest_key). Start from
// engine.DefaultConfig().
func WithEngineConfig(c engine.Config) Option {
	return func(o *options) { o.engine = c }
}

// WithNormalizerConfig replaces the argument/result canonicalization
// settings (the collector's normalizer). Start from
// canon.DefaultNormalizerConfig().
func WithNormalizerConfig(c canon.NormalizerConfig) Option {
	return func(o *options) { o.normalizer = c }
}

// WithKeys replaces the attribute key lists (the collector's attributes).
// Start from extract.DefaultKeys().
func WithKeys(k extract.Keys) Option {
	return func(o *options) { o.keys = k }
}

// WithSessionKeys sets the attribute keys the session key is read from,
// on the span, then its resource (the collector's session.keys), e.g.
// gen_ai.conversation.id. None (default) means the trace id. It takes
// precedence over the Session list of WithKeys, whatever the order.
func WithSessionKeys(keys ...string) Option {
	return func(o *options) { o.sessionKeys, o.sessionSet = append([]string(nil), keys...), true }
}

// WithDryRun marks kill decisions (Transition.DryRun) without setting
// Transition.Kill or cancelling any context (the collector's kill.dry_run).
func WithDryRun(dryRun bool) Option {
	return func(o *options) { o.engine.Kill.DryRun = dryRun }
}

// WithKill turns kill decisions on or off (the collector's kill.enabled,
// default on).
func WithKill(enabled bool) Option {
	return func(o *options) { o.engine.Kill.Enabled = enabled }
}

// WithDigestKey keys the evidence digests in transitions (HMAC; the
// collector's digest_key). Default empty.
func WithDigestKey(key []byte) Option {
	return func(o *options) { o.engine.DigestKey = append([]byte(nil), key...) }
}

// WithFrequentIdentical sets the 1,972-call incident's rule: threshold identical calls
// among the last window make a loop (the collector's frequent_identical;
// threshold 0 disables it).
func WithFrequentIdentical(window, threshold int) Option {
	return func(o *options) {
		o.engine.FrequentIdentical.Window, o.engine.FrequentIdentical.Threshold = window, threshold
	}
}

// WithBackstop marks a session stuck once it has been active this long
// (the collector's backstop.max_duration; 0 disables).
func WithBackstop(d time.Duration) Option {
	return func(o *options) { o.engine.Backstop.MaxDuration = d }
}

// WithMaxSessions caps the tracked sessions (the collector's max_sessions).
func WithMaxSessions(n int) Option {
	return func(o *options) { o.engine.MaxSessions = n }
}

// WithTickInterval sets how often the timers (wait lease expiry, backstop,
// idle expiry) run on the processor's ticker goroutine (the collector's
// tick_interval, default DefaultTickInterval). 0 starts no goroutine: the
// caller then runs the timers with Processor.Tick.
func WithTickInterval(d time.Duration) Option {
	return func(o *options) { o.tick = d }
}

// WithClock sets the clock the engine decides by (default time.Now), for
// tests and simulations.
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.clock = now }
}
