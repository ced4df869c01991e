//go:build amd64 && !purego

#include "textflag.h"

// func cpuid7ECX() uint32
TEXT ·cpuid7ECX(SB), NOSPLIT, $0-4
	MOVL  $7, AX
	XORL  CX, CX
	CPUID
	MOVL  CX, ret+0(FP)
	RET

// FOLD_REDUCE folds the accumulators Y0-Y3 (DX: the constants) to the
// 128-bit remainder in X1: Y0 onto Y1, onto Y2, onto Y3 (256 bits each,
// by32), then lane 0 onto lane 1 (128 bits; the lanes constant is zero in
// lane 1). Y4, Y5 and Y9 are scratch.
#define FOLD_REDUCE \
	VMOVDQU      32(DX), Y9      \
	VPCLMULQDQ   $0x00, Y9, Y0, Y4 \
	VPCLMULQDQ   $0x11, Y9, Y0, Y0 \
	VPXOR        Y4, Y0, Y0      \
	VPXOR        Y1, Y0, Y0      \
	VPCLMULQDQ   $0x00, Y9, Y0, Y4 \
	VPCLMULQDQ   $0x11, Y9, Y0, Y0 \
	VPXOR        Y4, Y0, Y0      \
	VPXOR        Y2, Y0, Y0      \
	VPCLMULQDQ   $0x00, Y9, Y0, Y4 \
	VPCLMULQDQ   $0x11, Y9, Y0, Y0 \
	VPXOR        Y4, Y0, Y0      \
	VPXOR        Y3, Y0, Y0      \
	VMOVDQU      64(DX), Y9      \
	VPCLMULQDQ   $0x00, Y9, Y0, Y4 \
	VPCLMULQDQ   $0x11, Y9, Y0, Y5 \
	VPXOR        Y5, Y4, Y4      \
	VEXTRACTI128 $1, Y0, X1      \
	VPXOR        X4, X1, X1

// func castagnoliFold(crc uint32, p []byte, k *foldConstants) uint32
//
// One chunk (checksum.go: foldVector bytes, then three streams of
// foldStream bytes). Y0-Y3 are the accumulators of the vector part, 32
// bytes each, Y0 the earliest; each step multiplies every 128-bit lane's
// low half by its constant's low half and its high half by its constant's
// high half (VPCLMULQDQ $0x00 and $0x11) and xors both products with the
// data 128 bytes on. R9-R11 are the CRC registers of the three streams,
// which R8 walks 48 bytes a step. SI: vector data; CX: steps left; DX: k.
TEXT ·castagnoliFold(SB), NOSPLIT, $0-44
	MOVL crc+0(FP), AX
	MOVQ p_base+8(FP), SI
	MOVQ k+32(FP), DX

	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	VMOVD   AX, X8 // the register enters as the first 4 bytes' xor
	VPXOR   Y8, Y0, Y0
	ADDQ    $128, SI
	LEAQ    8064(SI), R8 // the first stream: p + foldVector
	XORL    R9, R9
	XORL    R10, R10
	XORL    R11, R11
	VMOVDQU 0(DX), Y9 // by128
	MOVQ    $63, CX

	// 63 vector steps (the first 128 bytes were loaded above) beside 64
	// stream steps; the 64th stream step follows it.
