package extract

import (
	mbits "math/bits"
	"slices"
)

// One pass over a tool span's attributes.
//
// Extract reads some forty span attribute keys (client hints, tool name,
// argument and result keys, call id, error keys, evidence attributes). Read
// with Span.Attr, each is a scan of the span's attributes. A Span type that
// implements AttrLister hands all its attributes to an AttrSink once
// instead: the sink keeps those whose key Extract reads, in slots compiled
// at New, and Extract then reads the slots. Either way every read answers
// exactly what Span.Attr(key) answers.

// AttrLister is optionally implemented by *S for a value Span type S, or by
// S itself for a pointer Span type S. Extract finds it through a nil *S or a
// nil S, so its method must not use its receiver: the span is the argument.
// That keeps a value span from being boxed (allocated) on the hot path.
//
// ListAttrs calls sink.Want for every span attribute key, and for a slot
// returned ≥ 0 sink.Put (or sink.PutLazy) with the attribute's value. The
// sink keeps the first value per key, so the attributes must come in the
// order in which Attr finds its hit first (pdata: front to back, Attr
// returns the first; the OTel SDK adapter: back to front, Attr returns the
// last).
type AttrLister[S any] interface {
	ListAttrs(s S, sink *AttrSink)
}

// maxSlots bounds the distinct keys the one-pass path reads; an Extractor
// with more reads them with Span.Attr.
const maxSlots = 64

// AttrSink collects the attributes Extract reads from one span. It lives in
// Scratch, so collecting allocates nothing.
type AttrSink struct {
	t    *attrTable
	seen uint64 // slot has a value (Put or PutLazy)
	lazy uint64 // slot's value is read with Span.Attr when needed
	vals [maxSlots]Value
}

// Want returns the slot of key, or -1 when Extract does not read key or the
// sink already holds a value for it.
func (a *AttrSink) Want(key string) int {
	t := a.t
	n := len(key)
	if n < 64 {
		if t.lens&(1<<uint(n)) == 0 {
			return -1
		}
	} else if !t.long {
		return -1
	}
	for h := t.hash(key); ; h = (h + 1) & t.mask {
		e := &t.ents[h]
		if e.slot < 0 {
			return -1
		}
		if e.key == key {
			if a.seen&(1<<uint(e.slot)) != 0 {
				return -1
			}
			return int(e.slot)
		}
	}
}

// Put stores the value of the attribute whose key Want mapped to slot.
func (a *AttrSink) Put(slot int, v Value) {
	a.seen |= 1 << uint(slot)
	// Field by field: while the GC marks, a Value copied whole goes
	// through the bulk write barrier, its one pointer alone through the
	// buffered one.
	e := &a.vals[slot]
	e.Kind, e.Int, e.Float, e.Bool, e.Truncated = v.Kind, v.Int, v.Float, v.Bool, v.Truncated
	e.Str = v.Str
}

// PutLazy records that the attribute whose key Want mapped to slot is
// present, leaving its conversion to Span.Attr should Extract read it: for
// values whose conversion costs (maps and slices rendered as JSON, bytes).
func (a *AttrSink) PutLazy(slot int) {
	a.seen |= 1 << uint(slot)
	a.lazy |= 1 << uint(slot)
}

// attrTable maps the span attribute keys Extract reads to slots: open
// addressing over a multiplicative hash of the key's length and three of
// its bytes, the multiplier chosen at New for the fewest probes.
type attrTable struct {
	keys  []string // by slot; "" has a slot too, not in ents
	empty uint64   // the slots of "": always read with Span.Attr
	ents  []tabEnt
	mask  uint32
	shift uint32
	mul   uint32
	lens  uint64 // bit n: a key of length n < 64
	long  bool   // a key of 64 bytes or more
}

type tabEnt struct {
	key  string
	slot int32 // -1: empty
}

