//go:build amd64 && !purego

#include "textflag.h"

// func columnWeighted(dst, src *byte, stride, n int, w *int32, taps int, half int32, bits uint64)
//
// 16 output bytes a step, as two halves of 8 int32 lanes: the sum starts at
// half, each of the taps rows adds its bytes (widened) times its weight,
// then the sum is shifted right by bits (logically: the low byte kept is
// the same as after an arithmetic shift for any bits <= 24), masked to its
// low byte and packed.
TEXT ·columnWeighted(SB), NOSPLIT, $0-64
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ stride+16(FP), DX
	MOVQ n+24(FP), CX
	MOVQ w+32(FP), R8
	MOVQ taps+40(FP), R9
	MOVL half+48(FP), AX
	VMOVD AX, X14
	VPBROADCASTD X14, Y14
	MOVQ bits+56(FP), X13
	MOVL $0xff, AX
	VMOVD AX, X12
	VPBROADCASTD X12, Y12 // 0xff in every lane

step:
	VMOVDQA Y14, Y0
	VMOVDQA Y14, Y1
	MOVQ    SI, R10 // row k of this step's 16 columns
	MOVQ    R8, R11 // w[k]
	MOVQ    R9, BX

tap:
	VPBROADCASTD (R11), Y4
	VPMOVZXBD    (R10), Y2
	VPMOVZXBD    8(R10), Y3
	VPMULLD      Y4, Y2, Y2
	VPMULLD      Y4, Y3, Y3
	VPADDD       Y2, Y0, Y0
	VPADDD       Y3, Y1, Y1
	ADDQ         DX, R10
	ADDQ         $4, R11
	DECQ         BX
	JNZ          tap

	VPSRLD    X13, Y0, Y0
	VPSRLD    X13, Y1, Y1
	VPAND     Y12, Y0, Y0
	VPAND     Y12, Y1, Y1
	VPACKUSDW Y1, Y0, Y0 // lanes interleave: [0-3, 8-11 | 4-7, 12-15]
	VPERMQ    $0xD8, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPACKUSWB X1, X0, X0
	VMOVDQU   X0, (DI)

	ADDQ $16, SI
	ADDQ $16, DI
	SUBQ $16, CX
	JNZ  step
	VZEROUPPER
	RET
