package pdataspan

import (
	"slices"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/extract"
)

// keyTable holds the keys a model span's usage read looks for — the token
// usage keys and the usage_skip keys — each once with what it means. A
// span's attribute keys mostly share prefixes ("gen_ai.") and a few
// lengths, so an attribute's key is placed by its length and two of its
// bytes (slotOf, inlined into the pass; slotBit): nearly every
// key that is none of the table's lands in an empty slot, without a call
// or a comparison of its text, and one of the table's lands in its own,
// where one comparison confirms it.
type keyTable struct {
	// keys are sorted by length; those of maxTableLen bytes or more from
	// long on.
	keys []tableKey
	long int
	// slots[n][b] is 1 + the index of the key of n bytes whose slot bit is
	// b, 0 when there is none, several when there are more; slotsAfterOp
	// is the same without the declared operation's key, for a usage read
	// whose screen has decided that key (see UsageAfter).
	slots, slotsAfterOp *[maxTableLen][64]uint8
	// byLen[n] is the range of keys of n bytes, for several.
	byLen [maxTableLen]keyRange
	// rare: some key has fewer than 8 bytes, or maxTableLen or more: the
	// slots do not hold it, and keys of those lengths are looked for.
	rare bool
}

// maxTableLen bounds the lengths the slots index: longer attribute keys
// are rare, and compared with the long keys one by one (as shorter ones
// than 8 bytes with the table's of their length).
const maxTableLen = 64

// several marks a slot more than one key takes, and any key the slots do
// not index when the table has keys of such lengths (rare).
const several = 255

type keyRange struct{ lo, hi uint16 }

// tableKey is one usage or usage_skip key and its roles: it may hold more
// than one kind of token count, and be a usage key and a usage_skip key
// at once.
type tableKey struct {
	key string
	// list is the token count the key gives (input, output, total:
	// 0, 1, 2) at rank in that list (the first listed wins); noList when
	// none, manyLists when it is in more than one (then ranks has them,
	// -1 for a list it is not in).
	list  int8
	rank  int32
	ranks [3]int32
	// skip are the usage_skip matches on the key, decided by its first
	// occurrence in a span (as Lookup reads it), which sets bit in the
	// usage read's seen set.
	skip []extract.Match
	bit  uint64
	// plain: the key gives one kind of count (list is 0, 1 or 2) and is
	// no usage_skip key, so the usage read counts it in its loop.
	plain bool
}

// The values of tableKey.list besides the lists.
const (
	noList    = -1
	manyLists = 3
)

// slotBit is the slot of a key of n >= 8 bytes among its length's: of
// its middle byte and its eighth from last, which tell the default keys
// of one length apart ("input_tokens" and "total_tokens" end alike) and
// put the usual GenAI keys of their lengths in other slots.
func slotBit(k string) byte {
	n := len(k)
	return (k[n-8]*5 + k[n>>1]) & 63 // as slotOf computes it
}

// slotOf returns the slot of k in slots: 0 for nearly every attribute
// that is no key of the table, without a call (it is small enough to
// inline into a pass's loop).
func (t *keyTable) slotOf(k string, slots *[maxTableLen][64]uint8) uint8 {
	n := len(k)
	if uint(n-8) >= maxTableLen-8 {
		if t.rare && n != 0 {
			return several
		}
		return 0
	}
	return slots[n][(k[n-8]*5+k[n>>1])&63]
}

// at returns the table's entry for k in slot s (non-zero), or nil.
func (t *keyTable) at(k string, s uint8) *tableKey {
	if s != several {
		if e := &t.keys[s-1]; e.key == k {
			return e
		}
		return nil
	}
	return t.find(k)
}

// find returns the table's entry for k, or nil.
func (t *keyTable) find(k string) *tableKey {
	lo, hi := t.long, len(t.keys)
	if n := len(k); n < maxTableLen {
		lo, hi = int(t.byLen[n].lo), int(t.byLen[n].hi)
	}
	for i := lo; i < hi; i++ {
		if t.keys[i].key == k {
			return &t.keys[i]
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
			if e := t.entry(key); e.ranks[list] < 0 {
				e.ranks[list] = int32(rank)
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
		t.keys = slices.DeleteFunc(t.keys, func(e tableKey) bool { return e.ranks == [3]int32{-1, -1, -1} })
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
	t.keys = append(t.keys, tableKey{key: k, ranks: [3]int32{-1, -1, -1}})
	return &t.keys[len(t.keys)-1]
}

// index sorts the keys by length, sets their list and rank, and fills
// byLen and the slots; the operation's key op is left out of
// slotsAfterOp unless it gives a token count.
func (t *keyTable) index(op string) {
	slices.SortStableFunc(t.keys, func(a, b tableKey) int { return len(a.key) - len(b.key) })
	t.slots, t.slotsAfterOp = new([maxTableLen][64]uint8), new([maxTableLen][64]uint8)
	t.long = len(t.keys)
	for i := range t.keys {
		e := &t.keys[i]
		e.list = noList
		for l, r := range e.ranks {
			switch {
			case r < 0:
			case e.list == noList:
				e.list, e.rank = int8(l), r
			default:
				e.list = manyLists
			}
		}
		e.plain = e.list >= 0 && e.list < manyLists && e.skip == nil
		n := len(e.key)
		if n >= maxTableLen {
			t.long = min(t.long, i)
			t.rare = true
			continue
		}
		if r := &t.byLen[n]; r.lo == r.hi {
			r.lo, r.hi = uint16(i), uint16(i+1)
		} else {
			r.hi = uint16(i + 1)
		}
		if n < 8 {
			t.rare = true
			continue
		}
		place(t.slots, e.key, i)
		if e.key != op || e.list != noList {
			place(t.slotsAfterOp, e.key, i)
		}
	}
}

// place puts key i, k, in its slot.
func place(slots *[maxTableLen][64]uint8, k string, i int) {
	s := &slots[len(k)][slotBit(k)]
	if *s != 0 || i+1 >= several {
		*s = several
	} else {
		*s = uint8(i + 1)
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
	// Int is 0 for a value of another type: a positive one is an integer,
	// which TokenCount's float64 round trip returns itself below its
	// bound, and the bound above it.
	if n := v.Int(); n > 0 {
		return min(n, maxTokensPerSpan), true
	}
	return extract.TokenCount(Value(v))
}

// maxTokensPerSpan is extract.TokenCount's bound.
const maxTokensPerSpan = 1 << 32
