package pdataspan

import (
	"encoding/binary"
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// keyTable holds the keys a model span's usage read looks for — the token
// usage keys and the usage_skip keys — each once with what it means. A
// span's attribute keys mostly share prefixes ("gen_ai.") and a few
// lengths, so an attribute is first tested against a filter of the
// table's lengths and two of their bytes (mayHave, inlined into the pass),
// which rules out nearly every attribute that is no usage key without a
// call; the few left are compared by their last eight bytes, then their
// spelling (find).
type keyTable struct {
	// keys are sorted by length; those of maxTableLen bytes or more from
	// long on. tails[i] is tailWord(keys[i].key), compared before the key.
	keys  []tableKey
	tails []uint64
	long  int
	// byLen[n] is the range of keys of n bytes.
	byLen [maxTableLen]keyRange
	// filter[n] has bit filterBit(k) set for each key k of n bytes;
	// filterAfterOp is the same without the declared operation's key, for a
	// usage read whose screen has decided that key (see UsageAfter).
	filter, filterAfterOp [maxTableLen]uint64
}

// maxTableLen bounds the lengths the filter and byLen index: longer
// attribute keys are rare, and compared with the long keys one by one.
const maxTableLen = 64

type keyRange struct{ lo, hi uint16 }

// tableKey is one usage or usage_skip key and its roles: it may hold more
// than one kind of token count, and be a usage key and a usage_skip key
// at once.
type tableKey struct {
	key string
	// rank[l] is the key's rank in token list l (input, output, total;
	// the first listed wins), -1 when it is in none; counts says it is in
	// one.
	rank   [3]int32
	counts bool
	// skip are the usage_skip matches on the key, decided by its first
	// occurrence in a span (as Lookup reads it), which sets bit in the
	// usage read's seen set.
	skip []extract.Match
	bit  uint64
}

// filterBit is the bit of a key of n > 0 bytes in its length's filter
// word: of its last and middle bytes, which tell most GenAI keys of one
// length apart (the usage keys end in "tokens", and so do request keys).
func filterBit(k string) uint64 {
	n := len(k)
	return 1 << ((k[n-1] ^ k[n>>1]) & 63) // as mayHave computes it
}

// mayHave reports whether k may be a key of the table, by filter: false
// for nearly every other attribute, without a call (it is small enough to
// inline into a pass's loop).
func (t *keyTable) mayHave(k string, filter *[maxTableLen]uint64) bool {
	n := len(k)
	if n == 0 || n >= maxTableLen {
		return n != 0 && t.long < len(t.keys)
	}
	return filter[n]>>((k[n-1]^k[n>>1])&63)&1 != 0
}

// tailWord is the last eight bytes of a key as one word; a shorter key's
// bytes padded with its length, so keys of one length compare by it alone.
func tailWord(k string) uint64 {
	if n := len(k); n >= 8 {
		return binary.LittleEndian.Uint64([]byte(k[n-8:]))
	}
	var w [8]byte
	copy(w[:], k)
	w[7] = byte(len(k))
	return binary.LittleEndian.Uint64(w[:])
}

// find returns the table's entry for k, or nil.
func (t *keyTable) find(k string) *tableKey {
	lo, hi := t.long, len(t.keys)
	if n := len(k); n < maxTableLen {
		lo, hi = int(t.byLen[n].lo), int(t.byLen[n].hi)
	}
	w := tailWord(k)
	for i, tail := range t.tails[lo:hi] {
		if tail == w && t.keys[lo+i].key == k {
			return &t.keys[lo+i]
		}
	}
	return nil
}

// newKeyTable compiles the usage keys of k and its usage_skip matches;
// op is the declared operation's key ("" when none). It reports false
// for more distinct usage_skip keys than seen has bits: their matches are
// then left to look-ups after the pass (Prefilter.skipLookup), and the
// table holds no skip key.
func newKeyTable(op string, k extract.Keys) (keyTable, bool) {
	var t keyTable
	for list, keys := range [...][]string{k.InputTokens, k.OutputTokens, k.TotalTokens} {
		for rank, key := range keys {
			if key == "" {
				continue // Lookup finds no empty key
			}
			// A key listed twice counts at its first rank.
			if e := t.entry(key); e.rank[list] < 0 {
				e.rank[list], e.counts = int32(rank), true
			}
		}
	}
	bits := 0
	for _, m := range k.UsageSkip {
		if m.Key == "" {
			continue
		}
		e := t.entry(m.Key)
		if e.skip == nil {
			e.bit = 1 << uint(bits%64)
			bits++
		}
		e.skip = append(e.skip, m)
	}
	fits := bits <= 64
	if !fits {
		t.keys = slices.DeleteFunc(t.keys, func(e tableKey) bool { return !e.counts })
		for i := range t.keys {
			t.keys[i].skip, t.keys[i].bit = nil, 0
		}
	}
	t.index(op)
	return t, fits
}

// entry returns k's entry, adding it.
func (t *keyTable) entry(k string) *tableKey {
	for i := range t.keys {
		if t.keys[i].key == k {
			return &t.keys[i]
		}
	}
	t.keys = append(t.keys, tableKey{key: k, rank: [3]int32{-1, -1, -1}})
	return &t.keys[len(t.keys)-1]
}

// index sorts the keys by length and fills byLen and the filters; the
// operation's key op is left out of filterAfterOp unless it gives a
// token count.
func (t *keyTable) index(op string) {
	slices.SortStableFunc(t.keys, func(a, b tableKey) int { return len(a.key) - len(b.key) })
	t.long = len(t.keys)
	t.tails = make([]uint64, len(t.keys))
	for i := range t.keys {
		t.tails[i] = tailWord(t.keys[i].key)
		e := &t.keys[i]
		n := len(e.key)
		if n >= maxTableLen {
			t.long = min(t.long, i)
			continue
		}
		t.filter[n] |= filterBit(e.key)
		if e.key != op || e.counts {
			t.filterAfterOp[n] |= filterBit(e.key)
		}
		if r := &t.byLen[n]; r.lo == r.hi {
			r.lo, r.hi = uint16(i), uint16(i+1)
		} else {
			r.hi = uint16(i + 1)
		}
	}
}

// matchAny reports whether v satisfies one of the key's usage_skip
// matches.
func (e *tableKey) matchAny(v pcommon.Value) bool {
	if v.Type() == pcommon.ValueTypeStr {
		s := v.Str()
		for i := range e.skip {
			if e.skip[i].MatchesString(s) {
				return true
			}
		}
		return false
	}
	ev := Value(v)
	for i := range e.skip {
		if e.skip[i].Matches(ev) {
			return true
		}
	}
	return false
}

// tokenCount is extract.TokenCount of v; an integer, the common case, is
// read without converting the value.
func tokenCount(v pcommon.Value) (int64, bool) {
	if v.Type() == pcommon.ValueTypeInt {
		// TokenCount's float64 round trip returns the integer itself below
		// its bound, and the bound above it.
		n := v.Int()
		if n < 0 {
			return 0, false
		}
		return min(n, maxTokensPerSpan), true
	}
	return extract.TokenCount(Value(v))
}

// maxTokensPerSpan is extract.TokenCount's bound.
const maxTokensPerSpan = 1 << 32
