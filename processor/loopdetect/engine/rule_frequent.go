package engine

import (
	"fmt"
	"strings"
)

// frequentIdenticalRule: at least FrequentThreshold calls with one
// signature among the last FrequentWindow calls (5 of 10), counted only
// while the calls between them bring nothing new — the rule of the
// 1,972-call incident, where the same bash call returned the same answer
// for five hours. It needs no result, so it also holds for agents that
// record none, and catches alternating loops. A new action or a new result
// between the identical calls (a fix-and-test cycle) is progress.
type frequentIdenticalRule struct{}

func (frequentIdenticalRule) evaluate(w *window, v *verdict) bool {
	if !w.frequentStall() {
		return false
	}
	count, first := w.frequent()
	n := len(w.h)
	*v = verdict{state: StateStuck, reason: ReasonFrequentIdentical, count: count, loopStart: first, window: min(n, w.e.cfg.FrequentWindow), period: 1, reps: count}
	if sh, ok := w.periodic(); ok && sh.fpRun >= sh.period*w.e.cfg.MinRepetitions && !sh.lowConf {
		// A periodic loop inside the window describes the loop better.
		v.period, v.reps = sh.period, sh.fpRun/sh.period
		v.loopStart = min(first, n-sh.fpRun)
	}
	// The repeated call, not whatever came last, identifies the loop.
	v.cycleKey = mix(uint64(w.h[first].sig) ^ mix(uint64(w.h[first].fp)))
	return true
}

func (frequentIdenticalRule) explain(b *strings.Builder, _ *window, v verdict) {
	fmt.Fprintf(b, "loop detected: same tool call x%d of last %d", v.count, v.window)
}

// frequent finds the signature repeated most among the last window calls,
// counting its occurrences only while the calls between them bring nothing
// new. A fix-and-test cycle (a new edit, then the same failing test) is
// progress however often the test repeats; the same call back to back, or
// an A-B-A-B cycle with unchanged results, is not. Ties go to the run that
// started first.
func (e *Engine) frequent(h []record, lowConf bool, window int) (count, first int) {
	n := len(h)
	lo := max(0, n-window)
	for i := n - 1; i >= lo; i-- {
		if h[i].has(fLowConf) != lowConf {
			continue
		}
		// A novel call's run is that call alone (stallRun's first step),
		// and most calls of a working agent are novel.
		c, f := 1, i
		if !h[i].has(fNovel) {
			c, f = stallRun(h, i, lo)
		}
		if c > count || (c == count && f < first) {
			count, first = c, f
		}
	}
	return count, first
}

// stallRun counts the occurrences of h[last].sig from last back to lo. A
// novel call between two occurrences ends the run; a novel occurrence
// starts it.
func stallRun(h []record, last, lo int) (count, first int) {
	sig := h[last].sig
	broken := false
	for k := last; k >= lo; k-- {
		if h[k].sig != sig {
			broken = broken || h[k].has(fNovel)
			continue
		}
		if broken {
			break
		}
		count, first = count+1, k
		if h[k].has(fNovel) {
			break
		}
	}
	return count, first
}
