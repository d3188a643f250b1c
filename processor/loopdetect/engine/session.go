package engine

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// record is one call in a session's history: 48 bytes, digests only.
type record struct {
	start int64
	sig   Digest
	fp    Digest
	// spanID is kept whole: events name the loop's first span.
	spanID [8]byte
	// parent and callID are 32-bit digests: they only match twins within
	// the short history, where a collision is negligible.
	parent uint32
	callID uint32
	// durMs is the span's duration in milliseconds (saturating).
	durMs   uint32
	tool    uint16
	attempt uint8
	// flags holds the f* bits and, in bits 5–6, the FingerprintSource.
	flags uint8
}

const (
	fLowConf uint8 = 1 << iota
	fFailed
	fRetryable
	fTerminal
	// fChanged: the fingerprint differs from the previous call with the
	// same signature, i.e. this call shows progress.
	fChanged
	fpSrcShift = 5
)

func (r *record) has(f uint8) bool { return r.flags&f != 0 }
func (r *record) fpSource() FingerprintSource {
	return FingerprintSource(r.flags >> fpSrcShift & 3)
}
func (r *record) setFPSource(f FingerprintSource) {
	r.flags = r.flags&^(3<<fpSrcShift) | uint8(f)<<fpSrcShift
}
func (r *record) hasFP() bool { return r.fpSource() != FingerprintMissing }
func (r *record) end() int64  { return r.start + int64(r.durMs)*int64(time.Millisecond) }

// id32 digests a span id for the parent/twin comparisons; 0 only for the
// zero id (no parent), which matches nothing.
func id32(id [8]byte) uint32 {
	x := uint64(id[0]) | uint64(id[1])<<8 | uint64(id[2])<<16 | uint64(id[3])<<24 |
		uint64(id[4])<<32 | uint64(id[5])<<40 | uint64(id[6])<<48 | uint64(id[7])<<56
	if x == 0 {
		return 0
	}
	return uint32(mix(x)) | 1
}

type session struct {
	key        string
	keyHash    uint64
	prev, next *session
	// hist is ordered by start time; total counts every call after dedup,
	// so hist[i] is call number total-len(hist)+i+1.
	hist       []record
	total      int64
	firstStart int64
	// firstSeen is the engine time of the first call: the backstop counts
	// from it, so an agent's skewed span clock cannot trip it.
	firstSeen  int64
	lastSeen   int64
	traceID    [16]byte
	lastParent [8]byte
	state      State
	reason     Reason
	seq        int64
	// x holds what only some sessions need (a loop, a lease, failures),
	// allocated on first use to keep a working session small.
	x      *sessionExtras
	tok    *tokenState
	source string
	agent  string
	client string
	target Target
}

type sessionExtras struct {
	loop      loopState
	lease     leaseState
	policy    RetryPolicy
	hystKey   uint64
	hystCount int
	// errClass names the newest failure, for explanations.
	errClass string
}

func (s *session) extras() *sessionExtras {
	if s.x == nil {
		s.x = &sessionExtras{}
	}
	return s.x
}

// loopState remembers the stuck loop being reported, so it is killed once
// and left only on new evidence.
type loopState struct {
	startIndex int64
	startTime  int64
	firstSpan  [8]byte
	period     int
	fps        [8]Digest
	nfps       int
	killed     bool
	backstop   bool
}

type leaseState struct {
	owner    string
	reason   string
	deadline int64
	renewals int
	active   bool
}

// maxKept bounds every string a session keeps, so hostile attribute values
// cannot grow memory.
const maxKept = 256

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func cloneIfChanged(dst *string, src string) {
	src = truncate(src, maxKept)
	if src != "" && *dst != src {
		*dst = strings.Clone(src)
	}
}

