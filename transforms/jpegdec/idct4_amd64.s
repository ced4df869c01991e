//go:build amd64 && !purego

#include "textflag.h"

// func idct4SIMD(b *[blockSize]int32, dst *byte, stride int, k *idct4Constants)
//
// idct4 (idct.go, libjpeg's 4x4 reduced IDCT) with AVX2: the same int32
// operations, so the same bytes (TestIDCTSIMD). Pass 1 runs on the 8
// columns at once (lanes: columns; row 4 is not read), pass 2 on the 4 work
// rows at once (lanes: rows) after a transpose, and a 4x4 transpose puts
// the samples back in rows. idct4's shortcuts (a column or row whose
// coefficients past the first are zero) give the same values as the general
// formula except where it overflows, so they are computed too and blended
// in by lane. k.c[i] is each constant in 8 lanes:
// 0 k1_847759065, 1 -k0_765366865, 2 -k0_211164243, 3 k1_451774981,
// 4 -k2_172734803, 5 k1_061594337, 6 -k0_509795579, 7 -k0_601344887,
// 8 k0_899976223, 9 k2_562915447, 10 1<<11, 11 1<<18, 12 16, 13 128.
TEXT ·idct4SIMD(SB), NOSPLIT, $0-32
	MOVQ b+0(FP), SI
	MOVQ dst+8(FP), DI
	MOVQ stride+16(FP), CX
	MOVQ k+24(FP), DX
	LEAQ (CX)(CX*2), R12
	ADDQ DI, R12 // row 3

	// Pass 1: Y0-Y3, Y5-Y7 = coefficient rows 0-3, 5-7.
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VMOVDQU 160(SI), Y5
	VMOVDQU 192(SI), Y6
	VMOVDQU 224(SI), Y7

	VPOR     Y2, Y1, Y8 // the shortcut's columns: rows 1-3, 5-7 zero
	VPOR     Y3, Y8, Y8
	VPOR     Y5, Y8, Y8
	VPOR     Y6, Y8, Y8
	VPOR     Y7, Y8, Y8
	VPXOR    Y9, Y9, Y9
	VPCMPEQD Y9, Y8, Y8
	VPSLLD   $2, Y0, Y9 // their value: b[0] << pass1Bits

	VPSLLD  $14, Y0, Y0 // t0
	VPMULLD 0(DX), Y2, Y10
	VPMULLD 32(DX), Y6, Y11
	VPADDD  Y11, Y10, Y10 // t2
	VPADDD  Y10, Y0, Y2 // t10
	VPSUBD  Y10, Y0, Y0 // t12
	VPMULLD 64(DX), Y7, Y10
	VPMULLD 96(DX), Y5, Y11
	VPADDD  Y11, Y10, Y10
	VPMULLD 128(DX), Y3, Y11
	VPADDD  Y11, Y10, Y10
	VPMULLD 160(DX), Y1, Y11
	VPADDD  Y11, Y10, Y10 // odd0
	VPMULLD 192(DX), Y7, Y11
	VPMULLD 224(DX), Y5, Y12
	VPADDD  Y12, Y11, Y11
	VPMULLD 256(DX), Y3, Y12
	VPADDD  Y12, Y11, Y11
	VPMULLD 288(DX), Y1, Y12
	VPADDD  Y12, Y11, Y11 // odd2
	VPADDD  Y11, Y2, Y1 // o0
	VPSUBD  Y11, Y2, Y2 // o3
	VPADDD  Y10, Y0, Y3 // o1
	VPSUBD  Y10, Y0, Y0 // o2

	// Work rows W0-W3 = descale(o, 12), or the shortcut's value.
	VPADDD    320(DX), Y1, Y1
	VPSRAD    $12, Y1, Y1
	VPBLENDVB Y8, Y9, Y1, Y1 // W0
	VPADDD    320(DX), Y3, Y3
	VPSRAD    $12, Y3, Y3
	VPBLENDVB Y8, Y9, Y3, Y3 // W1
	VPADDD    320(DX), Y0, Y0
	VPSRAD    $12, Y0, Y0
	VPBLENDVB Y8, Y9, Y0, Y0 // W2
	VPADDD    320(DX), Y2, Y2
	VPSRAD    $12, Y2, Y2
	VPBLENDVB Y8, Y9, Y2, Y2 // W3

	// Transpose: C0-C3 in X8-X11, C5-C7 in X13-X15 (lanes: work rows).
	VPUNPCKLDQ   Y3, Y1, Y4
	VPUNPCKHDQ   Y3, Y1, Y5
	VPUNPCKLDQ   Y2, Y0, Y6
	VPUNPCKHDQ   Y2, Y0, Y7
	VPUNPCKLQDQ  Y6, Y4, Y8  // C0 | C4
	VPUNPCKHQDQ  Y6, Y4, Y9  // C1 | C5
	VPUNPCKLQDQ  Y7, Y5, Y10 // C2 | C6
	VPUNPCKHQDQ  Y7, Y5, Y11 // C3 | C7
	VEXTRACTI128 $1, Y9, X13
	VEXTRACTI128 $1, Y10, X14
	VEXTRACTI128 $1, Y11, X15

	// Pass 2 on X registers.
	VPOR     X10, X9, X0 // the shortcut's rows: C1-C3, C5-C7 zero
	VPOR     X11, X0, X0
	VPOR     X13, X0, X0
	VPOR     X14, X0, X0
	VPOR     X15, X0, X0
	VPXOR    X1, X1, X1
	VPCMPEQD X1, X0, X0
	VPADDD   384(DX), X8, X1 // their value: clampSample(descale(C0, pass1Bits+3))
	VPSRAD   $5, X1, X1
	VPADDD   416(DX), X1, X1

	VPSLLD  $14, X8, X8 // t0
	VPMULLD 0(DX), X10, X2
	VPMULLD 32(DX), X14, X3
	VPADDD  X3, X2, X2 // t2
	VPADDD  X2, X8, X10 // t10
	VPSUBD  X2, X8, X8 // t12
	VPMULLD 64(DX), X15, X2
	VPMULLD 96(DX), X13, X3
	VPADDD  X3, X2, X2
	VPMULLD 128(DX), X11, X3
	VPADDD  X3, X2, X2
	VPMULLD 160(DX), X9, X3
	VPADDD  X3, X2, X2 // odd0
	VPMULLD 192(DX), X15, X3
	VPMULLD 224(DX), X13, X4
	VPADDD  X4, X3, X3
	VPMULLD 256(DX), X11, X4
	VPADDD  X4, X3, X3
	VPMULLD 288(DX), X9, X4
	VPADDD  X4, X3, X3 // odd2
	VPADDD  X3, X10, X4 // o0
	VPSUBD  X3, X10, X10 // o3
	VPADDD  X2, X8, X5 // o1
	VPSUBD  X2, X8, X8 // o2

	// Samples: descale(o, 19) + 128, or the shortcut's value.
	VPADDD    352(DX), X4, X4
	VPSRAD    $19, X4, X4
	VPADDD    416(DX), X4, X4
	VPBLENDVB X0, X1, X4, X4
	VPADDD    352(DX), X5, X5
	VPSRAD    $19, X5, X5
	VPADDD    416(DX), X5, X5
	VPBLENDVB X0, X1, X5, X5
	VPADDD    352(DX), X8, X8
	VPSRAD    $19, X8, X8
	VPADDD    416(DX), X8, X8
	VPBLENDVB X0, X1, X8, X8
	VPADDD    352(DX), X10, X10
	VPSRAD    $19, X10, X10
	VPADDD    416(DX), X10, X10
	VPBLENDVB X0, X1, X10, X10

	// Rows of samples, clipped to bytes by the saturating packs.
	VPUNPCKLDQ  X5, X4, X6
	VPUNPCKHDQ  X5, X4, X7
	VPUNPCKLDQ  X10, X8, X9
	VPUNPCKHDQ  X10, X8, X11
	VPUNPCKLQDQ X9, X6, X12 // row 0
	VPUNPCKHQDQ X9, X6, X13 // row 1
	VPUNPCKLQDQ X11, X7, X14 // row 2
	VPUNPCKHQDQ X11, X7, X15 // row 3
	VPACKSSDW   X13, X12, X12
	VPACKSSDW   X15, X14, X14
	VPACKUSWB   X14, X12, X12
	VMOVD       X12, (DI)
	VPEXTRD     $1, X12, (DI)(CX*1)
	VPEXTRD     $2, X12, (DI)(CX*2)
	VPEXTRD     $3, X12, (R12)
	VZEROUPPER
	RET
