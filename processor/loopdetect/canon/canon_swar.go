// Word-at-a-time (SWAR: SIMD within a register) helpers: tests of 8 bytes
// at once for a quote or an escape, a digit, a byte that normalization
// changes, and the reading of short strings as the words the short hash
// folds. They are pure functions of words, apart so that their bit tricks
// can be checked on their own; most are small enough for the compiler to
// inline them into the scanner's loop, and must stay so.

package canon

import (
	"encoding/binary"
	"math/bits"
)

// SWAR (SIMD within a register) constants: one byte of 1s, of high bits.
const (
	swarOnes = 0x0101010101010101
	swarHigh = 0x8080808080808080
)

// load64 reads s[i:i+8] as a little-endian word.
func load64(s string, i int) uint64 {
	return binary.LittleEndian.Uint64([]byte(s[i : i+8]))
}

// quoteOrEscape marks with its high bit each byte of x (8 string bytes,
// the first in the low byte) that is '"' or '\\'. Borrows may also mark
// bytes after a true match, so only the lowest mark is exact.
func quoteOrEscape(x uint64) uint64 {
	q := x ^ (swarOnes * '"')
	e := x ^ (swarOnes * '\\')
	return ((q-swarOnes)&^q | (e-swarOnes)&^e) & swarHigh
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

// nonDigit marks (high bit) the bytes of a word that are no ASCII digit.
func nonDigit(x uint64) uint64 {
	const low7 = 0x7f7f7f7f7f7f7f7f
	t := x & low7
	digits := (t + swarOnes*(0x80-'0')) &^ (t + swarOnes*(0x80-'9'-1)) &^ x
	return ^digits & swarHigh
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
