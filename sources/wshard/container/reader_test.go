package container

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cespare/xxhash/v2"
)

// byteBuilder writes little-endian fields by hand, independently of Writer.
type byteBuilder struct{ b []byte }

func (e *byteBuilder) str(s string) { e.b = append(e.b, s...) }
func (e *byteBuilder) u8(v uint8)   { e.b = append(e.b, v) }
func (e *byteBuilder) u16(v uint16) { e.b = binary.LittleEndian.AppendUint16(e.b, v) }
func (e *byteBuilder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *byteBuilder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }

// lz4Text and lz4Stored are an lz4 block written by hand from the block
// format: a token with 3 literals "abc" and a match of 9 bytes at offset 3
// (token 0x35: 3 literals, match length 9-4 = 5), then a last token of 5
// literals "hello".
const lz4Text = "abcabcabcabchello"

var lz4Stored = []byte{0x35, 'a', 'b', 'c', 0x03, 0x00, 0x50, 'h', 'e', 'l', 'l', 'o'}

// handmadeLZ4Container is a one-block WShard container written field by
// field: no golden file has an lz4 block, so this is the lz4 reference.
func handmadeLZ4Container() []byte {
	const name = "signal/lz"
	var e byteBuilder
	dataOff := uint64(HeaderSize + EntrySize + len(name))
	e.str("SHRD")
	e.u8(2)     // version
	e.u8(0x05)  // role WShard
	e.u16(0x22) // little-endian | checksums
	e.u8(0)     // no alignment
	e.u8(2)     // default lz4
	e.u16(48)   // entry size
	e.u32(1)    // entries
	e.u64(64 + 48)
	e.u64(dataOff)
	e.u64(0) // schema
	e.u64(dataOff + uint64(len(lz4Stored)))
	e.b = append(e.b, make([]byte, 16)...)
	e.u64(xxhash.Sum64String(name))
	e.u32(0)
	e.u16(uint16(len(name)))
	e.u16(0x0005)
	e.u64(dataOff)
	e.u64(uint64(len(lz4Stored)))
	e.u64(uint64(len(lz4Text)))
	e.u32(crc32.Checksum([]byte(lz4Text), crc32.MakeTable(crc32.Castagnoli)))
	e.u16(0)
	e.u16(0)
	e.str(name)
	e.b = append(e.b, lz4Stored...)
	return e.b
}

func open(t testing.TB, b []byte) (*Reader, error) {
	t.Helper()
	return NewReader(bytes.NewReader(b), int64(len(b)), "f.wshard", Limits{})
}

func TestHandmadeLZ4(t *testing.T) {
	r, err := open(t, handmadeLZ4Container())
	if err != nil {
		t.Fatal(err)
	}
	e, ok := r.Lookup("signal/lz")
	if !ok || e.Compression() != CompressLZ4 {
		t.Fatalf("entry %+v, %v", e, ok)
	}
	got, err := r.ReadBlock(e)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != lz4Text {
		t.Fatalf("decoded %q, want %q", got, lz4Text)
	}
}

// TestWriterRoundTrip writes zstd, lz4 and raw blocks with alignments 0 and
// 32 and reads every one back.
func TestWriterRoundTrip(t *testing.T) {
	compressible := bytes.Repeat([]byte("joint angles 0123456789 "), 200)
	incompressible := make([]byte, 300)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range incompressible {
		incompressible[i] = byte(rng.Uint32())
	}
	for _, align := range []uint8{0, 32} {
		w := Writer{Role: RoleWShard, Alignment: align}
		blocks := []Block{
			{Name: "meta/episode", Data: []byte(`{"length_T":3}`), ContentType: ContentJSON},
			{Name: "signal/z", Data: compressible, Compression: CompressZstd},
			{Name: "signal/l", Data: compressible, Compression: CompressLZ4},
			{Name: "signal/raw", Data: incompressible, Compression: CompressLZ4}, // stays raw
			{Name: "empty", Data: nil},
		}
		for _, b := range blocks {
			w.Add(b)
		}
		out, err := w.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		r, err := open(t, out)
		if err != nil {
			t.Fatalf("align %d: %v", align, err)
		}
		wantComp := []Compression{CompressNone, CompressZstd, CompressLZ4, CompressNone, CompressNone}
		for i, b := range blocks {
			e, ok := r.Lookup(b.Name)
			if !ok || e.Compression() != wantComp[i] {
				t.Fatalf("align %d: %s: %+v (ok %v), want %s", align, b.Name, e, ok, wantComp[i])
			}
			got, err := r.ReadBlock(e)
			if err != nil || !bytes.Equal(got, b.Data) {
				t.Fatalf("align %d: %s: read %d bytes, %v", align, b.Name, len(got), err)
			}
		}
	}
	w := Writer{Role: RoleWShard}
	w.Add(Block{Name: "a", Data: []byte{1}})
	w.Add(Block{Name: "a", Data: []byte{2}})
	if _, err := w.Bytes(); err == nil {
		t.Fatal("repeated block name accepted")
	}
}

