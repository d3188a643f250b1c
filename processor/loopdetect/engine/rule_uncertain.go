package engine

import (
	"fmt"
	"strings"
)

// unsafeEvidenceRule: a loop-shaped sequence whose evidence cannot support
// a verdict is uncertain — a missing fingerprint is never read as "no
// progress" (the redacted-evidence case), and a name-only signature may
// hide different arguments.
type unsafeEvidenceRule struct{}

func (unsafeEvidenceRule) evaluate(w *window, v *verdict) bool {
	sh, ok := w.periodic()
	if !ok || (!sh.lowConf && !sh.missing) {
		return false
	}
	r := ReasonMissingFingerprint
	if sh.lowConf {
		r = ReasonNameOnly
	}
	n := len(w.history)
	*v = verdict{state: StateUncertain, reason: r, period: sh.period, reps: sh.sigRun / sh.period, loopStart: n - sh.sigRun, window: n, lowConf: sh.lowConf}
	return true
}

func (unsafeEvidenceRule) explain(b *strings.Builder, w *window, v verdict) {
	if v.reason == ReasonNameOnly {
		fmt.Fprintf(b, "loop-shaped (%s x%d) but arguments not recorded (name-only signature): no safe verdict", w.cycle(v.period), v.reps)
		return
	}
	fmt.Fprintf(b, "loop-shaped (%s x%d) but no progress fingerprint recorded: no safe verdict", w.cycle(v.period), v.reps)
}

// workingRule: everything else is working — loop-shaped with a moving
// fingerprint (progress), or nothing loop-shaped at all.
type workingRule struct{}

func (workingRule) evaluate(w *window, v *verdict) bool {
	*v = verdict{state: StateWorking, reason: ReasonNoLoop, loopStart: -1, window: len(w.history)}
	if _, periodic := w.periodic(); periodic || w.frequentStall() {
		v.reason = ReasonProgress
	}
	return true
}

func (workingRule) explain(b *strings.Builder, w *window, v verdict) {
	if v.reason == ReasonProgress {
		b.WriteString("progress: the fingerprint changed")
		return
	}
	fmt.Fprintf(b, "no loop in the last %d calls", len(w.history))
}
