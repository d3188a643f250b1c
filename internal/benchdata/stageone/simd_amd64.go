//go:build goexperiment.simd

package stageone

import "simd/archsimd"

// BlockSIMD computes the masks of block b 32 bytes at a time with AVX2,
// or is nil where the CPU has no AVX2.
var BlockSIMD = func() func(*[BlockSize]byte) Masks {
	if !archsimd.X86.AVX2() {
		return nil
	}
	return blockAVX2
}()

func blockAVX2(b *[BlockSize]byte) Masks {
	quote := archsimd.BroadcastUint8x32('"')
	backslash := archsimd.BroadcastUint8x32('\\')
	open := archsimd.BroadcastUint8x32('{')
	closing := archsimd.BroadcastUint8x32('}')
	colon := archsimd.BroadcastUint8x32(':')
	comma := archsimd.BroadcastUint8x32(',')
	lower := archsimd.BroadcastUint8x32(0x20)
	var m Masks
	for j := 0; j < 2; j++ {
		x := archsimd.LoadUint8x32Slice(b[32*j : 32*j+32])
		y := x.Or(lower)
		m.Quote |= uint64(x.Equal(quote).ToBits()) << (32 * j)
		m.Backslash |= uint64(x.Equal(backslash).ToBits()) << (32 * j)
		m.Structural |= uint64(y.Equal(open).Or(y.Equal(closing)).Or(x.Equal(colon)).Or(x.Equal(comma)).ToBits()) << (32 * j)
	}
	return m
}