// patch helpers for the corruption table. Offsets are those of the
// reference simple_episode.wshard: 7 entries, string table at 400 (112
// bytes with padding), data section at 512; entry 5 is reward (40 bytes at
// 1280), entry 6 is done (10 bytes at 1344).
func put16(b []byte, off int, v uint16) { binary.LittleEndian.PutUint16(b[off:], v) }
func put32(b []byte, off int, v uint32) { binary.LittleEndian.PutUint32(b[off:], v) }
func put64(b []byte, off int, v uint64) { binary.LittleEndian.PutUint64(b[off:], v) }
func entryOff(i int) int                { return HeaderSize + i*EntrySize }

// TestCorruption applies one defect per case and expects the exact error:
// every case of the malformed-input list of formats/wshard.md and every
// check of the package documentation.
func TestCorruption(t *testing.T) {
	const simple = "simple_episode.wshard"
	cases := []struct {
		name  string
		file  string // golden file, or "" for the handmade lz4 container
		patch func(b []byte) []byte
		read  string // block to read after opening; "" = the error comes from NewReader
		kind  error
		want  string
	}{
		{"short header", simple, func(b []byte) []byte { return b[:63] }, "", ErrCorrupt,
			"container: f.wshard: corrupt: file is 63 bytes, shorter than the 64-byte header"},
		{"bad magic", simple, func(b []byte) []byte { b[0] = 'X'; return b }, "", ErrCorrupt,
			`container: f.wshard: corrupt: bad magic "XHRD", want "SHRD"`},
		{"version", simple, func(b []byte) []byte { b[4] = 3; return b }, "", ErrCorrupt,
			"container: f.wshard: corrupt: unsupported version 3, want 2"},
		{"entry size", simple, func(b []byte) []byte { put16(b, 10, 40); return b }, "", ErrCorrupt,
			"container: f.wshard: corrupt: index entry size 40, want 48"},
		{"alignment", simple, func(b []byte) []byte { b[8] = 8; return b }, "", ErrCorrupt,
			"container: f.wshard: corrupt: alignment 8, want 0, 16, 32 or 64"},
		{"default compression", simple, func(b []byte) []byte { b[9] = 3; return b }, "", ErrDecompress,
			"container: f.wshard: decompression failed: unknown default compression 3"},
		{"total size", simple, func(b []byte) []byte { return append(b, 0) }, "", ErrCorrupt,
			"container: f.wshard: corrupt: header says the file is 1354 bytes, it is 1355 (truncated or extended)"},
		{"inflated entry_count past EOF", simple, func(b []byte) []byte { put32(b, 12, 1000); return b }, "", ErrCorrupt,
			"container: f.wshard: corrupt: index of 1000 entries ends at 48064, past the end of the file at 1354"},
		{"inflated entry_count into string table", simple, func(b []byte) []byte { put32(b, 12, 8); return b }, "", ErrCorrupt,
			"container: f.wshard: corrupt: index of 8 entries ends at 448, past the string table at 400"},
		{"entry_count beyond limit", simple, func(b []byte) []byte { put32(b, 12, 0xFFFFFFFF); return b }, "", ErrCorrupt,
			"container: f.wshard: corrupt: entry_count 4294967295 exceeds the limit of 1048576"},
		{"string table past EOF", simple, func(b []byte) []byte { put64(b, 16, 5000); return b }, "", ErrCorrupt,
			"container: f.wshard: corrupt: string table offset 5000 is past the end of the file at 1354"},
		{"data section past EOF", simple, func(b []byte) []byte { put64(b, 24, 1<<40); return b }, "", ErrCorrupt,
			"container: f.wshard: corrupt: data section offset 1099511627776 is past the end of the file at 1354"},
		{"data section before string table", simple, func(b []byte) []byte { put64(b, 24, 399); return b }, "", ErrCorrupt,
			"container: f.wshard: corrupt: data section offset 399 is before the string table at 400"},
		{"schema past EOF", simple, func(b []byte) []byte { put64(b, 32, 1354); return b }, "", ErrCorrupt,
			"container: f.wshard: corrupt: schema offset 1354 is past the end of the file at 1354"},
		{"name length overflows string table", simple, func(b []byte) []byte { put16(b, entryOff(6)+12, 200); return b }, "", ErrCorrupt,
			`container: f.wshard: block "#6": corrupt: name of 200 bytes at string table offset 65 overflows the string table of 112 bytes`},
		{"name offset overflows string table", simple, func(b []byte) []byte { put32(b, entryOff(6)+8, 0xFFFFFFFF); return b }, "", ErrCorrupt,
			`container: f.wshard: block "#6": corrupt: name of 4 bytes at string table offset 4294967295 overflows the string table of 112 bytes`},
		{"empty name", simple, func(b []byte) []byte { put16(b, entryOff(6)+12, 0); return b }, "", ErrCorrupt,
			`container: f.wshard: block "#6": corrupt: name "" is empty or not UTF-8`},
		{"name hash mismatch", simple, func(b []byte) []byte { b[entryOff(5)] ^= 1; return b }, "", ErrChecksum,
			`container: f.wshard: block "reward": checksum mismatch: name hash 0xa6c353320cb8fded in the index, xxHash64 of the name is 0xa6c353320cb8fdec`},
		{"duplicate names", simple, func(b []byte) []byte {
			put32(b, entryOff(6)+8, 59) // "reward"
			put16(b, entryOff(6)+12, 6)
			put64(b, entryOff(6), xxhash.Sum64String("reward"))
			return b
		}, "", ErrCorrupt, `container: f.wshard: block "reward": corrupt: name repeated by entries 5 and 6`},
		{"unknown compression flag", simple, func(b []byte) []byte { put16(b, entryOff(5)+14, 0x0008); return b }, "", ErrDecompress,
			`container: f.wshard: block "reward": decompression failed: unknown entry flags 0x0008`},
		{"compressed without algorithm", simple, func(b []byte) []byte { put16(b, entryOff(5)+14, 0x0001); return b }, "", ErrDecompress,
			`container: f.wshard: block "reward": decompression failed: entry flags 0x0001 say compressed but name no algorithm, and the header default is none`},
		{"algorithm without compressed bit", simple, func(b []byte) []byte { put16(b, entryOff(5)+14, 0x0002); return b }, "", ErrDecompress,
			`container: f.wshard: block "reward": decompression failed: entry flags 0x0002 name an algorithm but not the compressed bit`},
		{"both algorithms", simple, func(b []byte) []byte { put16(b, entryOff(5)+14, 0x0007); return b }, "", ErrDecompress,
			`container: f.wshard: block "reward": decompression failed: entry flags 0x0007 name both zstd and lz4`},
		{"raw sizes disagree", simple, func(b []byte) []byte { put64(b, entryOff(5)+32, 41); return b }, "", ErrCorrupt,
			`container: f.wshard: block "reward": corrupt: uncompressed block with disk size 40 but original size 41`},
		{"offset past EOF", simple, func(b []byte) []byte { put64(b, entryOff(5)+16, 2048); return b }, "", ErrCorrupt,
			`container: f.wshard: block "reward": corrupt: 40 bytes at offset 2048 run past the end of the file at 1354`},
		{"size past EOF", simple, func(b []byte) []byte { put64(b, entryOff(6)+24, 11); put64(b, entryOff(6)+32, 11); return b }, "", ErrCorrupt,
			`container: f.wshard: block "done": corrupt: 11 bytes at offset 1344 run past the end of the file at 1354`},
		{"size overflows uint64", simple, func(b []byte) []byte { put64(b, entryOff(6)+24, 1<<64-1); put64(b, entryOff(6)+32, 1<<64-1); return b }, "", ErrCorrupt,
			`container: f.wshard: block "done": corrupt: 18446744073709551615 bytes at offset 1344 run past the end of the file at 1354`},
		{"offset before data section", simple, func(b []byte) []byte { put64(b, entryOff(5)+16, 448); return b }, "", ErrCorrupt,
			`container: f.wshard: block "reward": corrupt: data offset 448 is before the data section at 512`},
		{"misaligned offset", simple, func(b []byte) []byte { put64(b, entryOff(5)+16, 1281); return b }, "", ErrCorrupt,
			`container: f.wshard: block "reward": corrupt: data offset 1281 is not a multiple of the alignment 64`},
		{"overlapping blocks", simple, func(b []byte) []byte { put64(b, entryOff(5)+16, 1216); return b }, "", ErrCorrupt,
			`container: f.wshard: block "reward": corrupt: bytes 1216..1256 overlap block "action/ctrl" at 1152..1232`},
		{"CRC mismatch", simple, func(b []byte) []byte { b[1280] ^= 0x40; return b }, "reward", ErrChecksum,
			fmt.Sprintf(`container: f.wshard: block "reward": checksum mismatch: CRC32C of the uncompressed bytes is 0x%08x, the index says 0x357b93e0`, flippedRewardCRC())},
		{"zero CRC with the checksums flag", simple, func(b []byte) []byte { put32(b, entryOff(5)+40, 0); return b }, "reward", ErrChecksum,
			`container: f.wshard: block "reward": checksum mismatch: CRC32C of the uncompressed bytes is 0x357b93e0, the index says 0x00000000`},
		{"decompression bomb", "per_block_compressed.wshard", func(b []byte) []byte { put64(b, entryOff(3)+32, 1<<62); return b }, "signal/obs", ErrDecompress,
			`container: f.wshard: block "signal/obs": decompression failed: original size 4611686018427387904 (stored 26) exceeds the limit of 1073741824 bytes`},
		{"zstd frame larger than the index says", "per_block_compressed.wshard", func(b []byte) []byte { put64(b, entryOff(3)+32, 3199); return b }, "signal/obs", ErrDecompress,
			`container: f.wshard: block "signal/obs": decompression failed: zstd: `},
		{"zstd frame garbage", "per_block_compressed.wshard", func(b []byte) []byte { copy(b[0x340:], "GARBAGE!"); return b }, "signal/obs", ErrDecompress,
			`container: f.wshard: block "signal/obs": decompression failed: zstd: `},
		{"lz4 original size impossible", "", func(b []byte) []byte { put64(b, entryOff(0)+32, 100000); return b }, "", ErrDecompress,
			`container: f.wshard: block "signal/lz": decompression failed: original size 100000 cannot come from 12 lz4 bytes (at most 3076)`},
		{"lz4 shorter than the index says", "", func(b []byte) []byte { put64(b, entryOff(0)+32, 18); return b }, "signal/lz", ErrDecompress,
			`container: f.wshard: block "signal/lz": decompression failed: lz4: decoded 17 bytes, the index says 18`},
		{"lz4 garbage", "", func(b []byte) []byte { b[len(b)-12] = 0xFF; return b }, "signal/lz", ErrDecompress,
			`container: f.wshard: block "signal/lz": decompression failed: lz4: `},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b []byte
			if c.file == "" {
				b = handmadeLZ4Container()
			} else {
				b = readGolden(t, c.file)
			}
			b = c.patch(b)
			r, err := open(t, b)
			if c.read != "" {
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				e, ok := r.Lookup(c.read)
				if !ok {
					t.Fatalf("no block %q", c.read)
				}
				_, err = r.ReadBlock(e)
			}
			checkErr(t, err, c.kind, c.want)
		})
	}
}

