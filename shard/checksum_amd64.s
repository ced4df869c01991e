//go:build amd64 && !purego

#include "textflag.h"

// func cpuid7ECX() uint32
TEXT ·cpuid7ECX(SB), NOSPLIT, $0-4
	MOVL  $7, AX
	XORL  CX, CX
	CPUID
	MOVL  CX, ret+0(FP)
	RET

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

	// Y0 onto Y1, onto Y2, onto Y3 (256 bits each).
	VMOVDQU    32(DX), Y9 // by32
	VPCLMULQDQ $0x00, Y9, Y0, Y4
	VPCLMULQDQ $0x11, Y9, Y0, Y0
	VPXOR      Y4, Y0, Y0
	VPXOR      Y1, Y0, Y0
	VPCLMULQDQ $0x00, Y9, Y0, Y4
	VPCLMULQDQ $0x11, Y9, Y0, Y0
	VPXOR      Y4, Y0, Y0
	VPXOR      Y2, Y0, Y0
	VPCLMULQDQ $0x00, Y9, Y0, Y4
	VPCLMULQDQ $0x11, Y9, Y0, Y0
	VPXOR      Y4, Y0, Y0
	VPXOR      Y3, Y0, Y0

	// Lane 0 onto lane 1 (128 bits; the lanes constant is zero in lane 1).
	VMOVDQU      64(DX), Y9 // lanes
	VPCLMULQDQ   $0x00, Y9, Y0, Y4
	VPCLMULQDQ   $0x11, Y9, Y0, Y5
	VPXOR        Y5, Y4, Y4
	VEXTRACTI128 $1, Y0, X1
	VPXOR        X4, X1, X1

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
