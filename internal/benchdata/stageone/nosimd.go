//go:build !(goexperiment.simd && amd64)

package stageone

// BlockSIMD is nil: the vector form needs GOEXPERIMENT=simd on amd64.
var BlockSIMD func(*[BlockSize]byte) Masks
