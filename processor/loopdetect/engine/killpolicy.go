package engine

import (
	"errors"
	"fmt"
)

// KillPolicy bounds when a stuck verdict becomes a kill request (kill).
type KillPolicy struct {
	// Enabled turns kill decisions on. Default true.
	Enabled bool `mapstructure:"enabled"`
	// DryRun marks kills in events (loopdetect.dry_run) without requesting
	// them. Default false.
	DryRun bool `mapstructure:"dry_run"`
	// Reasons kill as soon as they make a session stuck. Default
	// [frequent_identical, backstop].
	Reasons []Reason `mapstructure:"reasons"`
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

func defaultKill() KillPolicy {
	return KillPolicy{Enabled: true, Reasons: []Reason{ReasonFrequentIdentical, ReasonBackstop}, AfterLoopCalls: 5}
}

func (c KillPolicy) check() error {
	var errs []error
	for _, r := range c.Reasons {
		if r == ReasonNone || int(r) >= len(reasonNames) {
			errs = append(errs, fmt.Errorf("kill.reasons: unknown reason %q", r))
		}
	}
	if c.MaxLoopTokens < 0 {
		errs = append(errs, fmt.Errorf("kill.max_loop_tokens must be ≥ 0, got %d", c.MaxLoopTokens))
	}
	if c.AfterLoopCalls < 0 {
		errs = append(errs, fmt.Errorf("kill.after_loop_calls must be ≥ 0, got %d", c.AfterLoopCalls))
	}
	return errors.Join(errs...)
}

// decideKill applies the kill policy to a stuck loop: once per loop, never
// for a kept verdict (the agent may have left its loop), never on
// name-only evidence unless allowed; at once for the reasons listed in
// Kill.Reasons, else when the loop has lasted Kill.AfterLoopCalls calls or
// burned Kill.MaxLoopTokens tokens.
// The A-B-A-B loop of the 1,972-call incident's alternating variant is
// stuck at its 4th call and killed at its 5th this way.
func (e *Engine) decideKill(sh *shard, s *session, v *verdict, loop *loopState, kept bool) bool {
	kp := &e.cfg.Kill
	if loop == nil || kept || !kp.Enabled || loop.killed || (v.lowConf && !kp.AllowLowConfidence) {
		return false
	}
	// The loop's length is the fresh verdict's own: calls from its first
	// call to the newest.
	loopCalls := int64(len(s.hist) - v.loopStart)
	if v.loopStart < 0 {
		loopCalls = s.total - loop.startIndex + 1
	}
	if e.killReasons[v.reason] || (kp.AfterLoopCalls > 0 && loopCalls >= int64(kp.AfterLoopCalls)) || e.loopTokensKill(sh, s, loop) {
		loop.killed = true
		return true
	}
	return false
}