func (s *session) noteMeta(c *ToolCall) {
	s.traceID = c.TraceID
	s.lastParent = c.ParentSpanID
	cloneIfChanged(&s.source, c.SessionSource)
	cloneIfChanged(&s.agent, c.Agent)
	cloneIfChanged(&s.client, c.Client)
	cloneIfChanged(&s.target.ServiceName, c.Target.ServiceName)
	cloneIfChanged(&s.target.ServiceInstanceID, c.Target.ServiceInstanceID)
	cloneIfChanged(&s.target.HostName, c.Target.HostName)
	if c.Target.PID != 0 {
		s.target.PID = c.Target.PID
	}
}

// dedupOutcome says what a call's arrival did to the history.
type dedupOutcome uint8

const (
	// dedupNew: a new action, to be inserted.
	dedupNew dedupOutcome = iota
	// dedupDrop: a redelivery or a nested twin with no better evidence.
	dedupDrop
	// dedupUpgraded: a nested twin whose evidence replaced its twin's.
	dedupUpgraded
)

// evidenceScore ranks what a twin knows: arguments, then a fingerprint.
func (r *record) evidenceScore() int {
	score := 0
	if !r.has(fLowConf) {
		score += 2
	}
	if r.hasFP() {
		score++
	}
	return score
}

// dedup drops a second delivery of a span, and merges tool spans nested in
// one another (same call id or same tool) into one action that keeps the
// outermost span's id and the richer evidence: an agent's execute_tool
// span with content often wraps an MCP tools/call span without it, and the
// inner one usually arrives first. Spans sharing a call id merge only when
// they overlap in time: some frameworks number calls per turn.
func (s *session) dedup(c *record) dedupOutcome {
	cID := id32(c.spanID)
	for i := range s.hist {
		r := &s.hist[i]
		if r.spanID == c.spanID {
			return dedupDrop
		}
		sameCall := c.callID != 0 && r.callID == c.callID
		twin := (r.tool == c.tool && r.tool != otherID) || sameCall
		outerArrived := twin && r.parent != 0 && r.parent == cID
		innerArrived := twin && c.parent != 0 && c.parent == id32(r.spanID)
		overlapping := sameCall && c.start <= r.end() && r.start <= c.end()
		if !outerArrived && !innerArrived && !overlapping {
			continue
		}
		spanID, parent, start := r.spanID, r.parent, min(r.start, c.start)
		if outerArrived {
			spanID, parent = c.spanID, c.parent
		}
		if c.evidenceScore() <= r.evidenceScore() {
			r.spanID, r.parent, r.start = spanID, parent, start
			return dedupDrop
		}
		*r = *c
		r.spanID, r.parent, r.start = spanID, parent, start
		for j := range s.hist {
			s.markChanged(j)
		}
		return dedupUpgraded
	}
	return dedupNew
}

// insert places r by start time and reports whether it arrived out of order.
func (s *session) insert(r record, capacity int) bool {
	s.total++
	n := len(s.hist)
	pos := n
	for pos > 0 && s.hist[pos-1].start > r.start {
		pos--
	}
	if n == capacity {
		if pos == 0 {
			return true // older than everything kept: counted, not stored
		}
		copy(s.hist, s.hist[1:pos])
		pos--
		s.hist[pos] = r
	} else {
		if n == cap(s.hist) {
			// Grow by doubling up to exactly capacity: short sessions stay small.
			grown := make([]record, n, min(max(2*n, 4), capacity))
			copy(grown, s.hist)
			s.hist = grown
		}
		s.hist = append(s.hist, record{})
		copy(s.hist[pos+1:], s.hist[pos:n])
		s.hist[pos] = r
	}
	for i := pos; i < len(s.hist); i++ {
		s.markChanged(i)
	}
	return pos != len(s.hist)-1
}

func (s *session) markChanged(i int) {
	r := &s.hist[i]
	r.flags &^= fChanged
	if !r.hasFP() {
		return
	}
	for j := i - 1; j >= 0; j-- {
		if s.hist[j].sig == r.sig {
			if s.hist[j].hasFP() && s.hist[j].fp != r.fp {
				r.flags |= fChanged
			}
			return
		}
	}
}

