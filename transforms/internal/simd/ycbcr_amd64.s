//go:build amd64 && !purego

#include "textflag.h"

// func ycbcrRow16(dst, y, cb, cr *byte, n int, k *ycbcrConstants)
//
// 16 pixels a step: Y, Cb and Cr widened to int32 (two halves of 8),
// R = Y*0x10101 + 91881*(Cr-128), G = Y*0x10101 - 22554*(Cb-128) -
// 46802*(Cr-128), B = Y*0x10101 + 116130*(Cb-128), each >> 16 and packed
// to bytes with signed then unsigned saturation (the clamp to 0..255),
// then interleaved to RGB by byte shuffles (k.masks) into 48 bytes.
TEXT ·ycbcrRow16(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ y+8(FP), SI
	MOVQ cb+16(FP), R8
	MOVQ cr+24(FP), R9
	MOVQ n+32(FP), CX
	MOVQ k+40(FP), DX

	VPBROADCASTD 0(DX), Y15  // 0x10101
	VPBROADCASTD 4(DX), Y14  // 91881
	VPBROADCASTD 8(DX), Y13  // -22554
	VPBROADCASTD 12(DX), Y12 // -46802
	VPBROADCASTD 16(DX), Y11 // 116130
	VPBROADCASTD 20(DX), Y10 // 128

loop:
	VPMOVZXBD (SI), Y0
	VPMOVZXBD 8(SI), Y1
	VPMOVZXBD (R8), Y2
	VPMOVZXBD 8(R8), Y3
	VPMOVZXBD (R9), Y4
	VPMOVZXBD 8(R9), Y5
	VPMULLD   Y15, Y0, Y0 // Y*0x10101
	VPMULLD   Y15, Y1, Y1
	VPSUBD    Y10, Y2, Y2 // Cb-128
	VPSUBD    Y10, Y3, Y3
	VPSUBD    Y10, Y4, Y4 // Cr-128
	VPSUBD    Y10, Y5, Y5

	VPMULLD Y14, Y4, Y6 // R
	VPADDD  Y0, Y6, Y6
	VPMULLD Y14, Y5, Y7
	VPADDD  Y1, Y7, Y7
	VPMULLD Y13, Y2, Y8 // G
	VPMULLD Y12, Y4, Y9
	VPADDD  Y9, Y8, Y8
	VPADDD  Y0, Y8, Y8
	VPMULLD Y13, Y3, Y9
	VPMULLD Y12, Y5, Y4
	VPADDD  Y4, Y9, Y9
	VPADDD  Y1, Y9, Y9
	VPMULLD Y11, Y2, Y2 // B
	VPADDD  Y0, Y2, Y2
	VPMULLD Y11, Y3, Y3
	VPADDD  Y1, Y3, Y3

	VPSRAD $16, Y6, Y6
	VPSRAD $16, Y7, Y7
	VPSRAD $16, Y8, Y8
	VPSRAD $16, Y9, Y9
	VPSRAD $16, Y2, Y2
	VPSRAD $16, Y3, Y3

	// int32 -> int16 (lanes interleave: VPERMQ puts them back in order),
	// then int16 -> uint8 of the two 128-bit halves.
	VPACKSSDW    Y7, Y6, Y6
	VPERMQ       $0xD8, Y6, Y6
	VEXTRACTI128 $1, Y6, X7
	VPACKUSWB    X7, X6, X6 // R0..R15
	VPACKSSDW    Y9, Y8, Y8
	VPERMQ       $0xD8, Y8, Y8
	VEXTRACTI128 $1, Y8, X9
	VPACKUSWB    X9, X8, X8 // G0..G15
	VPACKSSDW    Y3, Y2, Y2
	VPERMQ       $0xD8, Y2, Y2
	VEXTRACTI128 $1, Y2, X3
	VPACKUSWB    X3, X2, X2 // B0..B15

	VPSHUFB 32(DX), X6, X0
	VPSHUFB 48(DX), X8, X1
	VPOR    X1, X0, X0
	VPSHUFB 64(DX), X2, X1
	VPOR    X1, X0, X0
	VMOVDQU X0, 0(DI)
	VPSHUFB 80(DX), X6, X0
	VPSHUFB 96(DX), X8, X1
	VPOR    X1, X0, X0
	VPSHUFB 112(DX), X2, X1
	VPOR    X1, X0, X0
	VMOVDQU X0, 16(DI)
	VPSHUFB 128(DX), X6, X0
	VPSHUFB 144(DX), X8, X1
	VPOR    X1, X0, X0
	VPSHUFB 160(DX), X2, X1
	VPOR    X1, X0, X0
	VMOVDQU X0, 32(DI)

	ADDQ $16, SI
	ADDQ $16, R8
	ADDQ $16, R9
	ADDQ $48, DI
	SUBQ $16, CX
	JNZ  loop
	VZEROUPPER
	RET
