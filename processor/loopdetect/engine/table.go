package engine

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"
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
//     they are created, and the sessions are counted per sender (senders),
//     so the one that holds the most is known at once. See
//     (*Engine).evictOne and evictee for the policy.
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
	// senders counts the sessions per sender: at the bound the sender
	// holding the most gives one up (evictee).
	senders senderCounts
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

// sessionChunk holds chunkLen sessions, and apart from them their token
// counts.
type sessionChunk struct {
	hot   [chunkLen]session
	usage [chunkLen]sessionUsage
}

// sessionUsage is a session's model token count and its key's keyed hash,
// kept apart from the session: a model span's trace is asked once per
// batch whether its session is tracked (Tracks) and given its tokens
// (AddTokens), and at scale reading the session's line, no longer in
// cache, was most of that cost. At sixteen bytes a session, four to a
// line, these lines usually still are.
type sessionUsage struct {
	// hash is the key's keyed hash (hashKey): with the index slot's tag it
	// finds the session by its 64 bits alone (usageOf).
	hash   uint64
	tokens int64
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

// usageAt is the token count of the session at slab position p.
func (t *sessionTable) usageAt(p uint32) *sessionUsage {
	return &t.chunks[p>>chunkBits].usage[p&chunkMask]
}

// usageOf is the token count of the session whose key's keyed hash is h,
// found by h without reading the session (nor its key), or nil.
func (t *sessionTable) usageOf(h uint64) *sessionUsage {
	if len(t.index) == 0 {
		return nil
	}
	mask := uint32(len(t.index) - 1)
	tag := uint32(h >> 32)
	for i := tag & mask; ; i = (i + 1) & mask {
		sl := t.index[i]
		if sl.ref == 0 {
			return nil
		}
		if sl.tag == tag {
			if u := t.usageAt(sl.ref - 1); u.hash == h {
				return u
			}
		}
	}
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
	t.senders.add(noDesc.sender, p, true)
	s.pos = p
	s.lastSeen = now
	s.setKey(key)
	*t.usageAt(p) = sessionUsage{hash: h}
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
	t.senders.drop(s.desc.sender)
	*s = session{}
	*t.usageAt(p) = sessionUsage{}
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
// left empty: a flood of sessions, once expired, must not hold its memory
// (nor its senders' counts: shrink).
// It runs from Tick, which visits every session anyway; hash is the keyed
// hash of a session's key, to find a moved session's index slot.
func (t *sessionTable) compact(hash func(*session) uint64) {
	t.senders.shrink()
	if t.live*2 >= int(t.next) || int(t.next)-t.live < chunkLen {
		return
	}
	// The newest ring forgets the positions it names that are free: they
	// may be beyond the chunks kept (the ring once named a released chunk,
	// and the next eviction there panicked), or be refilled by a move.
	for k, r := range t.recent {
		if r != 0 && t.at(r-1).desc == nil {
			t.recent[k] = 0
		}
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
	u := t.usageAt(from)
	*t.usageAt(to), *u = *u, sessionUsage{}
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
	t.senders.moved(dst.desc.sender, from, to)
}

// redescribe counts s, a session of sender from, as one of sender to (its
// description named another target). It becomes to's newest session
// unless to has one that started later: a session's first description
// (from no target to its own) is always its sender's newest.
func (t *sessionTable) redescribe(s *session, from, to uint64) {
	newest := true
	if r := t.senders.last(to); r != 0 && r-1 < t.next {
		if o := t.at(r - 1); o.desc != nil && o.desc.sender == to && o.firstSeen > s.firstSeen {
			newest = false
		}
	}
	// Dropped first: the new sender's gain is the later move in the lists.
	t.senders.drop(from)
	t.senders.add(to, s.pos, newest)
}

// evictee is the session a shard gives up at the bound when no stale
// session was found: the newest session of the sender that holds the most
// of the shard's sessions (longest queue drop, the fair-share rule of a
// buffer that flows share). A flood's sessions share a sender, so a flood
// evicts its own sessions, however many it opens and however often it
// calls them again; a session of another sender keeps its history whether
// it predates the flood or starts during it. Among one sender's sessions
// the newest goes, so those of its sessions that are older and still
// calling keep theirs. When every sender holds one session of the shard (a
// flood that names a new sender on every session), the shard's newest
// session goes. See docs/design.md, The session table.
func (t *sessionTable) evictee() (uint32, bool) {
	if sender, ok := t.senders.heaviest(); ok {
		if p, ok := t.newestOf(sender, sweepLen); ok {
			return p, true
		}
	}
	return t.newest(sweepLen)
}

// newestOf is the slab position of one of sender's sessions: the one it
// counted last if that one is still the sender's, else its newest among
// the ring of newest sessions, else its latest created among n positions
// from the hand (a sender that holds more than a sliver of the shard is
// met there).
func (t *sessionTable) newestOf(sender uint64, n int) (uint32, bool) {
	if r := t.senders.last(sender); r != 0 && r-1 < t.next {
		if s := t.at(r - 1); s.desc != nil && s.desc.sender == sender {
			return r - 1, true
		}
	}
	for k := 1; k <= evictWindow; k++ {
		r := t.recent[(int(t.recentAt)-k+evictWindow)%evictWindow]
		if r == 0 {
			continue
		}
		if s := t.at(r - 1); s.desc != nil && s.desc.sender == sender {
			return r - 1, true
		}
	}
	best, found := uint32(0), false
	for range min(n, int(t.next)) {
		p := t.hand
		if t.hand++; t.hand >= t.next {
			t.hand = 0
		}
		if s := t.at(p); s.desc != nil && s.desc.sender == sender && (!found || s.firstSeen > t.at(best).firstSeen) {
			best, found = p, true
		}
	}
	return best, found
}

// senderCounts counts a shard's sessions per sender, the agent process a
// session names as its target (sessionDesc.sender), and keeps the senders
// in one list per count, so the sender holding the most sessions is known
// at once and kept up in O(1) per session added, removed or re-described
// (the layout of an O(1) LFU cache). Its memory follows the senders: an
// entry per sender with sessions, shrunk by compact.
type senderCounts struct {
	// index maps a sender to its entry.
	index map[uint64]int32
	// entries[1:] are the senders' entries (0 ends a list); a free entry
	// is chained through next from free.
	entries []senderEntry
	free    int32
	// heads[c] and tails[c] are the ends of the list of the senders
	// holding c sessions: a sender that gains one goes to the head, one
	// that loses one to the tail, so that between senders holding as many
	// the head is the one that last opened a session.
	heads, tails []int32
	// most is the largest count a sender holds (0: no sessions).
	most int32
}

// senderEntry is one sender's count, its place in the list of its count,
// and the last session counted for it.
type senderEntry struct {
	sender     uint64
	count      int32
	prev, next int32
	// last is 1 + the slab position of the session counted last.
	last uint32
}

// add counts a session of sender at slab position p, the sender's newest
// if newest says so (or it has none yet).
func (c *senderCounts) add(sender uint64, p uint32, newest bool) {
	i, ok := c.index[sender]
	if !ok {
		i = c.newEntry(sender)
	} else {
		c.unlink(i)
	}
	e := &c.entries[i]
	e.count++
	if newest || e.last == 0 {
		e.last = p + 1
	}
	c.pushFront(i)
	c.most = max(c.most, e.count)
}

// drop uncounts a session of sender.
func (c *senderCounts) drop(sender uint64) {
	i := c.index[sender]
	if i == 0 {
		return // not counted: cannot happen while add and drop pair up
	}
	c.unlink(i)
	e := &c.entries[i]
	e.count--
	if e.count == 0 {
		delete(c.index, sender)
		*e = senderEntry{next: c.free}
		c.free = i
	} else {
		c.pushBack(i)
	}
	// Counts move by one: a count above most's cannot have appeared.
	if c.heads[c.most] == 0 {
		c.most--
	}
}

// moved notes that the session at slab position from, of sender, is now at to.
func (c *senderCounts) moved(sender uint64, from, to uint32) {
	if i := c.index[sender]; i != 0 && c.entries[i].last == from+1 {
		c.entries[i].last = to + 1
	}
}

// heaviest is the sender holding the most sessions (of those holding as
// many, the one that last opened a session).
func (c *senderCounts) heaviest() (uint64, bool) {
	if c.most == 0 {
		return 0, false
	}
	return c.entries[c.heads[c.most]].sender, true
}

// last is 1 + the slab position of the session counted last for sender
// (0: none). It may have gone since: the caller checks.
func (c *senderCounts) last(sender uint64) uint32 {
	if i := c.index[sender]; i != 0 {
		return c.entries[i].last
	}
	return 0
}

func (c *senderCounts) newEntry(sender uint64) int32 {
	if c.index == nil {
		c.index = make(map[uint64]int32)
		c.entries = make([]senderEntry, 1, 8)
	}
	i := c.free
	if i != 0 {
		c.free = c.entries[i].next
	} else {
		i = int32(len(c.entries))
		c.entries = append(c.entries, senderEntry{})
	}
	c.entries[i] = senderEntry{sender: sender}
	c.index[sender] = i
	return i
}

// pushFront puts entry i at the head of its count's list.
func (c *senderCounts) pushFront(i int32) {
	e := &c.entries[i]
	c.lists(e.count)
	h := c.heads[e.count]
	e.prev, e.next = 0, h
	if h != 0 {
		c.entries[h].prev = i
	} else {
		c.tails[e.count] = i
	}
	c.heads[e.count] = i
}

// pushBack puts entry i at the tail of its count's list.
func (c *senderCounts) pushBack(i int32) {
	e := &c.entries[i]
	c.lists(e.count)
	tl := c.tails[e.count]
	e.prev, e.next = tl, 0
	if tl != 0 {
		c.entries[tl].next = i
	} else {
		c.heads[e.count] = i
	}
	c.tails[e.count] = i
}

// lists makes room for the list of count n.
func (c *senderCounts) lists(n int32) {
	for int(n) >= len(c.heads) {
		c.heads, c.tails = append(c.heads, 0), append(c.tails, 0)
	}
}

// unlink takes entry i out of its count's list.
func (c *senderCounts) unlink(i int32) {
	e := &c.entries[i]
	if e.prev != 0 {
		c.entries[e.prev].next = e.next
	} else {
		c.heads[e.count] = e.next
	}
	if e.next != 0 {
		c.entries[e.next].prev = e.prev
	} else {
		c.tails[e.count] = e.prev
	}
	e.prev, e.next = 0, 0
}

// shrink rebuilds the counts in fresh memory when most entries are free or
// the count lists outgrew the largest count by far: after a flood of
// senders, or of one sender's sessions, has gone (a map never shrinks).
func (c *senderCounts) shrink() {
	n := len(c.index)
	if len(c.entries) <= 2*n+64 && len(c.heads) <= 2*int(c.most)+64 {
		return
	}
	old := c.entries
	// Rebuilt list by list, each in its order.
	var order []int32
	for cnt := 1; cnt <= int(c.most); cnt++ {
		for i := c.heads[cnt]; i != 0; i = old[i].next {
			order = append(order, i)
		}
	}
	*c = senderCounts{}
	if n == 0 {
		return
	}
	c.index = make(map[uint64]int32, n)
	c.entries = make([]senderEntry, 1, n+1)
	for _, i := range order {
		j := c.newEntry(old[i].sender)
		e := &c.entries[j]
		e.count, e.last = old[i].count, old[i].last
		c.pushBack(j)
		c.most = max(c.most, e.count)
	}
}

// evictOne makes room at the global bound. A stale session (no call for
// staleAfter) goes first: one of sh's, else one of another shard's whose
// lock is free at once (never waiting, so shard locks cannot deadlock),
// each found by a bounded sweep of the clock hand. With none found, a
// session of the sender holding the most sessions of one shard goes
// (evictee): sh's heaviest sender's, unless a free shard's heaviest holds
// more. So a session alone in its shard, or alone of its sender in one,
// is not what a flood spread over every shard evicts. It reports false
// when it found no session to evict.
func (e *Engine) evictOne(sh *shard, now int64) bool {
	stale := e.staleAfter()
	if p, ok := sh.tab.staleVictim(now, stale, sweepLen); ok {
		e.evict(sh, p, &e.stats.EvictedStale)
		return true
	}
	// best is the shard to give up a session: sh, or the free shard whose
	// heaviest sender holds the most, kept locked.
	best, most := sh, sh.tab.senders.most
	for i := range e.shards {
		o := &e.shards[i]
		if o == sh || !o.mu.TryLock() {
			continue
		}
		if p, ok := o.tab.staleVictim(now, stale, sweepOtherLen); ok {
			e.evict(o, p, &e.stats.EvictedStale)
			o.mu.Unlock()
			if best != sh {
				best.mu.Unlock()
			}
			return true
		}
		if o.tab.senders.most > most {
			if best != sh {
				best.mu.Unlock()
			}
			best, most = o, o.tab.senders.most
			continue
		}
		o.mu.Unlock()
	}
	if best != sh {
		defer best.mu.Unlock()
	}
	if most == 0 {
		// sh is empty and every other shard is busy: their holders are
		// not waiting on us, so one is free again shortly (admit retries).
		return false
	}
	p, ok := best.tab.evictee()
	if ok {
		e.evict(best, p, &e.stats.EvictedActive)
	}
	return ok
}

// evict removes the session at slab position p of sh, whose lock the
// caller holds, to make room for a new one, and counts it in Evicted and
// kind (EvictedStale or EvictedActive).
func (e *Engine) evict(sh *shard, p uint32, kind *atomic.Int64) {
	sh.tab.removeSession(e, sh.tab.at(p))
	kind.Add(1)
	e.stats.Evicted.Add(1)
}

// evictWindow is how many of a shard's newest sessions it remembers for
// eviction.
const evictWindow = 16

// maxStaleAfter is the longest a session may go without a call and still
// be spared at the bound (shorter with a shorter idle_timeout).
const maxStaleAfter = 5 * time.Minute

func (e *Engine) staleAfter() int64 {
	d := maxStaleAfter
	if e.cfg.IdleTimeout > 0 {
		d = min(d, e.cfg.IdleTimeout)
	}
	return int64(d)
}
