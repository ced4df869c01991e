package xzstream

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	ulzma "github.com/ulikunitz/xz"
)

// plain is the fixture formula of testdata/roverdgen/xz_fixtures.py.
func plain(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte((i*7 + i/251) % 256)
	}
	return b
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Every fixture written by liblzma (Python's lzma module and the xz tool)
// decompresses to the bytes the formula gives.
func TestDecompressLiblzmaFixtures(t *testing.T) {
	tests := []struct {
		file string
		want []byte
	}{
		{"crc64.xz", plain(20000)},
		{"crc32.xz", plain(20000)},
		{"sha256.xz", plain(20000)},
		{"none.xz", plain(20000)},
		{"preset9e.xz", plain(20000)},
		{"empty.xz", []byte{}},
		{"concat.xz", append(plain(300), plain(700)...)},
		{"multiblock.xz", plain(50000)},
		{"multiblock_mt.xz", plain(50000)},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			data := fixture(t, tc.file)
			got, err := DecompressBytes(data, int64(len(tc.want)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, tc.want) {
				t.Fatalf("decompressed %d bytes, differ from the %d expected", len(got), len(tc.want))
			}
			info, err := Stat(bytes.NewReader(data), int64(len(data)))
			if err != nil || info.Uncompressed != int64(len(tc.want)) {
				t.Fatalf("Stat = %+v, %v; want %d bytes", info, err, len(tc.want))
			}
		})
	}
}

func TestStatCounts(t *testing.T) {
	for file, want := range map[string]Info{
		"multiblock.xz": {Uncompressed: 50000, Streams: 1, Blocks: 4},
		"concat.xz":     {Uncompressed: 1000, Streams: 2, Blocks: 2},
		"empty.xz":      {Uncompressed: 0, Streams: 1, Blocks: 0},
	} {
		data := fixture(t, file)
		got, err := Stat(bytes.NewReader(data), int64(len(data)))
		if err != nil || got != want {
			t.Errorf("%s: Stat = %+v, %v; want %+v", file, got, err, want)
		}
	}
}

