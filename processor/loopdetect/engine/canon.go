package engine

import (
	"encoding/binary"
	"errors"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/cespare/xxhash/v2"
)

// Digest is a fixed-size, non-cryptographic digest of canonical content. It
// never leaves the process unkeyed: see Keyer for the form that does.
type Digest uint64

// Hash type tags keep values of different JSON types apart ("1" vs 1).
const (
	tagString  = 0x9e3779b97f4a7c15
	tagNumber  = 0xc2b2ae3d27d4eb4f
	tagObject  = 0x165667b19e3779f9
	tagArray   = 0x27d4eb2f165667c5
	tagTrue    = 0x85ebca77c2b2ae63
	tagFalse   = 0xff51afd7ed558ccd
	tagNull    = 0xc4ceb9fe1a85ec53
	tagOpaque  = 0x94d049bb133111eb
	tagMember  = 0xbf58476d1ce4e5b9
	maxDepth   = 64
	primeArray = 0x100000001b3
)

// mix is the splitmix64 finalizer: cheap, and good enough to combine
// member hashes for in-memory keys.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

var errSyntax = errors.New("malformed JSON")

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
func (e *spelledKey) shortHash() uint64 { return shortHash(e.a, e.b, e.n) }

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
			c := strHash(nk)
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
		a, b := shortWords(k)
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

// strHash hashes a string; short strings (most keys and values) take a
// multiply-fold path far cheaper than a general hash's setup.
func strHash(s string) uint64 {
	if len(s) > 16 {
		return xxhash.Sum64String(s)
	}
	a, b := shortWords(s)
	return shortHash(a, b, len(s))
}

// shortWords reads a string of at most 16 bytes as the two words
// shortHash folds. With the length they determine the string: for 8 to 16
// bytes the words overlap, for 4 to 7 the halves do, and below 4 every
// byte is one of the three read.
func shortWords(s string) (a, b uint64) {
	switch n := len(s); {
	case n >= 8:
		a = binary.LittleEndian.Uint64([]byte(s[:8]))
		b = binary.LittleEndian.Uint64([]byte(s[n-8:]))
	case n >= 4:
		a = uint64(binary.LittleEndian.Uint32([]byte(s[:4])))
		b = uint64(binary.LittleEndian.Uint32([]byte(s[n-4:])))
	case n > 0:
		a = uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1])
	}
	return a, b
}

// wordWords is shortWords of a string of n < 8 bytes held in w (the first
// in the low byte), without the loads.
func wordWords(w uint64, n int) (a, b uint64) {
	if n >= 4 {
		return w & 0xffffffff, w >> (8 * (n - 4)) & 0xffffffff
	}
	if n > 0 {
		a = (w&0xff)<<16 | (w>>(8*(n>>1))&0xff)<<8 | w>>(8*(n-1))&0xff
	}
	return a, 0
}

func shortHash(a, b uint64, n int) uint64 {
	return mum(a^0xa0761d6478bd642f, b^0xe7037ed1a0b428db^uint64(n))
}

// mum is the 64×64→128 multiply-fold at the heart of wyhash.
func mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// terminalMatcher recognises a finished async result: a status-like key
// whose string value names a final state.
type terminalMatcher struct {
	keys   *keySet
	names  []string // the keys as configured
	values []string
	// lens marks the byte lengths below 64 a value matching one of values
	// can have, so most status values ("ok", "running") are turned away by
	// their length; anyLen is set when some value's lengths are not known
	// (not ASCII, or 64 bytes or more).
	lens   uint64
	anyLen bool
}

func newTerminalMatcher(keys, values []string) *terminalMatcher {
	t := &terminalMatcher{keys: newKeySet(keys), names: keys, values: values}
	for _, v := range values {
		lo, hi, ok := FoldLengths(v)
		if !ok || hi >= 64 {
			t.anyLen = true
			continue
		}
		for n := lo; n <= hi; n++ {
			t.lens |= 1 << n
		}
	}
	return t
}

