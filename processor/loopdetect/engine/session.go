package engine

import (
	"encoding/binary"
	"fmt"
	"github.com/otelcol-loop/otelcol-loop/internal/target"
	"hash/maphash"
	"strings"
	"time"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
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
	// durUs is the span's duration in microseconds, rounded up so twins
	// that overlap by less than a millisecond still overlap here
	// (saturating at 71 minutes).
	durUs   uint32
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
	// fNovel: when it arrived, the call was a new action (its signature's
	// first call in the history) or brought a new result (a fingerprint no
	// earlier call with its signature had).
	fNovel uint8 = 1 << 7
)

func (r *record) has(f uint8) bool { return r.flags&f != 0 }
func (r *record) fpSource() FingerprintSource {
	return FingerprintSource(r.flags >> fpSrcShift & 3)
}
func (r *record) setFPSource(f FingerprintSource) {
	r.flags = r.flags&^(3<<fpSrcShift) | uint8(f)<<fpSrcShift
}
func (r *record) hasFP() bool { return r.fpSource() != FingerprintMissing }
func (r *record) end() int64  { return r.start + int64(r.durUs)*int64(time.Microsecond) }

// id32 digests a span id for the parent/twin comparisons; 0 only for the
// zero id (no parent), which matches nothing.
func id32(id [8]byte) uint32 {
	x := uint64(id[0]) | uint64(id[1])<<8 | uint64(id[2])<<16 | uint64(id[3])<<24 |
		uint64(id[4])<<32 | uint64(id[5])<<40 | uint64(id[6])<<48 | uint64(id[7])<<56
	if x == 0 {
		return 0
	}
	return uint32(hash64.Mix(x)) | 1
}

// session is a tracked session: what a call reads and writes, in 256
// bytes (four cache lines; its position in a chunk is aligned to them).
// What only some sessions need (sessionExtras, tokenState, a long key) and
// the description transitions carry (sessionDesc, shared by the sessions
// that describe themselves alike) are behind pointers.
type session struct {
	keyLen uint16
	state  State
	reason Reason
	// keyHead holds the key, or its first keyInline bytes when longer
	// (the whole key is then in long): most keys (trace ids, UUIDs) are
	// compared here, on the line the look-up reads anyway.
	keyHead  [keyInline]byte
	lastSeen int64
	// firstSeen is the engine time of the first call: the backstop counts
	// from it, so an agent's skewed span clock cannot trip it.
	firstSeen int64
	// hist is ordered by start time; total counts every call after dedup,
	// so hist[i] is call number total-len(hist)+i+1.
	hist       []record
	total      int64
	firstStart int64
	// extra holds what only some sessions need (a loop, a lease, failures),
	// allocated on first use to keep a working session small.
	extra      *sessionExtras
	tok        *tokenState
	cycles     cycleTracker
	traceID    [16]byte
	lastParent [8]byte
	// pos is the session's slab position in its shard's table.
	pos  uint32
	seq  int64
	desc *sessionDesc
	// long is the whole key when it is longer than keyInline.
	long *string
}

// keyInline is how much of a session key the session holds itself: what
// is left of its 256 bytes.
const keyInline = 68

// sessionDesc is how a session describes itself in its transitions: the
// newest non-empty value of each field over its calls. Descriptions are
// immutable and shared: the sessions of one agent process usually have
// the same one, so each costs a session a pointer (keepDesc).
type sessionDesc struct {
	source string
	agent  string
	client string
	target target.Process
	// sender identifies the agent process target names (senderOf), by
	// which the session table shares itself out at max_sessions.
	sender uint64
}

// noDesc describes a session before its first call is noted; it also
// marks a table position as in use.
var noDesc = &sessionDesc{}

// setKey stores key, which is at most maxKept bytes (Observe bounds it).
func (s *session) setKey(key string) {
	s.keyLen = uint16(len(key))
	copy(s.keyHead[:], key)
	if len(key) > keyInline {
		long := strings.Clone(key)
		s.long = &long
	}
}

// keyIs reports whether s is key's session.
func (s *session) keyIs(key string) bool {
	if len(key) != int(s.keyLen) {
		return false
	}
	if len(key) <= keyInline {
		return string(s.keyHead[:len(key)]) == key
	}
	return *s.long == key
}

