package engine

// decideKill applies the kill policy to a stuck loop: once per loop, never
// for a kept verdict (the agent may have left its loop), never on
// name-only evidence unless allowed; at once for the reasons listed in
// Kill.Reasons, else when the loop has lasted Kill.AfterLoopCalls calls or
// burned Kill.MaxLoopTokens tokens.
// The A-B-A-B loop of the 1,972-call incident's alternating variant is
// stuck at its 4th call and killed at its 5th this way.
func (e *Engine) decideKill(s *session, v *verdict, loop *loopState, kept bool) bool {
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
	if e.killReasons[v.reason] || (kp.AfterLoopCalls > 0 && loopCalls >= int64(kp.AfterLoopCalls)) || e.loopTokensKill(s, loop) {
		loop.killed = true
		return true
	}
	return false
}
