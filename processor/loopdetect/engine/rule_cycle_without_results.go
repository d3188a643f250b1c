package engine

import (
	"fmt"
	"strings"
)

// cycleWithoutResultsRule: a cycle of up to CycleWithoutResults.MaxPeriod
// calls with recorded arguments but no results, repeated
// CycleWithoutResults.Repetitions times, is stuck. Without results nothing shows progress, so a short
// repetition stays uncertain; Gemini CLI's bound — five repetitions of a
// cycle of up to five calls — is where an agent that repeats its actions
// verbatim is stopped all the same. Name-only calls never get here.
type cycleWithoutResultsRule struct{}

func (cycleWithoutResultsRule) evaluate(w *window, v *verdict) bool {
	reps := w.engine.cfg.CycleWithoutResults.Repetitions
	if reps <= 0 {
		return false
	}
	t := &w.session.cycles
	for p := 1; p <= w.engine.cfg.CycleWithoutResults.MaxPeriod; p++ {
		if int(t.withoutResults[p-1]) >= (reps-1)*p {
			n := len(w.history)
			*v = verdict{state: StateStuck, reason: ReasonCycleWithoutResults, period: p, reps: reps,
				loopStart: max(0, n-reps*p), window: n, cycleKey: cycleKey(w.history, min(p, n))}
			return true
		}
	}
	return false
}

func (cycleWithoutResultsRule) explain(b *strings.Builder, w *window, v verdict) {
	fmt.Fprintf(b, "loop detected: cycle %s repeated x%d with the same arguments and no results recorded", w.cycle(v.period), v.reps)
}

// CycleWithoutResultsConfig is the cycle-without-results rule's
// (cycle_without_results).
type CycleWithoutResultsConfig struct {
	// MaxPeriod is the longest cycle looked for (1..5). Default 5.
	MaxPeriod int `mapstructure:"max_period"`
	// Repetitions is how often the cycle must repeat; 0 disables. Default 5.
	Repetitions int `mapstructure:"repetitions"`
}

// Gemini CLI stops a cycle of up to 5 calls repeated 5 times.
func defaultCycleWithoutResults() CycleWithoutResultsConfig {
	return CycleWithoutResultsConfig{MaxPeriod: 5, Repetitions: 5}
}

func (c CycleWithoutResultsConfig) check() error {
	if c.Repetitions != 0 && (c.Repetitions < 2 || c.MaxPeriod < 1 || c.MaxPeriod > maxCycleWithoutResultsPeriod) {
		return fmt.Errorf("cycle_without_results: repetitions (%d) must be 0 or ≥ 2 and max_period (%d) in 1..%d", c.Repetitions, c.MaxPeriod, maxCycleWithoutResultsPeriod)
	}
	return nil
}
