package engine

// Leaving stuck needs new evidence: a fingerprint the loop never had. A
// different action alone is not recovery — an agent that alternates its
// loop with another call has not left it. A verdict kept this way never
// decides a kill: an agent that has left its loop must not be killed for
// it later.
//
// keepStuck replaces *v with the kept stuck verdict and reports true when
// the session stays stuck.
func keepStuck(s *session, v *verdict, trig Trigger) bool {
	if s.state != StateStuck || v.state == StateStuck {
		return false
	}
	n := len(s.hist)
	if trig == TriggerTick || n == 0 || !s.hist[n-1].hasFP() || s.extra.loop.hasFP(s.hist[n-1].fp) {
		*v = verdict{by: s.extra.loop.rule, state: StateStuck, reason: s.reason, period: s.extra.loop.period, loopStart: -1, window: n}
		return true
	}
	return false
}

// loopState remembers the stuck loop being reported, so it is killed once
// and left only on new evidence.
type loopState struct {
	rule       rule
	startIndex int64
	startTime  int64
	firstSpan  [8]byte
	period     int
	fps        [8]Digest
	nfps       int
	killed     bool
	backstop   bool
}

func (l *loopState) hasFP(fp Digest) bool {
	for i := 0; i < l.nfps; i++ {
		if l.fps[i] == fp {
			return true
		}
	}
	return false
}

// startLoop records the loop a new stuck verdict found: where it started
// and which fingerprints it had, so recovery can tell a new one.
func (s *session) startLoop(v *verdict, n int) {
	l := &s.extras().loop
	*l = loopState{rule: v.by, period: v.period}
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
