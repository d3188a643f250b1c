//go:build !amd64

package twostage

// hasAVX2: the vector stage one is written for amd64 only.
const hasAVX2 = false

func blocksAVX2(*byte, int, *rawMasks) { panic("twostage: no vector stage one on this architecture") }
