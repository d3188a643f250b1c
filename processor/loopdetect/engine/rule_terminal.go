package engine

import (
	"fmt"
	"strings"
)

// terminalRereadRule: the same read, in a row, returning the same terminal
// result (a finished task read again instead of acting on it — the async
// task incident: more than ten byte-identical re-reads of a complete
// result). Anything in between, or a changed result, is not it.
type terminalRereadRule struct{}

// terminal is the position of the first call of the terminal re-read run
// that ends the history, -1 for none.
func (w *window) terminal() int {
	if w.done&doneTerminal != 0 {
		return w.terminalAt
	}
	w.done |= doneTerminal
	w.terminalAt = -1
	h, n := w.history, len(w.history)
	if !w.engine.cfg.TerminalReread.Enabled || n < 2 || h[n-1].has(fLowConf) {
		return -1
	}
	last := &h[n-1]
	for j := n - 2; j >= 0; j-- {
		r := &h[j]
		if r.sig != last.sig || !r.has(fTerminal) || !r.hasFP() || r.fp != last.fp {
			break
		}
		w.terminalAt = j
	}
	return w.terminalAt
}

func (terminalRereadRule) evaluate(w *window, v *verdict) bool {
	at := w.terminal()
	if at < 0 {
		return false
	}
	n := len(w.history)
	*v = verdict{state: StateStuck, reason: ReasonTerminalReread, period: 1, reps: n - at, loopStart: at, window: n, cycleKey: cycleKey(w.history, 1)}
	return true
}

func (terminalRereadRule) explain(b *strings.Builder, w *window, v verdict) {
	fmt.Fprintf(b, "loop detected: terminal result of %s re-read (x%d)", w.toolName(), v.reps)
}

// TerminalRereadConfig is the terminal re-read rule's (terminal_reread).
type TerminalRereadConfig struct {
	// Enabled turns the rule on (an agent re-reading a completed
	// async task result). Default true. (The other async-task rule, an
	// identical result twice in a row, is the periodic rule's period 1.)
	Enabled bool `mapstructure:"enabled"`
}

func defaultTerminalReread() TerminalRereadConfig { return TerminalRereadConfig{Enabled: true} }