// FoldLengths returns the byte lengths lo..hi of the strings s with
// strings.EqualFold(s, t), when t is ASCII (ok), so that most strings are
// told apart by length without reading them. ASCII letters fold only to
// ASCII letters, but for k and s, which also fold to the Kelvin sign (3
// bytes) and the long s (2 bytes).
func FoldLengths(t string) (lo, hi int, ok bool) {
	hi = len(t)
	for i := 0; i < len(t); i++ {
		switch c := t[i]; {
		case c >= utf8.RuneSelf:
			return 0, 0, false
		case c == 'k' || c == 'K':
			hi += 2
		case c == 's' || c == 'S':
			hi++
		}
	}
	return len(t), hi, true
}

// canonHasher hashes one JSON document in a single pass into a digest that
// ignores key order, member nulls, surrounding whitespace of strings and the
// denylisted keys at any depth. Objects combine member hashes with a sum, so
// no keys are sorted and nothing is allocated.
type canonHasher struct {
	s        string
	pos      int
	deny     *keySet
	terminal *terminalMatcher
	// foundTerminal is set when a status key within the first three levels
	// holds a final state.
	foundTerminal bool
	// want names a member of the top-level object whose raw value is
	// recorded (the first such member that parses) as s[member[0]:member[1]],
	// so a caller can look into it without a second parse of the document.
	// Indices, not a string: a string taken from s and kept in the hasher
	// would move decoded strings, and with them the hasher, to the heap.
	want   string
	member [2]int
	found  bool
	// buf holds the decoded string with escapes, unless it outgrows it:
	// the hasher lives on its caller's stack, and so do decoded strings.
	buf [256]byte
}

// skipSpace returns the index of the first byte at or after pos that is
// no JSON whitespace, and that byte; 0 at the end (no token starts with a
// 0 byte, so the end and a stray NUL are both an error).
func skipSpace(s string, pos int) (int, byte) {
	for ; pos < len(s); pos++ {
		switch c := s[pos]; c {
		case ' ', '\t', '\n', '\r':
		default:
			return pos, c
		}
	}
	return pos, 0
}

// nextByte is skipSpace with the test that settles it for compact JSON,
// which has no whitespace between tokens, inlined.
func nextByte(s string, pos int) (int, byte) {
	if pos < len(s) && s[pos] > ' ' {
		return pos, s[pos]
	}
	return skipSpace(s, pos)
}

// isNumber marks the bytes a number token runs over. The scanner is
// lenient on purpose: it hashes the token as written.
var isNumber = [256]bool{
	'0': true, '1': true, '2': true, '3': true, '4': true, '5': true, '6': true, '7': true, '8': true, '9': true,
	'-': true, '+': true, '.': true, 'e': true, 'E': true,
}

// embedded canonicalizes a string value that holds JSON itself
// ({"arguments":"{\"b\":1}"}), so key order and volatile keys inside it do
// not change the digest either.
func (h *canonHasher) embedded(str string, depth int) (uint64, bool) {
	// Most strings start with a byte that is neither '{', '[' nor space
	// (ASCII or not, as TrimSpace sees it): they are no JSON.
	if str == "" || (str[0] > ' ' && str[0] < utf8.RuneSelf && str[0] != '{' && str[0] != '[') {
		return 0, false
	}
	t := strings.TrimSpace(str)
	if t == "" || (t[0] != '{' && t[0] != '[') || depth+1 > maxDepth {
		return 0, false
	}
	sub := canonHasher{s: t, deny: h.deny}
	v, err := sub.container(depth+1, nil)
	if end, _ := skipSpace(sub.s, sub.pos); err != nil || end != len(sub.s) {
		return 0, false
	}
	return v, true
}

func hashString(s string) uint64 {
	if n := len(s); n > 0 && (s[0] <= ' ' || s[n-1] <= ' ') {
		s = strings.TrimSpace(s)
	}
	return strHash(s) ^ tagString
}

// SWAR (SIMD within a register) constants: one byte of 1s, of high bits.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// quoteOrEscape marks with its high bit each byte of x (8 string bytes,
// the first in the low byte) that is '"' or '\\'. Borrows may also mark
// bytes after a true match, so only the lowest mark is exact.
func quoteOrEscape(x uint64) uint64 {
	q := x ^ (swarOnes * '"')
	e := x ^ (swarOnes * '\\')
	return ((q-swarOnes)&^q | (e-swarOnes)&^e) & swarHigh
}

