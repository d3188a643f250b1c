// Package stageone measures the first stage of a two-stage JSON scanner,
// the design simdjson made known: per 64-byte block, one bit per byte for
// the quotes, the backslashes and the structural bytes ({ } [ ] : ,), from
// which the second stage would walk tokens by bit scans instead of a
// branch per byte. It is no part of the product. It answers one question
// with a number: can the canonical scanner meet its budget of 0.6 ns per
// JSON byte by this design in portable Go? Stage one alone, in SWAR (eight
// bytes per 64-bit word), costs more than that budget on this machine; the
// vector form, built with GOEXPERIMENT=simd on amd64, a tenth of it
// (docs/design.md, The canonicalizer's speed).
package stageone

import "encoding/binary"

// BlockSize is the number of bytes one Masks describes.
const BlockSize = 64

// Masks describes one block: bit i is set when byte i of the block is a
// quote, a backslash, or a structural byte (outside strings or not: the
// second stage tells them apart with the quote mask).
type Masks struct {
	Quote, Backslash, Structural uint64
}

// SWAR constants: one byte of ones, of high bits, of the low seven bits.
const (
	ones = 0x0101010101010101
	high = 0x8080808080808080
	low7 = 0x7f7f7f7f7f7f7f7f
)

// equal marks (high bit) exactly the bytes of x equal to c's, with no
// borrow running into the next byte.
func equal(x, c uint64) uint64 {
	t := x ^ c
	return ^((t&low7 + low7) | t) & high
}

// pack gathers the eight high bits of m into the low byte.
func pack(m uint64) uint64 {
	return (m >> 7) * 0x0102040810204080 >> 56
}

// BlockSWAR computes the masks of block b eight bytes at a time.
func BlockSWAR(b *[BlockSize]byte) Masks {
	var m Masks
	for j := 0; j < BlockSize/8; j++ {
		x := binary.LittleEndian.Uint64(b[8*j : 8*j+8])
		// | 0x20 maps '[' and ']' onto '{' and '}' (and nothing else
		// onto them).
		y := x | ones*0x20
		m.Quote |= pack(equal(x, ones*'"')) << (8 * j)
		m.Backslash |= pack(equal(x, ones*'\\')) << (8 * j)
		m.Structural |= pack(equal(y, ones*'{')|equal(y, ones*'}')|equal(x, ones*':')|equal(x, ones*',')) << (8 * j)
	}
	return m
}

// BlockScalar computes the masks of block b a byte at a time: the
// reference the other forms are tested against.
func BlockScalar(b *[BlockSize]byte) Masks {
	var m Masks
	for i, c := range b {
		bit := uint64(1) << i
		switch c {
		case '"':
			m.Quote |= bit
		case '\\':
			m.Backslash |= bit
		case '{', '}', '[', ']', ':', ',':
			m.Structural |= bit
		}
	}
	return m
}

// Scan runs block over s, whose tail is padded with spaces to a whole
// block, and folds each block's masks with the in-string mask (a prefix
// XOR of the quotes, as the second stage would start from) into one
// word, so that no work is left out by the compiler.
func Scan(s []byte, block func(*[BlockSize]byte) Masks) uint64 {
	var acc, inString uint64
	var tail [BlockSize]byte
	for len(s) > 0 {
		var b *[BlockSize]byte
		if len(s) >= BlockSize {
			b, s = (*[BlockSize]byte)(s[:BlockSize]), s[BlockSize:]
		} else {
			for i := range tail {
				tail[i] = ' '
			}
			copy(tail[:], s)
			b, s = &tail, nil
		}
		m := block(b)
		p := m.Quote
		p ^= p << 1
		p ^= p << 2
		p ^= p << 4
		p ^= p << 8
		p ^= p << 16
		p ^= p << 32
		p ^= inString
		inString = uint64(int64(p) >> 63) // carried into the next block
		acc += m.Structural&^p ^ m.Backslash
	}
	return acc
}
