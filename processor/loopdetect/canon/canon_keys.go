// Key sets: which object keys the canonicalizer drops (the volatile keys)
// and which hold a status (the terminal matcher's keys), matched whatever
// their case and separators, or by prefix. Every member of every document
// has its key classified, so most of this file is filters that settle a key
// before its normalized hash and the map look-up: the shape and clean-key
// bit sets and the index of the configured keys by their spelling. It is
// apart from the scanner because it is built once per configuration and
// only read per document.

package canon

import (
	"math"
	"slices"
	"strings"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
)

// keySet matches object keys regardless of case, '_', '-' and '.', so that
// request_id, requestId and Request-ID are one key; a trailing '*' in a
// configured key matches a prefix. Keys are compared by a hash of their
// normalized form, computed in one pass with no buffer.
type keySet struct {
	exact map[uint64]struct{}
	// filter has bit (hash & 255) of every exact key, so most keys are
	// rejected without a map lookup.
	filter   [4]uint64
	prefixes []prefixHash
	// prefixLens has bit n set when some prefix is n normalized bytes long.
	prefixLens uint64
	// shapes has bit shapeBit of every exact key's normalized form, and
	// prefixFirst the folded first byte of every prefix: together they let
	// mayHave rule out most keys before the byte-by-byte normalized hash.
	shapes      [8]uint64
	prefixFirst [4]uint64
	prefixMin   int // normalized length of the shortest prefix
	// prefixFrom is prefixMin, or more than any key's length when the
	// set has no prefix that can match.
	prefixFrom int
	// clean has, in word shortHash>>6&15, the cleanBits of the shortHash
	// of every exact key whose normalized form is at most 16 bytes: a
	// clean key (see clean) is its own normalized form, and the hash of it
	// is at hand. Two bits, because with one of 512 a tenth of all keys
	// went on to the normalized hash for nothing.
	clean [16]uint64
	// spelled holds the configured exact keys of at most 16 bytes as they
	// are written, with the terminal keys of term, and spelledAt indexes
	// them (entry+1, 0 for none) by bits spelledShift.. of their short
	// hash: a document's key spelled the same way (request_id for
	// request_id, status for status) is classified without the shape
	// test, the normalized hash and the look-ups, which cost such a key
	// more than the rest of its member. The shift is chosen so that the
	// keys' slots differ: with the first 32-slot table, slot collisions
	// left 16 of the 42 short default result keys (duration_ms among them)
	// to the slow path on every occurrence.
	spelled      []spelledKey
	spelledAt    [spelledSlots]uint8
	spelledShift uint8
	term         *terminalMatcher
}

func newKeySet(keys []string) *keySet { return newKeySetFor(keys, nil) }

// newKeySetFor is newKeySet for documents read with the terminal matcher
// term (results): term's keys, spelled as configured, are classified by
// their spelling too.
func newKeySetFor(keys []string, term *terminalMatcher) *keySet {
	ks := &keySet{exact: make(map[uint64]struct{}, len(keys)), prefixFrom: math.MaxInt, term: term}
	for _, k := range keys {
		if p, ok := strings.CutSuffix(k, "*"); ok {
			h, n := normHash(p)
			if n < 64 {
				ks.prefixes = append(ks.prefixes, prefixHash{n: n, h: h})
				ks.prefixLens |= 1 << n
			}
			// hash compares prefixes from one normalized byte on: an empty
			// one never matches.
			if n < 64 && n > 0 {
				first := normalized(p)[0] | 0x20
				ks.prefixFirst[first>>6] |= 1 << (first & 63)
				if ks.prefixMin == 0 || n < ks.prefixMin {
					ks.prefixMin, ks.prefixFrom = n, n
				}
			}
			continue
		}
		h, _ := normHash(k)
		ks.exact[h] = struct{}{}
		ks.filter[h>>6&3] |= 1 << (h & 63)
		// A key that normalizes to nothing is only matched by keys of
		// separators alone, which mayHave never rules out.
		if nk := normalized(k); nk != "" {
			b := keyShape{n: len(nk), first: nk[0] | 0x20, last: nk[len(nk)-1] | 0x20}.bit()
			ks.shapes[b>>6] |= 1 << (b & 63)
		}
		if nk := normalized(k); len(nk) <= 16 {
			c := hash64.String(nk)
			ks.clean[c>>6&15] |= cleanBits(c)
		}

	}
	// After the prefixes are known, each key is classified as match
	// classifies it (a key a prefix takes on the way by the prefix's
	// hash).
	var spelled []spelledKey
	candidates := keys
	if term != nil {
		candidates = append(slices.Clip(keys), term.names...)
	}
	for _, k := range candidates {
		if n := len(k); n == 0 || n > 16 || strings.HasSuffix(k, "*") {
			continue
		}
		a, b := hash64.ShortWords(k)
		e := spelledKey{a: a, b: b, n: len(k)}
		if slices.ContainsFunc(spelled, func(o spelledKey) bool { return o.a == e.a && o.b == e.b && o.n == e.n }) {
			continue // listed twice
		}
		var prefixed bool
		e.hash, prefixed = ks.hash(k)
		e.denied = prefixed || ks.hasExact(e.hash)
		e.status = term != nil && term.keys.hasExact(e.hash)
		spelled = append(spelled, e)
	}
	ks.placeSpelled(spelled)
	return ks
}

