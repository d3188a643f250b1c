package twostage

import (
	"errors"
	"math/bits"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
)

// maxDepth bounds the nesting of containers, as the canonicalizer does.
const maxDepth = 64

var errSyntax = errors.New("malformed JSON")

// Scanner computes digests in two stages; it holds stage one's buffers
// from one document to the next.
type Scanner struct {
	ix     index
	raw    []rawMasks
	vector bool
	// filter stands for the key classification: one probe a key, a bit
	// test on its hash, whose answer (with a test of the hash's top half
	// for zero) is as good as never yes, so that the digest stays the one
	// without key sets while each key pays what a key set's first test
	// would.
	filter uint64
	buf    [256]byte
}

// New returns a Scanner; vector selects the AVX2 stage one where the CPU
// has it.
func New(vector bool) *Scanner {
	return &Scanner{vector: vector && hasAVX2, filter: 1<<7 | 1<<33}
}

// frame is an open container: its running hash (arrays) or member sum
// (objects) over n members, and the key of the member being read.
type frame struct {
	acc, n, key uint64
	obj, skip   bool
}

// Digest hashes doc, a JSON object or array, as the canonicalizer does
// without key sets.
func (sc *Scanner) Digest(doc string) (uint64, error) {
	if doc == "" {
		return 0, errSyntax
	}
	sc.index(doc)
	return sc.walk(doc)
}

// index runs stage one over doc into sc.ix, growing the buffers it reuses.
func (sc *Scanner) index(doc string) {
	n := (len(doc) + 63) / 64
	if cap(sc.raw) < n {
		sc.raw = make([]rawMasks, n)
		sc.ix.events = make([]uint64, 0, n)
		sc.ix.delims = make([]uint64, 0, n)
	}
	sc.ix.build(doc, sc.vector, sc.raw[:n])
}

// walk is stage two: a loop over the events, an explicit stack of open
// containers. It is one loop, with a call only for escapes, numbers and
// literals and the hashes, for the reason the one-pass scanner's loop is:
// a call per token was measured to be most of that scanner's cost. A form
// with the open container and the position among the events in locals
// rather than in the stack and a cursor was measured too, before numbers
// and literals were read in one call: 14 % more instructions than this
// form then (48,509 against 42,585) and no faster. A number or literal is
// read in three places (after '[', after ':', after an array's ','): one
// read after the switch for all three cost 2.8 % more instructions
// (44,620 → 45,857 a 2 KiB document;
// internal/benchdata/changes/14-two-stage-ceiling).
//
//nolint:funlen // one loop on purpose: docs/design.md, "The canonicalizer's speed"
func (sc *Scanner) walk(s string) (uint64, error) {
	cur := cursor{ev: sc.ix.events, word: sc.ix.events[0]}
	var stack [maxDepth + 1]frame
	depth := -1
	expectKey := false
	var result uint64
	for {
		p := cur.next()
		if p < 0 {
			return 0, errSyntax
		}
		var vh uint64
		isNull := false
		switch c := s[p]; c {
		case '{', '[':
			if depth >= maxDepth {
				return 0, errSyntax
			}
			depth++
			f := &stack[depth]
			f.obj, f.n = c == '{', 0
			if f.obj {
				f.acc = 0
				expectKey = true
			} else {
				f.acc = hash64.TagArray
				expectKey = false
				var ok bool
				var err error
				if vh, isNull, ok, err = sc.scalarAt(s, p+1); err != nil {
					return 0, err
				} else if ok {
					break
				}
			}
			continue
		case '"':
			if depth < 0 {
				return 0, errSyntax
			}
			q := cur.next()
			if q < 0 {
				return 0, errSyntax
			}
			var str string
			escapedStr := s[q] != '"'
			if !escapedStr {
				str = s[p+1 : q]
			} else {
				var err error
				if str, err = sc.str(s, p, q, &cur); err != nil {
					return 0, err
				}
			}
			f := &stack[depth]
			if expectKey {
				if len(str) <= 16 && !escapedStr {
					a, b := hash64.ShortWords(str)
					f.key = hash64.Short(a, b, len(str))
				} else {
					f.key = hash64.String(str)
				}
				// Stands for the key's classification (denied or not).
				f.skip = sc.filter&(1<<(f.key&63)) != 0 && f.key>>32 == 0
				colon := cur.next()
				if colon < 0 || s[colon] != ':' {
					return 0, errSyntax
				}
				expectKey = false
				var ok bool
				var err error
				if vh, isNull, ok, err = sc.scalarAt(s, colon+1); err != nil {
					return 0, err
				} else if ok {
					break
				}
				continue
			}
			vh = hashString(str)
		case ',':
			if depth < 0 {
				return 0, errSyntax
			}
			f := &stack[depth]
			if f.obj {
				expectKey = true
				continue
			}
			var ok bool
			var err error
			if vh, isNull, ok, err = sc.scalarAt(s, p+1); err != nil {
				return 0, err
			} else if ok {
				break
			}
			continue
		case '}', ']':
			if depth < 0 {
				return 0, errSyntax
			}
			f := &stack[depth]
			if f.obj {
				vh = hash64.Mix(f.acc ^ hash64.TagObject ^ (f.n * hash64.PrimeArray))
			} else {
				vh = hash64.Mix(f.acc ^ f.n)
			}
			depth--
			// The enclosing container's next token is a separator or
			// its closer: no key (after {} in an array, a string is a
			// value).
			expectKey = false
			if depth < 0 {
				result = vh
				return result, nil
			}
		default:
			return 0, errSyntax
		}
		f := &stack[depth]
		if f.obj {
			if !isNull && !f.skip {
				f.acc += hash64.Mum(f.key^hash64.TagMember, vh^hash64.TagString)
				f.n++
			}
		} else {
			f.acc = hash64.Mum(f.acc^hash64.PrimeArray, vh^hash64.TagArray)
			f.n++
		}
	}
}