func (t *attrTable) hash(key string) uint32 {
	n := len(key)
	x := uint32(n) | uint32(key[n-1])<<8 | uint32(key[n/2])<<16 | uint32(key[n*3/4])<<24
	return (x * t.mul) >> t.shift & t.mask
}

// slot returns the slot of key, adding it if new.
func (t *attrTable) slot(index map[string]int32, key string) int32 {
	if i, ok := index[key]; ok {
		return i
	}
	i := int32(len(t.keys))
	t.keys = append(t.keys, key)
	index[key] = i
	return i
}

func (t *attrTable) slots(index map[string]int32, keys []string) []int32 {
	out := make([]int32, len(keys))
	for i, k := range keys {
		out[i] = t.slot(index, k)
	}
	return out
}

// build lays out the hash table once every key has its slot.
func (t *attrTable) build() {
	bits := uint32(4)
	for 1<<bits < 4*len(t.keys) {
		bits++
	}
	size := uint32(1) << bits
	t.mask, t.shift = size-1, 32-bits
	best, bestCost := uint32(0), -1
	for seed := uint32(0); seed < 256; seed++ {
		t.mul = 0x9e3779b1 + seed*0x2545f492 | 1
		if cost := t.fill(size); bestCost < 0 || cost < bestCost {
			best, bestCost = t.mul, cost
			if cost == 0 {
				break
			}
		}
	}
	t.mul = best
	t.fill(size)
}

// fill inserts the keys and returns the extra probes they take.
func (t *attrTable) fill(size uint32) int {
	t.ents = make([]tabEnt, size)
	for i := range t.ents {
		t.ents[i].slot = -1
	}
	t.lens, t.long, t.empty = 0, false, 0
	cost := 0
	for i, k := range t.keys {
		if k == "" {
			if i < maxSlots {
				t.empty |= 1 << uint(i)
			}
			continue
		}
		if len(k) < 64 {
			t.lens |= 1 << uint(len(k))
		} else {
			t.long = true
		}
		h := t.hash(k)
		for t.ents[h].slot >= 0 {
			h = (h + 1) & t.mask
			cost++
		}
		t.ents[h] = tabEnt{key: k, slot: int32(i)}
	}
	return cost
}

// roleSlots are the slots of every key list Extract reads from span
// attributes, in the lists' order.
type roleSlots struct {
	hints, skip, failure                              []int32 // parallel to ClientHints, SkipSpans, Failure
	hintMask, skipMask, failureMask                   uint64  // their slots' bits
	toolName, args, result, callID, errType, toolStat keyList
	session, agent                                    keyList
	fingerprint, attempt, initial, backoff, maxAtt    int32
	owner, deadline, reason                           int32
	// evidenceMask: the evidence keys evidence reads first (the policy's
	// interval and rate are read only with its max attempts).
	evidenceMask uint64
	// fingerprintMask is the fingerprint slot's bit.
	fingerprintMask uint64
	// redactMask: the argument and result keys that Redacted names, the
	// only ones whose values may be redacted.
	redactMask uint64
	// toolCall is parallel to ToolCall, nil when its keys would not fit
	// maxSlots with the others: classify then reads them with Span.Attr.
	toolCall []int32
	// hintsOrdered: the hints' slots rise with the list's order (so the
	// lowest slot present is the first hint present); hintAt holds the
	// first hint of each slot.
	hintsOrdered bool
	hintAt       [maxSlots]int32
}

// mayRedact reports whether Redacted names the key of slot.
func (r *roleSlots) mayRedact(sl int32) bool {
	return sl >= maxSlots || r.redactMask&(1<<uint(sl)) != 0
}

// keyList is one key list's slots, in the list's order, with their bits:
// after the one pass, a list none of whose keys the span has is passed
// over at once.
type keyList struct {
	slots []int32
	mask  uint64
	// ordered: the slots rise with the list's order, so the first key
	// present is the lowest slot present.
	ordered bool
}

