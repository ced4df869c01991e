package shard

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// crc32cBitwise is CRC-32C computed one bit at a time from its definition
// (reflected polynomial 0x82F63B78, initial value and final xor
// 0xFFFFFFFF): the reference the table-driven and hardware versions are
// checked against, sharing no code with hash/crc32.
func crc32cBitwise(data []byte) uint32 {
	crc := ^uint32(0)
	for _, b := range data {
		crc ^= uint32(b)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82F63B78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

// TestCRC32C pins the checksum to CRC-32C: its standard check value, and
// hash/crc32's Castagnoli (hardware where the CPU has it) against the
// bitwise definition for lengths around its 8-byte and stream thresholds,
// in one piece and continued across pieces.
func TestCRC32C(t *testing.T) {
	if got := crc32cBitwise([]byte("123456789")); got != 0xE3069283 {
		t.Fatalf("bitwise CRC-32C of 123456789 = 0x%08x, want 0xE3069283", got)
	}
	if got := crc32c(0, []byte("123456789")); got != 0xE3069283 {
		t.Fatalf("crc32c(123456789) = 0x%08x, want 0xE3069283", got)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 7, 8, 9, 63, 64, 65, 167, 168, 169, 1343, 1344, 1345, 4032, 4096, 100000} {
		data := make([]byte, n)
		for k := range data {
			data[k] = byte(rng.UintN(256))
		}
		want := crc32cBitwise(data)
		if got := crc32c(0, data); got != want {
			t.Errorf("%d bytes: crc32c 0x%08x, bitwise 0x%08x", n, got, want)
		}
		cut := n / 3
		if got := crc32c(0, data[:cut], data[cut:2*cut], data[2*cut:]); got != want {
			t.Errorf("%d bytes in three pieces: crc32c 0x%08x, bitwise 0x%08x", n, got, want)
		}
		if got := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli)); got != want {
			t.Errorf("%d bytes: hash/crc32 0x%08x, bitwise 0x%08x", n, got, want)
		}
	}
}

// TestVerifySample flips one byte in each section of one sample of the
// golden shards: VerifySample refuses that sample, naming it and both CRCs,
// and accepts the other; Parse does not look at sample bytes.
func TestVerifySample(t *testing.T) {
	// Golden f32 (golden_test.go): images of 72 bytes at 80, boxes of 32 at
	// 224, mask of 8 at 288, records of 88 at 328, extras of 8 at 504. The
	// expected CRCs were computed outside Go (Python's crc32c package) over
	// the flipped bytes.
	f32 := readGolden(t, "f32")
	tests := []struct {
		name   string
		golden []byte
		off    int
		sample int
		want   string
	}{
		{"f32 image", f32, 80 + 72 + 5, 1, "sample 1: crc32c 0x870b792b, the checksum table says 0x72039558"},
		{"f32 boxes", f32, 224 + 3, 0, "sample 0: crc32c 0x53ab6050, the checksum table says 0x04d9c1a7"},
		{"f32 mask", f32, 288 + 8 + 7, 1, "sample 1: crc32c 0x0fd235a3, the checksum table says 0x72039558"},
		{"f32 record frame_id", f32, 328 + 8, 0, "sample 0: crc32c 0x75852497, the checksum table says 0x04d9c1a7"},
		{"f32 record class_index", f32, 328 + 88 + 80, 1, "sample 1: crc32c 0x6425bde7, the checksum table says 0x72039558"},
		{"f32 extras", f32, 504 + 8 + 1, 1, "sample 1: crc32c 0xee586ffe, the checksum table says 0x72039558"},
		// Golden f16: records of 96 bytes at 240 end in 4 padding bytes,
		// which the CRC covers too.
		{"f16 record padding", goldenF16(t), 240 + 92, 0, "sample 0: crc32c 0xe86a4532, the checksum table says 0x010ef40f"},
		// Golden u8: images of 9 bytes at 80.
		{"u8 image", readGolden(t, "u8"), 80 + 8, 0, "sample 0: crc32c 0x4baf88d2, the checksum table says 0x6d8b2ae6"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(tc.golden)
			b[tc.off] ^= 0x10
			r := mustParse(t, b)
			for i := range r.Len() {
				err := r.VerifySample(i, nil)
				if i != tc.sample {
					if err != nil {
						t.Errorf("sample %d: %v, want nil (the flip is in sample %d)", i, err, tc.sample)
					}
					continue
				}
				if !errors.Is(err, ErrCorrupt) || err.Error() != "shard: corrupt: "+tc.want {
					t.Errorf("VerifySample(%d) = %v, want %q", i, err, "shard: corrupt: "+tc.want)
				}
				want, _ := r.SampleChecksum(i)
				if got := r.ComputeSampleChecksum(i, nil); got == want {
					t.Errorf("ComputeSampleChecksum(%d) = table value 0x%08x after a flip", i, got)
				}
			}
		})
	}
}

