package engine

import (
	"fmt"
	"strings"
	"time"
)

// backstopRule: a session active longer than Backstop is stuck, whatever
// its calls look like. The 1,972-call incident ran five hours; normal runs
// take 4–23 minutes, so a generous limit (2 h) catches the pathologies the
// loop rules cannot see (endlessly varying, unproductive calls). It counts
// from the engine's first sight of the session, so an agent's skewed span
// clock cannot trip it.
type backstopRule struct{}

func (backstopRule) evaluate(w *window, v *verdict) bool {
	s, cfg := w.session, &w.engine.cfg
	if cfg.Backstop.MaxDuration <= 0 || s.firstSeen <= 0 || w.now-s.firstSeen < int64(cfg.Backstop.MaxDuration) {
		return false
	}
	*v = verdict{state: StateStuck, reason: ReasonBackstop, loopStart: 0, window: len(w.history)}
	return true
}

func (backstopRule) explain(b *strings.Builder, w *window, _ verdict) {
	fmt.Fprintf(b, "backstop: session active for %s (limit %s)", time.Duration(w.now-w.session.firstSeen).Round(time.Second), w.engine.cfg.Backstop.MaxDuration)
}

// BackstopConfig is the backstop rule's (backstop).
type BackstopConfig struct {
	// MaxDuration marks a session stuck once it has been active this long
	// (0 disables the rule). Default 2h.
	MaxDuration time.Duration `mapstructure:"max_duration"`
}

func defaultBackstop() BackstopConfig { return BackstopConfig{MaxDuration: 2 * time.Hour} }

func (c BackstopConfig) check() error {
	if c.MaxDuration < 0 {
		return fmt.Errorf("backstop.max_duration must not be negative (0 disables it), got %s", c.MaxDuration)
	}
	return nil
}
