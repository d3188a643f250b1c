package engine

import (
	"math"
	"math/bits"
	"unsafe"
)

// sessionTable is one shard's sessions, laid out for the per-call path: a
// call reads an index slot, then its session and its history, whose
// addresses both follow from the slot, and nothing else of the session
// (docs/design.md, The session table).
//
//   - index: open addressing with linear probing over 8-byte slots (a 32-bit
//     tag of the key's keyed hash and the session's slab position), eight to
//     a cache line, at most three quarters full. A hit is usually found in
//     the first line read.
//   - slab: sessions (256 bytes: four cache lines) in chunks of chunkLen
//     that never move. A session keeps its position, and a *session stays
//     valid while the shard's lock is held, until Tick compacts the table
//     (compact). At the default history sizes each chunk's histories are
//     one block of records, a session's found from its position.
//   - eviction: no list is kept in recency order, so a call moves nothing.
//     A clock hand sweeps the slab for a stale session when one is needed
//     (bounded per sweep); the newest sessions are remembered in a ring as
//     they are created. See (*Engine).evictOne for the policy.
type sessionTable struct {
	index []tableSlot
	live  int
	// chunks and their records (nil when histories grow on their own).
	chunks []*sessionChunk
	recs   [][]record
	// next is the number of slab positions handed out; free holds released
	// ones, reused newest first (the warmest in cache).
	next uint32
	free []uint32
	// histCap is the history size when histories live in the chunks, 0
	// when each session allocates its own as it grows.
	histCap int
	// hand is the clock hand: the slab position the next sweep starts at.
	hand uint32
	// recent[i] is 1 + the slab position of one of the newest sessions,
	// in creation order (a ring; recentAt is the next to write).
	recent   [evictWindow]uint32
	recentAt uint8
	// oldestSeen is at most the lastSeen of every live session: a session
	// takes the time of its call, which only lowers this bound when the
	// caller's clock went back. Tick sets it exactly; while now is less
	// than staleAfter past it, no session of the table is stale and a
	// sweep would find none.
	oldestSeen int64
}

// tableSlot is one index slot: ref is 1 + a slab position (0: empty); tag
// is the high half of the key's keyed hash, whose low bits are the slot's
// home, so entries can be moved and rehashed without their keys.
type tableSlot struct {
	tag, ref uint32
}

const (
	chunkBits = 6
	// chunkLen sessions per chunk: 16 KiB, and 36 KiB of records at
	// history 12.
	chunkLen  = 1 << chunkBits
	chunkMask = chunkLen - 1
	// maxArenaHistory is the largest history size kept in the chunks. A
	// chunk gives each session its whole history from the start; above
	// this, a session's history grows as it fills, so a table of short
	// sessions stays small (history 1024 would cost 48 KiB per session).
	maxArenaHistory = 32
	// sweepLen bounds the positions one sweep of the own shard looks at,
	// sweepOtherLen one of another shard's (up to 15 of them per eviction).
	sweepLen      = 64
	sweepOtherLen = 16
)

// sessionChunk holds chunkLen sessions.
type sessionChunk struct {
	hot [chunkLen]session
}

func (t *sessionTable) init(historySize int) {
	t.oldestSeen = math.MaxInt64
	if historySize <= maxArenaHistory {
		t.histCap = historySize
	}
}

// at is the session at slab position p.
func (t *sessionTable) at(p uint32) *session {
	return &t.chunks[p>>chunkBits].hot[p&chunkMask]
}

// find is the session with key (whose keyed hash is h) and its slab
// position, or nil.
func (t *sessionTable) find(key string, h uint64) (*session, uint32) {
	if len(t.index) == 0 {
		return nil, 0
	}
	mask := uint32(len(t.index) - 1)
	tag := uint32(h >> 32)
	for i := tag & mask; ; i = (i + 1) & mask {
		sl := t.index[i]
		if sl.ref == 0 {
			return nil, 0
		}
		if sl.tag == tag {
			if s := t.at(sl.ref - 1); s.keyIs(key) {
				return s, sl.ref - 1
			}
		}
	}
}

// history is s.hist, s being at slab position p, with its records
// addressed from p when they live in the chunks: reading them then waits
// for the index slot only, not also for s, whose line is fetched at the
// same time.
func (t *sessionTable) history(p uint32, s *session) []record {
	if t.histCap == 0 {
		return s.hist
	}
	off := int(p&chunkMask) * t.histCap
	return t.recs[p>>chunkBits][off : off+len(s.hist)]
}

