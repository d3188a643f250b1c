package engine

import "github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"

// recentCalls is how far back the cycle trackers look: the longest cycle
// long_cycle can see (a 10-page sweep that wraps is well inside it). 24
// two-byte digests keep a session within its 1 KiB budget.
const recentCalls = 24

// maxCycleWithoutResultsPeriod bounds cycle_without_results' period.
const maxCycleWithoutResultsPeriod = 5

// cycleTracker follows, in arrival order and in O(1) per call, the cycles
// too long for the history: the run of calls that brought nothing new, and
// the short cycles repeated by calls without results.
type cycleTracker struct {
	// recent holds 16-bit digests of the newest calls' (action, result)
	// pairs, a ring whose newest entry is at head-1.
	recent  [recentCalls]uint16
	n, head uint8
	// seenRun counts the newest calls whose pair was in recent; seenSpan
	// is the farthest back one of them had to look: the cycle's length.
	seenRun, seenSpan uint8
	// withoutResults[p-1] counts the newest calls with arguments and no
	// result that repeat the call p before them.
	withoutResults [maxCycleWithoutResultsPeriod]uint8
}

func satInc(x uint8) uint8 {
	if x == 255 {
		return x
	}
	return x + 1
}

// mayHold reports whether d may be in recent, four entries at a time: a
// working agent's new pair is in none, and the exact scan for the nearest
// one cost more than the rest of observe. Empty slots are zero, so d == 0
// may answer true falsely; the exact scan then finds nothing.
func (t *cycleTracker) mayHold(d uint16) bool {
	const ones, highs = 0x0001_0001_0001_0001, 0x8000_8000_8000_8000
	pat := uint64(d) * ones
	for i := 0; i < recentCalls; i += 4 {
		x := pat ^ (uint64(t.recent[i]) | uint64(t.recent[i+1])<<16 | uint64(t.recent[i+2])<<32 | uint64(t.recent[i+3])<<48)
		if (x-ones)&^x&highs != 0 {
			return true
		}
	}
	return false
}

// observe records r, the newest call by arrival. Positions are computed
// with a compare instead of a modulo: this runs on every call.
func (t *cycleTracker) observe(r *record) {
	d := uint16(hash64.Mix(uint64(r.sig)^hash64.Mix(uint64(r.fp))) >> 48)
	head, n := int(t.head), int(t.n)
	dist := 0
	if r.hasFP() && !r.has(fLowConf) && t.mayHold(d) {
		// The nearest earlier call with the same pair: scan back from the
		// newest, first the part of the ring before head, then the wrapped end.
		for i := head - 1; i >= 0 && head-i <= n; i-- {
			if t.recent[i] == d {
				dist = head - i
				break
			}
		}
		if dist == 0 {
			for i := recentCalls - 1; i >= head && head+recentCalls-i <= n; i-- {
				if t.recent[i] == d {
					dist = head + recentCalls - i
					break
				}
			}
		}
	}
	if dist > 0 {
		t.seenRun = satInc(t.seenRun)
		t.seenSpan = max(t.seenSpan, uint8(dist))
	} else {
		t.seenRun, t.seenSpan = 0, 0
	}
	if r.hasFP() || r.has(fLowConf) {
		t.withoutResults = [maxCycleWithoutResultsPeriod]uint8{} // most calls have results
	} else {
		for p := 1; p <= maxCycleWithoutResultsPeriod; p++ {
			i := head - p
			if i < 0 {
				i += recentCalls
			}
			if p <= n && t.recent[i] == d {
				t.withoutResults[p-1] = satInc(t.withoutResults[p-1])
			} else {
				t.withoutResults[p-1] = 0
			}
		}
	}
	t.recent[head] = d
	if head++; head == recentCalls {
		head = 0
	}
	t.head = uint8(head)
	if n < recentCalls {
		t.n++
	}
}

// failureStreak follows the newest run of non-retryable failures of one
// tool with one error class.
type failureStreak struct {
	class   uint32
	tool    uint16
	count   uint16
	unknown bool
	// start is the session's call count when the streak began.
	start int64
}

// observe records a call by arrival: a failure extends or restarts the
// streak; a successful new call (a new action or a new result) ends it;
// anything else leaves it. A failure of an action seen before with a new
// error (the error moved: a syntax error now on line 20, not 10) is
// progress too, so it starts a new streak.
func (f *failureStreak) observe(r *record, c *ToolCall, class uint32, total int64) {
	switch {
	case !r.has(fFailed):
		if r.has(fNovel) {
			f.count = 0
		}
	case r.has(fRetryable):
		// A provider's transient error is the retry policy's business.
	case f.count > 0 && f.tool == r.tool && f.class == class && (!r.has(fNovel) || !r.has(fChanged)):
		if f.count < 1<<15 {
			f.count++
		}
	default:
		*f = failureStreak{class: class, tool: r.tool, count: 1, unknown: c.UnknownTool, start: total}
	}
}
