package transforms

import (
	"bytes"
	"compress/flate"
	"compress/zlib"
	"errors"
	stdadler32 "hash/adler32"
	"io"
	"testing"

	"warehouse-etl/internal/fuzzmem"
)

// stdInflate decodes a zlib stream with compress/zlib, the reference.
// trailing reports whether bytes were left after the stream.
func stdInflate(src []byte, limit int) (out []byte, trailing bool, err error) {
	r := bytes.NewReader(src)
	zr, err := zlib.NewReader(r)
	if err != nil {
		return nil, false, err
	}
	out, err = io.ReadAll(io.LimitReader(zr, int64(limit)+1))
	if err != nil {
		return out, false, err // the bytes decoded before the error
	}
	if len(out) > limit {
		return nil, false, errors.New("output over the limit")
	}
	return out, r.Len() > 0, nil
}

// testPayloads are inputs of very different compressibility.
func testPayloads() map[string][]byte {
	noise := make([]byte, 100000)
	fillRandom(noise, 81)
	text := bytes.Repeat([]byte("the tensor warehouse keeps its shards sorted; "), 2000)
	runs := make([]byte, 70000) // long runs and distance-1 matches
	for i := range runs {
		runs[i] = byte(i / 997)
	}
	period := make([]byte, 50000) // short periods: distances 2..7
	for i := range period {
		period[i] = byte(i%3 + i%5 + i%7)
	}
	smooth := make([]byte, 90000) // image-like: small steps
	fillRandom(smooth, 82)
	for i := 4; i < len(smooth); i++ {
		smooth[i] = smooth[i-4] + smooth[i]%5 - 2
	}
	return map[string][]byte{
		"empty": {}, "one-byte": {42}, "noise": noise, "text": text,
		"runs": runs, "short-periods": period, "smooth": smooth,
	}
}

// Every level of compress/zlib (stored, Huffman-only, fixed and dynamic
// blocks, long and short distances) decodes to the original bytes.
func TestInflateMatchesZlib(t *testing.T) {
	levels := []int{zlib.NoCompression, zlib.HuffmanOnly, zlib.BestSpeed, 3, zlib.DefaultCompression, zlib.BestCompression}
	var f inflater
	for name, payload := range testPayloads() {
		for _, level := range levels {
			z := zlibCompress(t, payload, level)
			dst := make([]byte, len(payload))
			if err := f.inflateZlib(dst, z); err != nil {
				t.Fatalf("%s level %d: %v", name, level, err)
			}
			if !bytes.Equal(dst, payload) {
				t.Fatalf("%s level %d: output differs", name, level)
			}
		}
	}
}

// rawZlib wraps raw DEFLATE bytes in a zlib header and the Adler-32 of
// want, the bytes they are meant to decode to.
func rawZlib(deflate []byte, want []byte) []byte {
	z := append([]byte{0x78, 0x9c}, deflate...)
	s := stdadler32.Checksum(want)
	return append(z, byte(s>>24), byte(s>>16), byte(s>>8), byte(s))
}

