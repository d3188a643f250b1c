// Package hash64 holds the 64-bit hashes the canonicalizer builds its
// digests from and the engine keys cycles, wait owners and failures with.
// They are one package so the two cannot drift: keyed forms of both reach
// events and replays of old captures, so the values are pinned
// (TestHashesArePinned) and must not change.
package hash64

import (
	"encoding/binary"
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// The canonical digest's type tags, which keep values of different JSON
// types apart ("1" vs 1), and the constants it folds members and arrays
// with. They are here rather than in the canonicalizer so that a second
// scanner of the same digest (internal/twostage, a measurement) folds
// with these very values.
const (
	TagString  = 0x9e3779b97f4a7c15
	TagNumber  = 0xc2b2ae3d27d4eb4f
	TagObject  = 0x165667b19e3779f9
	TagArray   = 0x27d4eb2f165667c5
	TagTrue    = 0x85ebca77c2b2ae63
	TagFalse   = 0xff51afd7ed558ccd
	TagNull    = 0xc4ceb9fe1a85ec53
	TagOpaque  = 0x94d049bb133111eb
	TagMember  = 0xbf58476d1ce4e5b9
	PrimeArray = 0x100000001b3
)

// Mix is the splitmix64 finalizer: cheap, and good enough to combine
// member hashes for in-memory keys.
func Mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Mum is the 64×64→128 multiply-fold at the heart of wyhash.
func Mum(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}

// Short hashes a string of n ≤ 16 bytes given as ShortWords' two words.
func Short(a, b uint64, n int) uint64 {
	return Mum(a^0xa0761d6478bd642f, b^0xe7037ed1a0b428db^uint64(n))
}

// String hashes a string; short strings (most keys and values) take a
// multiply-fold path far cheaper than a general hash's setup.
func String(s string) uint64 {
	if len(s) > 16 {
		return xxhash.Sum64String(s)
	}
	a, b := ShortWords(s)
	return Short(a, b, len(s))
}

// ShortWords reads a string of at most 16 bytes as the two words Short
// folds. With the length they determine the string: for 8 to 16 bytes the
// words overlap, for 4 to 7 the halves do, and below 4 every byte is one
// of the three read.
func ShortWords(s string) (a, b uint64) {
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
