package canon

// This file is a frozen copy of the streaming canonicalizer as it was when
// its digests were pinned (canon_pinned_test.go), renamed with a ref
// prefix. The differential fuzz test compares the live scanner with it on
// arbitrary input: a faster scanner must agree with it bit for bit.

import (
	"encoding/binary"
	"errors"
	"math/bits"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/cespare/xxhash/v2"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
)

// mix is the splitmix64 finalizer: cheap, and good enough to combine
// member hashes for in-memory keys.
func refMix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

var errRefSyntax = errors.New("malformed JSON")

// keySet matches object keys regardless of case, '_', '-' and '.', so that
// request_id, requestId and Request-ID are one key; a trailing '*' in a
// configured key matches a prefix. Keys are compared by a hash of their
// normalized form, computed in one pass with no buffer.
type refKeySet struct {
	exact map[uint64]struct{}
	// filter has bit (hash & 255) of every exact key, so most keys are
	// rejected without a map lookup.
	filter   [4]uint64
	prefixes []refPrefixHash
	// prefixLens has bit n set when some prefix is n normalized bytes long.
	prefixLens uint64
	// shapes has bit shapeBit of every exact key's normalized form, and
	// prefixFirst the folded first byte of every prefix: together they let
	// mayHave rule out most keys before the byte-by-byte normalized hash.
	shapes      [8]uint64
	prefixFirst [4]uint64
	prefixMin   int // refNormalized length of the shortest prefix
	// clean has bit shortHash&511 of every exact key whose normalized
	// form is at most 16 bytes: a clean key (see clean) is its own
	// normalized form, and the hash of it is at hand.
	clean [8]uint64
}

type refPrefixHash struct {
	n int
	h uint64
}

const (
	refNormSeed  = 0xcbf29ce484222325
	refNormPrime = 0x100000001b3
)

// normStep folds one key byte as the normalization does; skip is true for
// the separators it drops.
func refNormStep(h uint64, c byte) (uint64, bool) {
	switch {
	case c == '_' || c == '-' || c == '.':
		return h, true
	case 'A' <= c && c <= 'Z':
		c += 'a' - 'A'
	}
	return (h ^ uint64(c)) * refNormPrime, false
}

func refNormHash(key string) (h uint64, n int) {
	h = refNormSeed
	for i := 0; i < len(key); i++ {
		var skip bool
		if h, skip = refNormStep(h, key[i]); !skip {
			n++
		}
	}
	return h, n
}

func refNewKeySet(keys []string) *refKeySet {
	ks := &refKeySet{exact: make(map[uint64]struct{}, len(keys))}
	for _, k := range keys {
		if p, ok := strings.CutSuffix(k, "*"); ok {
			h, n := refNormHash(p)
			if n < 64 {
				ks.prefixes = append(ks.prefixes, refPrefixHash{n: n, h: h})
				ks.prefixLens |= 1 << n
			}
			// hash compares prefixes from one normalized byte on: an empty
			// one never matches.
			if n < 64 && n > 0 {
				first := refNormalized(p)[0] | 0x20
				ks.prefixFirst[first>>6] |= 1 << (first & 63)
				if ks.prefixMin == 0 || n < ks.prefixMin {
					ks.prefixMin = n
				}
			}
			continue
		}
		h, _ := refNormHash(k)
		ks.exact[h] = struct{}{}
		ks.filter[h>>6&3] |= 1 << (h & 63)
		// A key that normalizes to nothing is only matched by keys of
		// separators alone, which mayHave never rules out.
		if nk := refNormalized(k); nk != "" {
			b := refKeyShape{n: len(nk), first: nk[0] | 0x20, last: nk[len(nk)-1] | 0x20}.bit()
			ks.shapes[b>>6] |= 1 << (b & 63)
		}
		if nk := refNormalized(k); len(nk) <= 16 {
			c := refStrHash(nk) & 511
			ks.clean[c>>6] |= 1 << (c & 63)
		}
	}
	return ks
}