func (ks *keySet) match(key string) bool {
	if ks == nil || len(key) > 64 {
		return false
	}
	h, prefixed := ks.hash(key)
	return prefixed || ks.hasExact(h)
}

// hash returns key's normalized hash, and whether a prefix matched on the way.
func (ks *keySet) hash(key string) (uint64, bool) {
	if ks == nil {
		h, _ := normHash(key)
		return h, false
	}
	h := uint64(normSeed)
	n := 0
	for i := 0; i < len(key); i++ {
		var skip bool
		if h, skip = normStep(h, key[i]); skip {
			continue
		}
		n++
		if n < 64 && ks.prefixLens&(1<<n) != 0 {
			for _, p := range ks.prefixes {
				if p.n == n && p.h == h {
					return h, true
				}
			}
		}
	}
	return h, false
}

func (ks *keySet) hasExact(h uint64) bool {
	if ks == nil || ks.filter[h>>6&3]&(1<<(h&63)) == 0 {
		return false
	}
	_, ok := ks.exact[h]
	return ok
}

type prefixHash struct {
	n int
	h uint64
}

const (
	normSeed  = 0xcbf29ce484222325
	normPrime = 0x100000001b3
)

// normStep folds one key byte as the normalization does; skip is true for
// the separators it drops.
func normStep(h uint64, c byte) (uint64, bool) {
	switch {
	case c == '_' || c == '-' || c == '.':
		return h, true
	case 'A' <= c && c <= 'Z':
		c += 'a' - 'A'
	}
	return (h ^ uint64(c)) * normPrime, false
}

func normHash(key string) (h uint64, n int) {
	h = normSeed
	for i := 0; i < len(key); i++ {
		var skip bool
		if h, skip = normStep(h, key[i]); !skip {
			n++
		}
	}
	return h, n
}

// normalized is key as the normalized hash sees it: separators dropped,
// ASCII letters lower case.
func normalized(key string) string {
	b := make([]byte, 0, len(key))
	for i := 0; i < len(key); i++ {
		if c := key[i]; c != '_' && c != '-' && c != '.' {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b = append(b, c)
		}
	}
	return string(b)
}

// isSep marks the separators normalization drops.
var isSep = [256]uint8{'_': 1, '-': 1, '.': 1}

// keyShape is what mayHave compares: a key's normalized length and its
// first and last normalized bytes, folded with |0x20 (which maps A-Z onto
// a-z, as normalization does, and merges a few other pairs: a filter may
// let keys through, it must not turn a matching key away).
type keyShape struct {
	n           int
	first, last byte
	// edge: the key is empty or starts or ends with a separator; its
	// normalized ends are not at hand and every set may have it.
	edge bool
}

// shapeOf returns key's shape in one pass without a buffer.
func shapeOf(key string) keyShape {
	n := len(key)
	if n == 0 || isSep[key[0]] != 0 || isSep[key[n-1]] != 0 {
		return keyShape{edge: true}
	}
	seps := 0
	for i := 1; i < n-1; i++ {
		seps += int(isSep[key[i]])
	}
	return keyShape{n: n - seps, first: key[0] | 0x20, last: key[n-1] | 0x20}
}

