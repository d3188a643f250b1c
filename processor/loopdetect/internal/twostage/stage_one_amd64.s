#include "textflag.h"

// func blocksAVX2(src *byte, n int, out *rawMasks)
//
// For each of n 64-byte blocks at src: the quote, backslash, structural
// ({ } [ ] : ,) and space (bytes <= 0x20) masks, one bit per byte, in
// rawMasks' order. Y0-Y6 hold the bytes compared against ('"', '\\', '{',
// '}', ':', ',', 0x20), Y8 and Y9 a block's two halves. '[' and ']' are
// folded onto '{' and '}' by | 0x20; a byte is at most 0x20 when its
// unsigned maximum with 0x20 is 0x20.
TEXT ·blocksAVX2(SB), NOSPLIT, $0-24
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ out+16(FP), DI
	TESTQ CX, CX
	JZ done
	MOVL $0x22, AX
	MOVQ AX, X0
	VPBROADCASTB X0, Y0
	MOVL $0x5c, AX
	MOVQ AX, X1
	VPBROADCASTB X1, Y1
	MOVL $0x7b, AX
	MOVQ AX, X2
	VPBROADCASTB X2, Y2
	MOVL $0x7d, AX
	MOVQ AX, X3
	VPBROADCASTB X3, Y3
	MOVL $0x3a, AX
	MOVQ AX, X4
	VPBROADCASTB X4, Y4
	MOVL $0x2c, AX
	MOVQ AX, X5
	VPBROADCASTB X5, Y5
	MOVL $0x20, AX
	MOVQ AX, X6
	VPBROADCASTB X6, Y6

loop:
	VMOVDQU (SI), Y8
	VMOVDQU 32(SI), Y9

	VPCMPEQB Y8, Y0, Y10
	VPCMPEQB Y9, Y0, Y11
	VPMOVMSKB Y10, AX
	VPMOVMSKB Y11, BX
	SHLQ $32, BX
	ORQ BX, AX
	MOVQ AX, 0(DI)

	VPCMPEQB Y8, Y1, Y10
	VPCMPEQB Y9, Y1, Y11
	VPMOVMSKB Y10, AX
	VPMOVMSKB Y11, BX
	SHLQ $32, BX
	ORQ BX, AX
	MOVQ AX, 8(DI)

	VPOR Y8, Y6, Y12
	VPOR Y9, Y6, Y13
	VPCMPEQB Y12, Y2, Y10
	VPCMPEQB Y12, Y3, Y14
	VPOR Y14, Y10, Y10
	VPCMPEQB Y8, Y4, Y14
	VPOR Y14, Y10, Y10
	VPCMPEQB Y8, Y5, Y14
	VPOR Y14, Y10, Y10
	VPCMPEQB Y13, Y2, Y11
	VPCMPEQB Y13, Y3, Y15
	VPOR Y15, Y11, Y11
	VPCMPEQB Y9, Y4, Y15
	VPOR Y15, Y11, Y11
	VPCMPEQB Y9, Y5, Y15
	VPOR Y15, Y11, Y11
	VPMOVMSKB Y10, AX
	VPMOVMSKB Y11, BX
	SHLQ $32, BX
	ORQ BX, AX
	MOVQ AX, 16(DI)

	VPMAXUB Y8, Y6, Y12
	VPMAXUB Y9, Y6, Y13
	VPCMPEQB Y12, Y6, Y12
	VPCMPEQB Y13, Y6, Y13
	VPMOVMSKB Y12, AX
	VPMOVMSKB Y13, BX
	SHLQ $32, BX
	ORQ BX, AX
	MOVQ AX, 24(DI)

	ADDQ $64, SI
	ADDQ $32, DI
	DECQ CX
	JNZ loop
	VZEROUPPER

done:
	RET
