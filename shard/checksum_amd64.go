//go:build amd64 && !purego

package shard

import "golang.org/x/sys/cpu"

// foldAvailable: the CPU has VPCLMULQDQ (carry-less multiplication of
// 256-bit registers, leaf 7 ECX bit 10 of CPUID, which x/sys/cpu reports
// only beside AVX-512) with AVX2, whose registers the OS saves, and
// SSE4.2's CRC32.
var foldAvailable = cpu.X86.HasAVX2 && cpu.X86.HasPCLMULQDQ && cpu.X86.HasSSE42 && cpuid7ECX()&(1<<10) != 0

// cpuid7ECX is ECX of CPUID leaf 7, subleaf 0 (present where AVX2 is).
func cpuid7ECX() uint32

// castagnoliFold returns the CRC-32C register (not inverted) after p from
// the register crc. len(p) must be foldChunk.
//
//go:noescape
func castagnoliFold(crc uint32, p []byte, k *foldConstants) uint32

// castagnoliCopyFold copies src to dst and returns the CRC-32C register
// (not inverted) after src from the register crc, in one pass; with
// stream its stores bypass the caches, and dst must be 32-byte aligned.
// len(src) must be a nonzero multiple of 128 and len(dst) at least
// len(src).
//
//go:noescape
func castagnoliCopyFold(crc uint32, dst, src []byte, k *foldConstants, stream bool) uint32

// copyNTAvailable: copyNT's AVX stores past the caches.
var copyNTAvailable = cpu.X86.HasAVX2

// copyNT copies src to dst with stores that bypass the caches. len(src)
// must be a nonzero multiple of 128, len(dst) at least len(src), dst
// 32-byte aligned.
//
//go:noescape
func copyNT(dst, src []byte)

// checksum_amd64.s has the stream length and the vector part's length as
// literal offsets (3072, 6144, 8064 = foldVector - 128): these fail to
// compile when the constants change without it.
var (
	_ [foldStream - 3072]struct{}
	_ [3072 - foldStream]struct{}
	_ [foldVector - 8192]struct{}
	_ [8192 - foldVector]struct{}
)
