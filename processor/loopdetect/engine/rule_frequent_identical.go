package engine

import (
	"fmt"
	"strings"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
)

// frequentIdenticalRule: at least FrequentIdentical.Threshold calls with one
// signature among the last FrequentIdentical.Window calls (5 of 10), counted only
// while the calls between them bring nothing new — the rule of the
// 1,972-call incident, where the same bash call returned the same answer
// for five hours. It needs no result, so it also holds for agents that
// record none, and catches alternating loops. A new action or a new result
// between the identical calls (a fix-and-test cycle) is progress, unless
// the new action is the first pass of the cycle being counted (firstPass).
type frequentIdenticalRule struct{}

func (frequentIdenticalRule) evaluate(w *window, v *verdict) bool {
	if !w.frequentStall() {
		return false
	}
	count, first := w.frequent()
	n := len(w.history)
	*v = verdict{state: StateStuck, reason: ReasonFrequentIdentical, count: count, loopStart: first, window: min(n, w.engine.cfg.FrequentIdentical.Window), period: 1, reps: count}
	if sh, ok := w.periodic(); ok && sh.fpRun >= sh.period*w.engine.cfg.PeriodicLoop.MinRepetitions && !sh.lowConf {
		// A periodic loop inside the window describes the loop better.
		v.period, v.reps = sh.period, sh.fpRun/sh.period
		v.loopStart = min(first, n-sh.fpRun)
	}
	// The repeated call, not whatever came last, identifies the loop.
	v.cycleKey = hash64.Mix(uint64(w.history[first].sig) ^ hash64.Mix(uint64(w.history[first].fp)))
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
// started first. Calls before from are not counted: polls an implicit lease
// excused (session.excusedFrom).
func (e *Engine) frequent(h []record, lowConf bool, window, from int) (count, first int) {
	n := len(h)
	lo := max(0, n-window, from)
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
// novel call between two occurrences ends the run, unless it is the first
// pass of a cycle (firstPass); a novel occurrence starts it.
func stallRun(h []record, last, lo int) (count, first int) {
	sig := h[last].sig
	// passed has a bit for each signature passed between the occurrences:
	// the filter before firstPass's scans.
	var passed uint64
	for k := last; k >= lo; k-- {
		r := &h[k]
		if r.sig != sig {
			if r.has(fNovel) && (passed&sigBit(r.sig) == 0 || !firstPass(h, k, last)) {
				break // nothing after it can add to the run
			}
			passed |= sigBit(r.sig)
			continue
		}
		count, first = count+1, k
		if r.has(fNovel) {
			break
		}
	}
	return count, first
}

func sigBit(d Digest) uint64 { return 1 << (uint64(d) & 63) }

// firstPass reports that the novel call h[k] is the first pass of the
// cycle a run counts, not progress: its action is new (no earlier call of
// its signature) and comes again before last, where the run's scan passed
// it as nothing new. In A-B-A-B the first B is new, yet the A before it
// belongs to the loop; the new edits of a fix-and-test cycle never come
// again, and a new result is progress.
func firstPass(h []record, k, last int) bool {
	sig := h[k].sig
	again := false
	for j := k + 1; j < last && !again; j++ {
		again = h[j].sig == sig
	}
	if !again {
		return false
	}
	for j := 0; j < k; j++ {
		if h[j].sig == sig {
			return false
		}
	}
	return true
}

// FrequentIdenticalConfig is the frequent-identical rule's (frequent_identical).
type FrequentIdenticalConfig struct {
	// Window is how many recent calls are looked at. Default 10.
	Window int `mapstructure:"window"`
	// Threshold is how many identical calls make a loop; 0 disables.
	// Default 5.
	Threshold int `mapstructure:"threshold"`
}

func defaultFrequentIdentical() FrequentIdenticalConfig {
	return FrequentIdenticalConfig{Window: 10, Threshold: 5}
}

func (c FrequentIdenticalConfig) check(historySize int) error {
	if c.Threshold < 0 || (c.Threshold > 0 && (c.Window < c.Threshold || c.Window > historySize)) {
		return fmt.Errorf("frequent_identical: threshold (%d) must be ≤ window (%d) ≤ history_size (%d)", c.Threshold, c.Window, historySize)
	}
	return nil
}
