package engine

import "fmt"

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

// HysteresisConfig delays non-deterministic stuck verdicts; its key is at
// the top level.
type HysteresisConfig struct {
	// Hysteresis is how many consecutive evaluations must agree before a
	// non-deterministic stuck verdict. Default 1 (off).
	Hysteresis int `mapstructure:"hysteresis"`
}

func defaultHysteresis() HysteresisConfig { return HysteresisConfig{Hysteresis: 1} }

func (c HysteresisConfig) check() error {
	if c.Hysteresis < 1 {
		return fmt.Errorf("hysteresis must be ≥ 1, got %d", c.Hysteresis)
	}
	return nil
}
