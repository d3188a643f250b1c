package pdataspan

import (
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The usage read of a model span: one pass over its attributes through the
// key table (keytable.go), after the screen's look-up of the declared
// operation.

// Usage is extract.ExtractUsage's token count read in one pass over the
// span's attributes: input + output tokens (else the total), the first
// listed key of each kind winning, nothing for a span that sums nested
// spans' usage (UsageSkip).
func (p *Prefilter) Usage(span ptrace.Span) (int64, bool) {
	return p.UsageAfter(span, Screening{})
}

// UsageAfter is Usage of a span screened as sc. When Screen read the
// declared operation (its first occurrence, a string that is no
// usage_skip match), the pass leaves that key out: in the defaults it is
// a usage_skip key, decided, and the pass then meets the token keys alone.
func (p *Prefilter) UsageAfter(span ptrace.Span, sc Screening) (int64, bool) {
	u := usageSum{t: &p.table, slots: p.table.slots, ranks: [3]int32{-1, -1, -1}}
	if sc.opRead {
		u.slots, u.seen = p.table.slotsAfterOp, p.opBit
	}
	// The loop's body is the slot's look-up, and for a plain token key
	// with a positive integer count (a model span's usage, as SDKs write
	// it) the count; the rest of the few keys that land in a slot are read
	// by a call.
	for k, v := range span.Attributes().All() {
		s := u.t.slotOf(k, u.slots)
		if s == 0 {
			continue
		}
		if s != several {
			if e := &u.t.keys[s-1]; e.plain && e.key == k {
				if !u.before(e.list, e.rank) {
					continue // counted from a key listed before
				}
				if n := v.Int(); n > 0 {
					u.set(e.list, e.rank, min(n, maxTokensPerSpan))
					continue
				}
			}
		}
		if !u.hit(k, v, s) {
			return 0, false // a skipped span reports nothing, whatever its counts
		}
	}
	return u.result(p, span)
}

// usageSum is a usage read's state: the table and slots it reads with,
// the counts found (input, output, total) with the rank of the key each
// came from, and the usage_skip keys met.
type usageSum struct {
	t      *keyTable
	slots  *[maxTableLen][64]uint8
	counts [3]int64
	ranks  [3]int32
	found  bool
	seen   uint64
}

// hit reads attribute k, v, which lands in slot s, and reports false if
// it is a usage_skip match.
func (u *usageSum) hit(k string, v pcommon.Value, s uint8) bool {
	if e := u.t.at(k, s); e != nil {
		return u.add(e, v)
	}
	return true
}

// result is the token count read: input + output (else the total).
func (u *usageSum) result(p *Prefilter, span ptrace.Span) (int64, bool) {
	if !u.found {
		return 0, false
	}
	tokens := u.counts[0] + u.counts[1]
	if u.ranks[0] < 0 && u.ranks[1] < 0 {
		tokens = u.counts[2]
	}
	if tokens <= 0 {
		return 0, false
	}
	if p.skipLookup {
		for i := range p.skip {
			m := &p.skip[i]
			if v, ok := Lookup(span.Attributes(), m.Key); ok && m.Matches(v) {
				return 0, false
			}
		}
	}
	return tokens, true
}

// add reads attribute v of key e, and reports false if it is a usage_skip
// match.
func (u *usageSum) add(e *tableKey, v pcommon.Value) bool {
	switch l := e.list; {
	case l == noList:
	case l != manyLists:
		if u.before(l, e.rank) {
			if n, ok := tokenCount(v); ok {
				u.set(l, e.rank, n)
			}
		}
	default:
		u.addLists(e, v)
	}
	if e.skip != nil && u.seen&e.bit == 0 {
		u.seen |= e.bit
		return !e.matchAny(v)
	}
	return true
}

// before reports whether a key of rank in list l comes before the key
// list l was counted from: not yet counted, or counted from a key listed
// after it.
func (u *usageSum) before(l int8, rank int32) bool {
	r := u.ranks[l]
	return r < 0 || rank < r
}

// set counts n for list l from the key of that rank.
func (u *usageSum) set(l int8, rank int32, n int64) {
	u.counts[l], u.ranks[l], u.found = n, rank, true
}

// addLists is add's count of a key listed in more than one list.
func (u *usageSum) addLists(e *tableKey, v pcommon.Value) {
	for l, r := range e.ranks {
		if r < 0 || !u.before(int8(l), r) {
			continue
		}
		if n, ok := tokenCount(v); ok {
			u.set(int8(l), r, n)
		}
	}
}