// cursor yields the events in order.
type cursor struct {
	ev   []uint64
	blk  int
	word uint64
}

func (c *cursor) next() int {
	for c.word == 0 {
		c.blk++
		if c.blk >= len(c.ev) {
			return -1
		}
		c.word = c.ev[c.blk]
	}
	i := bits.TrailingZeros64(c.word)
	c.word &= c.word - 1
	return c.blk<<6 | i
}

// scalarAt reads the value that starts at q, after any space, when it is
// a number or a literal (ok): it runs to the next delimiter, and no event
// is consumed. Strings and containers are left to their events.
func (sc *Scanner) scalarAt(s string, q int) (vh uint64, isNull, ok bool, err error) {
	for q < len(s) && s[q] <= ' ' {
		q++
	}
	if q >= len(s) {
		return 0, false, false, errSyntax
	}
	switch s[q] {
	case '"', '{', '[', '}', ']':
		return 0, false, false, nil
	}
	d := sc.ix.delims
	b := q >> 6
	end := q
	if w := d[b] >> (q & 63); w != 0 {
		end += bits.TrailingZeros64(w)
	} else {
		for b++; b < len(d) && d[b] == 0; b++ {
		}
		if b == len(d) {
			return 0, false, false, errSyntax
		}
		end = b<<6 | bits.TrailingZeros64(d[b])
	}
	switch t := s[q:end]; t {
	case "true":
		return hash64.TagTrue, false, true, nil
	case "false":
		return hash64.TagFalse, false, true, nil
	case "null":
		return hash64.TagNull, true, true, nil
	default:
		return hash64.String(t) ^ hash64.TagNumber, false, true, nil
	}
}

// str decodes into buf the string whose opening quote is at p and first
// escape at q, consuming its events.
func (sc *Scanner) str(s string, p, q int, cur *cursor) (string, error) {
	next := cur.next
	// Escapes: decode, consuming events up to the closing quote.
	out := sc.buf[:0]
	from := p + 1
	for {
		if s[q] == '"' {
			out = append(out, s[from:q]...)
			if len(out) == 0 {
				return "", nil
			}
			// Aliases buf: hashed before the next string is decoded.
			return unsafe.String(&out[0], len(out)), nil
		}
		out = append(out, s[from:q]...)
		if q+1 >= len(s) {
			return "", errSyntax
		}
		switch e := s[q+1]; e {
		case 'n':
			out = append(out, '\n')
		case 't':
			out = append(out, '\t')
		case 'r':
			out = append(out, '\r')
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'u':
			r, w := unicodeEscape(s, q)
			if w == 0 {
				return "", errSyntax
			}
			out = utf8.AppendRune(out, r)
			from = q + w
			// The escapes the \u run holds were events too.
			for q = next(); q >= 0 && q < from; q = next() {
			}
			if q < 0 {
				return "", errSyntax
			}
			continue
		default:
			out = append(out, e)
		}
		from = q + 2
		if q = next(); q < 0 {
			return "", errSyntax
		}
	}
}

func hashString(s string) uint64 {
	if n := len(s); n > 0 && (s[0] <= ' ' || s[n-1] <= ' ') {
		s = strings.TrimSpace(s)
	}
	return hash64.String(s) ^ hash64.TagString
}

// unicodeEscape decodes the \u escape at q (and the low surrogate's after
// it): the rune and the bytes read, 0 when malformed.
func unicodeEscape(s string, q int) (rune, int) {
	hex := func(i int) (rune, bool) {
		if i+6 > len(s) {
			return 0, false
		}
		v, err := strconv.ParseUint(s[i+2:i+6], 16, 16)
		return rune(v), err == nil
	}
	r, ok := hex(q)
	if !ok {
		return 0, 0
	}
	if utf16.IsSurrogate(r) {
		if q+12 <= len(s) && s[q+6] == '\\' && s[q+7] == 'u' {
			if r2, ok := hex(q + 6); ok {
				if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
					return d, 12
				}
			}
		}
		return utf8.RuneError, 6
	}
	return r, 6
}
