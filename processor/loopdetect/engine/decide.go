package engine

import (
	"strings"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
)

// rule is one verdict rule: it reads a session's history through a window
// and, when it applies, returns its verdict. It explains its own verdicts,
// so a rule and its wording live in one file (docs/design.md lists them).
type rule interface {
	// evaluate writes the rule's verdict to v and reports true when the
	// rule applies (a pointer: the verdict is not copied per rule).
	evaluate(w *window, v *verdict) bool
	// explain writes the human explanation of a verdict the rule returned.
	explain(b *strings.Builder, w *window, v verdict)
}

// verdictOrder is the only place that says which rule wins: the first rule
// that applies decides the session's state. Explanations (a wait, a retry
// policy) are checked before a repetition is read as a loop, and a loop
// before the doubts about its evidence; working is what is left.
var verdictOrder = [...]rule{
	backstopRule{},            // stuck: the session outlived the backstop
	leaseRule{},               // waiting: a valid lease covers a repetition
	retryPolicyRule{},         // retrying: retryable failures inside the policy
	failedRepetitionRule{},    // stuck: a repetition of failures the policy does not explain
	terminalRereadRule{},      // stuck: a terminal result read again
	frequentIdenticalRule{},   // stuck: ≥ N identical calls of the last M, nothing new between
	periodicLoopRule{},        // stuck: a cycle repeated with an unchanged fingerprint
	longCycleRule{},           // stuck: a longer cycle that brings nothing new
	cycleWithoutResultsRule{}, // stuck: a short cycle repeated many times without results
	failureStreakRule{},       // stuck: one tool failing the same way, whatever its arguments
	nameOnlyThresholdRule{},   // stuck (low confidence): repeated name-only calls, when configured
	unsafeEvidenceRule{},      // uncertain: loop-shaped, but the evidence cannot support a verdict
	workingRule{},             // working: everything else
}

// stallRules are the stuck rules that read a repetition as a loop, in
// verdict order; failedRepetitionRule refines whichever applies first.
var stallRules = [...]rule{terminalRereadRule{}, frequentIdenticalRule{}, periodicLoopRule{}, nameOnlyThresholdRule{}}

// verdict is one evaluation's outcome before recovery, hysteresis and the
// kill policy.
type verdict struct {
	by        rule
	state     State
	reason    Reason
	period    int
	reps      int
	window    int
	loopStart int // position in hist of the loop's first call, -1 for none
	count     int
	attempt   int
	maxTry    int
	lowConf   bool
	cycleKey  uint64
}

// window is what a rule reads: the session, its history, the time and the
// engine's settings. The shared analyses (periodicity, the frequent run,
// the terminal re-read, the retry run) are computed once, on first use.
type window struct {
	engine  *Engine
	shard   *shard
	session *session
	history []record
	now     int64

	scratch verdict

	done                             uint8
	shape                            shape
	isPeriodic                       bool
	freqCount, freqFirst, terminalAt int
	retry                            retryRun
}

const (
	doneShape uint8 = 1 << iota
	doneFrequent
	doneTerminal
	doneRetry
)

// reset points w at a session for one evaluation. Only the inputs and the
// done bits are set: a cached analysis is read only once its bit says it
// was computed, and clearing the whole window (its scratch verdict
// included) on every tool call showed in the profile.
func (w *window) reset(e *Engine, sh *shard, s *session, now int64) {
	w.engine, w.shard, w.session, w.history, w.now, w.done = e, sh, s, s.hist, now, 0
}

// periodic is the periodicity of the newest calls. The shape is returned
// by pointer: half a dozen rules read it on every call.
func (w *window) periodic() (*shape, bool) {
	if w.done&doneShape == 0 {
		w.done |= doneShape
		w.shape, w.isPeriodic = w.engine.periodic(w.history)
	}
	return &w.shape, w.isPeriodic
}

// frequent is the longest run of one signature among the last
// FrequentIdentical.Window calls with nothing new between (0 when the rule is off).
func (w *window) frequent() (count, first int) {
	if w.done&doneFrequent == 0 {
		w.done |= doneFrequent
		w.freqCount, w.freqFirst = 0, 0 // reset keeps the last session's
		if w.engine.cfg.FrequentIdentical.Threshold > 0 {
			w.freqCount, w.freqFirst = w.engine.frequent(w.history, false, w.engine.cfg.FrequentIdentical.Window, w.session.excusedFrom(len(w.history), w.now))
		}
	}
	return w.freqCount, w.freqFirst
}

// frequentStall reports the frequent-identical rule's condition.
func (w *window) frequentStall() bool {
	c, _ := w.frequent()
	return w.engine.cfg.FrequentIdentical.Threshold > 0 && c >= w.engine.cfg.FrequentIdentical.Threshold
}

// periodicStall reports a periodic repetition without progress (or with
// evidence too weak to show progress).
func (w *window) periodicStall() bool {
	sh, ok := w.periodic()
	return ok && (sh.fpRun >= sh.period*w.engine.cfg.PeriodicLoop.MinRepetitions || sh.missing || sh.lowConf)
}

// repetition is a repetition without progress: what a lease or a retry
// policy may explain. A repetition whose fingerprint moves needs no
// explaining.
func (w *window) repetition() bool {
	return w.periodicStall() || w.frequentStall() || w.terminal() >= 0
}

// retryRun is the run of identical failing calls that ends the history.
func (w *window) retryRun() retryRun {
	if w.done&doneRetry == 0 {
		w.done |= doneRetry
		w.retry = w.engine.retry(w.session)
	}
	return w.retry
}

// toolName names the newest call's tool.
func (w *window) toolName() string {
	if n := len(w.history); n > 0 {
		return w.shard.names.name(w.history[n-1].tool)
	}
	return ""
}

// cycle names the tools of the newest period calls, in order.
func (w *window) cycle(period int) string {
	names := make([]string, 0, period)
	for i := max(0, len(w.history)-period); i < len(w.history); i++ {
		names = append(names, w.shard.names.name(w.history[i].tool))
	}
	return strings.Join(names, " → ")
}

// decide returns the verdict of the first rule in verdictOrder that applies.
func (e *Engine) decide(w *window) *verdict {
	// The rules write into the window's scratch verdict: a local one would
	// escape through their interface calls. It is returned by pointer, as
	// recovery, hysteresis and the kill policy read it: each copy of its
	// hundred-odd bytes showed in the profile of a tool call.
	v := &w.scratch
	*v = verdict{}
	// Ranged through a pointer: ranging over the array copied its
	// thirteen interface values on every call.
	for _, r := range &verdictOrder {
		if r.evaluate(w, v) {
			v.by = r
			return v
		}
	}
	// Not reached: workingRule always applies.
	*v = verdict{by: workingRule{}, state: StateWorking, reason: ReasonNoLoop, loopStart: -1, window: len(w.history)}
	return v
}

func cycleKey(h []record, period int) uint64 {
	k := uint64(period)
	for i := max(0, len(h)-period); i < len(h); i++ {
		k = hash64.Mix(k ^ uint64(h[i].sig) ^ hash64.Mix(uint64(h[i].fp)))
	}
	return k
}