// Corrupt streams, each with the exact error, and each also refused by
// compress/zlib (the decoder is never more lenient than the standard one).
func TestInflateCorrupt(t *testing.T) {
	good := zlibCompress(t, bytes.Repeat([]byte("abcdefgh"), 100), zlib.BestCompression)
	// Raw DEFLATE streams, bits written LSB first (RFC 1951 3.1.1).
	tests := []struct {
		name string
		z    []byte
		n    int // output size asked for
		want error
	}{
		{"bad method", append([]byte{0x79, 0x9c}, good[2:]...), 800, errZlibHeader},
		{"bad check bits", append([]byte{0x78, 0x9d}, good[2:]...), 800, errZlibHeader},
		{"window over 32K", append([]byte{0x88, 0x98}, good[2:]...), 800, errZlibHeader},
		{"preset dictionary", append([]byte{0x78, 0xbb}, good[2:]...), 800, errZlibHeader},
		// BFINAL=1, BTYPE=11.
		{"reserved block type", rawZlib([]byte{0x07}, nil), 0, errInflateCorrupt},
		// Stored: LEN=3, NLEN not its complement.
		{"stored length check", rawZlib([]byte{0x01, 0x03, 0x00, 0xfc, 0xfe, 'a', 'b', 'c'}, []byte("abc")), 3, errInflateCorrupt},
		{"stored block cut", rawZlib([]byte{0x01, 0x03, 0x00, 0xfc, 0xff, 'a'}, []byte("abc"))[:8], 3, errInflateTruncated},
		// Fixed block: literal 'a' (0x91 in 8 bits: 00110000+0x61), then
		// length 3 (symbol 257, 7 bits 0000001) with distance code 0
		// (distance 1)... here distance 5 > 1 byte of output: 'a' then
		// symbol 257, distance code 4 (distance 5-6, 1 extra bit).
		{"distance before the start", rawZlib(fixedBlock(t, fixedLiteral('a'), fixedLength257(), fixedDistance(4, 1, 0), fixedEnd()), []byte("aaaa")), 4, errInflateCorrupt},
		{"literal/length symbol 286", rawZlib(fixedBlock(t, fixedSymbol(286), fixedEnd()), nil), 0, errInflateCorrupt},
		{"distance symbol 30", rawZlib(fixedBlock(t, fixedLiteral('a'), fixedLength257(), fixedDistance(30, 0, 0), fixedEnd()), []byte("aaaa")), 4, errInflateCorrupt},
		// Dynamic header: HLIT = 30 (287 codes > 286).
		{"too many literal/length codes", rawZlib([]byte{0x05 | 30<<3, 0x00, 0x00, 0x00}, nil), 0, errInflateCorrupt},
		// Dynamic header: HDIST = 30 (31 distance codes > 30).
		{"too many distance codes", rawZlib([]byte{0x05, 0x1e, 0x00, 0x00}, nil), 0, errInflateCorrupt},
		// Dynamic header, HLIT=HDIST=HCLEN=0: the 4 code length codes
		// (for 16, 17, 18, 0) all of length 1, an over-subscribed code.
		{"over-subscribed code length code", rawZlib([]byte{0x05, 0x00, 0x92, 0x04}, nil), 0, errInflateCorrupt},
		{"output larger than the image", good, 799, errInflateSize},
		{"output smaller than the image", good, 801, errInflateSize},
		{"stream cut", good[:len(good)-6], 800, errInflateTruncated},
		{"checksum", append(bytes.Clone(good[:len(good)-1]), good[len(good)-1]^1), 800, errZlibChecksum},
		{"trailing byte", append(bytes.Clone(good), 0), 800, errZlibTrailing},
	}
	var f inflater
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := f.inflateZlib(make([]byte, tt.n), tt.z)
			if !errors.Is(err, tt.want) {
				t.Fatalf("inflateZlib = %v, want %v", err, tt.want)
			}
			if tt.want == errZlibTrailing || tt.want == errInflateSize {
				return // compress/zlib has no expected size and ignores what follows
			}
			if _, _, err := stdInflate(tt.z, 1<<20); err == nil {
				t.Fatal("compress/zlib accepts it")
			}
		})
	}
}

// fixedCode is one code of a fixed-Huffman block: value sent in n bits,
// most significant bit first (Huffman codes) or least (extra bits).
type fixedCode struct {
	v      uint32
	n      uint
	msbFst bool
}

func fixedSymbol(sym int) []fixedCode {
	switch {
	case sym < 144:
		return []fixedCode{{uint32(0x30 + sym), 8, true}}
	case sym < 256:
		return []fixedCode{{uint32(0x190 + sym - 144), 9, true}}
	case sym < 280:
		return []fixedCode{{uint32(sym - 256), 7, true}}
	}
	return []fixedCode{{uint32(0xc0 + sym - 280), 8, true}}
}

func fixedLiteral(b byte) []fixedCode { return fixedSymbol(int(b)) }
func fixedLength257() []fixedCode     { return fixedSymbol(257) } // length 3
func fixedEnd() []fixedCode           { return fixedSymbol(256) }

// fixedDistance is distance code d (5 bits) with extra bits of the given
// count and value.
func fixedDistance(d int, extraBits uint, extra uint32) []fixedCode {
	c := []fixedCode{{uint32(d), 5, true}}
	if extraBits > 0 {
		c = append(c, fixedCode{extra, extraBits, false})
	}
	return c
}