// noteLease records a declared wait and reports false when it is not
// honoured. A later deadline is a renewal; so is a new lease after the last
// one expired (whatever its owner), so neither extending nor handing a wait
// on escapes the renewal limit. While a lease runs its owner is kept.
func (s *session) noteLease(l Lease, maxRenewals int, now int64) bool {
	if l.Owner == "" && l.Deadline.IsZero() {
		return true
	}
	if l.Owner == "" || l.Deadline.IsZero() {
		return false // a lease needs both an owner and a deadline
	}
	d := l.Deadline.UnixNano()
	x := s.extras()
	ls := &x.lease
	switch {
	case !ls.active:
		*ls = leaseState{owner: strings.Clone(truncate(l.Owner, maxKept)), reason: strings.Clone(truncate(l.Reason, maxKept)), deadline: d, active: true}
	case ls.deadline <= now && (l.Owner != ls.owner || d > ls.deadline):
		if ls.renewals >= maxRenewals {
			return false
		}
		ls.renewals++
		ls.deadline = d
		if l.Owner != ls.owner {
			ls.owner, ls.reason = strings.Clone(truncate(l.Owner, maxKept)), strings.Clone(truncate(l.Reason, maxKept))
		}
	case l.Owner != ls.owner:
		return false // the owner is kept while its lease runs
	case d > ls.deadline:
		if ls.renewals >= maxRenewals {
			return false
		}
		ls.renewals++
		ls.deadline = d
	}
	return true
}

func (s *session) leaseValid(now int64) bool {
	return s.x != nil && s.x.lease.active && s.x.lease.deadline > now
}

