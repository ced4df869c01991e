package shard

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden/*.twh and the FuzzParse seed corpus from the Writer's output")

// goldenCase is a tiny shard whose every byte is also spelled out by hand in
// want, independently of the Writer.
type goldenCase struct {
	name    string
	layout  Layout
	samples []Sample
	want    func() []byte
}

// The two samples shared by both golden shards. Box coordinates 0.1..0.4
// are not representable in binary16 and check its rounding.
func goldenSamples(imageBytes int, extras [2][]float32) []Sample {
	img0 := make([]byte, imageBytes)
	img1 := make([]byte, imageBytes)
	for k := range imageBytes {
		img0[k] = byte(k)
		img1[k] = byte(0xF0 - k)
	}
	return []Sample{{
		Image:      img0,
		Boxes:      [][4]float32{{0.25, 0.5, 0.75, 1}, {0, 0.125, 0.5, 0.625}},
		ClassIndex: []int32{3, 0},
		Meta: Meta{SourceIndex: 1, FrameID: 42, InputSeq: 7, UnixTimeNs: 1700000000123456789, SimTime: 12.5,
			SrcWidth: 640, SrcHeight: 480, ResizedWidth: 3, ResizedHeight: 2, PadX: 0, PadY: 0,
			ScaleX: 0.5, ScaleY: 0.25, BoxesDropped: 1},
		Extras: extras[0],
	}, {
		Image:      img1,
		Boxes:      [][4]float32{{0.1, 0.2, 0.3, 0.4}},
		ClassIndex: []int32{7},
		Meta: Meta{SourceIndex: 0, FrameID: 43, InputSeq: 9, UnixTimeNs: -5, SimTime: -0.75,
			SrcWidth: 8, SrcHeight: 4, ResizedWidth: 3, ResizedHeight: 1, PadX: 0, PadY: 1,
			ScaleX: 0.375, ScaleY: 0.375, BoxesDropped: 0},
		Extras: extras[1],
	}}
}

// byteBuilder builds expected little-endian bytes field by field.
type byteBuilder struct{ b []byte }

func (e *byteBuilder) str(s string) { e.b = append(e.b, s...) }
func (e *byteBuilder) u16(v uint16) { e.b = binary.LittleEndian.AppendUint16(e.b, v) }
func (e *byteBuilder) u32(v uint32) { e.b = binary.LittleEndian.AppendUint32(e.b, v) }
func (e *byteBuilder) i32(v int32)  { e.u32(uint32(v)) }
func (e *byteBuilder) u64(v uint64) { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *byteBuilder) i64(v int64)  { e.u64(uint64(v)) }
func (e *byteBuilder) zeros(n int)  { e.b = append(e.b, make([]byte, n)...) }
func (e *byteBuilder) raw(p []byte) { e.b = append(e.b, p...) }
func (e *byteBuilder) u16s(v ...int) {
	for _, x := range v {
		e.u16(uint16(x))
	}
}
func (e *byteBuilder) u32s(v ...uint32) {
	for _, x := range v {
		e.u32(x)
	}
}

// imagePattern is the image bytes of goldenSamples, spelled out again.
func (e *byteBuilder) imagePattern(n int) {
	for k := range n {
		e.b = append(e.b, byte(k))
	}
	for k := range n {
		e.b = append(e.b, byte(0xF0-k))
	}
}

// record0 and record1 are the fixed 80 bytes of the two golden records.
func (e *byteBuilder) record0() {
	e.u32(1)                   // source_index
	e.u32(0)                   // flags
	e.u64(42)                  // frame_id
	e.u64(7)                   // input_seq
	e.i64(1700000000123456789) // unix_time_ns
	e.u64(0x4029000000000000)  // sim_time 12.5
	e.u32s(640, 480, 3, 2, 0, 0)
	e.u32s(0x3F000000, 0x3E800000) // scale 0.5, 0.25
	e.u32(2)                       // box_count
	e.u32(1)                       // boxes_dropped
}

func (e *byteBuilder) record1() {
	e.u32(0)
	e.u32(0)
	e.u64(43)
	e.u64(9)
	e.i64(-5)
	e.u64(0xBFE8000000000000) // sim_time -0.75
	e.u32s(8, 4, 3, 1, 0, 1)
	e.u32s(0x3EC00000, 0x3EC00000) // scale 0.375
	e.u32(1)
	e.u32(0)
}

// checksumSection is the checksum section of a golden shard built field by
// field: its two sample CRCs and the table's own CRC are hex literals
// computed outside Go (Python's crc32c package and a bitwise CRC-32C over
// the bytes spelled out above them), and TestGolden checks them again
// with crc32cBitwise.
func (e *byteBuilder) checksumSection(crc0, crc1, table uint32) {
	e.str("TWCK")
	e.u32(1) // checksum_version
	e.u64(2) // samples
	e.u32(crc0)
	e.u32(crc1)
	e.u32(table) // table_crc32c over the 24 bytes before it
}

// wantHeader is the 80-byte header built field by field.
func wantHeader(version, dtype, height, maxBoxes uint32, boxesOffset, maskOffset, metaOffset, checksumOffset uint64) []byte {
	var e byteBuilder
	e.str("TWH1")
	e.u32(version)  // shard_version
	e.u32(dtype)    // dtype
	e.u32(0)        // endianness
	e.u32(3)        // width
	e.u32(height)   // height
	e.u32(3)        // channels
	e.u32(maxBoxes) // max_boxes
	e.u64(2)        // samples
	e.u64(80)       // image_offset
	e.u64(boxesOffset)
	e.u64(maskOffset)
	e.u64(metaOffset)
	e.u64(checksumOffset)
	return e.b
}

var goldenCases = []goldenCase{{
	// 3x2x3 f16 images of 36 bytes, max_boxes 3: boxes 24 and mask 6 bytes
	// per sample, 4 bytes of padding before the meta section, records of
	// 80+12 -> 96 bytes ending at 432, where the checksum section starts
	// (a multiple of 8 already): 16 + 2*4 + 4 bytes, end 460. Sample 0's
	// CRC covers bytes 80..116, 152..176, 200..206 and 240..336; sample
	// 1's 116..152, 176..200, 206..212 and 336..432.
	name:    "f16",
	layout:  Layout{DType: F16, Width: 3, Height: 2, Channels: 3, MaxBoxes: 3},
	samples: goldenSamples(36, [2][]float32{}),
	want: func() []byte {
		var e byteBuilder
		e.raw(wantHeader(3, 1, 2, 3, 152, 200, 216, 432)) // shard_version 3: meta and checksums
		e.imagePattern(36)
		e.u16s(0x3400, 0x3800, 0x3A00, 0x3C00, 0x0000, 0x3000, 0x3800, 0x3900, 0, 0, 0, 0)
		e.u16s(0x2E66, 0x3266, 0x34CD, 0x3666, 0, 0, 0, 0, 0, 0, 0, 0)
		e.u16s(0x3C00, 0x3C00, 0, 0x3C00, 0, 0) // mask
		e.zeros(4)                              // 212 -> 216
		e.str("TWMD")
		e.u32s(1, 96, 0)
		e.u64(2)
		e.record0()
		e.i32(3)
		e.i32(0)
		e.i32(-1)
		e.zeros(4)
		e.record1()
		e.i32(7)
		e.i32(-1)
		e.i32(-1)
		e.zeros(4)
		e.checksumSection(0x010EF40F, 0x31225FB1, 0x704CE348)
		return e.b
	},
}, {
	// 3x2x3 f32 images of 72 bytes, max_boxes 2, two extras: no padding,
	// records of exactly 88 bytes, 16 bytes of extras ending at 520, the
	// checksum section at 520..548. Sample 0's CRC covers 80..152,
	// 224..256, 288..296, 328..416 and 504..512 (its extras).
	name:    "f32",
	layout:  Layout{DType: F32, Width: 3, Height: 2, Channels: 3, MaxBoxes: 2, ExtraF32: 2},
	samples: goldenSamples(72, [2][]float32{{1.5, -2}, {0, 3.25}}),
	want: func() []byte {
		var e byteBuilder
		e.raw(wantHeader(3, 0, 2, 2, 224, 288, 304, 520)) // shard_version 3: meta and checksums
		e.imagePattern(72)
		e.u32s(0x3E800000, 0x3F000000, 0x3F400000, 0x3F800000, 0, 0x3E000000, 0x3F000000, 0x3F200000)
		e.u32s(0x3DCCCCCD, 0x3E4CCCCD, 0x3E99999A, 0x3ECCCCCD, 0, 0, 0, 0)
		e.u32s(0x3F800000, 0x3F800000, 0x3F800000, 0) // mask
		e.str("TWMD")
		e.u32s(1, 88, 2)
		e.u64(2)
		e.record0()
		e.i32(3)
		e.i32(0)
		e.record1()
		e.i32(7)
		e.i32(-1)
		e.u32s(0x3FC00000, 0xC0000000, 0, 0x40500000) // extras 1.5 -2 0 3.25
		e.checksumSection(0x04D9C1A7, 0x72039558, 0xEBD430BD)
		return e.b
	},
}, {
	// 3x1x3 u8 images of 9 bytes: 80+18 = 98, 6 bytes of padding so the
	// f32 boxes start at 104; max_boxes 2: boxes 32 and mask 8 bytes per
	// sample (f32), mask ends at 184 where the meta section starts, records
	// of 88 bytes ending at 384, the checksum section at 384..412. The
	// padding after the images belongs to no sample: sample 0's CRC covers
	// 80..89, 104..136, 168..176 and 208..296.
	name:    "u8",
	layout:  Layout{DType: U8, Width: 3, Height: 1, Channels: 3, MaxBoxes: 2},
	samples: goldenSamples(9, [2][]float32{}),
	want: func() []byte {
		var e byteBuilder
		e.raw(wantHeader(4, 2, 1, 2, 104, 168, 184, 384)) // shard_version 4: U8
		e.imagePattern(9)
		e.zeros(6) // 98 -> 104
		e.u32s(0x3E800000, 0x3F000000, 0x3F400000, 0x3F800000, 0, 0x3E000000, 0x3F000000, 0x3F200000)
		e.u32s(0x3DCCCCCD, 0x3E4CCCCD, 0x3E99999A, 0x3ECCCCCD, 0, 0, 0, 0)
		e.u32s(0x3F800000, 0x3F800000, 0x3F800000, 0) // mask
		e.str("TWMD")
		e.u32s(1, 88, 0)
		e.u64(2)
		e.record0()
		e.i32(3)
		e.i32(0)
		e.record1()
		e.i32(7)
		e.i32(-1)
		e.checksumSection(0x6D8B2AE6, 0xBFF32501, 0x73746672)
		return e.b
	},
}}

// TestGolden checks the Writer's bytes against a hand-built file and against
// testdata/golden; -update rewrites the golden files and fuzz seeds.
func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			got, res := writeShard(t, tc.layout, len(tc.samples), tc.samples)
			want := tc.want()
			if !bytes.Equal(got, want) {
				t.Fatalf("writer output differs from the hand-built shard at byte %d\n got %x\nwant %x", firstDiff(got, want), got, want)
			}
			if res.Samples != 2 || res.Bytes != int64(len(want)) || res.SHA256 != sha256.Sum256(want) {
				t.Errorf("Result = %d samples, %d bytes, %x; want 2, %d, %x", res.Samples, res.Bytes, res.SHA256, len(want), sha256.Sum256(want))
			}
			if n := tc.layout.FileSize(2); n != int64(len(want)) {
				t.Errorf("FileSize(2) = %d, want %d", n, len(want))
			}
			checkGoldenCRCs(t, want)
			path := filepath.Join("testdata", "golden", tc.name+".twh")
			if *update {
				writeTestdata(t, path, got)
				writeFuzzSeed(t, "golden-"+tc.name, got)
				writeFuzzSeed(t, "golden-"+tc.name+"-unchecked", withoutChecksums(t, got))
				writeFuzzSeed(t, "golden-"+tc.name+"-original", withoutMeta(t, got))
			}
			golden, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create)", err)
			}
			if !bytes.Equal(got, golden) {
				t.Errorf("writer output differs from %s at byte %d", path, firstDiff(got, golden))
			}
		})
	}
}

// checkGoldenCRCs recomputes the checksum section's literals of the
// hand-built shard b with crc32cBitwise, which shares no code with
// hash/crc32: each sample's CRC over its sections' bytes, and the table's.
func checkGoldenCRCs(t *testing.T, b []byte) {
	t.Helper()
	r := mustParse(t, b)
	if !r.HasSampleChecksums() {
		t.Fatal("golden shard without a checksum section")
	}
	for i := range r.Len() {
		var data []byte
		data = append(data, r.Image(i)...)
		data = append(data, r.BoxesRaw(i)...)
		data = append(data, r.MaskRaw(i)...)
		data = append(data, r.record(i)...)
		data = append(data, r.section(r.extrasOffset, r.extraBytes, i)...)
		if got, _ := r.SampleChecksum(i); got != crc32cBitwise(data) {
			t.Errorf("sample %d: table says 0x%08x, bitwise CRC-32C of its %d bytes is 0x%08x", i, got, len(data), crc32cBitwise(data))
		}
	}
	start := r.Header().ChecksumOffset
	table := b[start : len(b)-4]
	if got, want := crc32cBitwise(table), binary.LittleEndian.Uint32(b[len(b)-4:]); got != want {
		t.Errorf("table_crc32c 0x%08x, bitwise CRC-32C of the table 0x%08x", want, got)
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func writeTestdata(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeFuzzSeed stores b as a seed of FuzzParse in the go test fuzz corpus
// format.
func writeFuzzSeed(t *testing.T, name string, b []byte) {
	t.Helper()
	path := filepath.Join("testdata", "fuzz", "FuzzParse", name)
	writeTestdata(t, path, fmt.Appendf(nil, "go test fuzz v1\n[]byte(%q)\n", b))
}