// checkErr wants an *Error wrapping kind whose message is want, or starts
// with want when want ends in ": " (third-party decoder messages).
func checkErr(t *testing.T, err, kind error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %q", want)
	}
	var ce *Error
	if !errors.As(err, &ce) || !errors.Is(err, kind) {
		t.Fatalf("error %v (%T) is not an *Error wrapping %v", err, err, kind)
	}
	msg := err.Error()
	if want[len(want)-2:] == ": " {
		if len(msg) < len(want) || msg[:len(want)] != want {
			t.Fatalf("error\n %s\nwant prefix\n %s", msg, want)
		}
		return
	}
	if msg != want {
		t.Fatalf("error\n %s\nwant\n %s", msg, want)
	}
}

// flippedRewardCRC is the CRC32C of simple_episode's reward block (1.0,
// 0.5 alternating) with bit 6 of its first byte flipped, computed here from
// the values rather than from the file.
func flippedRewardCRC() uint32 {
	var b []byte
	for i := range 10 {
		v := float32(1)
		if i%2 == 1 {
			v = 0.5
		}
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	b[0] ^= 0x40
	return crc32.Checksum(b, crc32.MakeTable(crc32.Castagnoli))
}

// TestZeroCRCWithoutChecksumsFlag: like the reference reader, a zero CRC is
// not checked when the header does not promise checksums.
func TestZeroCRCWithoutChecksumsFlag(t *testing.T) {
	b := readGolden(t, "simple_episode.wshard")
	put16(b, 6, 0)
	put32(b, entryOff(5)+40, 0)
	r, err := open(t, b)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := r.Lookup("reward")
	if _, err := r.ReadBlock(e); err != nil {
		t.Fatal(err)
	}
	put32(b, entryOff(5)+40, 1) // a non-zero CRC is always checked
	r, _ = open(t, b)
	e, _ = r.Lookup("reward")
	if _, err := r.ReadBlock(e); !errors.Is(err, ErrChecksum) {
		t.Fatalf("non-zero wrong CRC without the flag: %v", err)
	}
}

// TestBombAllocatesNothing: refusing a decompression bomb must not
// allocate its claimed size first.
func TestBombAllocatesNothing(t *testing.T) {
	b := readGolden(t, "per_block_compressed.wshard")
	put64(b, entryOff(3)+32, 1<<40)
	r, err := open(t, b)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := r.Lookup("signal/obs")
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = r.ReadBlock(e)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrDecompress) {
		t.Fatalf("bomb: %v", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Fatalf("refusing the bomb allocated %d bytes", grew)
	}
}

// TestTruncationEveryOffset cuts a file at every length, once as is and
// once with the header's total size patched to the cut length so the
// deeper checks must catch it. Neither may panic or read past the end;
// every cut must be refused as corrupt.
func TestTruncationEveryOffset(t *testing.T) {
	for _, name := range []string{"simple_episode.wshard", "per_block_compressed.wshard", ""} {
		var full []byte
		if name == "" {
			full = handmadeLZ4Container()
		} else {
			full = readGolden(t, name)
		}
		for n := range len(full) {
			cut := bytes.Clone(full[:n])
			for _, patched := range []bool{false, true} {
				if patched && n >= offFileSize+8 {
					put64(cut, offFileSize, uint64(n))
				}
				_, err := open(t, cut)
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s cut at %d (size patched %v): %v", name, n, patched, err)
				}
			}
		}
	}
}

