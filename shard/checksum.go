package shard

import (
	"hash/crc32"
	"math/bits"
	"unsafe"
)

// castagnoli is the CRC-32C table. hash/crc32 computes it with the SSE4.2
// (amd64) or CRC32 (arm64) instructions where the CPU has them.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc32c continues the CRC-32C crc over p; crc32c(0, a, b) is the CRC-32C of
// a followed by b.
func crc32c(crc uint32, p ...[]byte) uint32 {
	for _, b := range p {
		if foldAvailable && len(b) >= foldChunk { // checksum_amd64.go
			crc = ^crc
			for len(b) >= foldChunk {
				crc = castagnoliFold(crc, b[:foldChunk], &foldK)
				b = b[foldChunk:]
			}
			crc = ^crc
		}
		crc = crc32.Update(crc, castagnoli, b)
	}
	return crc
}

// Copy is copy(dst, src) that, with stream, stores past the caches where
// it can (amd64 with AVX2, 1 KiB or more to a 32-byte aligned dst), as
// CopyCRC32C does: for a destination that is not read back from the
// caches soon.
func Copy(dst, src []byte, stream bool) {
	dst = dst[:len(src)]
	if stream && copyNTAvailable && len(src) >= copyFoldMin && uintptr(unsafe.Pointer(unsafe.SliceData(dst)))%32 == 0 {
		m := len(src) &^ 127
		copyNT(dst[:m], src[:m])
		dst, src = dst[m:], src[m:]
	}
	copy(dst, src)
}

// StoresPastCaches reports whether Copy (and CopyCRC32C where the CPU has
// the fold) store past the caches when asked to stream: amd64 with AVX2.
// Elsewhere stream changes nothing.
func StoresPastCaches() bool { return copyNTAvailable }

// UpdateCRC32C returns the CRC-32C crc continued over p (crc 0 starts
// one), with the fold where the CPU has it.
func UpdateCRC32C(crc uint32, p []byte) uint32 { return crc32c(crc, p) }

// CopyCRC32C copies src into dst, which must be at least as long, and
// returns the CRC-32C crc continued over src (crc 0 starts one; CopyCRC32C
// of a whole in pieces, each continuing the last, is the CRC-32C of the
// whole): copy(dst, src) and then a CRC pass, in one pass over src where
// the CPU has the fold (castagnoliFold's carry-less multiplications, which
// run while the loads wait on memory, so that a copy from memory costs
// about what the copy alone does). With stream, a copy of 1 KiB or more to
// a 32-byte aligned dst stores past the caches (VMOVNTDQ): for a
// destination that is not read back from the caches soon, a sample in a
// batch of megabytes. A regular store first reads the line it writes
// (read for ownership); skipping that moves a third fewer bytes to and
// from memory. Without the fold each copyChunk bytes are copied and then
// their CRC computed from dst while they are still in the first-level
// cache.
func CopyCRC32C(crc uint32, dst, src []byte, stream bool) uint32 {
	dst = dst[:len(src)]
	if foldAvailable && len(src) >= copyFoldMin {
		m := len(src) &^ 127
		stream = stream && uintptr(unsafe.Pointer(unsafe.SliceData(dst)))%32 == 0
		crc = ^castagnoliCopyFold(^crc, dst[:m], src[:m], &foldK, stream)
		dst, src = dst[m:], src[m:]
	}
	for len(src) > 0 {
		n := min(len(src), copyChunk)
		copy(dst[:n], src[:n])
		crc = crc32.Update(crc, castagnoli, dst[:n])
		dst, src = dst[n:], src[n:]
	}
	return crc
}

const (
	// copyFoldMin: below it the fold's setup and reduction (tens of
	// cycles) are not worth it.
	copyFoldMin = 1024
	// copyChunk is the piece CopyCRC32C copies before computing its CRC
	// without the fold: half a typical 32 KiB first-level data cache.
	copyChunk = 16 << 10
)

