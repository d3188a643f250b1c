package engine

import (
	"math/bits"
	"sync/atomic"
)

// presence counts a shard's sessions by some bits of their keys' hash, so
// that "is this session tracked?" (Tracks, AddTokens) is answered no for
// most untracked sessions without the shard's lock or a map look-up: a
// model span of a chat-only agent asks it once per trace and batch, and
// the map look-up was a cold cache miss at ten thousand sessions. Counts
// change only under the shard's lock; they are read without it.
type presence struct {
	// words hold 16 four-bit counts each. A count that reaches 15 stays
	// there (it no longer knows how many sessions it holds): its bucket
	// then always answers "maybe", which costs a look-up, never a wrong no.
	words []atomic.Uint64
	mask  uint64 // the bucket count minus one
}

// presenceBuckets returns a shard's bucket count for maxSessions: about
// eight per session the shard may hold, so that at the bound about one
// untracked key in nine still needs the look-up.
func presenceBuckets(maxSessions int) int {
	per := max(maxSessions/numShards, 1) * 8
	return max(1<<bits.Len(uint(per-1)), 16)
}

func (p *presence) init(buckets int) {
	p.words = make([]atomic.Uint64, buckets/16)
	p.mask = uint64(buckets - 1)
}

// slot returns the word and bit offset of hash h's count; the shard index
// took h's low bits, the bucket takes the ones above.
func (p *presence) slot(h uint64) (*atomic.Uint64, uint) {
	b := (h / numShards) & p.mask
	return &p.words[b/16], uint(b%16) * 4
}

// add counts a session whose key hashes to h; the caller holds the lock.
func (p *presence) add(h uint64) {
	w, shift := p.slot(h)
	if v := w.Load(); v>>shift&15 < 15 {
		w.Store(v + 1<<shift)
	}
}

// remove uncounts a session whose key hashes to h; the caller holds the
// lock.
func (p *presence) remove(h uint64) {
	w, shift := p.slot(h)
	v := w.Load()
	if c := v >> shift & 15; c > 0 && c < 15 {
		w.Store(v - 1<<shift)
	}
}

// mayHave is false when no session's key hashes to h's bucket.
func (p *presence) mayHave(h uint64) bool {
	w, shift := p.slot(h)
	return w.Load()>>shift&15 != 0
}