// A data set that declares more than the limit fails before anything is
// decompressed: 64 MiB of zeros in 10 KiB, read with a 1 MiB limit,
// allocates almost nothing.
func TestBombRefusedBeforeDecompressing(t *testing.T) {
	data := fixture(t, "zeros64m.xz")
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := DecompressBytes(data, 1<<20)
	runtime.ReadMemStats(&after)
	want := "xz: uncompressed size over the limit: the data declares at least 67108864 bytes uncompressed, more than the limit of 1048576"
	if !errors.Is(err, ErrTooLarge) || err.Error() != want {
		t.Fatalf("err = %v, want %q", err, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Fatalf("refusing the bomb allocated %d bytes", alloc)
	}
	// One byte short of the declared size is refused too; the declared
	// size itself is what Stat reports.
	if _, err := DecompressBytes(data, 64<<20-1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("limit one byte short: %v", err)
	}
	if info, err := Stat(bytes.NewReader(data), int64(len(data))); err != nil || info.Uncompressed != 64<<20 {
		t.Fatalf("Stat = %+v, %v", info, err)
	}
}

// rewriteIndex returns data (one stream, one block) with the index's
// uncompressed size replaced and every CRC it affects recomputed: a file
// whose index lies.
func rewriteIndex(t *testing.T, data []byte, uncompressed uint64) []byte {
	t.Helper()
	ft := data[len(data)-footerSize:]
	indexSize := (int(binary.LittleEndian.Uint32(ft[4:8])) + 1) * 4
	idx := data[len(data)-footerSize-indexSize : len(data)-footerSize]
	unpadded, k, err := vli(idx[2:])
	if err != nil || idx[1] != 1 {
		t.Fatalf("fixture index: %v records %d", err, idx[1])
	}
	_ = k
	rec := append(putVLI(nil, unpadded), putVLI(nil, uncompressed)...)
	body := append([]byte{0, 1}, rec...)
	for len(body)%4 != 0 {
		body = append(body, 0)
	}
	body = binary.LittleEndian.AppendUint32(body, crc32.ChecksumIEEE(body))
	out := append([]byte{}, data[:len(data)-footerSize-indexSize]...)
	out = append(out, body...)
	footer := make([]byte, footerSize)
	binary.LittleEndian.PutUint32(footer[4:8], uint32(len(body)/4-1))
	copy(footer[8:10], ft[8:10])
	copy(footer[10:12], footerMagic)
	binary.LittleEndian.PutUint32(footer[0:4], crc32.ChecksumIEEE(footer[4:10]))
	return append(out, footer...)
}

func putVLI(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// setDictProps returns data with the first block header's LZMA2 property
// byte replaced and its CRC recomputed.
func setDictProps(t *testing.T, data []byte, props byte) []byte {
	t.Helper()
	out := append([]byte{}, data...)
	h := out[headerSize : headerSize+(int(out[headerSize])+1)*4]
	if h[1] != 0 || h[2] != filterLZMA2 || h[3] != 1 {
		t.Fatalf("fixture block header % x is not a plain LZMA2 header", h)
	}
	h[4] = props
	binary.LittleEndian.PutUint32(h[len(h)-4:], crc32.ChecksumIEEE(h[:len(h)-4]))
	return out
}

// A block header asking for a 4 GiB dictionary is decoded with a
// dictionary the size of the block, not allocated as asked.
func TestHugeDictionaryNotAllocated(t *testing.T) {
	data := setDictProps(t, fixture(t, "crc64.xz"), lzma2DictMax)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := DecompressBytes(data, 1<<20)
	runtime.ReadMemStats(&after)
	if err != nil || !bytes.Equal(got, plain(20000)) {
		t.Fatalf("decompress: %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 8<<20 {
		t.Fatalf("decoding a 20000-byte block allocated %d bytes", alloc)
	}
}

// Corruption table: each case damages a liblzma fixture and names the
// exact error.
func TestCorruption(t *testing.T) {
	good := fixture(t, "crc64.xz")
	flip := func(off int) []byte {
		b := append([]byte{}, good...)
		if off < 0 {
			off += len(b)
		}
		b[off] ^= 0x01
		return b
	}
	n := len(good)
	tests := []struct {
		name string
		data []byte
		is   error
		want string
	}{
		{"empty input", nil, ErrCorrupt, "xz: corrupt data: no stream in 0 bytes"},
		{"only padding", make([]byte, 8), ErrCorrupt, "xz: corrupt data: no stream in 8 bytes"},
		{"too short", []byte("YZ"), ErrCorrupt, "xz: corrupt data: 2 bytes cannot hold a stream header and footer"},
		{"footer magic", flip(-1), ErrCorrupt, "xz: corrupt data: no stream footer magic at offset 414"},
		{"footer crc", flip(-12), ErrCorrupt, "xz: corrupt data: stream footer CRC32 mismatch at offset 404"},
		{"header magic", flip(0), ErrCorrupt, "xz: corrupt data: no stream header magic at offset 0"},
		{"header crc", flip(8), ErrCorrupt, "xz: corrupt data: stream header CRC32 mismatch at offset 0"},
		{"index crc", flip(n - footerSize - 1), ErrCorrupt, "xz: corrupt data: index CRC32 mismatch at offset 392"},
		{"block header crc", flip(headerSize + 2), ErrCorrupt, "xz: corrupt data: block header CRC32 mismatch at offset 12"},
		{"compressed data", flip(headerSize + 40), ErrCorrupt, ""},
		{"check", flip(n - footerSize - 12 - 1), ErrCorrupt, "xz: corrupt data: block at offset 12: check mismatch (the uncompressed data is damaged)"},
		{"index says fewer bytes", rewriteIndex(t, good, 19999), ErrCorrupt, "xz: corrupt data: block at offset 12 holds more than its declared 19999 bytes"},
		{"index says more bytes", rewriteIndex(t, good, 20001), ErrCorrupt, ""},
		{"index says 2^62 bytes", rewriteIndex(t, good, 1<<62), ErrTooLarge, "xz: uncompressed size over the limit: the data declares at least 4611686018427387904 bytes uncompressed, more than the limit of 1048576"},
		{"dictionary property 41", setDictProps(t, good, 41), ErrCorrupt, "xz: corrupt data: block header at offset 12: LZMA2 dictionary property 0x29"},
		{"x86 filter", fixture(t, "x86.xz"), ErrUnsupported, "xz: unsupported: block at offset 12 has 2 filters, only LZMA2 alone is supported"},
		{"trailing garbage", append(append([]byte{}, good...), 1, 2, 3, 4), ErrCorrupt, "xz: corrupt data: no stream footer magic at offset 418"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecompressBytes(tc.data, 1<<20)
			if !errors.Is(err, tc.is) {
				t.Fatalf("err = %v, want %v", err, tc.is)
			}
			if tc.want != "" && err.Error() != tc.want {
				t.Fatalf("err = %q\nwant  %q", err, tc.want)
			}
		})
	}
}

// Every prefix of a valid stream is an error, never a panic or a short
// result.
func TestTruncationAtEveryOffset(t *testing.T) {
	for _, file := range []string{"crc64.xz", "concat.xz", "multiblock_mt.xz"} {
		data := fixture(t, file)
		valid := 0
		for n := range len(data) {
			got, err := DecompressBytes(data[:n], 1<<20)
			if err == nil {
				// Only concat.xz has valid prefixes: its first stream,
				// with and without the stream padding after it.
				if file != "concat.xz" || !bytes.Equal(got, plain(300)) {
					t.Fatalf("%s cut at %d: decompressed %d bytes without error", file, n, len(got))
				}
				valid++
				continue
			}
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
				t.Fatalf("%s cut at %d: %v is neither corrupt nor unsupported", file, n, err)
			}
		}
		if file == "concat.xz" && valid != 2 {
			t.Fatalf("concat.xz: %d valid prefixes, want 2 (the first stream with and without padding)", valid)
		}
	}
}

// What ulikunitz/xz's own writer produces decodes too (a second encoder).
func TestRoundTripUlikunitzWriter(t *testing.T) {
	want := []byte(strings.Repeat("roverd imu acc avel rot ", 5000))
	var buf bytes.Buffer
	w, err := ulzma.NewWriter(&buf)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(want)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := DecompressBytes(buf.Bytes(), int64(len(want)))
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("round trip: %d bytes, %v", len(got), err)
	}
	if _, err := DecompressBytes(buf.Bytes(), int64(len(want))-1); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("limit one byte short: %v", err)
	}
}

