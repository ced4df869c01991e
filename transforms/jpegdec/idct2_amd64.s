//go:build amd64 && !purego

#include "textflag.h"

// func idct2SIMD(b *[blockSize]int32, dst *byte, stride int, k *idct2Constants)
//
// idct2 (idct.go, libjpeg's 2x2 reduced IDCT) with AVX2: the same int32
// operations, so the same bytes (TestIDCTSIMD). Pass 1 runs on the 8
// columns at once (lanes: columns; rows 2, 4, 6 are not read, and of its
// outputs only columns 0, 1, 3, 5, 7 are), pass 2 on each work row by
// multiplying its lanes by their factors (k.c[5]: zero for the columns not
// read) and adding the lanes up, both rows at once. idct2's shortcuts (a
// column or row zero past its first value) differ from the general formula
// only where it overflows; they are computed too and blended in by lane.
// k.c[i] in 8 lanes: 0 -k0_720959822, 1 k0_850430095, 2 -k1_272758580,
// 3 k3_624509785, 4 1<<12, 5 the row factors by column, 6 the odd columns'
// mask, 7 -8, 8 16, 9 128, 10 1<<19.
TEXT ·idct2SIMD(SB), NOSPLIT, $0-32
	MOVQ b+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ stride+16(FP), CX
	MOVQ k+24(FP), DX

	// Pass 1: Y0, Y1, Y3, Y5, Y7 = coefficient rows 0, 1, 3, 5, 7.
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 96(SI), Y3
	VMOVDQU 160(SI), Y5
	VMOVDQU 224(SI), Y7

	VPOR     Y3, Y1, Y8 // the shortcut's columns: rows 1, 3, 5, 7 zero
	VPOR     Y5, Y8, Y8
	VPOR     Y7, Y8, Y8
	VPXOR    Y9, Y9, Y9
	VPCMPEQD Y9, Y8, Y8
	VPSLLD   $2, Y0, Y9 // their value: b[0] << pass1Bits

	VPSLLD  $15, Y0, Y0 // t10
	VPMULLD 0(DX), Y7, Y10
	VPMULLD 32(DX), Y5, Y11
	VPADDD  Y11, Y10, Y10
	VPMULLD 64(DX), Y3, Y11
	VPADDD  Y11, Y10, Y10
	VPMULLD 96(DX), Y1, Y11
	VPADDD  Y11, Y10, Y10 // t0
	VPADDD  Y10, Y0, Y1 // o0
	VPSUBD  Y10, Y0, Y2 // o1

	VPADDD    128(DX), Y1, Y1
	VPSRAD    $13, Y1, Y1
	VPBLENDVB Y8, Y9, Y1, Y1 // W0
	VPADDD    128(DX), Y2, Y2
	VPSRAD    $13, Y2, Y2
	VPBLENDVB Y8, Y9, Y2, Y2 // W1

	// Pass 2: t0 of each row, the sum of its lanes times their factors.
	VPMULLD      160(DX), Y1, Y3
	VPMULLD      160(DX), Y2, Y4
	VPHADDD      Y4, Y3, Y3
	VPHADDD      Y3, Y3, Y3
	VEXTRACTI128 $1, Y3, X4
	VPADDD       X4, X3, X3 // t0 of rows 0, 1 in lanes 0, 1

	// The shortcut's rows: every odd column zero (8 lanes of -1 add to -8).
	VPAND        192(DX), Y1, Y4
	VPAND        192(DX), Y2, Y5
	VPXOR        Y6, Y6, Y6
	VPCMPEQD     Y6, Y4, Y4
	VPCMPEQD     Y6, Y5, Y5
	VPHADDD      Y5, Y4, Y4
	VPHADDD      Y4, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPADDD       X5, X4, X4
	VPCMPEQD     224(DX), X4, X4 // the mask, lanes 0, 1

	VPUNPCKLDQ X2, X1, X5 // W0[0], W1[0] in lanes 0, 1
	VPADDD     256(DX), X5, X6 // the shortcut's value: clampSample(descale(W[0], pass1Bits+3))
	VPSRAD     $5, X6, X6
	VPADDD     288(DX), X6, X6

	VPSLLD    $15, X5, X5 // t10
	VPADDD    X3, X5, X7 // o0
	VPSUBD    X3, X5, X8 // o1
	VPADDD    320(DX), X7, X7
	VPSRAD    $20, X7, X7
	VPADDD    288(DX), X7, X7
	VPBLENDVB X4, X6, X7, X7
	VPADDD    320(DX), X8, X8
	VPSRAD    $20, X8, X8
	VPADDD    288(DX), X8, X8
	VPBLENDVB X4, X6, X8, X8

	// Samples o0, o1 of row 0, then of row 1, clipped to bytes.
	VPUNPCKLDQ X8, X7, X7
	VPACKSSDW  X7, X7, X7
	VPACKUSWB  X7, X7, X7
	VMOVD      X7, AX
	MOVW       AX, (DI)
	SHRL       $16, AX
	MOVW       AX, (DI)(CX*1)
	VZEROUPPER
	RET