// load64 reads s[i:i+8] as a little-endian word.
func load64(s string, i int) uint64 {
	return binary.LittleEndian.Uint64([]byte(s[i : i+8]))
}

// quoteOrEscapeAt returns the index of the first '"' or '\\' in s at or
// after i, 8 bytes at a time, or -1.
func quoteOrEscapeAt(s string, i int) int {
	for ; i+8 <= len(s); i += 8 {
		if m := quoteOrEscape(load64(s, i)); m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for ; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			return i
		}
	}
	return -1
}

// str reads a JSON string at pos. Without escapes it returns a slice of the
// input; with escapes it decodes into the hasher's buffer.
func (h *canonHasher) str() (string, error) {
	s := h.s
	start := h.pos + 1 // after the opening quote
	// quoteOrEscapeAt, inlined: strings are the most frequent token.
	i := start
	for ; i+8 <= len(s); i += 8 {
		if m := quoteOrEscape(load64(s, i)); m != 0 {
			i += bits.TrailingZeros64(m) >> 3
			goto found
		}
	}
	if i = quoteOrEscapeAt(s, i); i < 0 {
		return "", errSyntax
	}
found:
	if h.s[i] == '"' {
		h.pos = i + 1
		return h.s[start:i], nil
	}
	str, _, err := h.unescape(start, i, nil)
	return str, err
}

// unescape decodes the string from start, whose first escape is at i, into
// the hasher's buffer: the runs between escapes are copied whole. With lv
// (a value whose string is only hashed) a string that outgrows the buffer
// may be hashed as it is decoded: then lv.state is longOn and the hash is
// returned instead of the string. With longProbe it gives up with errLong
// instead.
func (h *canonHasher) unescape(start, i int, lv *longValue) (string, uint64, error) {
	s := h.s
	if !lv.fits(0, i-start) {
		return "", 0, errLong
	}
	// buf is never stored in h: that would move the hasher to the heap.
	buf := lv.appendRun(h.buf[:0], s[start:i])
	for {
		// s[i] is a backslash.
		i++
		if i >= len(s) {
			return "", 0, errSyntax
		}
		if e := s[i]; !lv.fits(len(buf), utf8.UTFMax) {
			return "", 0, errLong
		} else if e != 'u' {
			buf = append(lv.room(buf, 1), unescapeByte[e])
		} else {
			if i+4 >= len(s) {
				return "", 0, errSyntax
			}
			r, ok := hex4(s[i+1 : i+5])
			if !ok {
				return "", 0, errSyntax
			}
			i += 4
			// A surrogate pair is one character: "\ud83d\ude00" == "😀".
			if utf16.IsSurrogate(r) && i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
				if lo, ok := hex4(s[i+3 : i+7]); ok {
					if pair := utf16.DecodeRune(r, lo); pair != utf8.RuneError {
						r = pair
						i += 6
					}
				}
			}
			buf = utf8.AppendRune(lv.room(buf, utf8.UTFMax), r)
		}
		i++
		// The run up to the next quote or escape is copied 8 bytes at a
		// time while the buffer has room for a whole word: a word is
		// stored before its quote or escape is looked for, and the bytes
		// past the run are overwritten by what follows.
		for i+8 <= len(s) && len(buf)+8 <= cap(buf) {
			x := load64(s, i)
			k := len(buf)
			binary.LittleEndian.PutUint64(buf[k:k+8], x)
			if m := quoteOrEscape(x); m != 0 {
				d := bits.TrailingZeros64(m) >> 3
				buf, i = buf[:k+d], i+d
				goto runEnd
			}
			buf, i = buf[:k+8], i+8
		}
		if j := quoteOrEscapeAt(s, i); j < 0 {
			return "", 0, errSyntax
		} else {
			if !lv.fits(len(buf), j-i) {
				return "", 0, errLong
			}
			buf, i = lv.appendRun(buf, s[i:j]), j
		}
	runEnd:
		if s[i] == '"' {
			h.pos = i + 1
			if lv != nil && lv.state == longOn {
				return "", lv.sum(buf), nil
			}
			// Aliases buf: callers use it before the next str call.
			return unsafe.String(unsafe.SliceData(buf), len(buf)), 0, nil
		}
	}
}