// Folding (checksum_amd64.s) computes CRC-32C 1.7x as fast as hash/crc32
// where the CPU has 256-bit carry-less multiplication (38 against 22 GB/s
// on the Zen 3-class CPU it was tuned on: docs/performance.md). hash/crc32's SSE4.2
// loop is bound by the CRC32 instruction's throughput (8 bytes a cycle);
// the fold runs it and carry-less multiplications (Gopal et al., "Fast CRC
// Computation for Generic Polynomials Using PCLMULQDQ Instruction", Intel,
// 2009, for a bit-reflected CRC) side by side, on different execution
// units. A chunk of foldChunk bytes is foldVector bytes reduced by
// multiplication in four 256-bit accumulators, 128 bytes a step, to a
// 128-bit remainder whose CRC the CRC32 instruction computes, then three
// streams of foldStream bytes that the CRC32 instruction takes 8 bytes at a
// time, 48 bytes of each per step; the four CRCs are joined by shifting
// each by the bytes that follow it (foldShift). Inputs are folded a chunk
// at a time; what is left over goes to hash/crc32.
const (
	foldSteps  = 64
	foldVector = foldSteps * 128
	foldStream = foldSteps * 48
	foldChunk  = foldVector + 3*foldStream // 17,408 bytes
)

// foldConstants are the multipliers of the fold. Each pair (lo, hi) is the
// one a 128-bit lane's low and high halves are multiplied by to move them d
// bits further on: (foldConst(d+32), foldConst(d-32)). shift[j] (padded to
// 16 bytes) moves a CRC register over (3-j)*foldStream bytes.
type foldConstants struct {
	by128 [4]uint64 // d = 1024, both lanes: one step
	by32  [4]uint64 // d = 256, both lanes: one accumulator onto the next
	lanes [4]uint64 // d = 128 for lane 0 onto lane 1; lane 1 zero
	shift [3][2]uint64
}

var foldK = newFoldConstants(crc32.Castagnoli)

func newFoldConstants(reflected uint32) foldConstants {
	pair := func(d uint) []uint64 { return []uint64{foldConst(reflected, d+32), foldConst(reflected, d-32)} }
	var k foldConstants
	for lane := range 2 {
		copy(k.by128[2*lane:], pair(1024))
		copy(k.by32[2*lane:], pair(256))
	}
	copy(k.lanes[:], pair(128))
	for j := range 3 {
		k.shift[j][0] = foldShift(reflected, (3-j)*foldStream)
	}
	return k
}

// foldShift is the multiplier that moves a CRC register c over n zero
// bytes: c*x^(8n) mod P is the CRC32 instruction's CRC, from a zero
// register, of the 8 bytes of the carry-less product of c and
// foldConst(8n-32) (whose degree is below 64).
func foldShift(reflected uint32, n int) uint64 {
	return foldConst(reflected, uint(8*n-32))
}

// foldConst is x^e mod P for the CRC whose bit-reflected polynomial is
// reflected, as the folds multiply by it: bit-reflected and shifted left by
// one (33 bits). For the IEEE polynomial these are the constants of the
// Intel paper (foldConst(IEEE, 544) = 0x154442bd4: TestFoldConstants).
func foldConst(reflected uint32, e uint) uint64 {
	p := 1<<32 | uint64(bits.Reverse32(reflected))
	r, base := uint64(1), uint64(2) // x^0 and x: x^e by squaring
	for ; e > 0; e >>= 1 {
		if e&1 != 0 {
			r = mulMod(r, base, p)
		}
		base = mulMod(base, base, p)
	}
	return uint64(bits.Reverse32(uint32(r))) << 1
}

// mulMod is a*b mod p for polynomials over GF(2) of degree below 32 (a, b)
// and 32 (p, its x^32 term set), in normal bit order.
func mulMod(a, b, p uint64) uint64 {
	var r uint64
	for i := 31; i >= 0; i-- {
		r <<= 1
		if r&(1<<32) != 0 {
			r ^= p
		}
		if b>>uint(i)&1 != 0 {
			r ^= a
		}
	}
	return r
}
