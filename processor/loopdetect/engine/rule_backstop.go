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
	s, cfg := w.s, &w.e.cfg
	if cfg.Backstop <= 0 || s.firstSeen <= 0 || w.now-s.firstSeen < int64(cfg.Backstop) {
		return false
	}
	*v = verdict{state: StateStuck, reason: ReasonBackstop, loopStart: 0, window: len(w.h)}
	return true
}

func (backstopRule) explain(b *strings.Builder, w *window, _ verdict) {
	fmt.Fprintf(b, "backstop: session active for %s (limit %s)", time.Duration(w.now-w.s.firstSeen).Round(time.Second), w.e.cfg.Backstop)
}

// BackstopConfig is the backstop rule's; its key is at the top level.
type BackstopConfig struct {
	// Backstop marks a session stuck after this long (0 disables).
	// Default 2h.
	Backstop time.Duration `mapstructure:"backstop"`
}

func defaultBackstop() BackstopConfig { return BackstopConfig{Backstop: 2 * time.Hour} }

func (c BackstopConfig) check() error {
	if c.Backstop < 0 {
		return fmt.Errorf("backstop must not be negative (0 disables it), got %s", c.Backstop)
	}
	return nil
}