loop:
	VPCLMULQDQ $0x00, Y9, Y0, Y4
	CRC32Q     0(R8), R9
	VPCLMULQDQ $0x11, Y9, Y0, Y0
	CRC32Q     3072(R8), R10
	VPCLMULQDQ $0x00, Y9, Y1, Y5
	CRC32Q     6144(R8), R11
	VPCLMULQDQ $0x11, Y9, Y1, Y1
	CRC32Q     8(R8), R9
	VPCLMULQDQ $0x00, Y9, Y2, Y6
	CRC32Q     3080(R8), R10
	VPCLMULQDQ $0x11, Y9, Y2, Y2
	CRC32Q     6152(R8), R11
	VPCLMULQDQ $0x00, Y9, Y3, Y7
	CRC32Q     16(R8), R9
	VPCLMULQDQ $0x11, Y9, Y3, Y3
	CRC32Q     3088(R8), R10
	VPXOR      0(SI), Y4, Y4
	CRC32Q     6160(R8), R11
	VPXOR      32(SI), Y5, Y5
	CRC32Q     24(R8), R9
	VPXOR      64(SI), Y6, Y6
	CRC32Q     3096(R8), R10
	VPXOR      96(SI), Y7, Y7
	CRC32Q     6168(R8), R11
	VPXOR      Y4, Y0, Y0
	CRC32Q     32(R8), R9
	VPXOR      Y5, Y1, Y1
	CRC32Q     3104(R8), R10
	VPXOR      Y6, Y2, Y2
	CRC32Q     6176(R8), R11
	VPXOR      Y7, Y3, Y3
	CRC32Q     40(R8), R9
	CRC32Q     3112(R8), R10
	CRC32Q     6184(R8), R11
	ADDQ       $128, SI
	ADDQ       $48, R8
	DECQ       CX
	JNZ        loop

	CRC32Q 0(R8), R9
	CRC32Q 3072(R8), R10
	CRC32Q 6144(R8), R11
	CRC32Q 8(R8), R9
	CRC32Q 3080(R8), R10
	CRC32Q 6152(R8), R11
	CRC32Q 16(R8), R9
	CRC32Q 3088(R8), R10
	CRC32Q 6160(R8), R11
	CRC32Q 24(R8), R9
	CRC32Q 3096(R8), R10
	CRC32Q 6168(R8), R11
	CRC32Q 32(R8), R9
	CRC32Q 3104(R8), R10
	CRC32Q 6176(R8), R11
	CRC32Q 40(R8), R9
	CRC32Q 3112(R8), R10
	CRC32Q 6184(R8), R11

	FOLD_REDUCE

	// The CRC of the 16-byte remainder from a zero register is the CRC of
	// the vector part.
	VMOVQ   X1, AX
	VPEXTRQ $1, X1, BX
	XORL    DI, DI
	CRC32Q  AX, DI
	CRC32Q  BX, DI

	// Join: each CRC moved over the bytes after it (foldShift), xored.
	VMOVQ      DI, X1
	VPCLMULQDQ $0x00, 96(DX), X1, X1
	VMOVQ      R9, X2
	VPCLMULQDQ $0x00, 112(DX), X2, X2
	VMOVQ      R10, X3
	VPCLMULQDQ $0x00, 128(DX), X3, X3
	VMOVQ      X1, AX
	VMOVQ      X2, BX
	VMOVQ      X3, CX
	XORL       DI, DI
	CRC32Q     AX, DI
	XORL       R9, R9
	CRC32Q     BX, R9
	XORL       R10, R10
	CRC32Q     CX, R10
	XORL       R9, DI
	XORL       R10, DI
	XORL       R11, DI
	VZEROUPPER
	MOVL       DI, ret+40(FP)
	RET

// COPYFOLD_STEP(STORE) is one step of castagnoliCopyFold: 128 bytes at SI
// loaded into Y10-Y13, stored to DI with STORE (VMOVDQU, or VMOVNTDQ past
// the caches), and folded into Y0-Y3 (each multiplied on by Y9, the by128
// constants, and xored with its new 32 bytes).
#define COPYFOLD_STEP(STORE) \
	PREFETCHT0 2048(SI)            \
	PREFETCHT0 2112(SI)            \
	VMOVDQU    0(SI), Y10          \
	VMOVDQU    32(SI), Y11         \
	VMOVDQU    64(SI), Y12         \
	VMOVDQU    96(SI), Y13         \
	VPCLMULQDQ $0x00, Y9, Y0, Y4   \
	VPCLMULQDQ $0x11, Y9, Y0, Y0   \
	VPCLMULQDQ $0x00, Y9, Y1, Y5   \
	VPCLMULQDQ $0x11, Y9, Y1, Y1   \
	VPCLMULQDQ $0x00, Y9, Y2, Y6   \
	VPCLMULQDQ $0x11, Y9, Y2, Y2   \
	VPCLMULQDQ $0x00, Y9, Y3, Y7   \
	VPCLMULQDQ $0x11, Y9, Y3, Y3   \
	STORE      Y10, 0(DI)          \
	STORE      Y11, 32(DI)         \
	STORE      Y12, 64(DI)         \
	STORE      Y13, 96(DI)         \
	VPXOR      Y10, Y4, Y4         \
	VPXOR      Y11, Y5, Y5         \
	VPXOR      Y12, Y6, Y6         \
	VPXOR      Y13, Y7, Y7         \
	VPXOR      Y4, Y0, Y0          \
	VPXOR      Y5, Y1, Y1          \
	VPXOR      Y6, Y2, Y2          \
	VPXOR      Y7, Y3, Y3          \
	ADDQ       $128, SI            \
	ADDQ       $128, DI