// bits returns the bits of slots (a slot of maxSlots or more has none:
// the one pass, which the bits serve, is then not used).
func bits(slots ...int32) uint64 {
	var m uint64
	for _, sl := range slots {
		if sl < maxSlots {
			m |= 1 << uint(sl)
		}
	}
	return m
}

func compileSlots(k *Keys) (attrTable, roleSlots) {
	var t attrTable
	var r roleSlots
	index := make(map[string]int32)
	matchKeys := func(ms []Match) []int32 {
		out := make([]int32, len(ms))
		for i := range ms {
			out[i] = t.slot(index, ms[i].Key)
		}
		return out
	}
	list := func(keys []string) keyList {
		sl := t.slots(index, keys)
		return keyList{slots: sl, mask: bits(sl...), ordered: slices.IsSorted(sl)}
	}
	r.hints = matchKeys(k.ClientHints)
	r.skip = matchKeys(k.SkipSpans)
	r.toolName = list(k.ToolName)
	r.session = list(k.Session)
	r.agent = list(k.Agent)
	r.callID = list(k.CallID)
	r.args = list(k.Arguments)
	r.result = list(k.Result)
	r.errType = list(k.ErrorType)
	r.toolStat = list(k.ToolStatus)
	r.failure = matchKeys(k.Failure)
	r.fingerprint = t.slot(index, k.Fingerprint)
	r.attempt = t.slot(index, k.RetryAttempt)
	r.maxAtt = t.slot(index, k.RetryMaxAttempts)
	r.initial = t.slot(index, k.RetryInitialInterval)
	r.backoff = t.slot(index, k.RetryBackoffRate)
	r.owner = t.slot(index, k.WaitOwner)
	r.deadline = t.slot(index, k.WaitDeadline)
	r.reason = t.slot(index, k.WaitReason)
	r.hintMask, r.skipMask, r.failureMask = bits(r.hints...), bits(r.skip...), bits(r.failure...)
	r.hintsOrdered = slices.IsSorted(r.hints)
	for i := len(r.hints) - 1; i >= 0; i-- {
		if sl := r.hints[i]; sl < maxSlots {
			r.hintAt[sl] = int32(i)
		} else {
			r.hintsOrdered = false
		}
	}
	r.fingerprintMask = bits(r.fingerprint)
	r.evidenceMask = bits(r.attempt, r.maxAtt, r.owner, r.deadline)
	for _, m := range k.Redacted {
		if sl, ok := index[m.Key]; ok {
			r.redactMask |= bits(sl)
		}
	}
	// The tool_call keys last, and only if they fit with the rest: the
	// one pass serves the whole extraction, classify is one look-up.
	if n := len(t.keys); n <= maxSlots {
		r.toolCall = matchKeys(k.ToolCall)
		if len(t.keys) > maxSlots {
			t.keys, r.toolCall = t.keys[:n], nil
		}
	}
	t.build()
	return t, r
}

// listerOf returns the AttrLister of span type S, if any, without boxing a
// value S.
func listerOf[S Span]() (AttrLister[S], bool) {
	if l, ok := any((*S)(nil)).(AttrLister[S]); ok {
		return l, true
	}
	var zero S
	if _, ok := any(zero).(AttrLister[S]); !ok { // does not escape: no allocation
		return nil, false
	}
	l, ok := any(zero).(AttrLister[S]) // S implements it: a pointer type, by contract
	return l, ok
}

// attrs reads span attributes by slot: from the sink after one pass over
// the span's attributes when S is an AttrLister (and the keys fit), else
// with Span.Attr.
type attrs[S Span] struct {
	s    S
	t    *attrTable
	sink *AttrSink // nil: Span.Attr
}