// keyString is the session key (a new string when it is held inline:
// transitions are rare, and a string per session would cost an allocation
// and 48 bytes more on each).
func (s *session) keyString() string {
	if s.long != nil {
		return *s.long
	}
	return string(s.keyHead[:s.keyLen])
}

// hash is the key's keyed hash under seed, as Engine.hashKey gives it.
func (s *session) hash(seed maphash.Seed) uint64 {
	if s.long != nil {
		return maphash.String(seed, *s.long)
	}
	return maphash.Bytes(seed, s.keyHead[:s.keyLen])
}

type sessionExtras struct {
	loop      loopState
	lease     leaseState
	policy    RetryPolicy
	hystKey   uint64
	hystCount int
	// errClass and errText name the newest failure, for explanations;
	// errText is masked (canon's Normalizer.ShownError).
	errClass string
	errText  string
	streak   failureStreak
	// wait holds the implicit leases, from the session's first poll.
	wait *implicitWaits
}

func (s *session) extras() *sessionExtras {
	if s.extra == nil {
		s.extra = &sessionExtras{}
	}
	return s.extra
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

// noteMeta keeps the call's trace ids and descriptive fields. The fields
// (source, agent, client, target) are compared with the session's shared
// description, which the sessions of one agent have in common and so is
// usually in cache, and a new description is made only when one changes.
func (s *session) noteMeta(sh *shard, c *ToolCall) {
	s.traceID = c.TraceID
	s.lastParent = c.ParentSpanID
	d := s.desc
	if changes(d.source, c.SessionSource) || changes(d.agent, c.Agent) || changes(d.client, c.Client) ||
		changes(d.target.ServiceName, c.Target.ServiceName) || changes(d.target.ServiceInstanceID, c.Target.ServiceInstanceID) ||
		changes(d.target.HostName, c.Target.HostName) || (c.Target.PID != 0 && c.Target.PID != d.target.PID) {
		s.desc = sh.describe(d, c)
		if s.desc.sender != d.sender {
			sh.tab.redescribe(s, d.sender, s.desc.sender)
		}
	}
}

// changes reports whether noting src over kept changes it: an empty value
// keeps the previous one, a long one is kept bounded.
func changes(kept, src string) bool {
	return src != "" && kept != truncate(src, maxKept)
}

// maxDescs bounds the descriptions a shard keeps for sharing.
const maxDescs = 1024

// describe is d updated with c's non-empty descriptive fields (bounded),
// d itself when they change nothing, else the shard's copy of the result,
// made when new. The shard's table of copies is dropped whole when full:
// the sessions keep theirs.
func (sh *shard) describe(d *sessionDesc, c *ToolCall) *sessionDesc {
	n := *d
	keep := func(dst *string, src string) {
		if src = truncate(src, maxKept); src != "" {
			*dst = src
		}
	}
	keep(&n.source, c.SessionSource)
	keep(&n.agent, c.Agent)
	keep(&n.client, c.Client)
	keep(&n.target.ServiceName, c.Target.ServiceName)
	keep(&n.target.ServiceInstanceID, c.Target.ServiceInstanceID)
	keep(&n.target.HostName, c.Target.HostName)
	if c.Target.PID != 0 {
		n.target.PID = c.Target.PID
	}
	if n == *d {
		return d
	}
	// The copies are found without their sender, which follows from the
	// target: it is worked out once per new copy, not per session.
	n.sender = 0
	if shared, ok := sh.descs[n]; ok {
		return shared
	}
	if len(sh.descs) >= maxDescs || sh.descs == nil {
		sh.descs = make(map[sessionDesc]*sessionDesc)
	}
	// The strings may alias the caller's memory: the copy owns its own.
	n.source, n.agent, n.client = strings.Clone(n.source), strings.Clone(n.agent), strings.Clone(n.client)
	n.target.ServiceName = strings.Clone(n.target.ServiceName)
	n.target.ServiceInstanceID = strings.Clone(n.target.ServiceInstanceID)
	n.target.HostName = strings.Clone(n.target.HostName)
	key := n
	n.sender = senderOf(&n.target)
	sh.descs[key] = &n
	return &n
}

// senderSeed keys senderOf, so that no sender can pick a target whose
// identity equals another's.
var senderSeed = maphash.MakeSeed()

// senderOf identifies the agent process a target names: its service name,
// instance id, host and pid together (0 for none, the sender of every
// session that names no target).
func senderOf(t *target.Process) uint64 {
	if *t == (target.Process{}) {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(senderSeed)
	for _, f := range [...]string{t.ServiceName, t.ServiceInstanceID, t.HostName} {
		h.WriteString(f)
		h.WriteByte(0) // so that fields cannot trade bytes
	}
	var pid [8]byte
	binary.LittleEndian.PutUint64(pid[:], uint64(t.PID))
	h.Write(pid[:])
	return h.Sum64() | 1
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
//
// h is s.hist as sessionTable.history gives it.
func (s *session) dedup(h []record, c *record) dedupOutcome {
	cID := id32(c.spanID)
	// The call's fields in locals: the loop runs over every record on
	// every call, and reloading them (c might alias a record) doubled its
	// instructions.
	span, callID, tool := c.spanID, c.callID, c.tool
	for i := range h {
		r := &h[i]
		if r.spanID == span {
			return dedupDrop
		}
		sameCall := callID != 0 && r.callID == callID
		if !sameCall && (r.tool != tool || r.tool == otherID) {
			continue // not twins: the same tool or the same call id
		}
		outerArrived := r.parent != 0 && r.parent == cID
		innerArrived := c.parent != 0 && c.parent == id32(r.spanID)
		overlapping := sameCall && c.start <= r.end() && r.start <= c.end()
		if !outerArrived && !innerArrived && !overlapping {
			continue
		}
		spanID, parent, start := r.spanID, r.parent, min(r.start, c.start)
		if outerArrived {
			spanID, parent = c.spanID, c.parent
		}
		// The richer evidence wins; between equals, the smaller signature,
		// so a call described twice (a Claude Code span and its log record)
		// keeps the same description whichever arrives first.
		if cs, rs := c.evidenceScore(), r.evidenceScore(); cs < rs || (cs == rs && c.sig >= r.sig) {
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

// insert places r by start time and returns its position (-1: older than
// everything kept, counted but not stored) and whether it arrived out of
// order.
func (s *session) insert(r *record, capacity int) (int, bool) {
	s.total++
	n := len(s.hist)
	pos := n
	for pos > 0 && s.hist[pos-1].start > r.start {
		pos--
	}
	if n == capacity {
		if pos == 0 {
			return -1, true
		}
		copy(s.hist, s.hist[1:pos])
		pos--
		s.hist[pos] = *r
	} else {
		if n == cap(s.hist) {
			// Grow by doubling up to exactly capacity: short sessions stay small.
			grown := make([]record, n, min(max(2*n, 4), capacity))
			copy(grown, s.hist)
			s.hist = grown
		}
		s.hist = append(s.hist, record{})
		copy(s.hist[pos+1:], s.hist[pos:n])
		s.hist[pos] = *r
	}
	for i := pos; i < len(s.hist); i++ {
		s.markChanged(i)
	}
	return pos, pos != len(s.hist)-1
}

func (s *session) markChanged(i int) {
	// r's fields in locals: the scan runs back over the whole history of
	// a working agent, and with r's flags written in the loop every field
	// was reloaded on every step.
	h := s.hist[:i+1]
	r := &h[i]
	sig, fp, hasFP := r.sig, r.fp, r.hasFP()
	flags := r.flags &^ (fChanged | fNovel)
	seen, sameResult := false, false
	for j := i - 1; j >= 0; j-- {
		p := &h[j]
		if p.sig != sig {
			continue
		}
		if !seen && hasFP && p.hasFP() && p.fp != fp {
			flags |= fChanged
		}
		seen = true
		if !hasFP || (p.hasFP() && p.fp == fp) {
			sameResult = true
			break
		}
	}
	if !seen || !sameResult {
		flags |= fNovel
	}
	r.flags = flags
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
	return s.extra != nil && s.extra.lease.active && s.extra.lease.deadline > now
}

func (s *session) errClass() string {
	if s.extra == nil {
		return ""
	}
	return s.extra.errClass
}

// quoteErrText appends `: "<masked error text>"` to an explanation when the
// newest failure recorded one that says more than its class.
func (s *session) quoteErrText(b *strings.Builder) {
	if s.extra == nil || s.extra.errText == "" || s.extra.errText == s.extra.errClass {
		return
	}
	fmt.Fprintf(b, ": %q", s.extra.errText)
}