// unescapeByte is the byte a one-byte escape \x stands for: the control
// characters for n, t, r, b and f, x itself for every other x (JSON's ", \
// and /, and whatever a lenient reading lets through).
var unescapeByte = func() (t [256]byte) {
	for i := range t {
		t[i] = byte(i)
	}
	t['n'], t['t'], t['r'], t['b'], t['f'] = '\n', '\t', '\r', '\b', '\f'
	return t
}()

func hex4(s string) (rune, bool) {
	var r rune
	for i := 0; i < 4; i++ {
		d := s[i]
		r <<= 4
		switch {
		case '0' <= d && d <= '9':
			r |= rune(d - '0')
		case 'a' <= d && d <= 'f':
			r |= rune(d-'a') + 10
		case 'A' <= d && d <= 'F':
			r |= rune(d-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}

// wrapperInfo records, for a top-level object, the members that framework
// wrappers put around the real arguments, so the caller can unwrap them
// without a second parse.
type wrapperInfo struct {
	other       bool // a key outside every wrapper shape
	inputs      uint64
	hasInputs   bool
	inputStr    uint64
	hasInputStr bool
	args        uint64
	argsEmpty   bool
	hasArgs     bool
	kwargs      uint64
	hasKwargs   bool
	langchain   bool // saw metadata or tags
}

// container hashes the object or array at pos, whose members are at
// depth+1 (at most maxDepth). It is one loop over the tokens of both, with
// strings, numbers and literals hashed in line: on structure-dense
// documents a function call per token was most of the cost. Nested
// containers recurse, and their depth bounds the recursion.
func (h *canonHasher) container(depth int, wrap *wrapperInfo) (uint64, error) {
	s := h.s
	pos := h.pos
	obj := s[pos] == '{'
	closer := byte(']')
	acc := uint64(tagArray) // an array's running hash, an object's member sum
	if obj {
		closer, acc = '}', 0
	}
	var n uint64
	pos, c := nextByte(s, pos+1)
	if c == closer {
		h.pos = pos + 1
		return closeHash(obj, acc, n), nil
	}
	if depth >= maxDepth || (obj && c != '"') {
		return 0, errSyntax
	}
	// The member being read: its key's hash and class, and for a wrapper
	// or a recorded member what it is.
	var keyHash uint64
	var denied, statusKey, record bool
	var wkey string
	expectKey := obj
	// top: the members are looked at for a wrapper or recorded; below
	// the top level one branch skips all of that.
	top := wrap != nil || (depth == 0 && h.want != "")
	for {
		var vh uint64
		var isNull bool
		vstart := pos
		switch {
		case c == '"':
			// A string, key or value: its closing quote or first escape
			// is found 8 bytes at a time (quoteOrEscapeAt, in line).
			start := pos + 1
			i := start
			// w is the string's first 8 bytes, if s has them: a key or
			// number shorter than that is hashed from it.
			var w uint64
			if i+8 <= len(s) {
				w = load64(s, i)
				if m := quoteOrEscape(w); m != 0 {
					i += bits.TrailingZeros64(m) >> 3
					goto found
				}
				for i += 8; i+8 <= len(s); i += 8 {
					if m := quoteOrEscape(load64(s, i)); m != 0 {
						i += bits.TrailingZeros64(m) >> 3
						goto found
					}
				}
			}
			if i = quoteOrEscapeAt(s, i); i < 0 {
				return 0, errSyntax
			}
		found:
			var str string
			if s[i] == '"' {
				str, pos = s[start:i], i+1
			} else {
				var err error
				var lv *longValue
				if !expectKey && !statusKey {
					lv = longProbe
				}
				h.pos = pos
				str, vh, err = h.unescape(start, i, lv)
				hashed := false
				if err == errLong {
					str, vh, hashed, err = h.unescapeLong(start, i)
				}
				if err != nil {
					return 0, err
				}
				pos, w = h.pos, 0
				if hashed {
					goto value
				}
			}
			if expectKey {
				// str may alias buf: it is done with before the value.
				if n := len(str); n <= 16 && w != 0 {
					// key, in line for the most frequent keys: short
					// and without escapes. Its first word is at hand;
					// from 8 bytes on its last ends before pos's quote.
					var a, b, u uint64
					if n < 8 {
						w &= 1<<(8*n) - 1
						a, b = wordWords(w, n)
						u = unclean(w)
					} else {
						a, b = w, load64(s, pos-9)
						u = unclean(a) | unclean(b)
					}
					keyHash, denied, statusKey = shortHash(a, b, n), false, false
					if e, ok := h.deny.spelledHit(keyHash, a, b, n); ok {
						denied, statusKey = e.denied, depth < 3 && h.deny.statusOf(e, h.terminal)
					} else if u != 0 {
						denied, statusKey = h.classify(str, depth)
					} else if h.deny.mayHaveClean(keyHash, str, true) || (h.terminal != nil && depth < 3 && h.terminal.keys.mayHaveClean(keyHash, str, false)) {
						denied, statusKey = h.match(str, depth)
					}
				} else {
					keyHash, denied, statusKey = h.key(str, depth)
				}
				if top {
					if wrap != nil {
						wkey = wrapperKey(str)
					}
					record = depth == 0 && h.want != "" && !h.found && str == h.want
				}
				if pos, c = nextByte(s, pos); c != ':' {
					return 0, errSyntax
				}
				pos, c = nextByte(s, pos+1)
				expectKey = false
				continue
			}
			switch {
			case statusKey:
				if h.terminal.matchValue(str) {
					h.foundTerminal = true
				}
			case str == "" || str[0] <= ' ' || str[0] >= utf8.RuneSelf || str[0] == '{' || str[0] == '[':
				// Maybe JSON itself (see embedded for the test).
				if v, ok := h.embedded(str, depth+1); ok {
					vh = v
					goto value
				}
			}
			if n := len(str); n > 16 && str[n-1] > ' ' && str[0] > ' ' {
				vh = xxhash.Sum64String(str) ^ tagString // hashString, in line
			} else {
				vh = hashString(str)
			}
		case c == '-' || ('0' <= c && c <= '9'):
			if pos+8 <= len(s) {
				// Most numbers are a few digits: where the digits end is
				// found in one word; only a number going on ('.', 'e', …)
				// or a longer one takes the loop.
				x := load64(s, pos)
				if m := nonDigit(x) &^ 0x80; m != 0 {
					if k := bits.TrailingZeros64(m) >> 3; !isNumber[s[pos+k]] {
						a, b := wordWords(x&(1<<(8*k)-1), k)
						vh, pos = shortHash(a, b, k)^tagNumber, pos+k
						break
					}
				}
			}
			i := pos + 1
			for i < len(s) && isNumber[s[i]] {
				i++
			}
			if n := i - pos; n < 8 && pos+8 <= len(s) {
				a, b := wordWords(load64(s, pos)&(1<<(8*n)-1), n)
				vh = shortHash(a, b, n) ^ tagNumber
			} else {
				vh = strHash(s[pos:i]) ^ tagNumber
			}
			pos = i
		case c == '{' || c == '[':
			var err error
			h.pos = pos
			if vh, err = h.container(depth+1, nil); err != nil {
				return 0, err
			}
			pos = h.pos
		case c == 't' && strings.HasPrefix(s[pos:], "true"):
			vh, pos = tagTrue, pos+4
		case c == 'f' && strings.HasPrefix(s[pos:], "false"):
			vh, pos = tagFalse, pos+5
		case c == 'n' && strings.HasPrefix(s[pos:], "null"):
			vh, pos, isNull = tagNull, pos+4, true
		default:
			return 0, errSyntax
		}
	value:
		if !obj {
			acc = mum(acc^primeArray, vh^tagArray)
			n++
		} else {
			if !denied && !isNull {
				acc += mum(keyHash^tagMember, vh^tagString)
				n++
			}
			if top {
				if wkey == "args" && c != '"' && c != '-' && (c < '0' || c > '9') {
					// A container or literal: only [] is an empty args.
					wrap.argsEmpty = strings.HasPrefix(s[vstart:], "[]")
				}
				if wrap != nil && !denied {
					wrap.note(wkey, vh)
				}
				if record {
					h.member, h.found, record = [2]int{vstart, pos}, true, false
				}
			}
			expectKey = true
		}
		if pos, c = nextByte(s, pos); c == ',' {
			// A comma before the closer is let through, as it always was.
			pos, c = nextByte(s, pos+1)
		} else if c != closer {
			return 0, errSyntax
		}
		if c == closer {
			h.pos = pos + 1
			return closeHash(obj, acc, n), nil
		}
		if obj && c != '"' {
			return 0, errSyntax
		}
	}
}

// closeHash finishes an object's member sum or an array's running hash
// over n members.
func closeHash(obj bool, acc, n uint64) uint64 {
	if obj {
		return mix(acc ^ tagObject ^ (n * primeArray))
	}
	return mix(acc ^ n)
}

// unclean marks (high bit) the bytes of a word that normalization may
// change: A-Z, '_', '-', '.' (and, to keep it short, [\\]^ between 'Z' and
// '_'). Bytes of 0x80 and more are left alone, as normalization does.
func unclean(x uint64) uint64 {
	const low7 = 0x7f7f7f7f7f7f7f7f
	t := x & low7
	letters := (t + swarOnes*(0x80-'A')) &^ (t + swarOnes*(0x80-'_'-1))
	seps := (t + swarOnes*(0x80-'-')) &^ (t + swarOnes*(0x80-'.'-1))
	return (letters | seps) &^ x & swarHigh
}

// nonDigit marks (high bit) the bytes of a word that are no ASCII digit.
func nonDigit(x uint64) uint64 {
	const low7 = 0x7f7f7f7f7f7f7f7f
	t := x & low7
	digits := (t + swarOnes*(0x80-'0')) &^ (t + swarOnes*(0x80-'9'-1)) &^ x
	return ^digits & swarHigh
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

// key hashes and classifies an object key. Its part for keys of at most
// 16 bytes is written out again in container's loop, for keys without
// escapes: as a shared function called per key it cost structure-dense
// documents 2-4 % (min of 6 interleaved runs).
func (h *canonHasher) key(key string, depth int) (hash uint64, denied, statusKey bool) {
	if len(key) > 16 {
		denied, statusKey = h.classify(key, depth)
		return xxhash.Sum64String(key), denied, statusKey
	}
	a, b := shortWords(key)
	hash = shortHash(a, b, len(key))
	if h.deny == nil && h.terminal == nil {
		return hash, false, false
	}
	if e, ok := h.deny.spelledHit(hash, a, b, len(key)); ok {
		return hash, e.denied, depth < 3 && h.deny.statusOf(e, h.terminal)
	}
	if unclean(a)|unclean(b) != 0 {
		denied, statusKey = h.classify(key, depth)
		return hash, denied, statusKey
	}
	if h.deny.mayHaveClean(hash, key, true) || (h.terminal != nil && depth < 3 && h.terminal.keys.mayHaveClean(hash, key, false)) {
		denied, statusKey = h.match(key, depth)
	}
	return hash, denied, statusKey
}

// classify says whether key is denied and whether it is a status key whose
// value may report a final state. One normalized hash serves both; most
// keys are ruled out by their shape before it.
func (h *canonHasher) classify(key string, depth int) (denied, statusKey bool) {
	if len(key) > 64 || (h.deny == nil && h.terminal == nil) {
		return false, false
	}
	shape := shapeOf(key)
	if !h.deny.mayHave(shape, true) && (h.terminal == nil || depth >= 3 || !h.terminal.keys.mayHave(shape, false)) {
		return false, false
	}
	return h.match(key, depth)
}

// match classifies key by its normalized hash.
func (h *canonHasher) match(key string, depth int) (denied, statusKey bool) {
	kh, prefixed := h.deny.hash(key)
	denied = prefixed || h.deny.hasExact(kh)
	statusKey = h.terminal != nil && depth < 3 && h.terminal.keys.hasExact(kh)
	return denied, statusKey
}

func (t *terminalMatcher) matchValue(v string) bool {
	v = strings.TrimSpace(v)
	if n := len(v); !t.anyLen && (n >= 64 || t.lens&(1<<n) == 0) {
		return false
	}
	for _, tv := range t.values {
		if strings.EqualFold(tv, v) {
			return true
		}
	}
	return false
}

func wrapperKey(key string) string {
	switch key {
	case "inputs", "input_str", "metadata", "tags", "args", "kwargs":
		return key
	}
	return ""
}

func (w *wrapperInfo) note(key string, vh uint64) {
	switch key {
	case "inputs":
		w.inputs, w.hasInputs = vh, true
	case "input_str":
		w.inputStr, w.hasInputStr = vh, true
	case "metadata", "tags":
		w.langchain = true
	case "args":
		w.args, w.hasArgs = vh, true
	case "kwargs":
		w.kwargs, w.hasKwargs = vh, true
	default:
		w.other = true
	}
}

// unwrapped returns the hash of the real arguments inside a LangChain
// ({input_str, inputs, metadata, tags}) or Traceloop ({args, kwargs})
// wrapper, or false when the object is no wrapper.
func (w *wrapperInfo) unwrapped() (uint64, bool) {
	if w.other {
		return 0, false
	}
	// LangChain's wrapper always has both: {"inputs": …} alone may be a
	// tool's real arguments.
	if w.hasInputs && w.hasInputStr && !w.hasArgs && !w.hasKwargs {
		return w.inputs, true
	}
	if w.hasKwargs && !w.langchain && !w.hasInputs && !w.hasInputStr && (!w.hasArgs || w.argsEmpty) {
		return w.kwargs, true
	}
	return 0, false
}

// canonResult says how a document was read.
type canonResult struct {
	digest   uint64
	opaque   bool // not JSON (or malformed): hashed as trimmed text
	terminal bool
	// member holds where, in the trimmed document, the raw value of the
	// top-level member named by canonicalize's want is, when found (also
	// in a malformed document, if the member itself parsed).
	member [2]int
	found  bool
}

// canonicalize hashes doc: JSON (also a JSON-encoded JSON string) into an
// order-independent canonical digest, anything else as trimmed opaque text.
// want names a member of a top-level object to record in the result.
func canonicalize(doc string, deny *keySet, term *terminalMatcher, unwrap bool, want string) canonResult {
	t := strings.TrimSpace(doc)
	if t == "" {
		return canonResult{digest: mix(tagOpaque)}
	}
	h := canonHasher{s: t, deny: deny, terminal: term, want: want}
	if t[0] == '"' {
		// A JSON-encoded string: hash its content, which may itself be JSON.
		inner, err := h.str()
		if end, _ := skipSpace(h.s, h.pos); err == nil && end == len(h.s) {
			it := strings.TrimSpace(inner)
			if it != "" && (it[0] == '{' || it[0] == '[') {
				return canonicalize(it, deny, term, unwrap, "")
			}
			return canonResult{digest: hashString(inner)}
		}
		return canonResult{digest: mix(xxhash.Sum64String(t) ^ tagOpaque), opaque: true}
	}
	if t[0] != '{' && t[0] != '[' {
		return canonResult{digest: mix(xxhash.Sum64String(t) ^ tagOpaque), opaque: true}
	}
	var wrap *wrapperInfo
	var wi wrapperInfo
	if unwrap && t[0] == '{' {
		wrap = &wi
	}
	v, err := h.container(0, wrap)
	if end, _ := skipSpace(h.s, h.pos); err != nil || end != len(h.s) {
		return canonResult{digest: mix(xxhash.Sum64String(t) ^ tagOpaque), opaque: true, member: h.member, found: h.found}
	}
	if wrap != nil {
		if u, ok := wi.unwrapped(); ok {
			v = u
		}
	}
	return canonResult{digest: v, terminal: h.foundTerminal, member: h.member, found: h.found}
}