func newAttrs[S Span](x *Extractor, s S, sc *Scratch) attrs[S] {
	a := attrs[S]{s: s, t: &x.tab}
	if len(x.tab.keys) > maxSlots {
		return a
	}
	if l, ok := listerOf[S](); ok {
		sink := &sc.attrs
		sink.t, sink.seen, sink.lazy = &x.tab, x.tab.empty, x.tab.empty
		l.ListAttrs(s, sink)
		a.sink = sink
	}
	return a
}

// known answers Span.Attr(key of slot) from the one pass; ok is false when
// only Span.Attr can (no one pass, or a value left lazy). It is not generic,
// so the hot paths inline it: a method of a type parameter is called
// through the instantiation's dictionary, which keeps its callers out of
// line.
func (k *AttrSink) known(slot int32) (v *Value, found, ok bool) {
	if k == nil {
		return nil, false, false
	}
	bit := uint64(1) << uint(slot)
	if k.seen&bit == 0 {
		return nil, false, true
	}
	if k.lazy&bit != 0 {
		return nil, false, false
	}
	return &k.vals[slot], true, true
}

// firstKnown answers firstSlot over l from the one pass when one slot of l
// is present, or l is ordered (the lowest slot present is then the first
// key present); ok is false otherwise, or when that slot holds a lazy
// value.
func (k *AttrSink) firstKnown(l *keyList) (sl int32, found, ok bool) {
	if k == nil {
		return -1, false, false
	}
	p := k.seen & l.mask
	if p == 0 {
		return -1, false, true
	}
	if p&(p-1) != 0 && !l.ordered {
		return -1, false, false
	}
	sl = int32(mbits.TrailingZeros64(p))
	if k.lazy&(1<<uint(sl)) != 0 {
		return -1, false, false
	}
	return sl, true, true
}

// get answers what s.Attr(key of slot) answers.
func (a *attrs[S]) get(slot int32) (Value, bool) {
	if v, found, ok := a.sink.known(slot); ok {
		if !found {
			return Value{}, false
		}
		return *v, true
	}
	return a.attr(slot)
}

// attr reads slot with Span.Attr.
func (a *attrs[S]) attr(slot int32) (Value, bool) { return a.s.Attr(a.t.keys[slot]) }

// none reports that the span has none of the keys of mask, which only the
// one pass tells without looking them up.
func (a *attrs[S]) none(mask uint64) bool { return a.sink != nil && a.sink.seen&mask == 0 }

// first returns the first key of l present, as first does with keys.
func (a *attrs[S]) first(l *keyList) (Value, string, bool) {
	v, sl, ok := a.firstSlot(l)
	if !ok {
		return Value{}, "", false
	}
	return v, a.t.keys[sl], true
}

// firstSlot is first, naming the key by its slot.
func (a *attrs[S]) firstSlot(l *keyList) (Value, int32, bool) {
	if sl, found, ok := a.sink.firstKnown(l); ok {
		if !found {
			return Value{}, -1, false
		}
		return a.sink.vals[sl], sl, true
	}
	return a.firstSlotEach(l)
}

// firstSlotEach is firstSlot key by key.
func (a *attrs[S]) firstSlotEach(l *keyList) (Value, int32, bool) {
	if a.none(l.mask) {
		return Value{}, -1, false
	}
	for _, sl := range l.slots {
		if v, ok := a.get(sl); ok {
			return v, sl, true
		}
	}
	return Value{}, -1, false
}

// firstTextOrResource is firstSpanOrResource over l, as text; memo, when
// not nil, keeps the resource's answer for the spans that share it. Most
// spans lack the keys and share a resource already read: that answer is
// then at hand at once.
func (a *attrs[S]) firstTextOrResource(l *keyList, memo *resourceFirst) (string, string, bool) {
	if !a.none(l.mask) {
		if v, k, ok := a.first(l); ok {
			return v.Text(), k, true
		}
	}
	if memo != nil && memo.read {
		return memo.text, memo.key, memo.ok
	}
	return resourceFirstOf(a.s, a.t.keys, l.slots, memo)
}
