// Decoding of JSON strings with escapes into the hasher's stack buffer, the
// runs between escapes copied a word at a time. It is apart from the
// scanner because most strings have no escape and never come here; a value
// too long for the buffer goes on in canon_long.go.

package canon

import (
	"encoding/binary"
	"math/bits"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// str reads a JSON string at pos. Without escapes it returns a slice of the
// input; with escapes it decodes into the hasher's buffer. The scanner
// reads strings in its loop; this is for a document that is a JSON string
// (and for the reference scanner of the tests).
func (h *canonHasher) str() (string, error) {
	start := h.pos + 1 // after the opening quote
	i := quoteOrEscapeAt(h.s, start)
	if i < 0 {
		return "", errSyntax
	}
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
	var err error
	for {
		// s[i] is a backslash. A one-byte escape with room after it for a
		// word, in the buffer and in s, is decoded with the word that
		// follows it at once: no capacity test can fail, and escape-dense
		// text (source code, with a \n, \t or \" every few bytes) spent
		// most of its time in those tests.
		if k := len(buf); i+10 <= len(s) && k+9 <= cap(buf) && s[i+1] != 'u' {
			b := buf[k : k+9]
			b[0] = unescapeByte[s[i+1]]
			x := load64(s, i+2)
			binary.LittleEndian.PutUint64(b[1:], x)
			if m := quoteOrEscape(x); m != 0 {
				d := bits.TrailingZeros64(m) >> 3
				buf, i = buf[:k+1+d], i+2+d
				goto runEnd
			}
			buf, i = buf[:k+9], i+10
		} else if buf, i, err = h.escape(buf, i, lv); err != nil {
			return "", 0, err
		}
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

// escape decodes the escape whose backslash is at i into buf and returns
// where the string goes on after it.
func (h *canonHasher) escape(buf []byte, i int, lv *longValue) ([]byte, int, error) {
	s := h.s
	i++
	if i >= len(s) {
		return buf, i, errSyntax
	}
	if e := s[i]; !lv.fits(len(buf), utf8.UTFMax) {
		return buf, i, errLong
	} else if e != 'u' {
		buf = append(lv.room(buf, 1), unescapeByte[e])
	} else {
		if i+4 >= len(s) {
			return buf, i, errSyntax
		}
		r, ok := hex4(s[i+1 : i+5])
		if !ok {
			return buf, i, errSyntax
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
	return buf, i + 1, nil
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