func (k keyShape) bit() uint {
	return (uint(k.first)*31 + uint(k.last)*7 + uint(k.n)*131) & 511
}

// mayHave is false when no key of the set can match a key of shape k: no
// exact key has its shape and no prefix its first byte and a length it
// can hold. prefixes says whether prefix keys count (the terminal keys use
// exact matches only).
func (ks *keySet) mayHave(k keyShape, prefixes bool) bool {
	if ks == nil {
		return false
	}
	if k.edge {
		return true
	}
	if b := k.bit(); ks.shapes[b>>6]&(1<<(b&63)) != 0 {
		return true
	}
	return prefixes && k.n >= ks.prefixMin && ks.prefixMin > 0 &&
		ks.prefixFirst[k.first>>6]&(1<<(k.first&63)) != 0
}

// mayHaveClean is mayHave for a clean key of at most 16 bytes whose
// strHash is hash.
func (ks *keySet) mayHaveClean(hash uint64, key string, prefixes bool) bool {
	if ks == nil {
		return false
	}
	if m := cleanBits(hash); ks.clean[hash>>6&15]&m == m {
		return true
	}
	if !prefixes || len(key) < ks.prefixFrom {
		return false
	}
	f := key[0] | 0x20
	return ks.prefixFirst[f>>6]&(1<<(f&63)) != 0
}

// cleanBits are the two bits of a word of keySet.clean that a key of short
// hash h sets.
func cleanBits(h uint64) uint64 {
	return 1<<(h&63) | 1<<(h>>10&63)
}

// spelledSlots is the size of keySet.spelledAt (a power of two). A byte a
// slot keeps the index small enough for the cache; a key left without a
// slot of its own (more than 255 keys, or no shift that parts them all)
// keeps the normalized path.
const spelledSlots = 1024

// spelledKey is a configured key as written: the words shortWords reads
// and its length, which together determine it, and what match answers for
// it: its hash as match computes it (normalized, or its prefix's when a
// prefix takes it), whether the set denies it and whether it is a status
// key of the set's terminal matcher.
type spelledKey struct {
	a, b           uint64
	n              int
	hash           uint64
	denied, status bool
}

// spelledHit returns the configured key spelled as the key of short hash
// hash, words a, b and length n, if there is one.
func (ks *keySet) spelledHit(hash, a, b uint64, n int) (*spelledKey, bool) {
	if ks == nil {
		return nil, false
	}
	i := ks.spelledAt[hash>>ks.spelledShift&(spelledSlots-1)]
	if i == 0 {
		return nil, false
	}
	if e := &ks.spelled[i-1]; e.n == n && e.a == a && e.b == b {
		return e, true
	}
	return nil, false
}

// statusOf says whether the spelled key e is a status key of t, as match
// does: from the set's answer when t is the matcher it was built for.
func (ks *keySet) statusOf(e *spelledKey, t *terminalMatcher) bool {
	if t == nil {
		return false
	}
	if t == ks.term {
		return e.status
	}
	return t.keys.hasExact(e.hash)
}

// placeSpelled indexes keys (distinct spellings) by the shift of their
// short hashes that leaves the fewest of them without a slot of their own
// (the default key sets find a shift that parts them all).
func (ks *keySet) placeSpelled(keys []spelledKey) {
	keys = keys[:min(len(keys), 255)]
	best, bestLost := uint8(0), len(keys)+1
	var taken [spelledSlots]bool
	for shift := uint8(0); shift <= 64-10; shift++ {
		taken = [spelledSlots]bool{}
		lost := 0
		for i := range keys {
			slot := keys[i].shortHash() >> shift & (spelledSlots - 1)
			if taken[slot] {
				lost++
			}
			taken[slot] = true
		}
		if lost < bestLost {
			best, bestLost = shift, lost
		}
		if lost == 0 {
			break
		}
	}
	ks.spelledShift = best
	for i := range keys {
		if slot := keys[i].shortHash() >> best & (spelledSlots - 1); ks.spelledAt[slot] == 0 {
			ks.spelled = append(ks.spelled, keys[i])
			ks.spelledAt[slot] = uint8(len(ks.spelled))
		}
	}
}

// shortHash is the short hash of the key e spells, as a document's key of
// that spelling has it.
func (e *spelledKey) shortHash() uint64 { return hash64.Short(e.a, e.b, e.n) }
