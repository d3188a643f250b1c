package engine

import (
	"errors"
	"fmt"
	"strings"
)

// periodicLoopRule: the newest calls repeat a cycle of period 1..MaxPeriod
// at least MinRepetitions times with an unchanged progress fingerprint
// (A A, A B A B, A B C A B C). Periodicity alone proves no stall; the
// fingerprint beside it does. Period 1 with a result fingerprint is the
// async-task incident's signal — two consecutive identical results —
// reported as unchanged_result.
type periodicLoopRule struct{}

// shape is the periodicity of the newest calls.
type shape struct {
	period  int
	sigRun  int // length of the periodic suffix (signatures only)
	fpRun   int // length of the suffix that also has unchanged fingerprints
	missing bool
	lowConf bool
}

func (e *Engine) periodic(h []record) (shape, bool) {
	n := len(h)
	for p := 1; p <= e.cfg.PeriodicLoop.MaxPeriod && 2*p <= n; p++ {
		run := 0
		for i := n - 1; i-p >= 0 && h[i].sig == h[i-p].sig; i-- {
			run++
		}
		if run+p < p*e.cfg.PeriodicLoop.MinRepetitions {
			continue
		}
		sh := shape{period: p, sigRun: run + p}
		fr := 0
		for i := n - 1; i >= n-run; i-- {
			a, b := &h[i], &h[i-p]
			if !a.hasFP() || !b.hasFP() {
				sh.missing = true
				break
			}
			if a.fp != b.fp {
				break
			}
			fr++
		}
		sh.fpRun = fr + p
		for i := n - sh.sigRun; i < n; i++ {
			if h[i].has(fLowConf) {
				sh.lowConf = true
				break
			}
		}
		return sh, true
	}
	return shape{}, false
}

func (periodicLoopRule) evaluate(w *window, v *verdict) bool {
	sh, ok := w.periodic()
	if !ok || sh.lowConf || sh.fpRun < sh.period*w.engine.cfg.PeriodicLoop.MinRepetitions {
		return false
	}
	n := len(w.history)
	*v = verdict{state: StateStuck, reason: ReasonPeriodicLoop, period: sh.period, reps: sh.fpRun / sh.period, loopStart: n - sh.fpRun, window: n}
	if sh.period == 1 && w.history[n-1].fpSource() == FingerprintResult {
		v.reason = ReasonUnchangedResult
	}
	v.cycleKey = cycleKey(w.history, v.period)
	return true
}

func (periodicLoopRule) explain(b *strings.Builder, w *window, v verdict) {
	switch {
	case v.reason == ReasonUnchangedResult:
		fmt.Fprintf(b, "loop detected: same tool call %s returned an identical result x%d in a row", w.toolName(), v.reps)
	case v.period == 1:
		fmt.Fprintf(b, "loop detected: same tool call %s x%d with unchanged progress fingerprint", w.toolName(), v.reps)
	default:
		fmt.Fprintf(b, "loop detected: cycle %s repeated x%d (period %d) with unchanged progress fingerprint", w.cycle(v.period), v.reps, v.period)
	}
}

// PeriodicLoopConfig is the periodic-loop rule's (periodic_loop).
type PeriodicLoopConfig struct {
	// MaxPeriod is the longest cycle looked for. Default 3.
	MaxPeriod int `mapstructure:"max_period"`
	// MinRepetitions is how often a cycle must repeat. Default 2.
	MinRepetitions int `mapstructure:"min_repetitions"`
}

func defaultPeriodicLoop() PeriodicLoopConfig {
	return PeriodicLoopConfig{MaxPeriod: 3, MinRepetitions: 2}
}

func (c PeriodicLoopConfig) check(historySize int) error {
	var errs []error
	if c.MaxPeriod < 1 || c.MaxPeriod > 16 {
		errs = append(errs, fmt.Errorf("periodic_loop.max_period must be in 1..16, got %d", c.MaxPeriod))
	}
	if c.MinRepetitions < 2 {
		errs = append(errs, fmt.Errorf("periodic_loop.min_repetitions must be ≥ 2, got %d", c.MinRepetitions))
	}
	if c.MaxPeriod*c.MinRepetitions > historySize {
		errs = append(errs, fmt.Errorf("history_size (%d) must hold periodic_loop.max_period × periodic_loop.min_repetitions (%d) calls", historySize, c.MaxPeriod*c.MinRepetitions))
	}
	return errors.Join(errs...)
}
