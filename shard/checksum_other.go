//go:build !amd64 || purego

package shard

// foldAvailable: the fold is written for amd64 only; elsewhere hash/crc32
// (the CRC32 instructions on arm64) computes every byte.
const foldAvailable = false

func castagnoliFold(crc uint32, p []byte, k *foldConstants) uint32 {
	panic("shard: castagnoliFold without the fold")
}

func castagnoliCopyFold(crc uint32, dst, src []byte, k *foldConstants, stream bool) uint32 {
	panic("shard: castagnoliCopyFold without the fold")
}

// copyNTAvailable: copyNT is written for amd64 only.
const copyNTAvailable = false

func copyNT(dst, src []byte) { panic("shard: copyNT without AVX") }
