// The scanner: canonHasher reads a JSON document once, token by token, and
// hashes it as it goes, with no tree, no sorting and no allocation. It is
// the hot path (every tool call's arguments and result), so its loop keeps
// in line what nearly every token meets and calls the steps below it for
// the rest; the key sets, escape decoding and word tests it uses are in
// the other canon_ files.

package canon

import (
	"math/bits"
	"strings"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
)

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
	// vstart is where the value of the top-level member being read
	// starts: kept here, not in the scanner's loop, which is short of
	// registers and reads it only at the top level.
	vstart int
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

// container hashes the object or array at pos, whose members are at
// depth+1 (at most maxDepth). It is one loop over the tokens of both;
// nested containers recurse, and their depth bounds the recursion.
//
// It keeps in line what nearly every member meets (a string's end, a
// short key's class, folding the member, the separator) and calls steps
// for the rest: a call per token was most of the cost on dense documents.
//
//nolint:funlen // one loop on purpose, measured: docs/design.md, "The canonicalizer's speed"
func (h *canonHasher) container(depth int, wrap *wrapperInfo) (uint64, error) {
	s := h.s
	pos := h.pos
	obj := s[pos] == '{'
	closer := byte(']')
	acc := uint64(hash64.TagArray) // an array's running hash, an object's member sum
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
	// The member being read: its key's hash, what is known of it (mf)
	// and, for a wrapper or a recorded member, what it is.
	var keyHash uint64
	var wkey wrapperKey
	var mf memberFlags
	if obj {
		mf = memberKey
	}
	// top: the members are looked at for a wrapper or recorded; below
	// the top level one branch skips all of that.
	top := wrap != nil || (depth == 0 && h.want != "")
	for {
		var vh uint64
		var isNull bool
		switch {
		case c == '"':
			// A string, key or value: its closing quote or first escape
			// is found 8 bytes at a time (quoteOrEscapeAt, in line). The
			// gotos are the cheapest way out of the two loads: the
			// goto-free forms tried (a found flag, a helper) cost 1-7 %
			// more instructions per document.
			start := pos + 1
			i := start
			// w is the string's first 8 bytes, if s has them: a short
			// key is hashed from it.
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
				var hashed bool
				if str, vh, hashed, err = h.escaped(start, i, mf&(memberKey|memberStatus) == 0); err != nil {
					return 0, err
				}
				pos, w = h.pos, 0
				if hashed {
					break // a long value, hashed as it was decoded
				}
			}
			if mf&memberKey != 0 {
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
					keyHash, mf = hash64.Short(a, b, n), 0
					if e, ok := h.deny.spelledHit(keyHash, a, b, n); ok {
						mf = flagsOf(e.denied, depth < 3 && h.deny.statusOf(e, h.terminal))
					} else if u != 0 {
						mf = flagsOf(h.classify(str, depth))
					} else if h.deny.mayHaveClean(keyHash, str, true) || (h.terminal != nil && depth < 3 && h.terminal.keys.mayHaveClean(keyHash, str, false)) {
						mf = flagsOf(h.match(str, depth))
					}
				} else {
					var denied, status bool
					keyHash, denied, status = h.key(str, depth)
					mf = flagsOf(denied, status)
				}
				if pos, c = nextByte(s, pos); c != ':' {
					return 0, errSyntax
				}
				pos, c = nextByte(s, pos+1)
				if top {
					wkey = h.topKey(str, wrap, depth)
					h.vstart = pos
				}
				continue
			}
			vh = h.stringValue(str, mf&memberStatus != 0, depth)
		case c == '-' || ('0' <= c && c <= '9'):
			// Most numbers are a few digits: where they end is found
			// in one word, in line; a number going on ('.', 'e', …) or a
			// longer one takes hashNumber's loop.
			if pos+8 <= len(s) {
				x := load64(s, pos)
				if m := nonDigit(x) &^ 0x80; m != 0 {
					if k := bits.TrailingZeros64(m) >> 3; !isNumber[s[pos+k]] {
						a, b := wordWords(x&(1<<(8*k)-1), k)
						vh, pos = hash64.Short(a, b, k)^hash64.TagNumber, pos+k
						break
					}
				}
			}
			vh, pos = hashNumber(s, pos)
		case c == '{' || c == '[':
			var err error
			h.pos = pos
			if vh, err = h.container(depth+1, nil); err != nil {
				return 0, err
			}
			pos = h.pos
		case c == 't' && strings.HasPrefix(s[pos:], "true"):
			vh, pos = hash64.TagTrue, pos+4
		case c == 'f' && strings.HasPrefix(s[pos:], "false"):
			vh, pos = hash64.TagFalse, pos+5
		case c == 'n' && strings.HasPrefix(s[pos:], "null"):
			vh, pos, isNull = hash64.TagNull, pos+4, true
		default:
			return 0, errSyntax
		}
		if !obj {
			acc = hash64.Mum(acc^hash64.PrimeArray, vh^hash64.TagArray)
			n++
		} else {
			if mf&memberDenied == 0 && !isNull {
				acc += hash64.Mum(keyHash^hash64.TagMember, vh^hash64.TagString)
				n++
			}
			if top {
				if wkey&^wantMember == wrapperArgs && c != '"' && c != '-' && (c < '0' || c > '9') {
					// A container or literal: only [] is an empty args.
					wrap.argsEmpty = strings.HasPrefix(s[h.vstart:], "[]")
				}
				if wrap != nil && mf&memberDenied == 0 {
					wrap.note(wkey&^wantMember, vh)
				}
				if wkey&wantMember != 0 {
					h.member, h.found = [2]int{h.vstart, pos}, true
				}
			}
			mf = memberKey
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

// memberFlags is what the scanner knows of the object member it reads:
// three flags in one byte, since every value carried through its loop
// costs instructions on every token (docs/design.md, "The canonicalizer's
// speed").
type memberFlags uint8

const (
	memberKey    memberFlags = 1 << iota // the next string is the member's key
	memberDenied                         // the key is denied: the member is left out
	memberStatus                         // the key may hold a final state: its value is matched
)

// flagsOf is the memberFlags of a key classified as denied and status.
func flagsOf(denied, status bool) memberFlags {
	var f memberFlags
	if denied {
		f |= memberDenied
	}
	if status {
		f |= memberStatus
	}
	return f
}

// escaped decodes the string from start, whose first escape is at i, and
// sets h.pos after it. A value string (value) that outgrows the buffer is
// hashed as it is decoded instead: then hashed is true and vh is its hash.
func (h *canonHasher) escaped(start, i int, value bool) (str string, vh uint64, hashed bool, err error) {
	var lv *longValue
	if value {
		lv = longProbe
	}
	str, vh, err = h.unescape(start, i, lv)
	if err == errLong {
		return h.unescapeLong(start, i)
	}
	return str, vh, false, err
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
	a, b := hash64.ShortWords(key)
	hash = hash64.Short(a, b, len(key))
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

// topKey notes a top-level key: which wrapper member it may be, with
// wantMember set when its member is the one to record for want.
func (h *canonHasher) topKey(str string, wrap *wrapperInfo, depth int) (wkey wrapperKey) {
	if wrap != nil {
		wkey = wrapperKeyOf(str)
	}
	if depth == 0 && h.want != "" && !h.found && str == h.want {
		wkey |= wantMember
	}
	return wkey
}

// stringValue hashes a value string; the value of a status key (statusKey)
// is looked at for a final state, and one that may be JSON itself is
// canonicalized (see embedded).
func (h *canonHasher) stringValue(str string, statusKey bool, depth int) uint64 {
	switch {
	case statusKey:
		if h.terminal.matchValue(str) {
			h.foundTerminal = true
		}
	case str == "" || str[0] <= ' ' || str[0] >= utf8.RuneSelf || str[0] == '{' || str[0] == '[':
		// Maybe JSON itself (see embedded for the test).
		if v, ok := h.embedded(str, depth+1); ok {
			return v
		}
	}
	if n := len(str); n > 16 && str[n-1] > ' ' && str[0] > ' ' {
		return xxhash.Sum64String(str) ^ hash64.TagString // hashString, in line
	}
	return hashString(str)
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
	var sub canonHasher // set field by field: see canonicalize
	sub.s, sub.deny = t, h.deny
	v, err := sub.container(depth+1, nil)
	if end, _ := skipSpace(sub.s, sub.pos); err != nil || end != len(sub.s) {
		return 0, false
	}
	return v, true
}

// hashNumber hashes the number token at pos that its first word does not
// hold (the scanner's loop tests that word) and returns where it ends.
func hashNumber(s string, pos int) (uint64, int) {
	i := pos + 1
	for i < len(s) && isNumber[s[i]] {
		i++
	}
	if n := i - pos; n < 8 && pos+8 <= len(s) {
		a, b := wordWords(load64(s, pos)&(1<<(8*n)-1), n)
		return hash64.Short(a, b, n) ^ hash64.TagNumber, i
	}
	return hash64.String(s[pos:i]) ^ hash64.TagNumber, i
}

// isNumber marks the bytes a number token runs over. The scanner is
// lenient on purpose: it hashes the token as written.
var isNumber = [256]bool{
	'0': true, '1': true, '2': true, '3': true, '4': true, '5': true, '6': true, '7': true, '8': true, '9': true,
	'-': true, '+': true, '.': true, 'e': true, 'E': true,
}
