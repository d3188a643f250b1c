package engine

// holdForHysteresis reports whether a new, non-deterministic stuck verdict
// must wait: for noisy collectors, Hysteresis consecutive evaluations must
// show the same cycle (cycleKey) first. It never delays a deterministic
// failure (a terminal re-read, a non-retryable error, the backstop, a spent
// retry budget), and resets when the session shows anything but stuck.
func (e *Engine) holdForHysteresis(s *session, v *verdict) bool {
	if v.state == StateStuck && s.state != StateStuck && e.cfg.Hysteresis > 1 && !v.reason.deterministic() {
		x := s.extras()
		if x.hystKey == v.cycleKey && x.hystCount > 0 {
			x.hystCount++
		} else {
			x.hystKey, x.hystCount = v.cycleKey, 1
		}
		return x.hystCount < e.cfg.Hysteresis
	}
	if v.state != StateStuck && s.x != nil {
		s.x.hystCount = 0
	}
	return false
}