// normalized is key as the normalized hash sees it: separators dropped,
// ASCII letters lower case.
func refNormalized(key string) string {
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
var refIsSep = [256]uint8{'_': 1, '-': 1, '.': 1}

// keyShape is what mayHave compares: a key's normalized length and its
// first and last normalized bytes, folded with |0x20 (which maps A-Z onto
// a-z, as normalization does, and merges a few other pairs: a filter may
// let keys through, it must not turn a matching key away).
type refKeyShape struct {
	n           int
	first, last byte
	// edge: the key is empty or starts or ends with a separator; its
	// normalized ends are not at hand and every set may have it.
	edge bool
}

// shapeOf returns key's shape in one pass without a buffer.
func refShapeOf(key string) refKeyShape {
	n := len(key)
	if n == 0 || refIsSep[key[0]] != 0 || refIsSep[key[n-1]] != 0 {
		return refKeyShape{edge: true}
	}
	seps := 0
	for i := 1; i < n-1; i++ {
		seps += int(refIsSep[key[i]])
	}
	return refKeyShape{n: n - seps, first: key[0] | 0x20, last: key[n-1] | 0x20}
}

func (k refKeyShape) bit() uint {
	return (uint(k.first)*31 + uint(k.last)*7 + uint(k.n)*131) & 511
}

// mayHave is false when no key of the set can match a key of shape k: no
// exact key has its shape and no prefix its first byte and a length it
// can hold. prefixes says whether prefix keys count (the terminal keys use
// exact matches only).
func (ks *refKeySet) mayHave(k refKeyShape, prefixes bool) bool {
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

// hash returns key's normalized hash, and whether a prefix matched on the way.
func (ks *refKeySet) hash(key string) (uint64, bool) {
	if ks == nil {
		h, _ := refNormHash(key)
		return h, false
	}
	h := uint64(refNormSeed)
	n := 0
	for i := 0; i < len(key); i++ {
		var skip bool
		if h, skip = refNormStep(h, key[i]); skip {
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

func (ks *refKeySet) hasExact(h uint64) bool {
	if ks == nil || ks.filter[h>>6&3]&(1<<(h&63)) == 0 {
		return false
	}
	_, ok := ks.exact[h]
	return ok
}

// strHash hashes a string; short strings (most keys and values) take a
// multiply-fold path far cheaper than a general hash's setup.
func refStrHash(s string) uint64 {
	if len(s) > 16 {
		return xxhash.Sum64String(s)
	}
	a, b := refShortWords(s)
	return refShortHash(a, b, len(s))
}

// shortWords reads a string of at most 16 bytes as the two words
// shortHash folds. With the length they determine the string: for 8 to 16
// bytes the words overlap, for 4 to 7 the halves do, and below 4 every
// byte is one of the three read.
func refShortWords(s string) (a, b uint64) {
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

func refShortHash(a, b uint64, n int) uint64 {
	return refMum(a^0xa0761d6478bd642f, b^0xe7037ed1a0b428db^uint64(n))
}

// mum is the 64×64→128 multiply-fold at the heart of wyhash.
func refMum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// terminalMatcher recognises a finished async result: a status-like key
// whose string value names a final state.
type refTerminalMatcher struct {
	keys   *refKeySet
	values []string
}

// canonHasher hashes one JSON document in a single pass into a digest that
// ignores key order, member nulls, surrounding whitespace of strings and the
// denylisted keys at any depth. Objects combine member hashes with a sum, so
// no keys are sorted and nothing is allocated.
type refCanonHasher struct {
	s        string
	pos      int
	deny     *refKeySet
	terminal *refTerminalMatcher
	// foundTerminal is set when a status key within the first three levels
	// holds a final state.
	foundTerminal bool
	// buf holds the decoded string with escapes, unless it outgrows it:
	// the hasher lives on its caller's stack, and so do decoded strings.
	buf [256]byte
}

func (h *refCanonHasher) skipWS() {
	for h.pos < len(h.s) {
		switch h.s[h.pos] {
		case ' ', '\t', '\n', '\r':
			h.pos++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the byte at pos, or 0 at the end (no
// caller accepts a 0 byte, so the end and a stray NUL are both an error).
func (h *refCanonHasher) peek() byte {
	for h.pos < len(h.s) {
		c := h.s[h.pos]
		if c > ' ' {
			return c
		}
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return c
		}
		h.pos++
	}
	return 0
}

// isNumber marks the bytes a number token runs over. The scanner is
// lenient on purpose: it hashes the token as written.
var refIsNumber = [256]bool{
	'0': true, '1': true, '2': true, '3': true, '4': true, '5': true, '6': true, '7': true, '8': true, '9': true,
	'-': true, '+': true, '.': true, 'e': true, 'E': true,
}

// value hashes the value at pos. wrap collects the hashes of wrapper
// members of a top-level object (see wrapperInfo).
func (h *refCanonHasher) value(depth int, wrap *refWrapperInfo) (uint64, bool, error) {
	if depth > maxDepth {
		return 0, false, errRefSyntax
	}
	switch c := h.peek(); {
	case c == '{':
		return h.object(depth, wrap)
	case c == '[':
		return h.array(depth)
	case c == '"':
		v, err := h.strValue(depth)
		return v, false, err
	case c == 't':
		return h.literal("true", hash64.TagTrue)
	case c == 'f':
		return h.literal("false", hash64.TagFalse)
	case c == 'n':
		v, _, err := h.literal("null", hash64.TagNull)
		return v, true, err
	case c == '-' || ('0' <= c && c <= '9'):
		return h.number(), false, nil
	default:
		return 0, false, errRefSyntax
	}
}

// number hashes the number token at pos.
func (h *refCanonHasher) number() uint64 {
	start := h.pos
	i := start + 1
	for i < len(h.s) && refIsNumber[h.s[i]] {
		i++
	}
	h.pos = i
	return refStrHash(h.s[start:i]) ^ hash64.TagNumber
}

// strValue hashes the string value at pos, canonicalized when it holds JSON.
func (h *refCanonHasher) strValue(depth int) (uint64, error) {
	str, err := h.str()
	if err != nil {
		return 0, err
	}
	if v, ok := h.embedded(str, depth); ok {
		return v, nil
	}
	return refHashString(str), nil
}

// embedded canonicalizes a string value that holds JSON itself
// ({"arguments":"{\"b\":1}"}), so key order and volatile keys inside it do
// not change the digest either.
func (h *refCanonHasher) embedded(str string, depth int) (uint64, bool) {
	// Most strings start with a byte that is neither '{', '[' nor space
	// (ASCII or not, as TrimSpace sees it): they are no JSON.
	if str == "" || (str[0] > ' ' && str[0] < utf8.RuneSelf && str[0] != '{' && str[0] != '[') {
		return 0, false
	}
	t := strings.TrimSpace(str)
	if t == "" || (t[0] != '{' && t[0] != '[') || depth+1 > maxDepth {
		return 0, false
	}
	sub := refCanonHasher{s: t, deny: h.deny}
	v, _, err := sub.value(depth+1, nil)
	sub.skipWS()
	if err != nil || sub.pos != len(sub.s) {
		return 0, false
	}
	return v, true
}

func refHashString(s string) uint64 {
	if n := len(s); n > 0 && (s[0] <= ' ' || s[n-1] <= ' ') {
		s = strings.TrimSpace(s)
	}
	return refStrHash(s) ^ hash64.TagString
}

func (h *refCanonHasher) literal(lit string, tag uint64) (uint64, bool, error) {
	if !strings.HasPrefix(h.s[h.pos:], lit) {
		return 0, false, errRefSyntax
	}
	h.pos += len(lit)
	return tag, false, nil
}

// SWAR (SIMD within a register) constants: one byte of 1s, of high bits.
const (
	refSwarOnes = 0x0101010101010101
	refSwarHigh = 0x8080808080808080
)

// quoteOrEscape marks with its high bit each byte of x (8 string bytes,
// the first in the low byte) that is '"' or '\\'. Borrows may also mark
// bytes after a true match, so only the lowest mark is exact.
func refQuoteOrEscape(x uint64) uint64 {
	q := x ^ (refSwarOnes * '"')
	e := x ^ (refSwarOnes * '\\')
	return ((q-refSwarOnes)&^q | (e-refSwarOnes)&^e) & refSwarHigh
}

// load64 reads s[i:i+8] as a little-endian word.
func refLoad64(s string, i int) uint64 {
	return binary.LittleEndian.Uint64([]byte(s[i : i+8]))
}

// quoteOrEscapeAt returns the index of the first '"' or '\\' in s at or
// after i, 8 bytes at a time, or -1.
func refQuoteOrEscapeAt(s string, i int) int {
	for ; i+8 <= len(s); i += 8 {
		if m := refQuoteOrEscape(refLoad64(s, i)); m != 0 {
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
func (h *refCanonHasher) str() (string, error) {
	s := h.s
	start := h.pos + 1 // after the opening quote
	// quoteOrEscapeAt, inlined: strings are the most frequent token.
	i := start
	for ; i+8 <= len(s); i += 8 {
		if m := refQuoteOrEscape(refLoad64(s, i)); m != 0 {
			i += bits.TrailingZeros64(m) >> 3
			goto found
		}
	}
	if i = refQuoteOrEscapeAt(s, i); i < 0 {
		return "", errRefSyntax
	}
found:
	if h.s[i] == '"' {
		h.pos = i + 1
		return h.s[start:i], nil
	}
	return h.unescape(start, i)
}

// unescape decodes the string from start, whose first escape is at i, into
// the hasher's buffer: the runs between escapes are copied whole.
func (h *refCanonHasher) unescape(start, i int) (string, error) {
	s := h.s
	// buf is never stored in h: that would move the hasher to the heap.
	buf := append(h.buf[:0], s[start:i]...)
	for {
		// s[i] is a backslash.
		i++
		if i >= len(s) {
			return "", errRefSyntax
		}
		switch e := s[i]; e {
		case 'n':
			buf = append(buf, '\n')
		case 't':
			buf = append(buf, '\t')
		case 'r':
			buf = append(buf, '\r')
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'u':
			if i+4 >= len(s) {
				return "", errRefSyntax
			}
			r, ok := refHex4(s[i+1 : i+5])
			if !ok {
				return "", errRefSyntax
			}
			i += 4
			// A surrogate pair is one character: "\ud83d\ude00" == "😀".
			if utf16.IsSurrogate(r) && i+6 < len(s) && s[i+1] == '\\' && s[i+2] == 'u' {
				if lo, ok := refHex4(s[i+3 : i+7]); ok {
					if pair := utf16.DecodeRune(r, lo); pair != utf8.RuneError {
						r = pair
						i += 6
					}
				}
			}
			buf = utf8.AppendRune(buf, r)
		default:
			buf = append(buf, e)
		}
		i++
		j := refQuoteOrEscapeAt(s, i)
		if j < 0 {
			return "", errRefSyntax
		}
		buf = append(buf, s[i:j]...)
		i = j
		if s[j] == '"' {
			h.pos = j + 1
			// Aliases buf: callers use it before the next str call.
			return unsafe.String(unsafe.SliceData(buf), len(buf)), nil
		}
	}
}

func refHex4(s string) (rune, bool) {
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
type refWrapperInfo struct {
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

func (h *refCanonHasher) object(depth int, wrap *refWrapperInfo) (uint64, bool, error) {
	h.pos++ // {
	var sum uint64
	var n uint64
	for {
		c := h.peek()
		if c == '}' {
			h.pos++
			return refMix(sum ^ hash64.TagObject ^ (n * hash64.PrimeArray)), false, nil
		}
		if c != '"' {
			return 0, false, errRefSyntax
		}
		key, err := h.str()
		if err != nil {
			return 0, false, err
		}
		// key may alias buf; hash it before the value reuses buf.
		keyHash, denied, statusKey := h.key(key, depth)
		var wkey string
		if wrap != nil {
			wkey = refWrapperKey(key)
		}
		if h.peek() != ':' {
			return 0, false, errRefSyntax
		}
		h.pos++
		c = h.peek()
		var vh uint64
		var isNull bool
		switch {
		case statusKey && c == '"':
			v, err := h.str()
			if err != nil {
				return 0, false, err
			}
			if h.terminal.matchValue(v) {
				h.foundTerminal = true
			}
			vh = refHashString(v)
		case depth+1 > maxDepth:
			return 0, false, errRefSyntax
		case c == '"':
			// The common scalars skip value's dispatch.
			if vh, err = h.strValue(depth + 1); err != nil {
				return 0, false, err
			}
		case c == '-' || ('0' <= c && c <= '9'):
			vh = h.number()
		default:
			emptyArr := wrap != nil && strings.HasPrefix(h.s[h.pos:], "[]")
			vh, isNull, err = h.value(depth+1, nil)
			if err != nil {
				return 0, false, err
			}
			if wrap != nil && wkey == "args" {
				wrap.argsEmpty = emptyArr
			}
		}
		if wrap != nil && !denied {
			wrap.note(wkey, vh)
		}
		if !denied && !isNull {
			sum += refMum(keyHash^hash64.TagMember, vh^hash64.TagString)
			n++
		}
		switch h.peek() {
		case ',':
			h.pos++
		case '}':
		default:
			return 0, false, errRefSyntax
		}
	}
}

// unclean marks (high bit) the bytes of a word that normalization may
// change: A-Z, '_', '-', '.' (and, to keep it short, [\\]^ between 'Z' and
// '_'). Bytes of 0x80 and more are left alone, as normalization does.
func refUnclean(x uint64) uint64 {
	const low7 = 0x7f7f7f7f7f7f7f7f
	t := x & low7
	letters := (t + refSwarOnes*(0x80-'A')) &^ (t + refSwarOnes*(0x80-'_'-1))
	seps := (t + refSwarOnes*(0x80-'-')) &^ (t + refSwarOnes*(0x80-'.'-1))
	return (letters | seps) &^ x & refSwarHigh
}

// mayHaveClean is mayHave for a clean key of at most 16 bytes whose
// strHash is hash.
func (ks *refKeySet) mayHaveClean(hash uint64, key string, prefixes bool) bool {
	if ks == nil {
		return false
	}
	if c := hash & 511; ks.clean[c>>6]&(1<<(c&63)) != 0 {
		return true
	}
	if !prefixes || ks.prefixMin == 0 || len(key) < ks.prefixMin {
		return false
	}
	f := key[0] | 0x20
	return ks.prefixFirst[f>>6]&(1<<(f&63)) != 0
}

// key hashes and classifies an object key.
func (h *refCanonHasher) key(key string, depth int) (hash uint64, denied, statusKey bool) {
	if len(key) > 16 {
		denied, statusKey = h.classify(key, depth)
		return xxhash.Sum64String(key), denied, statusKey
	}
	a, b := refShortWords(key)
	hash = refShortHash(a, b, len(key))
	if h.deny == nil && h.terminal == nil {
		return hash, false, false
	}
	if refUnclean(a)|refUnclean(b) != 0 {
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
func (h *refCanonHasher) classify(key string, depth int) (denied, statusKey bool) {
	if len(key) > 64 || (h.deny == nil && h.terminal == nil) {
		return false, false
	}
	shape := refShapeOf(key)
	if !h.deny.mayHave(shape, true) && (h.terminal == nil || depth >= 3 || !h.terminal.keys.mayHave(shape, false)) {
		return false, false
	}
	return h.match(key, depth)
}

// match classifies key by its normalized hash.
func (h *refCanonHasher) match(key string, depth int) (denied, statusKey bool) {
	kh, prefixed := h.deny.hash(key)
	denied = prefixed || h.deny.hasExact(kh)
	statusKey = h.terminal != nil && depth < 3 && h.terminal.keys.hasExact(kh)
	return denied, statusKey
}

func (t *refTerminalMatcher) matchValue(v string) bool {
	for _, tv := range t.values {
		if strings.EqualFold(tv, strings.TrimSpace(v)) {
			return true
		}
	}
	return false
}

func refWrapperKey(key string) string {
	switch key {
	case "inputs", "input_str", "metadata", "tags", "args", "kwargs":
		return key
	}
	return ""
}

func (w *refWrapperInfo) note(key string, vh uint64) {
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
func (w *refWrapperInfo) unwrapped() (uint64, bool) {
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

func (h *refCanonHasher) array(depth int) (uint64, bool, error) {
	h.pos++ // [
	acc := uint64(hash64.TagArray)
	var n uint64
	for {
		c := h.peek()
		if c == ']' {
			h.pos++
			return refMix(acc ^ n), false, nil
		}
		var vh uint64
		var err error
		switch {
		case depth+1 > maxDepth:
			return 0, false, errRefSyntax
		case c == '"':
			vh, err = h.strValue(depth + 1)
		case c == '-' || ('0' <= c && c <= '9'):
			vh = h.number()
		default:
			vh, _, err = h.value(depth+1, nil)
		}
		if err != nil {
			return 0, false, err
		}
		acc = refMum(acc^hash64.PrimeArray, vh^hash64.TagArray)
		n++
		switch h.peek() {
		case ',':
			h.pos++
		case ']':
		default:
			return 0, false, errRefSyntax
		}
	}
}

// canonResult says how a document was read.
type refCanonResult struct {
	digest   uint64
	opaque   bool // not JSON (or malformed): hashed as trimmed text
	terminal bool
}

// canonicalize hashes doc: JSON (also a JSON-encoded JSON string) into an
// order-independent canonical digest, anything else as trimmed opaque text.
func refCanonicalize(doc string, deny *refKeySet, term *refTerminalMatcher, unwrap bool) refCanonResult {
	t := strings.TrimSpace(doc)
	if t == "" {
		return refCanonResult{digest: refMix(hash64.TagOpaque)}
	}
	h := refCanonHasher{s: t, deny: deny, terminal: term}
	if t[0] == '"' {
		// A JSON-encoded string: hash its content, which may itself be JSON.
		inner, err := h.str()
		h.skipWS()
		if err == nil && h.pos == len(h.s) {
			it := strings.TrimSpace(inner)
			if it != "" && (it[0] == '{' || it[0] == '[') {
				return refCanonicalize(it, deny, term, unwrap)
			}
			return refCanonResult{digest: refHashString(inner)}
		}
		return refCanonResult{digest: refMix(xxhash.Sum64String(t) ^ hash64.TagOpaque), opaque: true}
	}
	if t[0] != '{' && t[0] != '[' {
		return refCanonResult{digest: refMix(xxhash.Sum64String(t) ^ hash64.TagOpaque), opaque: true}
	}
	var wrap *refWrapperInfo
	var wi refWrapperInfo
	if unwrap && t[0] == '{' {
		wrap = &wi
	}
	v, _, err := h.value(0, wrap)
	h.skipWS()
	if err != nil || h.pos != len(h.s) {
		return refCanonResult{digest: refMix(xxhash.Sum64String(t) ^ hash64.TagOpaque), opaque: true}
	}
	if wrap != nil {
		if u, ok := wi.unwrapped(); ok {
			v = u
		}
	}
	return refCanonResult{digest: v, terminal: h.foundTerminal}
}

// toolMessageContent finds the content of a serialized LangChain
// ToolMessage ({"lc":1,"kwargs":{"content":…,"tool_call_id":…}}), whose
// ids change on every call while the content may not.
func refToolMessageContent(s string) (string, bool) {
	t := strings.TrimSpace(s)
	if !strings.HasPrefix(t, "{") || !refContainsToolMessage(t) {
		return "", false
	}
	kw, ok := refMemberRaw(t, "kwargs")
	if !ok {
		return "", false
	}
	return refMemberRaw(kw, "content")
}

// containsToolMessage is strings.Contains(t, `"ToolMessage"`), found
// through the rare 'M' with IndexByte: on every tool result, the generic
// search for a needle starting with '"' cost a fifth of the digest.
func refContainsToolMessage(t string) bool {
	const marker = `"ToolMessage"`
	const m = 5 // index of 'M' in marker
	for i := 0; ; {
		j := strings.IndexByte(t[i:], 'M')
		if j < 0 {
			return false
		}
		if k := i + j - m; k >= 0 && strings.HasPrefix(t[k:], marker) {
			return true
		}
		i += j + 1
	}
}

// memberRaw returns the raw JSON text of a top-level member of an object.
func refMemberRaw(obj, name string) (string, bool) {
	h := refCanonHasher{s: obj}
	h.skipWS()
	if h.pos >= len(h.s) || h.s[h.pos] != '{' {
		return "", false
	}
	h.pos++
	for {
		h.skipWS()
		if h.pos >= len(h.s) || h.s[h.pos] != '"' {
			return "", false
		}
		key, err := h.str()
		if err != nil {
			return "", false
		}
		match := key == name
		h.skipWS()
		if h.pos >= len(h.s) || h.s[h.pos] != ':' {
			return "", false
		}
		h.pos++
		h.skipWS()
		start := h.pos
		if _, _, err := h.value(1, nil); err != nil {
			return "", false
		}
		if match {
			return h.s[start:h.pos], true
		}
		h.skipWS()
		if h.pos >= len(h.s) || h.s[h.pos] != ',' {
			return "", false
		}
		h.pos++
	}
}
