package engine

import (
	"encoding/binary"
	"errors"
	"math/bits"
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

func newKeySet(keys []string) *keySet {
	ks := &keySet{exact: make(map[uint64]struct{}, len(keys))}
	for _, k := range keys {
		if p, ok := strings.CutSuffix(k, "*"); ok {
			h, n := normHash(p)
			if n < 64 {
				ks.prefixes = append(ks.prefixes, prefixHash{n: n, h: h})
				ks.prefixLens |= 1 << n
			}
			continue
		}
		h, _ := normHash(k)
		ks.exact[h] = struct{}{}
		ks.filter[h>>6&3] |= 1 << (h & 63)
	}
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

// strHash hashes a string; short strings (most keys and values) take a
// multiply-fold path far cheaper than a general hash's setup.
func strHash(s string) uint64 {
	n := len(s)
	if n > 16 {
		return xxhash.Sum64String(s)
	}
	var a, b uint64
	switch {
	case n >= 8:
		a = binary.LittleEndian.Uint64([]byte(s[:8]))
		b = binary.LittleEndian.Uint64([]byte(s[n-8:]))
	case n >= 4:
		a = uint64(binary.LittleEndian.Uint32([]byte(s[:4])))
		b = uint64(binary.LittleEndian.Uint32([]byte(s[n-4:])))
	case n > 0:
		a = uint64(s[0])<<16 | uint64(s[n>>1])<<8 | uint64(s[n-1])
	}
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
	values []string
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
	scratch       []byte
}

func (h *canonHasher) skipWS() {
	for h.pos < len(h.s) {
		switch h.s[h.pos] {
		case ' ', '\t', '\n', '\r':
			h.pos++
		default:
			return
		}
	}
}

// value hashes the value at pos. wrap collects the hashes of wrapper
// members of a top-level object (see wrapperInfo).
func (h *canonHasher) value(depth int, wrap *wrapperInfo) (uint64, bool, error) {
	if depth > maxDepth {
		return 0, false, errSyntax
	}
	h.skipWS()
	if h.pos >= len(h.s) {
		return 0, false, errSyntax
	}
	switch c := h.s[h.pos]; {
	case c == '{':
		return h.object(depth, wrap)
	case c == '[':
		return h.array(depth)
	case c == '"':
		str, err := h.str()
		if err != nil {
			return 0, false, err
		}
		if v, ok := h.embedded(str, depth); ok {
			return v, false, nil
		}
		return hashString(str), false, nil
	case c == 't':
		return h.literal("true", tagTrue)
	case c == 'f':
		return h.literal("false", tagFalse)
	case c == 'n':
		v, _, err := h.literal("null", tagNull)
		return v, true, err
	case c == '-' || ('0' <= c && c <= '9'):
		start := h.pos
		for h.pos < len(h.s) {
			switch h.s[h.pos] {
			case '0', '1', '2', '3', '4', '5', '6', '7', '8', '9', '-', '+', '.', 'e', 'E':
				h.pos++
				continue
			}
			break
		}
		return strHash(h.s[start:h.pos]) ^ tagNumber, false, nil
	default:
		return 0, false, errSyntax
	}
}

// embedded canonicalizes a string value that holds JSON itself
// ({"arguments":"{\"b\":1}"}), so key order and volatile keys inside it do
// not change the digest either.
func (h *canonHasher) embedded(str string, depth int) (uint64, bool) {
	t := strings.TrimSpace(str)
	if t == "" || (t[0] != '{' && t[0] != '[') || depth+1 > maxDepth {
		return 0, false
	}
	sub := canonHasher{s: t, deny: h.deny}
	v, _, err := sub.value(depth+1, nil)
	sub.skipWS()
	if err != nil || sub.pos != len(sub.s) {
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

func (h *canonHasher) literal(lit string, tag uint64) (uint64, bool, error) {
	if !strings.HasPrefix(h.s[h.pos:], lit) {
		return 0, false, errSyntax
	}
	h.pos += len(lit)
	return tag, false, nil
}

// str reads a JSON string at pos. Without escapes it returns a slice of the
// input; with escapes it decodes into the reused scratch buffer.
func (h *canonHasher) str() (string, error) {
	h.pos++ // opening quote
	start := h.pos
	// Most JSON strings are short: one scan for both the closing quote and
	// an escape beats two vector searches and their call overhead.
	for i := start; i < len(h.s) && i-start < 32; i++ {
		switch h.s[i] {
		case '"':
			h.pos = i + 1
			return h.s[start:i], nil
		case '\\':
			return h.unescape(start)
		}
	}
	end := strings.IndexByte(h.s[start:], '"')
	if end < 0 {
		return "", errSyntax
	}
	if strings.IndexByte(h.s[start:start+end], '\\') < 0 {
		h.pos = start + end + 1
		return h.s[start : start+end], nil
	}
	return h.unescape(start)
}

// unescape decodes the string starting at start into the scratch buffer.
func (h *canonHasher) unescape(start int) (string, error) {
	if h.scratch == nil {
		h.scratch = make([]byte, 0, 256)
	}
	h.scratch = h.scratch[:0]
	for i := start; i < len(h.s); i++ {
		c := h.s[i]
		switch c {
		case '"':
			h.pos = i + 1
			// Aliases scratch: callers use it before the next str call.
			return unsafe.String(unsafe.SliceData(h.scratch), len(h.scratch)), nil
		case '\\':
			i++
			if i >= len(h.s) {
				return "", errSyntax
			}
			switch e := h.s[i]; e {
			case 'n':
				h.scratch = append(h.scratch, '\n')
			case 't':
				h.scratch = append(h.scratch, '\t')
			case 'r':
				h.scratch = append(h.scratch, '\r')
			case 'b':
				h.scratch = append(h.scratch, '\b')
			case 'f':
				h.scratch = append(h.scratch, '\f')
			case 'u':
				if i+4 >= len(h.s) {
					return "", errSyntax
				}
				r, ok := hex4(h.s[i+1 : i+5])
				if !ok {
					return "", errSyntax
				}
				i += 4
				// A surrogate pair is one character: "\ud83d\ude00" == "😀".
				if utf16.IsSurrogate(r) && i+6 < len(h.s) && h.s[i+1] == '\\' && h.s[i+2] == 'u' {
					if lo, ok := hex4(h.s[i+3 : i+7]); ok {
						if pair := utf16.DecodeRune(r, lo); pair != utf8.RuneError {
							r = pair
							i += 6
						}
					}
				}
				h.scratch = utf8.AppendRune(h.scratch, r)
			default:
				h.scratch = append(h.scratch, e)
			}
		default:
			h.scratch = append(h.scratch, c)
		}
	}
	return "", errSyntax
}

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

func (h *canonHasher) object(depth int, wrap *wrapperInfo) (uint64, bool, error) {
	h.pos++ // {
	var sum uint64
	var n uint64
	for {
		h.skipWS()
		if h.pos >= len(h.s) {
			return 0, false, errSyntax
		}
		if h.s[h.pos] == '}' {
			h.pos++
			return mix(sum ^ tagObject ^ (n * primeArray)), false, nil
		}
		if h.s[h.pos] != '"' {
			return 0, false, errSyntax
		}
		key, err := h.str()
		if err != nil {
			return 0, false, err
		}
		// key may alias scratch; hash it before the value reuses scratch.
		keyHash := strHash(key)
		// One normalized hash serves the denylist and the terminal keys.
		denied, statusKey := false, false
		if len(key) <= 64 && (h.deny != nil || h.terminal != nil) {
			kh, prefixed := h.deny.hash(key)
			denied = prefixed || h.deny.hasExact(kh)
			statusKey = h.terminal != nil && depth < 3 && h.terminal.keys.hasExact(kh)
		}
		var wkey string
		if wrap != nil {
			wkey = wrapperKey(key)
		}
		h.skipWS()
		if h.pos >= len(h.s) || h.s[h.pos] != ':' {
			return 0, false, errSyntax
		}
		h.pos++
		h.skipWS()
		var vh uint64
		var isNull bool
		if statusKey && h.pos < len(h.s) && h.s[h.pos] == '"' {
			v, err := h.str()
			if err != nil {
				return 0, false, err
			}
			if h.terminal.matchValue(v) {
				h.foundTerminal = true
			}
			vh = hashString(v)
		} else {
			emptyArr := strings.HasPrefix(h.s[h.pos:], "[]")
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
			sum += mum(keyHash^tagMember, vh^tagString)
			n++
		}
		h.skipWS()
		if h.pos < len(h.s) && h.s[h.pos] == ',' {
			h.pos++
			continue
		}
		if h.pos < len(h.s) && h.s[h.pos] == '}' {
			continue
		}
		return 0, false, errSyntax
	}
}

func (t *terminalMatcher) matchValue(v string) bool {
	for _, tv := range t.values {
		if strings.EqualFold(tv, strings.TrimSpace(v)) {
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

func (h *canonHasher) array(depth int) (uint64, bool, error) {
	h.pos++ // [
	acc := uint64(tagArray)
	var n uint64
	for {
		h.skipWS()
		if h.pos >= len(h.s) {
			return 0, false, errSyntax
		}
		if h.s[h.pos] == ']' {
			h.pos++
			return mix(acc ^ n), false, nil
		}
		vh, _, err := h.value(depth+1, nil)
		if err != nil {
			return 0, false, err
		}
		acc = mum(acc^primeArray, vh^tagArray)
		n++
		h.skipWS()
		if h.pos < len(h.s) && h.s[h.pos] == ',' {
			h.pos++
			continue
		}
		if h.pos < len(h.s) && h.s[h.pos] == ']' {
			continue
		}
		return 0, false, errSyntax
	}
}

// canonResult says how a document was read.
type canonResult struct {
	digest   uint64
	opaque   bool // not JSON (or malformed): hashed as trimmed text
	terminal bool
}

// canonicalize hashes doc: JSON (also a JSON-encoded JSON string) into an
// order-independent canonical digest, anything else as trimmed opaque text.
func canonicalize(doc string, deny *keySet, term *terminalMatcher, unwrap bool) canonResult {
	t := strings.TrimSpace(doc)
	if t == "" {
		return canonResult{digest: mix(tagOpaque)}
	}
	// scratch is allocated by str on the first escaped string only: a
	// stack buffer here would escape (the hasher's methods recurse).
	h := canonHasher{s: t, deny: deny, terminal: term}
	if t[0] == '"' {
		// A JSON-encoded string: hash its content, which may itself be JSON.
		inner, err := h.str()
		h.skipWS()
		if err == nil && h.pos == len(h.s) {
			it := strings.TrimSpace(inner)
			if it != "" && (it[0] == '{' || it[0] == '[') {
				return canonicalize(it, deny, term, unwrap)
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
	v, _, err := h.value(0, wrap)
	h.skipWS()
	if err != nil || h.pos != len(h.s) {
		return canonResult{digest: mix(xxhash.Sum64String(t) ^ tagOpaque), opaque: true}
	}
	if wrap != nil {
		if u, ok := wi.unwrapped(); ok {
			v = u
		}
	}
	return canonResult{digest: v, terminal: h.foundTerminal}
}