// TestVerifySampleCopy checks the image a caller copied out of the file
// (ImageSpan) instead of the shard's: a flip in the copy is refused, a
// faithful copy of a damaged shard is refused too.
func TestVerifySampleCopy(t *testing.T) {
	golden := goldenF16(t)
	r := mustParse(t, golden)
	img := bytes.Clone(r.Image(1))
	if err := r.VerifySample(1, img); err != nil {
		t.Fatalf("faithful copy: %v", err)
	}
	img[0] ^= 1
	if err := r.VerifySample(1, img); !errors.Is(err, ErrCorrupt) {
		t.Errorf("flipped copy: %v, want ErrCorrupt", err)
	}
	damaged := bytes.Clone(golden)
	damaged[116] ^= 1 // sample 1's first image byte
	d := mustParse(t, damaged)
	if err := d.VerifySample(1, bytes.Clone(d.Image(1))); !errors.Is(err, ErrCorrupt) {
		t.Errorf("copy of a damaged sample: %v, want ErrCorrupt", err)
	}
}

// TestUncheckedShard reads a shard without the checksum section, as older
// warehouses hold: it parses, every sample reads and VerifySample passes
// everything (nothing to check against), and its bytes are the checked
// shard's up to the checksum section.
func TestUncheckedShard(t *testing.T) {
	for _, name := range []string{"f16", "f32", "u8"} {
		t.Run(name, func(t *testing.T) {
			golden := readGolden(t, name)
			b := withoutChecksums(t, golden)
			r := mustParse(t, b)
			if r.HasSampleChecksums() || r.Header().ChecksumOffset != 0 {
				t.Fatalf("HasSampleChecksums %v, checksum_offset %d", r.HasSampleChecksums(), r.Header().ChecksumOffset)
			}
			if int64(len(b)) != r.Layout().FileSizeWithoutChecksums(r.Len()) {
				t.Errorf("%d bytes, FileSizeWithoutChecksums %d", len(b), r.Layout().FileSizeWithoutChecksums(r.Len()))
			}
			checked := mustParse(t, golden)
			for i := range r.Len() {
				if _, ok := r.SampleChecksum(i); ok {
					t.Errorf("sample %d: SampleChecksum ok without a table", i)
				}
				if err := r.VerifySample(i, nil); err != nil {
					t.Errorf("sample %d: %v", i, err)
				}
				if !bytes.Equal(r.Image(i), checked.Image(i)) || r.Meta(i) != checked.Meta(i) {
					t.Errorf("sample %d reads differently without the table", i)
				}
			}
			if err := r.Check(); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestFoldConstants checks foldConst against the published constants of
// the IEEE polynomial (the Intel paper's k1-k5, as hash/crc32's amd64 code
// has them) and the CRC-32C ones (k1, k2 of the same paper's method, as
// the Linux kernel's crc32c-pcl-intel has them).
func TestFoldConstants(t *testing.T) {
	for _, tc := range []struct {
		poly uint32
		e    uint
		want uint64
	}{
		{crc32.IEEE, 544, 0x154442bd4},
		{crc32.IEEE, 480, 0x1c6e41596},
		{crc32.IEEE, 160, 0x1751997d0},
		{crc32.IEEE, 96, 0x0ccaa009e},
		{crc32.IEEE, 64, 0x163cd6124},
		{crc32.Castagnoli, 544, 0x740eef02},
		{crc32.Castagnoli, 480, 0x9e4addf8},
	} {
		if got := foldConst(tc.poly, tc.e); got != tc.want {
			t.Errorf("foldConst(0x%08x, %d) = 0x%x, want 0x%x", tc.poly, tc.e, got, tc.want)
		}
	}
}

// TestCRC32CFold compares crc32c with hash/crc32 around the fold's
// thresholds and block multiples, at every alignment of the start, from
// random and extreme registers, in one piece and continued across pieces.
// Where the CPU has no fold (foldAvailable false) both sides are hash/crc32
// and the test says so.
func TestCRC32CFold(t *testing.T) {
	if !foldAvailable {
		t.Log("no AVX-512 VPCLMULQDQ here: crc32c is hash/crc32 throughout")
	}
	rng := rand.New(rand.NewPCG(7, 8))
	buf := make([]byte, 1<<20+64)
	for k := range buf {
		buf[k] = byte(rng.UintN(256))
	}
	lengths := []int{foldChunk - 1, foldChunk, foldChunk + 1, 2*foldChunk - 1, 2 * foldChunk, 3*foldChunk + 5, 4096, 442368, 1 << 20}
	for range 40 {
		lengths = append(lengths, foldChunk+int(rng.UintN(200000)))
	}
	table := crc32.MakeTable(crc32.Castagnoli)
	for _, n := range lengths {
		for _, align := range []int{0, 1, 7, 8, 15, 33, 63} {
			data := buf[align : align+n]
			for _, init := range []uint32{0, 0xFFFFFFFF, rng.Uint32()} {
				want := crc32.Update(init, table, data)
				if got := crc32c(init, data); got != want {
					t.Fatalf("%d bytes at +%d from 0x%08x: crc32c 0x%08x, hash/crc32 0x%08x", n, align, init, got, want)
				}
			}
		}
		cut := n / 2
		if got, want := crc32c(0, buf[:cut], buf[cut:n]), crc32.Checksum(buf[:n], table); got != want {
			t.Fatalf("%d bytes in two pieces: 0x%08x, want 0x%08x", n, got, want)
		}
	}
	// All zeros and all ones: no carry-less product may lose a bit.
	for _, fill := range []byte{0, 0xFF} {
		data := bytes.Repeat([]byte{fill}, 5000)
		if got, want := crc32c(0, data), crc32cBitwise(data); got != want {
			t.Fatalf("5000 bytes of 0x%02x: 0x%08x, bitwise 0x%08x", fill, got, want)
		}
	}
}

// BenchmarkCRC32C: crc32c (the fold where the CPU has it) against
// hash/crc32 on a letterboxed 384x384 u8 image (442,368 bytes) and on 4 KiB.
func BenchmarkCRC32C(b *testing.B) {
	table := crc32.MakeTable(crc32.Castagnoli)
	for _, n := range []int{4096, 442368} {
		data := make([]byte, n)
		for k := range data {
			data[k] = byte(k * 7)
		}
		b.Run(fmt.Sprintf("crc32c/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				crc32c(0, data)
			}
		})
		b.Run(fmt.Sprintf("hash-crc32/%d", n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				crc32.Checksum(data, table)
			}
		})
	}
}

// TestCopyCRC32C compares CopyCRC32C with copy and hash/crc32, and Copy
// with copy: lengths around the fold's minimum and its 128-byte steps,
// alignments of source and destination, random and extreme registers,
// regular stores and stores past the caches; the destination outside the
// copy stays untouched.
func TestCopyCRC32C(t *testing.T) {
	if !foldAvailable {
		t.Log("no AVX-512 VPCLMULQDQ here: CopyCRC32C copies and runs hash/crc32 a chunk at a time")
	}
	rng := rand.New(rand.NewPCG(9, 10))
	src := make([]byte, 1<<20+64)
	for k := range src {
		src[k] = byte(rng.UintN(256))
	}
	dst := make([]byte, len(src)+128)
	lengths := []int{0, 1, 127, 128, 129, copyFoldMin - 1, copyFoldMin, copyFoldMin + 1, copyFoldMin + 127, copyFoldMin + 128,
		copyChunk - 1, copyChunk, copyChunk + 1, 442368, 1 << 20}
	for range 40 {
		lengths = append(lengths, int(rng.UintN(300000)))
	}
	table := crc32.MakeTable(crc32.Castagnoli)
	for _, n := range lengths {
		for _, align := range [][2]int{{0, 0}, {1, 0}, {0, 1}, {7, 33}, {15, 16}, {63, 5}} {
			s := src[align[0] : align[0]+n]
			for k, init := range []uint32{0, 0xFFFFFFFF, rng.Uint32()} {
				stream := k != 1
				for k := range dst {
					dst[k] = 0xA5
				}
				d := dst[align[1]:]
				want := crc32.Update(init, table, s)
				if got := CopyCRC32C(init, d, s, stream); got != want {
					t.Fatalf("%d bytes, src +%d, dst +%d, from 0x%08x, stream %v: 0x%08x, hash/crc32 0x%08x", n, align[0], align[1], init, stream, got, want)
				}
				if !bytes.Equal(d[:n], s) {
					t.Fatalf("%d bytes, src +%d, dst +%d: the copy differs", n, align[0], align[1])
				}
				for k := range dst {
					if (k < align[1] || k >= align[1]+n) && dst[k] != 0xA5 {
						t.Fatalf("%d bytes, dst +%d: byte %d outside the copy written", n, align[1], k)
					}
				}
				// Copy, the same copy without the CRC.
				for k := range dst {
					dst[k] = 0x5A
				}
				Copy(d, s, stream)
				if !bytes.Equal(d[:n], s) {
					t.Fatalf("Copy of %d bytes, src +%d, dst +%d, stream %v: the copy differs", n, align[0], align[1], stream)
				}
				for k := range dst {
					if (k < align[1] || k >= align[1]+n) && dst[k] != 0x5A {
						t.Fatalf("Copy of %d bytes, dst +%d: byte %d outside the copy written", n, align[1], k)
					}
				}
			}
		}
	}
	for _, fill := range []byte{0, 0xFF} {
		s := bytes.Repeat([]byte{fill}, 5000)
		if got, want := CopyCRC32C(0, make([]byte, 5000), s, false), crc32cBitwise(s); got != want {
			t.Fatalf("5000 bytes of 0x%02x: 0x%08x, bitwise 0x%08x", fill, got, want)
		}
	}
}

// BenchmarkCopyCRC32C: a 384x384 u8 image (442,368 bytes) copied and
// checked in one pass (CopyCRC32C, regular stores and stores past the
// caches), against copy then crc32c and copy alone, from sources that rotate through 256 MiB so that every copy reads
// memory, not a cache, as a first read of a warehouse sample does, into
// the rows of a batch of 32 in turn.
func BenchmarkCopyCRC32C(b *testing.B) {
	const n = 442368
	srcs := make([][]byte, (256<<20)/n)
	for k := range srcs {
		srcs[k] = make([]byte, n)
		for j := range srcs[k] {
			srcs[k][j] = byte(j*7 + k)
		}
	}
	batch := make([]byte, 32*n)
	run := func(name string, f func(dst, src []byte)) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(n)
			k := 0
			for b.Loop() {
				row := k % 32
				f(batch[row*n:(row+1)*n], srcs[k%len(srcs)])
				k++
			}
		})
	}
	run("copy", func(dst, src []byte) { copy(dst, src) })
	run("copy-then-crc32c", func(dst, src []byte) { copy(dst, src); crc32c(0, dst) })
	run("CopyCRC32C", func(dst, src []byte) { CopyCRC32C(0, dst, src, false) })
	run("CopyCRC32C-stream", func(dst, src []byte) { CopyCRC32C(0, dst, src, true) })
	run("Copy-stream", func(dst, src []byte) { Copy(dst, src, true) })
}