// add creates the session for key at now and returns it and its slab
// position; the caller has taken its slot under max_sessions (admit).
func (t *sessionTable) add(key string, h uint64, now int64) (*session, uint32) {
	if (t.live+1)*4 > len(t.index)*3 {
		t.grow()
	}
	p := t.alloc()
	mask := uint32(len(t.index) - 1)
	tag := uint32(h >> 32)
	i := tag & mask
	for t.index[i].ref != 0 {
		i = (i + 1) & mask
	}
	t.index[i] = tableSlot{tag: tag, ref: p + 1}
	t.live++
	t.recent[t.recentAt] = p + 1
	t.recentAt = (t.recentAt + 1) % evictWindow
	t.oldestSeen = min(t.oldestSeen, now)
	s := t.at(p)
	s.desc = noDesc
	s.pos = p
	s.lastSeen = now
	s.setKey(key)
	if t.histCap > 0 {
		off := int(p&chunkMask) * t.histCap
		s.hist = t.recs[p>>chunkBits][off : off : off+t.histCap]
	}
	return s, p
}

// alloc hands out a slab position, adding a chunk when none is free.
func (t *sessionTable) alloc() uint32 {
	if n := len(t.free); n > 0 {
		p := t.free[n-1]
		t.free = t.free[:n-1]
		return p
	}
	p := t.next
	if c := int(p >> chunkBits); c == len(t.chunks) {
		t.chunks = append(t.chunks, &sessionChunk{})
		if t.histCap > 0 && c == len(t.recs) {
			t.addRecords()
		}
	}
	t.next++
	return p
}

// addRecords allocates the history records of the next chunks: as many
// chunks at once as make the block a whole number of 8 KiB pages (two at
// history 12), since the runtime rounds a large allocation up to its pages
// (one chunk's 36 KiB alone took 40).
func (t *sessionTable) addRecords() {
	per := chunkLen * t.histCap
	k := 1
	for k < 8 && (k*per*int(unsafe.Sizeof(record{})))%8192 != 0 {
		k *= 2
	}
	block := make([]record, k*per)
	for i := range k {
		t.recs = append(t.recs, block[i*per:(i+1)*per:(i+1)*per])
	}
}

// grow doubles the index (16 slots at first).
func (t *sessionTable) grow() {
	t.resize(max(16, 2*len(t.index)))
}

// resize makes the index n slots (a power of two) and re-places every
// entry by its tag.
func (t *sessionTable) resize(n int) {
	old := t.index
	t.index = make([]tableSlot, n)
	mask := uint32(n - 1)
	for _, sl := range old {
		if sl.ref == 0 {
			continue
		}
		i := sl.tag & mask
		for t.index[i].ref != 0 {
			i = (i + 1) & mask
		}
		t.index[i] = sl
	}
}

// nextPow2 is the least power of two ≥ n (n ≥ 1).
func nextPow2(n int) int {
	return 1 << bits.Len(uint(n-1))
}

// remove forgets the session at slab position p (h is its key's hash) and
// frees its position: the session is cleared, so nothing it held stays
// reachable.
func (t *sessionTable) remove(p uint32, h uint64) {
	mask := uint32(len(t.index) - 1)
	i := uint32(h>>32) & mask
	for t.index[i].ref != p+1 {
		i = (i + 1) & mask
	}
	// Backward-shift deletion: pull later entries of the probe run into
	// the hole unless that would put one before its home. No tombstones,
	// so a lookup never probes past a removed session.
	for j := (i + 1) & mask; t.index[j].ref != 0; j = (j + 1) & mask {
		home := t.index[j].tag & mask
		if (j-home)&mask >= (j-i)&mask {
			t.index[i] = t.index[j]
			i = j
		}
	}
	t.index[i] = tableSlot{}
	t.live--
	s := t.at(p)
	*s = session{}
	t.free = append(t.free, p)
}

// removeSession forgets s, which must be one of t's sessions.
func (t *sessionTable) removeSession(e *Engine, s *session) {
	t.remove(s.pos, e.sessionHash(s))
}

// each calls f with every live session and its slab position, in slab
// order; f may remove the session it is given.
func (t *sessionTable) each(f func(p uint32, s *session)) {
	for p := uint32(0); p < t.next; p++ {
		if s := t.at(p); s.desc != nil {
			f(p, s)
		}
	}
}

