package canon

import (
	"bytes"
	"errors"
	"unicode"
	"unicode/utf8"

	"github.com/cespare/xxhash/v2"

	"github.com/otelcol-loop/otelcol-loop/processor/loopdetect/internal/hash64"
)

// longValue hashes a string value that outgrows the hasher's buffer while
// it is decoded (a file's content with its escapes), chunk by chunk into an
// xxhash.Digest, so that the decoded string is never held whole and nothing
// is allocated. The digest of the chunks is xxhash.Sum64 of their
// concatenation, so the value hashes as hashString would hash it whole.
//
// hashString trims the string when its first or last byte is at most ' ',
// so what is written must be the string as hashString sees it: leading
// space is dropped before the first chunk when the first byte is such a
// byte, and each chunk ends at an ASCII byte that is no space, so trailing
// space is held back until the string's last byte says whether it goes.
//
// Decoded whole, onto the heap as before, are: a value that may be JSON
// itself ('{' or '[' after the leading space: embedded canonicalizes it),
// one that starts with a non-ASCII space (trimmed or not by its last byte),
// and one of which the first full buffer holds at most 16 bytes after the
// leading space. A run of space longer than the buffer inside a hashed
// value grows the buffer.
type longValue struct {
	d     xxhash.Digest
	state longState
	// trim: the first byte is at most ' ', so the string is trimmed.
	trim bool
}

// longProbe, passed to unescape as its longValue, makes it give up with
// errLong on a string that outgrows the buffer: the value is then decoded
// again by unescapeLong, whose frame holds the digest, so that the hasher
// (set up for every document) does not: held there, it cost structure-dense
// documents without long strings 2-5 %. It is never written to.
var longProbe = new(longValue)

// errLong is unescape's answer under longProbe to a string that does not
// fit the buffer.
var errLong = errors.New("string outgrows the buffer")

// fits is false when lv is longProbe and n more bytes do not fit a buffer
// holding k.
func (lv *longValue) fits(k, n int) bool {
	return lv != longProbe || k+n <= len(canonHasher{}.buf)
}

// unescapeLong decodes the value string from start, whose first escape is
// at i, once more, hashed as it goes if it is long enough and no JSON;
// hashed says so (and str is empty).
func (h *canonHasher) unescapeLong(start, i int) (str string, vh uint64, hashed bool, err error) {
	var lv longValue
	str, vh, err = h.unescape(start, i, &lv)
	return str, vh, lv.state == longOn, err
}

type longState uint8

const (
	longIdle longState = iota // nothing written yet
	longOn                    // chunks written to d
	longOff                   // decoded whole
)

// room makes room for n more bytes in buf, by hashing what can be hashed
// of it. buf may still be full: the caller's append then grows it.
func (lv *longValue) room(buf []byte, n int) []byte {
	if lv == nil || len(buf)+n <= cap(buf) {
		return buf
	}
	return lv.flush(buf)
}

// appendRun appends run to buf, hashing the buffer whenever it fills.
func (lv *longValue) appendRun(buf []byte, run string) []byte {
	if lv == nil || len(buf)+len(run) <= cap(buf) {
		return append(buf, run...)
	}
	return lv.appendLong(buf, run)
}

// appendLong is appendRun for a run that does not fit.
func (lv *longValue) appendLong(buf []byte, run string) []byte {
	for lv.state != longOff && len(buf)+len(run) > cap(buf) {
		k := cap(buf) - len(buf)
		buf = append(buf, run[:k]...)
		run = run[k:]
		if buf = lv.flush(buf); len(buf) == cap(buf) {
			break
		}
	}
	return append(buf, run...)
}

// flush writes buf up to its last ASCII byte that is no space to the
// digest and returns the rest, moved to the front. Such a byte is a whole
// rune and ends no space rune, so the trimmed string runs at least to it
// however the string goes on; a multi-byte rune is never cut in two.
func (lv *longValue) flush(buf []byte) []byte {
	cut := len(buf)
	for cut > 0 && (buf[cut-1] <= ' ' || buf[cut-1] >= utf8.RuneSelf) {
		cut--
	}
	from := 0
	switch lv.state {
	case longOff:
		return buf
	case longIdle:
		// The first rune after the leading space is whole when UTFMax
		// bytes follow its start; the string then starts as buf does,
		// and is longer than strHash's short form.
		t := bytes.TrimLeftFunc(buf, unicode.IsSpace)
		from = len(buf) - len(t)
		lv.trim = buf[0] <= ' '
		if len(t) < utf8.UTFMax || t[0] == '{' || t[0] == '[' || cut-from <= 16 || (from > 0 && !lv.trim) {
			lv.state = longOff
			return buf
		}
		lv.d.Reset()
		lv.state = longOn
	}
	if cut <= from {
		return buf
	}
	_, _ = lv.d.Write(buf[from:cut]) // never fails
	return buf[:copy(buf, buf[cut:])]
}

// sum finishes the value whose undecoded rest is buf: hashString of the
// whole string.
func (lv *longValue) sum(buf []byte) uint64 {
	// The last byte written so far is no space: only buf may end the
	// string with one.
	if lv.trim || (len(buf) > 0 && buf[len(buf)-1] <= ' ') {
		buf = bytes.TrimRightFunc(buf, unicode.IsSpace)
	}
	_, _ = lv.d.Write(buf) // never fails
	return lv.d.Sum64() ^ hash64.TagString
}