// fixedBlock packs a final fixed-Huffman block (BFINAL=1, BTYPE=01).
func fixedBlock(t *testing.T, codes ...[]fixedCode) []byte {
	t.Helper()
	var out []byte
	var acc uint64
	var n uint
	put := func(v uint32, bits uint) {
		acc |= uint64(v) << n
		n += bits
		for n >= 8 {
			out = append(out, byte(acc))
			acc >>= 8
			n -= 8
		}
	}
	put(1, 1) // BFINAL
	put(1, 2) // BTYPE = 01
	for _, cs := range codes {
		for _, c := range cs {
			if c.msbFst {
				for i := int(c.n) - 1; i >= 0; i-- {
					put(c.v>>uint(i)&1, 1)
				}
			} else {
				put(c.v, c.n)
			}
		}
	}
	if n > 0 {
		out = append(out, byte(acc))
	}
	return out
}

// The hand-packed fixed block really is what the corrupt cases above
// assume: a valid literal and match decode.
func TestFixedBlockHelper(t *testing.T) {
	// 'a', then length 3 at distance 1: "aaaa".
	z := rawZlib(fixedBlock(t, fixedLiteral('a'), fixedLength257(), fixedDistance(0, 0, 0), fixedEnd()), []byte("aaaa"))
	dst := make([]byte, 4)
	var f inflater
	if err := f.inflateZlib(dst, z); err != nil || string(dst) != "aaaa" {
		t.Fatalf("inflateZlib = %q, %v", dst, err)
	}
	if got, _, err := stdInflate(z, 100); err != nil || string(got) != "aaaa" {
		t.Fatalf("compress/zlib = %q, %v", got, err)
	}
}

func TestAdler32MatchesStd(t *testing.T) {
	big := make([]byte, 3<<20+17) // crosses the 1 MiB reduction blocks
	fillRandom(big, 83)
	for i := 0; i < 1<<20; i += 3 {
		big[i] = 0xff // long runs of the largest byte stress the sums
	}
	for _, n := range []int{0, 1, 15, 16, 17, 31, 5552, 5553, 65536, 1 << 20, len(big)} {
		if got, want := adler32(big[:n]), stdadler32.Checksum(big[:n]); got != want {
			t.Fatalf("adler32 of %d bytes = %08x, want %08x", n, got, want)
		}
	}
	ones := bytes.Repeat([]byte{0xff}, 5<<20)
	if got, want := adler32(ones), stdadler32.Checksum(ones); got != want {
		t.Fatalf("adler32 of 5 MiB of 0xff = %08x, want %08x", got, want)
	}
}

// FuzzInflate compares the decoder with compress/zlib on arbitrary
// streams. The output size is taken from compress/zlib; when it decodes
// the stream exactly (nothing after the checksum), inflateZlib must give
// the same bytes; when it refuses, so must inflateZlib, for any size.
func FuzzInflate(f *testing.F) {
	for _, p := range testPayloads() {
		for _, level := range []int{zlib.NoCompression, zlib.HuffmanOnly, zlib.BestSpeed, zlib.BestCompression} {
			if len(p) < 2000 {
				f.Add(zlibCompress(f, p, level))
			}
		}
	}
	f.Add(zlibCompress(f, bytes.Repeat([]byte("warehouse"), 200), flate.DefaultCompression))
	var inf inflater
	f.Fuzz(func(t *testing.T, z []byte) {
		want, trailing, err := stdInflate(z, 1<<20)
		if err != nil {
			for _, n := range []int{0, 1, 100, 4096, len(want)} {
				if inf.inflateZlib(make([]byte, n), z) == nil {
					t.Fatalf("compress/zlib refuses (%v), inflateZlib accepts it as %d bytes", err, n)
				}
			}
			return
		}
		dst := make([]byte, len(want))
		fuzzmem.Check(t, inflateAllocBound, func() { err = inf.inflateZlib(dst, z) })
		switch {
		case trailing:
			if !errors.Is(err, errZlibTrailing) {
				t.Fatalf("stream with trailing bytes: %v", err)
			}
		case err != nil:
			t.Fatalf("compress/zlib decodes %d bytes, inflateZlib: %v", len(want), err)
		case !bytes.Equal(dst, want):
			t.Fatal("output differs from compress/zlib")
		}
	})
}