// countingReaderAt counts the bytes read through it.
type countingReaderAt struct {
	r *bytes.Reader
	n atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// TestReadsOnlyTheBlockAsked: reading a reward next to a big camera block
// reads the header, index, string table and the reward, nothing else.
func TestReadsOnlyTheBlockAsked(t *testing.T) {
	w := Writer{Role: RoleWShard, Alignment: 64}
	w.Add(Block{Name: "meta/episode", Data: []byte(`{"length_T":10}`), ContentType: ContentJSON})
	w.Add(Block{Name: "signal/cam0/rgb", Data: make([]byte, 4<<20)})
	w.Add(Block{Name: "reward", Data: make([]byte, 40)})
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	cr := &countingReaderAt{r: bytes.NewReader(b)}
	r, err := NewReader(cr, int64(len(b)), "big.wshard", Limits{})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := r.Lookup("reward")
	if _, err := r.ReadBlock(e); err != nil {
		t.Fatal(err)
	}
	names := len("meta/episode") + len("signal/cam0/rgb") + len("reward")
	strtab := (HeaderSize+3*EntrySize+names+63)/64*64 - (HeaderSize + 3*EntrySize) // string table with its padding
	want := int64(HeaderSize + 3*EntrySize + strtab + 40)
	if got := cr.n.Load(); got != want {
		t.Fatalf("read %d bytes to get the reward, want %d", got, want)
	}

	// A range of the camera block reads that range only; Verify streams the
	// whole block through the CRC.
	cam, _ := r.Lookup("signal/cam0/rgb")
	cr.n.Store(0)
	frame := make([]byte, 1000)
	if err := r.ReadRange(cam, 5000, frame); err != nil {
		t.Fatal(err)
	}
	if got := cr.n.Load(); got != 1000 {
		t.Fatalf("range read of 1000 bytes read %d", got)
	}
	if err := r.Verify(cam); err != nil {
		t.Fatal(err)
	}
	if err := r.ReadRange(cam, 4<<20-10, frame); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("range past the block: %v", err)
	}
	big, err := NewReader(bytes.NewReader(b), int64(len(b)), "big.wshard", Limits{MaxBlockBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := big.ReadBlock(cam); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("4 MiB raw block under a 1 MiB limit: %v", err)
	}
	if err := big.Verify(cam); err != nil {
		t.Fatalf("Verify must stream any size: %v", err)
	}
	b[cam.Offset+4<<20-1] ^= 1
	if err := big.Verify(cam); !errors.Is(err, ErrChecksum) {
		t.Fatalf("Verify of a flipped byte: %v", err)
	}
}

// TestConcurrentReads reads every block of a file from several goroutines
// at once (run with -race).
func TestConcurrentReads(t *testing.T) {
	r := parseGolden(t, "per_block_compressed.wshard")
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(r.Entries()))
	for range 8 {
		wg.Go(func() {
			for _, e := range r.Entries() {
				if _, err := r.ReadBlock(e); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