// COPYFOLD_FIRST(STORE) stores the first 128 bytes, already in Y0-Y3, to
// DI with STORE, enters the register (X8) as their first 4 bytes' xor and
// moves SI and DI on.
#define COPYFOLD_FIRST(STORE) \
	STORE Y0, 0(DI)       \
	STORE Y1, 32(DI)      \
	STORE Y2, 64(DI)      \
	STORE Y3, 96(DI)      \
	VPXOR Y8, Y0, Y0      \
	ADDQ  $128, SI        \
	ADDQ  $128, DI

// func castagnoliCopyFold(crc uint32, dst, src []byte, k *foldConstants, stream bool) uint32
//
// Copies src to dst and returns the CRC-32C register (not inverted) after
// src from the register crc, in one pass: each 128 bytes are loaded once,
// stored to dst and folded into four 256-bit accumulators (Y0-Y3), the
// vector part of castagnoliFold without its CRC32 streams, with the
// source prefetched 2 KiB ahead (the multiplications slow the loop, and a
// slower loop gets less from the hardware prefetcher). With stream the
// stores bypass the caches (VMOVNTDQ, dst 32-byte aligned; SFENCE at the
// end). len(src) must be a nonzero multiple of 128, len(dst) at least
// len(src). SI: src; DI: dst; CX: steps left; DX: k.
TEXT ·castagnoliCopyFold(SB), NOSPLIT, $0-76
	MOVL    crc+0(FP), AX
	MOVQ    dst_base+8(FP), DI
	MOVQ    src_base+32(FP), SI
	MOVQ    src_len+40(FP), CX
	MOVQ    k+56(FP), DX
	MOVBLZX stream+64(FP), BX
	SHRQ    $7, CX
	VMOVDQU 0(DX), Y9 // by128
	VMOVD   AX, X8    // the register enters as the first 4 bytes' xor
	VMOVDQU 0(SI), Y0
	VMOVDQU 32(SI), Y1
	VMOVDQU 64(SI), Y2
	VMOVDQU 96(SI), Y3
	TESTQ   BX, BX
	JNZ     streamfirst

	COPYFOLD_FIRST(VMOVDQU)
	DECQ CX
	JZ   reduce

copyloop:
	COPYFOLD_STEP(VMOVDQU)
	DECQ CX
	JNZ  copyloop
	JMP  reduce

streamfirst:
	COPYFOLD_FIRST(VMOVNTDQ)
	DECQ CX
	JZ   streamdone

streamloop:
	COPYFOLD_STEP(VMOVNTDQ)
	DECQ CX
	JNZ  streamloop

streamdone:
	SFENCE

reduce:
	FOLD_REDUCE

	// The CRC of the 16-byte remainder from a zero register.
	VMOVQ   X1, AX
	VPEXTRQ $1, X1, BX
	XORL    R8, R8
	CRC32Q  AX, R8
	CRC32Q  BX, R8
	VZEROUPPER
	MOVL    R8, ret+72(FP)
	RET

// func copyNT(dst, src []byte)
//
// Copies src to dst with stores that bypass the caches (VMOVNTDQ), 128
// bytes a step, the source prefetched 2 KiB ahead, then SFENCE. len(src)
// must be a nonzero multiple of 128, len(dst) at least len(src), dst
// 32-byte aligned.
TEXT ·copyNT(SB), NOSPLIT, $0-48
	MOVQ dst_base+0(FP), DI
	MOVQ src_base+24(FP), SI
	MOVQ src_len+32(FP), CX
	SHRQ $7, CX

ntloop:
	PREFETCHT0 2048(SI)
	PREFETCHT0 2112(SI)
	VMOVDQU    0(SI), Y0
	VMOVDQU    32(SI), Y1
	VMOVDQU    64(SI), Y2
	VMOVDQU    96(SI), Y3
	VMOVNTDQ   Y0, 0(DI)
	VMOVNTDQ   Y1, 32(DI)
	VMOVNTDQ   Y2, 64(DI)
	VMOVNTDQ   Y3, 96(DI)
	ADDQ       $128, SI
	ADDQ       $128, DI
	DECQ       CX
	JNZ        ntloop
	SFENCE
	VZEROUPPER
	RET
