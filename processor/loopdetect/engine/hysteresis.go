package engine

import "fmt"

// holdForHysteresis reports whether a new, non-deterministic stuck verdict
// must wait: for noisy collectors, Hysteresis consecutive evaluations must
// show the same cycle (cycleKey) first. It never delays a deterministic
// failure (a terminal re-read, a non-retryable error, the backstop, a spent
// retry budget), and resets when the session shows anything but stuck.
func (e *Engine) holdForHysteresis(s *session, v *verdict) bool {
	if v.state == StateStuck && s.state != StateStuck && e.cfg.Hysteresis.Evaluations > 1 && !v.reason.deterministic() {
		x := s.extras()
		if x.hystKey == v.cycleKey && x.hystCount > 0 {
			x.hystCount++
		} else {
			x.hystKey, x.hystCount = v.cycleKey, 1
		}
		return x.hystCount < e.cfg.Hysteresis.Evaluations
	}
	if v.state != StateStuck && s.extra != nil {
		s.extra.hystCount = 0
	}
	return false
}

// HysteresisConfig delays non-deterministic stuck verdicts (hysteresis).
type HysteresisConfig struct {
	// Evaluations is how many consecutive evaluations must agree before a
	// non-deterministic stuck verdict. Default 1 (off).
	Evaluations int `mapstructure:"evaluations"`
}

func defaultHysteresis() HysteresisConfig { return HysteresisConfig{Evaluations: 1} }

func (c HysteresisConfig) check() error {
	if c.Evaluations < 1 {
		return fmt.Errorf("hysteresis.evaluations must be ≥ 1, got %d", c.Evaluations)
	}
	return nil
}