// verdict is one evaluation's outcome before stickiness and hysteresis.
type verdict struct {
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
	for p := 1; p <= e.cfg.MaxPeriod && 2*p <= n; p++ {
		run := 0
		for i := n - 1; i-p >= 0 && h[i].sig == h[i-p].sig; i-- {
			run++
		}
		if run+p < p*e.cfg.MinRepetitions {
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

// frequent finds the most repeated signature among the last window calls.
func (e *Engine) frequent(h []record, lowConf bool, window int) (count, first int) {
	n := len(h)
	lo := max(0, n-window)
	for i := lo; i < n; i++ {
		if h[i].has(fLowConf) != lowConf {
			continue
		}
		c := 1
		for j := i + 1; j < n; j++ {
			if h[j].sig == h[i].sig {
				c++
			}
		}
		if c > count {
			count, first = c, i
		}
	}
	return count, first
}

// progressBetween reports a changed fingerprint among calls first+1..last
// with first's signature anywhere in between.
func progressBetween(h []record, first int) bool {
	sig := h[first].sig
	last := first
	for i := first + 1; i < len(h); i++ {
		if h[i].sig == sig {
			last = i
		}
	}
	for i := first + 1; i <= last; i++ {
		if h[i].has(fChanged) {
			return true
		}
	}
	return false
}

type retryOutcome uint8

const (
	retryNone retryOutcome = iota
	retryOK
	retryNonRetryable
	retryCollapsed
	retryExhausted
)

// retry judges the run of identical failing calls that ends the history.
func (e *Engine) retry(s *session) (retryOutcome, int, int, int) {
	h := s.hist
	n := len(h)
	last := &h[n-1]
	if !last.has(fFailed) {
		return retryNone, 0, 0, 0
	}
	r := 1
	for i := n - 2; i >= 0 && h[i].sig == last.sig && h[i].has(fFailed); i-- {
		r++
	}
	if r < 2 {
		return retryNone, 0, 0, 0
	}
	pol := e.cfg.RetryPolicy
	if s.x != nil && s.x.policy.MaxAttempts > 0 {
		pol = s.x.policy
	}
	// The attribute may only add attempts: an agent reporting attempt 1
	// forever must not stretch the budget.
	attemptOf := func(pos, nth int) int {
		return max(int(h[pos].attempt), nth)
	}
	attempt := attemptOf(n-1, r)
	if !last.has(fRetryable) {
		return retryNonRetryable, r, attempt, pol.MaxAttempts
	}
	if attempt > pol.MaxAttempts {
		return retryExhausted, r, attempt, pol.MaxAttempts
	}
	for k := 1; k < r; k++ {
		pos := n - r + k
		a := attemptOf(pos, k+1)
		want := float64(pol.InitialInterval) * math.Pow(pol.BackoffRate, float64(max(a-2, 0)))
		gap := float64(h[pos].start - h[pos-1].start)
		if gap < want*(1-e.cfg.BackoffTolerance) {
			return retryCollapsed, r, attempt, pol.MaxAttempts
		}
	}
	return retryOK, r, attempt, pol.MaxAttempts
}

// decide applies SPEC §5's order: waiting, retrying, stuck, uncertain, working.
func (e *Engine) decide(s *session, now int64) verdict {
	h := s.hist
	n := len(h)
	v := verdict{state: StateWorking, reason: ReasonNoLoop, loopStart: -1, window: n}
	if e.cfg.Backstop > 0 && s.firstSeen > 0 && now-s.firstSeen >= int64(e.cfg.Backstop) {
		return verdict{state: StateStuck, reason: ReasonBackstop, loopStart: 0, window: n}
	}
	if n == 0 {
		return v
	}
	sh, periodic := e.periodic(h)
	count, first := 0, 0
	if e.cfg.FrequentThreshold > 0 {
		count, first = e.frequent(h, false, e.cfg.FrequentWindow)
	}
	frequent := count >= e.cfg.FrequentThreshold && e.cfg.FrequentThreshold > 0
	frequentProgress := frequent && progressBetween(h, first)
	// Seed 004's incident: the same read, in a row, returning the same
	// terminal result. Anything in between, or a changed result, is not it.
	terminalAt := -1
	if e.cfg.TerminalReread && n >= 2 && !h[n-1].has(fLowConf) {
		last := &h[n-1]
		for j := n - 2; j >= 0; j-- {
			r := &h[j]
			if r.sig != last.sig || !r.has(fTerminal) || !r.hasFP() || r.fp != last.fp {
				break
			}
			terminalAt = j
		}
	}
	// A repetition without progress is what a lease or a retry policy may
	// explain; a repetition whose fingerprint moves needs no explaining.
	periodicStall := periodic && (sh.fpRun >= sh.period*e.cfg.MinRepetitions || sh.missing || sh.lowConf)
	repetition := periodicStall || (frequent && !frequentProgress) || terminalAt >= 0

	// 1. waiting: a valid lease covers the repetition.
	if repetition && s.leaseValid(now) {
		return verdict{state: StateWaiting, reason: ReasonLease, loopStart: -1, window: n, period: sh.period, reps: sh.sigRun / max(sh.period, 1)}
	}
	// 2. retrying: retryable failures inside the policy.
	outcome, run, attempt, maxTry := e.retry(s)
	if outcome == retryOK {
		return verdict{state: StateRetrying, reason: ReasonRetryPolicy, period: 1, reps: run, loopStart: n - run, window: n, attempt: attempt, maxTry: maxTry}
	}
	// 3. stuck.
	stuck := verdict{state: StateStuck, window: n, loopStart: -1}
	switch {
	case terminalAt >= 0:
		stuck.reason, stuck.period, stuck.reps, stuck.loopStart = ReasonTerminalReread, 1, n-terminalAt, terminalAt
	case frequent && !frequentProgress:
		stuck.reason, stuck.count, stuck.loopStart, stuck.window = ReasonFrequentIdentical, count, first, min(n, e.cfg.FrequentWindow)
		stuck.period, stuck.reps = 1, count
		if periodic && sh.fpRun >= sh.period*e.cfg.MinRepetitions && !sh.lowConf {
			stuck.period, stuck.reps = sh.period, sh.fpRun/sh.period
			stuck.loopStart = min(first, n-sh.fpRun)
		}
	case periodic && !sh.lowConf && sh.fpRun >= sh.period*e.cfg.MinRepetitions:
		stuck.reason, stuck.period, stuck.reps, stuck.loopStart = ReasonPeriodicLoop, sh.period, sh.fpRun/sh.period, n-sh.fpRun
		if sh.period == 1 && h[n-1].fpSource() == FingerprintResult {
			stuck.reason = ReasonUnchangedResult
		}
	}
	if e.cfg.NameOnlyThreshold > 0 && stuck.reason == ReasonNone {
		if c, f := e.frequent(h, true, len(h)); c >= e.cfg.NameOnlyThreshold && !progressBetween(h, f) {
			stuck.reason, stuck.count, stuck.loopStart, stuck.period, stuck.reps, stuck.lowConf = ReasonFrequentIdentical, c, f, 1, c, true
			first = f
		}
	}
	if stuck.reason != ReasonNone {
		switch outcome {
		case retryNonRetryable:
			stuck.reason = ReasonNonRetryableError
		case retryCollapsed:
			stuck.reason = ReasonBackoffCollapsed
		case retryExhausted:
			stuck.reason = ReasonRetryExhausted
		}
		if outcome != retryNone {
			stuck.count, stuck.attempt, stuck.maxTry = run, attempt, maxTry
		}
		stuck.cycleKey = cycleKey(h, stuck.period)
		if stuck.reason == ReasonFrequentIdentical {
			// The repeated call, not whatever came last, identifies the loop.
			stuck.cycleKey = mix(uint64(h[first].sig) ^ mix(uint64(h[first].fp)))
		}
		return stuck
	}
	// 4. uncertain: loop-shaped without safe evidence.
	if periodic && (sh.lowConf || sh.missing) {
		r := ReasonMissingFingerprint
		if sh.lowConf {
			r = ReasonNameOnly
		}
		return verdict{state: StateUncertain, reason: r, period: sh.period, reps: sh.sigRun / sh.period, loopStart: n - sh.sigRun, window: n, lowConf: sh.lowConf}
	}
	// 5. working.
	if periodic || frequent {
		v.reason = ReasonProgress
	}
	return v
}

func cycleKey(h []record, period int) uint64 {
	var k uint64 = uint64(period)
	for i := max(0, len(h)-period); i < len(h); i++ {
		k = mix(k ^ uint64(h[i].sig) ^ mix(uint64(h[i].fp)))
	}
	return k
}

// evaluate decides, applies stickiness, hysteresis and the kill policy,
// and appends a transition when the state changes or a kill is decided.
func (e *Engine) evaluate(sh *shard, s *session, now int64, trig Trigger, span [8]byte, out []Transition) []Transition {
	v := e.decide(s, now)
	n := len(s.hist)
	// Leaving stuck needs new evidence: a fingerprint the loop never had.
	// A verdict kept this way never decides a kill: an agent that has left
	// its loop must not be killed for it later.
	kept := false
	if s.state == StateStuck && v.state != StateStuck {
		if trig == TriggerTick || n == 0 || !s.hist[n-1].hasFP() || s.x.loop.hasFP(s.hist[n-1].fp) {
			v = verdict{state: StateStuck, reason: s.reason, period: s.x.loop.period, loopStart: -1, window: n}
			kept = true
		}
	}
	// Hysteresis delays non-deterministic stuck verdicts, never the others.
	if v.state == StateStuck && s.state != StateStuck && e.cfg.Hysteresis > 1 && !v.reason.deterministic() {
		x := s.extras()
		if x.hystKey == v.cycleKey && x.hystCount > 0 {
			x.hystCount++
		} else {
			x.hystKey, x.hystCount = v.cycleKey, 1
		}
		if x.hystCount < e.cfg.Hysteresis {
			return out
		}
	} else if v.state != StateStuck && s.x != nil {
		s.x.hystCount = 0
	}
	from := s.state
	if v.state == StateStuck && from != StateStuck {
		s.startLoop(v, n)
	}
	var loop *loopState
	if v.state == StateStuck {
		loop = &s.x.loop
		if v.reason == ReasonBackstop {
			loop.backstop = true
		}
	}
	kill := false
	if loop != nil && !kept && e.cfg.Kill.Enabled && !loop.killed && (!v.lowConf || e.cfg.Kill.AllowLowConfidence) {
		// The loop's length is the fresh verdict's own: calls from its
		// first call to the newest.
		loopCalls := int64(n - v.loopStart)
		if v.loopStart < 0 {
			loopCalls = s.total - loop.startIndex + 1
		}
		if e.killReasons[v.reason] || (e.cfg.Kill.AfterLoopCalls > 0 && loopCalls >= int64(e.cfg.Kill.AfterLoopCalls)) || e.loopTokensKill(s, loop) {
			kill = true
			loop.killed = true
		}
	}
	if v.state == from && !kill {
		if v.state != StateStuck {
			s.reason = v.reason
		}
		return out
	}
	if from == StateStuck && v.state != StateStuck {
		s.x.loop = loopState{}
	}
	s.state = v.state
	s.reason = v.reason
	s.seq++
	t := Transition{
		ID:            eventID(s.keyHash, s.seq),
		Seq:           s.seq,
		Session:       s.key,
		SessionSource: s.source,
		TraceID:       s.traceID,
		ParentSpanID:  s.lastParent,
		From:          from,
		To:            v.state,
		Reason:        v.reason,
		Trigger:       trig,
		Period:        v.period,
		Repetitions:   v.reps,
		Window:        v.window,
		CallIndex:     s.total,
		TriggerSpanID: span,
		LowConfidence: v.lowConf,
		Kill:          kill && !e.cfg.Kill.DryRun,
		DryRun:        kill && e.cfg.Kill.DryRun,
		DecidedAt:     time.Unix(0, now).UTC(),
		Agent:         s.agent,
		Client:        s.client,
		Target:        s.target,
	}
	if trig == TriggerCall {
		for i := n - 1; i >= 0; i-- {
			if s.hist[i].spanID == span {
				t.CallIndex = s.total - int64(n-1-i)
				break
			}
		}
	}
	e.describeEvidence(sh, s, v, &t)
	if loop != nil {
		t.FirstLoopSpanID = loop.firstSpan
		t.DelayCalls = t.CallIndex - loop.startIndex + 1
		if loop.startTime > 0 {
			end := now
			if trig == TriggerCall && n > 0 {
				end = s.hist[n-1].start
			}
			t.DelaySeconds = float64(end-loop.startTime) / 1e9
		}
		if v.period == 0 {
			t.Period = loop.period
		}
	}
	t.Explanation = e.explain(sh, s, v, from, trig, now)
	s.fillTokens(loop, &t)
	return append(out, t)
}

func (s *session) startLoop(v verdict, n int) {
	l := &s.extras().loop
	*l = loopState{period: v.period}
	if v.loopStart >= 0 && v.loopStart < n {
		r := &s.hist[v.loopStart]
		l.startIndex = s.total - int64(n-v.loopStart) + 1
		l.startTime = r.start
		l.firstSpan = r.spanID
		for i := v.loopStart; i < n && l.nfps < len(l.fps); i++ {
			if s.hist[i].hasFP() && !l.hasFP(s.hist[i].fp) {
				l.fps[l.nfps] = s.hist[i].fp
				l.nfps++
			}
		}
	} else {
		l.startIndex = max(s.total-int64(n)+1, 1)
		l.startTime = s.firstStart
		if n > 0 {
			l.firstSpan = s.hist[0].spanID
		}
	}
}

func (s *session) errClass() string {
	if s.x == nil {
		return ""
	}
	return s.x.errClass
}

func (l *loopState) hasFP(fp Digest) bool {
	for i := 0; i < l.nfps; i++ {
		if l.fps[i] == fp {
			return true
		}
	}
	return false
}

func (e *Engine) describeEvidence(sh *shard, s *session, v verdict, t *Transition) {
	n := len(s.hist)
	if n == 0 {
		return
	}
	p := max(v.period, 1)
	for i := max(0, n-p); i < n; i++ {
		r := &s.hist[i]
		t.CycleTools = append(t.CycleTools, sh.names.name(r.tool))
		t.Signatures = append(t.Signatures, e.keyer.Keyed("sig", r.sig))
	}
	last := &s.hist[n-1]
	t.FingerprintSource = last.fpSource()
	if last.hasFP() {
		t.Fingerprint = e.keyer.Keyed("fp", last.fp)
	}
}

func (e *Engine) explain(sh *shard, s *session, v verdict, from State, trig Trigger, now int64) string {
	var b strings.Builder
	if from == StateWaiting && trig == TriggerTick {
		fmt.Fprintf(&b, "wait lease of %q expired; ", s.x.lease.owner)
	}
	tool := ""
	if n := len(s.hist); n > 0 {
		tool = sh.names.name(s.hist[n-1].tool)
	}
	cycle := func() string {
		names := make([]string, 0, v.period)
		for i := max(0, len(s.hist)-v.period); i < len(s.hist); i++ {
			names = append(names, sh.names.name(s.hist[i].tool))
		}
		return strings.Join(names, " → ")
	}
	switch v.reason {
	case ReasonFrequentIdentical:
		if v.lowConf {
			fmt.Fprintf(&b, "loop detected: same tool name x%d without arguments (name-only threshold)", v.count)
		} else {
			fmt.Fprintf(&b, "loop detected: same tool call x%d of last %d", v.count, v.window)
		}
	case ReasonPeriodicLoop:
		if v.period == 1 {
			fmt.Fprintf(&b, "loop detected: same tool call %s x%d with unchanged progress fingerprint", tool, v.reps)
		} else {
			fmt.Fprintf(&b, "loop detected: cycle %s repeated x%d (period %d) with unchanged progress fingerprint", cycle(), v.reps, v.period)
		}
	case ReasonUnchangedResult:
		fmt.Fprintf(&b, "loop detected: same tool call %s returned an identical result x%d in a row", tool, v.reps)
	case ReasonTerminalReread:
		fmt.Fprintf(&b, "loop detected: terminal result of %s re-read (x%d)", tool, v.reps)
	case ReasonBackstop:
		fmt.Fprintf(&b, "backstop: session active for %s (limit %s)", time.Duration(now-s.firstSeen).Round(time.Second), e.cfg.Backstop)
	case ReasonNonRetryableError:
		fmt.Fprintf(&b, "loop detected: %s failed x%d with non-retryable error %q", tool, v.count, s.errClass())
	case ReasonBackoffCollapsed:
		fmt.Fprintf(&b, "loop detected: %s retried x%d faster than the backoff policy after %q", tool, v.count, s.errClass())
	case ReasonRetryExhausted:
		fmt.Fprintf(&b, "loop detected: %s failed %d attempts, over the retry budget of %d", tool, v.attempt, v.maxTry)
	case ReasonRetryPolicy:
		fmt.Fprintf(&b, "retrying: %s attempt %d of %d after %q, backoff kept", tool, v.attempt, v.maxTry, s.errClass())
	case ReasonLease:
		ls := &s.x.lease
		fmt.Fprintf(&b, "waiting: lease held by %q until %s", ls.owner, time.Unix(0, ls.deadline).UTC().Format(time.RFC3339))
		if ls.reason != "" {
			fmt.Fprintf(&b, " (%s)", ls.reason)
		}
	case ReasonMissingFingerprint:
		fmt.Fprintf(&b, "loop-shaped (%s x%d) but no progress fingerprint recorded: no safe verdict", cycle(), v.reps)
	case ReasonNameOnly:
		fmt.Fprintf(&b, "loop-shaped (%s x%d) but arguments not recorded (name-only signature): no safe verdict", cycle(), v.reps)
	case ReasonProgress:
		b.WriteString("progress: the fingerprint changed")
	default:
		fmt.Fprintf(&b, "no loop in the last %d calls", len(s.hist))
	}
	return b.String()
}
