package container

import (
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// zstdDecoder is shared: DecodeAll is safe for concurrent use. With
// WithDecodeAllCapLimit a frame that decodes to more than cap(dst) fails
// instead of growing dst, so the original size in the index bounds memory
// whatever the frame header claims.
var zstdDecoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecodeAllCapLimit(true), zstd.WithDecoderLowmem(true))
})

// lz4MaxDecoded is the most bytes n bytes of lz4 block format can decode
// to: a sequence is at least one token byte and one length byte per 255
// bytes of match, so the ratio cannot exceed 255:1 (plus the literal tail).
// An original size beyond it is a lie, rejected before allocating.
func lz4MaxDecoded(n uint64) uint64 {
	if n > (1<<64-1-16)/255 {
		return 1<<64 - 1
	}
	return n*255 + 16
}

// zstdMaxDecoded is the most bytes n bytes of zstd frames can decode to.
// A block decodes to at most 128 KiB (Block_Maximum_Size, RFC 8878
// 3.1.1.2.4) and takes at least 4 bytes (a 3-byte block header and, for
// the densest kind, an RLE block, 1 byte of content), so no frame expands
// more than 32768:1. An original size beyond it is a lie, rejected before
// decompress allocates it as the output buffer.
func zstdMaxDecoded(n uint64) uint64 {
	const blockMax, blockMin = 128 << 10, 4
	if n/blockMin > (1<<64-1)/blockMax {
		return 1<<64 - 1
	}
	return n / blockMin * blockMax
}

// decompress decodes src, stored with c, into exactly size bytes.
func decompress(c Compression, src []byte, size int) ([]byte, error) {
	switch c {
	case CompressZstd:
		dec, err := zstdDecoder()
		if err != nil {
			return nil, err
		}
		out, err := dec.DecodeAll(src, make([]byte, 0, size))
		if err != nil {
			return nil, err
		}
		if len(out) != size {
			return nil, fmt.Errorf("decoded %d bytes, the index says %d", len(out), size)
		}
		return out, nil
	case CompressLZ4:
		out := make([]byte, size)
		n, err := lz4.UncompressBlock(src, out)
		if err != nil {
			return nil, err
		}
		if n != size {
			return nil, fmt.Errorf("decoded %d bytes, the index says %d", n, size)
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown compression %s", c)
}