func TestVLI(t *testing.T) {
	tests := []struct {
		in   []byte
		v    uint64
		n    int
		fail string
	}{
		{[]byte{0x00}, 0, 1, ""},
		{[]byte{0x7F}, 127, 1, ""},
		{[]byte{0x80, 0x01}, 128, 2, ""},
		{[]byte{0x80, 0x00}, 0, 0, "integer with a redundant zero byte"},
		{[]byte{0x80}, 0, 0, "truncated integer"},
		{bytes.Repeat([]byte{0xFF}, 10), 0, 0, "integer longer than 9 bytes"},
		{append(bytes.Repeat([]byte{0xFF}, 8), 0x7F), 1<<63 - 1, 9, ""},
		{append(bytes.Repeat([]byte{0xFF}, 8), 0xFF), 0, 0, "integer longer than 9 bytes"},
	}
	for _, tc := range tests {
		v, n, err := vli(tc.in)
		if tc.fail != "" {
			if err == nil || err.Error() != tc.fail {
				t.Errorf("vli(% x) err = %v, want %q", tc.in, err, tc.fail)
			}
			continue
		}
		if err != nil || v != tc.v || n != tc.n {
			t.Errorf("vli(% x) = %d, %d, %v; want %d, %d", tc.in, v, n, err, tc.v, tc.n)
		}
	}
}

func BenchmarkDecompress(b *testing.B) {
	data := fixture(b, "multiblock.xz")
	b.SetBytes(50000)
	for b.Loop() {
		if _, err := DecompressBytes(data, 1<<20); err != nil {
			b.Fatal(err)
		}
	}
}