// staleVictim sweeps up to n slab positions from the clock hand for a
// session without a call since now-stale, and returns its position. The
// hand stays past the positions looked at, so successive sweeps cover the
// whole slab. When the sweep covers the slab and finds none, the oldest
// time it saw becomes the table's bound.
func (t *sessionTable) staleVictim(now, stale int64, n int) (uint32, bool) {
	if t.live == 0 || now-t.oldestSeen < stale {
		return 0, false
	}
	whole := n >= int(t.next)
	oldest := int64(math.MaxInt64)
	for range min(n, int(t.next)) {
		p := t.hand
		if t.hand++; t.hand >= t.next {
			t.hand = 0
		}
		s := t.at(p)
		if s.desc == nil {
			continue
		}
		if now-s.lastSeen >= stale {
			return p, true
		}
		oldest = min(oldest, s.lastSeen)
	}
	if whole {
		t.oldestSeen = oldest
	}
	return 0, false
}

// newest is the slab position of the most recently created session still
// in the table among the last evictWindow created, else of the one
// created last (the latest first call) among n positions from the hand.
func (t *sessionTable) newest(n int) (uint32, bool) {
	if t.live == 0 {
		return 0, false
	}
	for k := 1; k <= evictWindow; k++ {
		r := t.recent[(int(t.recentAt)-k+evictWindow)%evictWindow]
		if r != 0 && t.at(r-1).desc != nil {
			return r - 1, true
		}
	}
	// The newest sessions have all gone (expired, or evicted as stale):
	// the latest created of the positions the hand passes. A sweep that
	// meets only free positions finds none; the next one goes on from there.
	best, found := uint32(0), false
	for range min(n, int(t.next)) {
		p := t.hand
		if t.hand++; t.hand >= t.next {
			t.hand = 0
		}
		if s := t.at(p); s.desc != nil && (!found || s.firstSeen > t.at(best).firstSeen) {
			best, found = p, true
		}
	}
	return best, found
}

// compact moves the sessions of a table that has shrunk to under half its
// slab into its lowest positions and releases the chunks (and the index)
// left empty: a flood of sessions, once expired, must not hold its memory.
// It runs from Tick, which visits every session anyway; hash is the keyed
// hash of a session's key, to find a moved session's index slot.
func (t *sessionTable) compact(hash func(*session) uint64) {
	if t.live*2 >= int(t.next) || int(t.next)-t.live < chunkLen {
		return
	}
	// Positions below lo hold sessions, those from hi on are free.
	hi := t.next
	for lo := uint32(0); lo < hi; lo++ {
		if t.at(lo).desc != nil {
			continue
		}
		for hi--; hi > lo && t.at(hi).desc == nil; hi-- {
		}
		if hi == lo {
			break
		}
		t.move(hi, lo, hash)
	}
	t.next = uint32(t.live)
	t.free = t.free[:0]
	t.hand = 0
	keep := (t.live + chunkLen - 1) / chunkLen
	clear(t.chunks[keep:])
	t.chunks = t.chunks[:keep]
	if t.histCap > 0 {
		clear(t.recs[keep:])
		t.recs = t.recs[:keep]
	}
	if need := max(16, nextPow2(t.live*4/3+1)); need*4 <= len(t.index) {
		t.resize(need)
	}
}

// move puts the session at slab position from, with its history, at the
// free position to, and points its index slot and the newest ring there.
func (t *sessionTable) move(from, to uint32, hash func(*session) uint64) {
	src, dst := t.at(from), t.at(to)
	*dst = *src
	*src = session{}
	dst.pos = to
	if t.histCap > 0 {
		n := len(dst.hist)
		off := int(to&chunkMask) * t.histCap
		dst.hist = t.recs[to>>chunkBits][off : off+n : off+t.histCap]
		src := int(from&chunkMask) * t.histCap // its records are still there
		copy(dst.hist, t.recs[from>>chunkBits][src:src+n])
	}
	mask := uint32(len(t.index) - 1)
	i := uint32(hash(dst)>>32) & mask
	for t.index[i].ref != from+1 {
		i = (i + 1) & mask
	}
	t.index[i].ref = to + 1
	for k, r := range t.recent {
		if r == from+1 {
			t.recent[k] = to + 1
		}
	}
}
