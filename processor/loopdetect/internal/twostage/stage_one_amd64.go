package twostage

import "golang.org/x/sys/cpu"

// blocksAVX2 writes the masks of n 64-byte blocks from src to out[0:n],
// 32 bytes a step (stage_one_amd64.s).
//
//go:noescape
func blocksAVX2(src *byte, n int, out *rawMasks)

// hasAVX2 is set where the vector stage one can run.
var hasAVX2 = cpu.X86.HasAVX2
