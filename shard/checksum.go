package shard

import "hash/crc32"

// castagnoli is the CRC-32C table. hash/crc32 computes it with the SSE4.2
// (amd64) or CRC32 (arm64) instructions where the CPU has them.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crc32c continues the CRC-32C crc over p; crc32c(0, a, b) is the CRC-32C of
// a followed by b.
func crc32c(crc uint32, p ...[]byte) uint32 {
	for _, b := range p {
		crc = crc32.Update(crc, castagnoli, b)
	}
	return crc
}
