// Package twostage is a measurement, not part of the product: how fast a
// two-stage scanner (simdjson's design) computes the canonical digest on
// this machine, against the one-pass scanner in package canon. Stage one
// marks, per 64-byte block, the quotes, backslashes, structural bytes and
// spaces, and from them the escaped bytes and the strings (AVX2 in Go
// assembly chosen at run time, or SWAR in portable Go); stage two walks
// the set bits and hashes the tokens with the digest's arithmetic. Stage
// two does the least any scanner of this digest must do per token: no key
// sets (one filter probe stands for them), no wrappers, no JSON embedded
// in strings, no long-value streaming, and it trusts its input to be JSON
// (malformed input gives an error or a wrong digest, not a panic). Its
// time is therefore a lower bound for a full two-stage canonicalizer
// (docs/design.md, "The canonicalizer's speed").
package twostage

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// rawMasks is one block's stage-one output, bit i for byte i: quotes,
// backslashes, structural bytes ({ } [ ] : ,) and bytes of at most ' '.
type rawMasks struct {
	quote, backslash, structural, space uint64
}

const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
	swarLow7 = 0x7f7f7f7f7f7f7f7f
)

// equal marks (high bit) exactly the bytes of x equal to c's, with no
// borrow running into the next byte.
func equal(x, c uint64) uint64 {
	t := x ^ c
	return ^((t&swarLow7 + swarLow7) | t) & swarHigh
}

// pack gathers the eight high bits of m into the low byte.
func pack(m uint64) uint64 {
	return (m >> 7) * 0x0102040810204080 >> 56
}

// blocksSWAR is blocksAVX2 eight bytes at a time, in portable Go.
func blocksSWAR(b []byte, out []rawMasks) {
	for k := range out {
		var m rawMasks
		for j := 0; j < 8; j++ {
			x := binary.LittleEndian.Uint64(b[64*k+8*j:])
			// | 0x20 maps '[' and ']' onto '{' and '}' (and nothing
			// else onto them).
			y := x | swarOnes*0x20
			m.quote |= pack(equal(x, swarOnes*'"')) << (8 * j)
			m.backslash |= pack(equal(x, swarOnes*'\\')) << (8 * j)
			m.structural |= pack(equal(y, swarOnes*'{')|equal(y, swarOnes*'}')|equal(x, swarOnes*':')|equal(x, swarOnes*',')) << (8 * j)
			// x <= 0x20: no high bit and x+0x5f has no high bit.
			m.space |= pack(^(x|(x&swarLow7+swarOnes*0x5f))&swarHigh) << (8 * j)
		}
		out[k] = m
	}
}

// index holds stage one's result for a document: per block the events
// stage two stops at (structural bytes outside strings, unescaped quotes,
// escape-starting backslashes) and the delimiters a scalar ends at.
type index struct {
	events, delims []uint64
}

const evenBits = 0x5555555555555555

// build runs stage one over s, in blocks of 64 bytes (the tail padded with
// spaces), into ix, whose slices it reuses.
func (ix *index) build(s string, vector bool, raw []rawMasks) {
	n := (len(s) + 63) / 64
	ix.events, ix.delims = ix.events[:0], ix.delims[:0]
	full := len(s) / 64
	if full > 0 {
		if vector {
			blocksAVX2(unsafe.StringData(s), full, &raw[0])
		} else {
			blocksSWAR(unsafe.Slice(unsafe.StringData(s), full*64), raw[:full])
		}
	}
	if full < n {
		var tail [64]byte
		for i := range tail {
			tail[i] = ' '
		}
		copy(tail[:], s[full*64:])
		blocksSWAR(tail[:], raw[full:n])
	}
	var prevEscaped, prevIn uint64
	for k := 0; k < n; k++ {
		m := raw[k]
		// Escaped bytes: those after an odd run of backslashes, found
		// with one add as simdjson does; the carry goes to the next block.
		bs := m.backslash &^ prevEscaped
		follows := bs<<1 | prevEscaped
		oddStarts := bs &^ evenBits &^ follows
		seq, carry := bits.Add64(oddStarts, bs, 0)
		escaped := (evenBits ^ seq<<1) & follows
		prevEscaped = carry
		q := m.quote &^ escaped
		in := q
		in ^= in << 1
		in ^= in << 2
		in ^= in << 4
		in ^= in << 8
		in ^= in << 16
		in ^= in << 32
		in ^= prevIn
		prevIn = uint64(int64(in) >> 63)
		escStarts := m.backslash &^ escaped & in
		ix.events = append(ix.events, m.structural&^in|q|escStarts)
		ix.delims = append(ix.delims, (m.structural|m.space)&^in)
	}
}

// blockScalar is a block's masks a byte at a time: the reference the
// other forms are tested against.
func blockScalar(b []byte) rawMasks {
	var m rawMasks
	for i, c := range b[:64] {
		bit := uint64(1) << i
		switch c {
		case '"':
			m.quote |= bit
		case '\\':
			m.backslash |= bit
		case '{', '}', '[', ']', ':', ',':
			m.structural |= bit
		}
		if c <= ' ' {
			m.space |= bit
		}
	}
	return m
}
