package shard

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"testing"
	"unsafe"
)

// goldenF16 returns a fresh copy of the golden f16 shard. Its sections, all
// worked out in golden_test.go: images 80..152, boxes 152..200 (rows of 8
// bytes: sample 0 at 152, 160, 168, sample 1 at 176, 184, 192), mask
// 200..212 (sample 0 at 200, 202, 204, sample 1 at 206, 208, 210), padding
// 212..216, meta header 216..240, records of 96 bytes at 240 and 336
// (box_count at +72, class_index at +80) ending at 432, checksum header
// 432..448 (magic, checksum_version at 436, samples at 440), CRCs of
// samples 0 and 1 at 448 and 452, table_crc32c at 456, end 460.
func goldenF16(t testing.TB) []byte {
	t.Helper()
	return readGolden(t, "f16")
}

// readGolden returns a fresh copy of testdata/golden/<name>.twh.
func readGolden(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", name+".twh"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func put32(off int, v uint32) func([]byte) []byte {
	return func(b []byte) []byte { le.PutUint32(b[off:], v); return b }
}

func put64(off int, v uint64) func([]byte) []byte {
	return func(b []byte) []byte { le.PutUint64(b[off:], v); return b }
}

func put16(off int, v uint16) func([]byte) []byte {
	return func(b []byte) []byte { le.PutUint16(b[off:], v); return b }
}

func truncate(n int) func([]byte) []byte {
	return func(b []byte) []byte { return b[:n] }
}

// legacy sets shard_version to 1, as every shard written before versions
// named features carries (the legacy rule).
func legacy(b []byte) []byte { return asLegacy(b) }

// cutChecksums cuts the checksum section off and sets shard_version to v
// (withoutChecksumsAs).
func cutChecksums(t testing.TB, v Version) func([]byte) []byte {
	return func(b []byte) []byte { return withoutChecksumsAs(t, b, v) }
}

func chain(fs ...func([]byte) []byte) func([]byte) []byte {
	return func(b []byte) []byte {
		for _, f := range fs {
			b = f(b)
		}
		return b
	}
}

// TestCorruptedShard corrupts the golden f16 shard in one way per case and
// checks Parse's exact error.
func TestCorruptedShard(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func([]byte) []byte
		want    string
	}{
		{"empty", truncate(0), "file is 0 bytes, shorter than the 80-byte header"},
		{"truncated in the header", truncate(79), "file is 79 bytes, shorter than the 80-byte header"},
		{"header only", truncate(80), "file is 80 bytes, too short for the meta header at 216"},
		{"truncated in the images", truncate(100), "file is 100 bytes, too short for the meta header at 216"},
		{"truncated in the meta header", truncate(239), "file is 239 bytes, too short for the meta header at 216"},
		{"truncated in the records", truncate(300), "file is 300 bytes, too short for the checksum header at 432"},
		{"truncated in the checksum header", truncate(440), "file is 440 bytes, too short for the checksum header at 432"},
		{"truncated in the checksum table", truncate(452), "file is 452 bytes, header implies 460"},
		{"truncated by one byte", truncate(459), "file is 459 bytes, header implies 460"},
		{"trailing byte", func(b []byte) []byte { return append(b, 0) }, "file is 461 bytes, header implies 460"},
		{"bad magic", func(b []byte) []byte { b[3] = '2'; return b }, `bad magic "TWH2", want "TWH1"`},
		{"version 0", put32(4, 0), "unsupported shard_version 0, want 1..5"},
		{"version 5 f16", put32(4, 5), "shard_version 5 has compact images, dtype 1 (F16), want 2 (U8)"},
		{"version 6", put32(4, 6), "unsupported shard_version 6, want 1..5"},
		{"version 99", put32(4, 99), "unsupported shard_version 99, want 1..5"},
		// From shard_version 2 on the version says which sections there are
		// (the golden f16 shard is a shard_version 3 one); in shard_version
		// 1 the offsets do (the legacy rule), and the cases marked legacy
		// check that those shards are read as before versions named
		// features.
		{"version 2 with a checksum section", put32(4, 2), "shard_version 2 has no checksum section, checksum_offset is 432"},
		{"version 2 without a meta section", chain(cutChecksums(t, 2), put64(64, 0)), "shard_version 2 has a meta section, meta_offset is 0"},
		{"version 3 without a meta section", put64(64, 0), "shard_version 3 has a meta section, meta_offset is 0"},
		{"version 4 without a meta section", chain(put32(4, 4), put64(64, 0)), "shard_version 4 has a meta section, meta_offset is 0"},
		{"version 3 without a checksum section", put64(72, 0), "shard_version 3 has a checksum section, checksum_offset is 0"},
		{"version 4 without a checksum section", chain(put32(4, 4), put64(72, 0)), "shard_version 4 has a checksum section, checksum_offset is 0"},
		{"version 3 with dtype U8", put32(8, 2), "shard_version 3 has no dtype 2 (U8), shard_version 4 adds it"},
		{"version 2 with dtype U8", chain(cutChecksums(t, 2), put32(8, 2)), "shard_version 2 has no dtype 2 (U8), shard_version 4 adds it"},
		// dtype 2 makes the images 18 bytes of u8: the boxes would start at
		// 80+2*18 = 116 rounded up to 120. The version allows U8 in both.
		{"legacy with dtype U8", chain(legacy, put32(8, 2)), "boxes_offset 152, want 120"},
		{"version 4 with dtype U8", chain(put32(4, 4), put32(8, 2)), "boxes_offset 152, want 120"},
		{"dtype 7", put32(8, 7), "unknown dtype 7"},
		{"big-endian", put32(12, 1), "big-endian shards unsupported"},
		{"endianness 2", put32(12, 2), "unknown endianness 2"},
		{"width 0", put32(16, 0), "width 0 out of range [1, 16384]"},
		{"height too large", put32(20, 16385), "height 16385 out of range [1, 16384]"},
		{"channels 5", put32(24, 5), "channels 5 out of range [1, 4]"},
		{"max_boxes too large", put32(28, 65536), "max_boxes 65536 out of range [0, 65535]"},
		{"max_boxes 2^32-1", put32(28, math.MaxUint32), "max_boxes 4294967295 out of range [0, 65535]"},
		{"samples 0", put64(32, 0), "samples is 0"},
		{"samples too many", put64(32, 3), "boxes_offset 152, want 188"},
		{"samples too few", put64(32, 1), "boxes_offset 152, want 116"},
		// Offsets consistent with the lie, no meta or checksum section
		// (legacy): only the size gives it away. 80+3*36 = 188, +3*24 = 260,
		// +3*6 = 278.
		{"legacy, samples too many, offsets agree", chain(legacy, put64(32, 3), put64(48, 188), put64(56, 260), put64(64, 0), put64(72, 0)),
			"file is 460 bytes, header implies 278"},
		// 80+36 = 116, +24 = 140, +6 = 146.
		{"legacy, samples too few, offsets agree", chain(legacy, put64(32, 1), put64(48, 116), put64(56, 140), put64(64, 0), put64(72, 0)),
			"file is 460 bytes, header implies 146"},
		// The same with a checksum section right after the mask (278 -> 280):
		// its header lands in record 0, whose src_width 640 is no magic.
		{"legacy, samples too many, checksum_offset agrees", chain(legacy, put64(32, 3), put64(48, 188), put64(56, 260), put64(64, 0), put64(72, 280)),
			`bad checksum magic "\x80\x02\x00\x00", want "TWCK"`},
		// In shard_version 3 the lie needs a meta section at 280 too: its
		// magic lands in record 0 as well.
		{"samples too many, meta_offset agrees", chain(put64(32, 3), put64(48, 188), put64(56, 260), put64(64, 280)),
			`bad meta magic "\x80\x02\x00\x00", want "TWMD"`},
		{"samples 2^63", put64(32, 1<<63), "samples 9223372036854775808 overflow the file size"},
		{"samples 2^64-1", put64(32, math.MaxUint64), "samples 18446744073709551615 overflow the file size"},
		{"image_offset", put64(40, 88), "image_offset 88, want 80"},
		{"boxes_offset off by one", put64(48, 153), "boxes_offset 153, want 152"},
		{"mask_offset off by one", put64(56, 199), "mask_offset 199, want 200"},
		{"meta_offset unaligned", put64(64, 212), "meta_offset 212, want 216"},
		{"meta_offset past the end", put64(64, 1<<40), "meta_offset 1099511627776, want 216"},
		{"legacy, meta_offset unaligned", chain(legacy, put64(64, 212)), "meta_offset 212, want 0 or 216"},
		{"legacy, meta_offset past the end", chain(legacy, put64(64, 1<<40)), "meta_offset 1099511627776, want 0 or 216"},
		// Without a meta section the checksum section would follow the mask
		// (212 -> 216).
		{"legacy, meta_offset 0 with the meta section present", chain(legacy, put64(64, 0)), "checksum_offset 432, want 0 or 216"},
		{"legacy, meta_offset 0 and checksum_offset 0", chain(legacy, put64(64, 0), put64(72, 0)), "file is 460 bytes, header implies 212"},
		{"checksum_offset", put64(72, 8), "checksum_offset 8, want 432"},
		{"checksum_offset unaligned", put64(72, 436), "checksum_offset 436, want 432"},
		{"checksum_offset past the end", put64(72, 1<<40), "checksum_offset 1099511627776, want 432"},
		{"legacy, checksum_offset", chain(legacy, put64(72, 8)), "checksum_offset 8, want 0 or 432"},
		{"legacy, checksum_offset unaligned", chain(legacy, put64(72, 436)), "checksum_offset 436, want 0 or 432"},
		{"legacy, checksum_offset past the end", chain(legacy, put64(72, 1<<40)), "checksum_offset 1099511627776, want 0 or 432"},
		{"legacy, checksum_offset 0 with the checksum section present", chain(legacy, put64(72, 0)), "file is 460 bytes, header implies 432"},
		{"meta magic", func(b []byte) []byte { b[219] = 'X'; return b }, `bad meta magic "TWMX", want "TWMD"`},
		{"meta_version 0", put32(220, 0), "unsupported meta_version 0, want 1..1"},
		{"meta_version 2", put32(220, 2), "unsupported meta_version 2, want 1..1"},
		{"record_size", put32(224, 92), "record_size 92, want 96"},
		{"extra_f32 too large", put32(228, 65536), "extra_f32 65536 out of range [0, 65535]"},
		// Two samples' extras would end at 440, where the checksums start.
		{"extra_f32 without extras", put32(228, 1), "checksum_offset 432, want 440"},
		{"legacy, extra_f32 without extras", chain(legacy, put32(228, 1)), "checksum_offset 432, want 0 or 440"},
		{"meta samples", put64(232, 3), "meta samples 3, header samples 2"},
		{"checksum magic", func(b []byte) []byte { b[435] = 'X'; return b }, `bad checksum magic "TWCX", want "TWCK"`},
		{"checksum_version 0", put32(436, 0), "unsupported checksum_version 0, want 1..1"},
		{"checksum_version 2", put32(436, 2), "unsupported checksum_version 2, want 1..1"},
		{"checksum samples", put64(440, 3), "checksum samples 3, header samples 2"},
		// The table's own CRC catches a flip in a sample's CRC (computed
		// outside Go, with Python's crc32c package), and a flip in itself.
		{"flipped CRC of sample 0", func(b []byte) []byte { b[449] ^= 1; return b },
			"checksum table crc32c 0x184fcf80, table_crc32c says 0x704ce348"},
		{"flipped table_crc32c", func(b []byte) []byte { b[457] ^= 1; return b },
			"checksum table crc32c 0x704ce348, table_crc32c says 0x704ce248"},
		{"box_count too large", put32(408, 4), "sample 1: box_count 4 exceeds max_boxes 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.corrupt(goldenF16(t))
			_, err := Parse(b)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Parse error = %v, want ErrCorrupt", err)
			}
			if want := "shard: corrupt: " + tc.want; err.Error() != want {
				t.Errorf("Parse error\n got %q\nwant %q", err.Error(), want)
			}
		})
	}
}

// TestVersions reads the golden shards in every version that can hold them
// and checks that the version, or in shard_version 1 the offsets and the
// dtype, decide which sections the Reader sees.
func TestVersions(t *testing.T) {
	tests := []struct {
		name, golden string
		change       func([]byte) []byte
		version      Version
		meta, crcs   bool
	}{
		{"f16 as written", "f16", func(b []byte) []byte { return b }, Version3, true, true},
		{"f32 as written", "f32", func(b []byte) []byte { return b }, Version3, true, true},
		{"u8 as written", "u8", func(b []byte) []byte { return b }, Version4, true, true},
		{"f16 as version 4", "f16", put32(offVersion, 4), Version4, true, true},
		{"f16 as version 2", "f16", cutChecksums(t, Version2), Version2, true, false},
		{"f32 as version 2", "f32", cutChecksums(t, Version2), Version2, true, false},
		// The legacy rule: shards of warehouse-etl/1 to /3 carry 1 whatever
		// they hold.
		{"f16 legacy, warehouse-etl/2 and /3", "f16", legacy, Version1, true, true},
		{"u8 legacy, warehouse-etl/3", "u8", legacy, Version1, true, true},
		{"f32 legacy, warehouse-etl/1", "f32", cutChecksums(t, Version1), Version1, true, false},
		{"u8 legacy without checksums", "u8", cutChecksums(t, Version1), Version1, true, false},
		{"f16 legacy, original layout", "f16", func(b []byte) []byte { return withoutMeta(t, b) }, Version1, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			golden := readGolden(t, tc.golden)
			want := mustParse(t, golden)
			r := mustParse(t, tc.change(readGolden(t, tc.golden)))
			if r.Header().Version != tc.version || r.HasMeta() != tc.meta || r.HasSampleChecksums() != tc.crcs {
				t.Fatalf("version %d, HasMeta %v, HasSampleChecksums %v; want %d, %v, %v",
					r.Header().Version, r.HasMeta(), r.HasSampleChecksums(), tc.version, tc.meta, tc.crcs)
			}
			if r.Layout().DType != want.Layout().DType {
				t.Errorf("dtype %v, want %v", r.Layout().DType, want.Layout().DType)
			}
			for i := range r.Len() {
				if !bytes.Equal(r.Image(i), want.Image(i)) || r.BoxCount(i) != want.BoxCount(i) {
					t.Errorf("sample %d differs from the golden shard's", i)
				}
				if tc.meta && r.Meta(i) != want.Meta(i) {
					t.Errorf("sample %d: Meta %+v, want %+v", i, r.Meta(i), want.Meta(i))
				}
				if err := r.VerifySample(i, nil); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestWriterVersion checks that the Writer writes the lowest version with
// every feature its shard uses.
func TestWriterVersion(t *testing.T) {
	for _, tc := range []struct {
		dtype DType
		want  Version
	}{{F32, Version3}, {F16, Version3}, {U8, Version4}} {
		l := Layout{DType: tc.dtype, Width: 2, Height: 2, Channels: 1, MaxBoxes: 1}
		if got := l.Version(); got != tc.want {
			t.Errorf("%v: Layout.Version() = %d, want %d", tc.dtype, got, tc.want)
		}
		b, _ := writeShard(t, l, 1, []Sample{{Image: make([]byte, l.ImageBytes())}})
		if got := mustParse(t, b).Header().Version; got != tc.want {
			t.Errorf("%v: the Writer wrote shard_version %d, want %d", tc.dtype, got, tc.want)
		}
	}
}

// TestCheck corrupts content that Parse does not look at and checks the
// exact error of Check.
func TestCheck(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func([]byte) []byte
		want    string
	}{
		{"valid", func(b []byte) []byte { return b }, ""},
		{"valid without meta", func(b []byte) []byte { return withoutMeta(t, b) }, ""},
		{"mask 0.5", put16(206, 0x3800), "sample 1: mask[0] is 0.5, want 0 or 1"},
		{"mask 1 after 0", put16(210, 0x3C00), "sample 1: mask[2] is 1 after a 0"},
		{"mask 1 after 0 without meta", func(b []byte) []byte { return put16(210, 0x3C00)(withoutMeta(t, b)) },
			"sample 1: mask[2] is 1 after a 0"},
		{"box_count disagrees with the mask", put32(312, 1), "sample 0: box_count 1, mask has 2 ones"},
		{"box outside [0, 1]", put16(152, 0x3E00), "sample 0: box 0 [1.5 0.5 0.75 1]: coordinate outside [0, 1]"},
		{"box NaN", put16(152, 0x7E00), "sample 0: box 0 [NaN 0.5 0.75 1]: coordinate outside [0, 1]"},
		{"box inverted", put16(160, 0x3A00), "sample 0: box 1 [0.75 0.125 0.5 0.625]: x0 > x1 or y0 > y1"},
		{"padding box not zero", func(b []byte) []byte { b[199] = 1; return b }, "sample 1: padding box 2 is not zero"},
		{"negative class of a real box", put32(324, math.MaxUint32), "sample 0: class_index[1] is -1, want >= 0"},
		{"padding class not -1", put32(424, 0), "sample 1: padding class_index[2] is 0, want -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustParse(t, tc.corrupt(goldenF16(t)))
			err := r.Check()
			want := ""
			if tc.want != "" {
				want = "shard: corrupt: " + tc.want
				if !errors.Is(err, ErrCorrupt) {
					t.Errorf("Check error %v does not wrap ErrCorrupt", err)
				}
			}
			if errString(err) != want {
				t.Errorf("Check error\n got %q\nwant %q", errString(err), want)
			}
		})
	}
}

// TestOriginalLayout reads a shard without a meta section, as the original
// writer made them: boxes come from the mask, metadata is absent.
func TestOriginalLayout(t *testing.T) {
	b := withoutMeta(t, goldenF16(t))
	if len(b) != 212 {
		t.Fatalf("original-layout shard is %d bytes, want 212", len(b))
	}
	r := mustParse(t, b)
	if r.HasMeta() || r.Header().MetaOffset != 0 || r.Layout().ExtraF32 != 0 {
		t.Fatalf("HasMeta %v, header %+v", r.HasMeta(), r.Header())
	}
	wantBoxes := [][][4]float32{
		{{0.25, 0.5, 0.75, 1}, {0, 0.125, 0.5, 0.625}},
		{{0.0999755859375, 0.199951171875, 0.300048828125, 0.39990234375}},
	}
	for i, want := range wantBoxes {
		if got := r.Boxes(i); len(got) != len(want) || (len(got) > 0 && got[0] != want[0]) {
			t.Errorf("sample %d: Boxes %v, want %v", i, got, want)
		}
		if r.BoxCount(i) != len(want) || r.Meta(i) != (Meta{}) || r.ClassIndex(i) != nil || r.Extras(i) != nil {
			t.Errorf("sample %d: BoxCount %d Meta %+v ClassIndex %v Extras %v", i, r.BoxCount(i), r.Meta(i), r.ClassIndex(i), r.Extras(i))
		}
	}
}

// TestOriginalReader reads the golden F16 and F32 shards (shard_version 3)
// as a reader of the original TWH1 layout does, per docs/format/shard.md
// ("What an original-layout reader sees"): the 80-byte header field by
// field, then images, boxes and mask at its offsets, ignoring shard_version,
// meta_offset and checksum_offset. It gets every byte the Reader hands out
// for them; only a reader that insisted on shard_version 1 would refuse.
func TestOriginalReader(t *testing.T) {
	for _, name := range []string{"f16", "f32"} {
		b := readGolden(t, name)
		u32 := func(off int) int { return int(binary.LittleEndian.Uint32(b[off:])) }
		u64 := func(off int) int { return int(binary.LittleEndian.Uint64(b[off:])) }
		if string(b[:4]) != "TWH1" || u32(12) != 0 {
			t.Fatalf("%s: magic %q, endianness %d", name, b[:4], u32(12))
		}
		if v := u32(4); v != 3 {
			t.Errorf("%s: shard_version %d, want 3 (what the Writer writes for %s)", name, v, name)
		}
		elem := map[int]int{0: 4, 1: 2}[u32(8)] // the original's dtypes: 0 f32, 1 f16
		w, h, c, boxes, n := u32(16), u32(20), u32(24), u32(28), u64(32)
		imageOff, boxesOff, maskOff := u64(40), u64(48), u64(56)
		r := mustParse(t, b)
		for i := range n {
			img := b[imageOff+i*c*h*w*elem:][:c*h*w*elem]
			bx := b[boxesOff+i*boxes*4*elem:][:boxes*4*elem]
			mask := b[maskOff+i*boxes*elem:][:boxes*elem]
			if !bytes.Equal(img, r.Image(i)) || !bytes.Equal(bx, r.BoxesRaw(i)) || !bytes.Equal(mask, r.MaskRaw(i)) {
				t.Errorf("%s: sample %d: the original reader's image, boxes or mask differ from the Reader's", name, i)
			}
		}
	}
}

// TestTypedViews checks that ImageF16/ImageF32/Extras alias the shard bytes
// when aligned and decode a copy with the same values when not.
func TestTypedViews(t *testing.T) {
	aligned, err := os.ReadFile(filepath.Join("testdata", "golden", "f32.twh"))
	if err != nil {
		t.Fatal(err)
	}
	r := mustParse(t, aligned)
	img := r.ImageF32(1)
	if unsafe.Pointer(&img[0]) != unsafe.Pointer(&aligned[80+72]) {
		t.Errorf("aligned ImageF32 is a copy, want a view")
	}
	if r.Extras(0)[0] != 1.5 || r.Extras(1)[1] != 3.25 {
		t.Errorf("Extras = %v %v", r.Extras(0), r.Extras(1))
	}

	buf := make([]byte, len(aligned)+1)
	unaligned := buf[1:]
	copy(unaligned, aligned)
	u := mustParse(t, unaligned)
	uimg := u.ImageF32(1)
	if unsafe.Pointer(&uimg[0]) == unsafe.Pointer(&unaligned[80+72]) {
		t.Errorf("unaligned ImageF32 aliases the bytes")
	}
	for k := range img {
		if math.Float32bits(img[k]) != math.Float32bits(uimg[k]) {
			t.Fatalf("ImageF32[%d]: aligned %v, unaligned %v", k, img[k], uimg[k])
		}
	}
	if e := u.Extras(0); e[0] != 1.5 || e[1] != -2 {
		t.Errorf("unaligned Extras(0) = %v", e)
	}

	f16 := goldenF16(t)
	buf16 := make([]byte, len(f16)+1)
	copy(buf16[1:], f16)
	for _, b := range [][]byte{f16, buf16[1:]} {
		// Sample 0's image bytes are 0, 1, 2, ...: element k is 2k | (2k+1)<<8.
		got := mustParse(t, b).ImageF16(0)
		for k, v := range got {
			if want := uint16(2*k) | uint16(2*k+1)<<8; v != want {
				t.Fatalf("ImageF16(0)[%d] = %#x, want %#x", k, v, want)
			}
		}
	}
}

func TestAccessorPanics(t *testing.T) {
	r := mustParse(t, goldenF16(t))
	tests := []struct {
		name string
		call func()
		want string
	}{
		{"index -1", func() { r.Image(-1) }, "shard: sample index -1 out of range [0:2]"},
		{"index Len", func() { r.Meta(2) }, "shard: sample index 2 out of range [0:2]"},
		{"wrong dtype", func() { r.ImageF32(0) }, "shard: ImageF32 on a F16 shard"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer func() {
				if got := recover(); got != tc.want {
					t.Errorf("panic %v, want %q", got, tc.want)
				}
			}()
			tc.call()
		})
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	golden := goldenF16(t)
	path := filepath.Join(dir, "ok.twh")
	if err := os.WriteFile(path, golden, 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if r.Len() != 2 || !bytes.Equal(r.Image(1), golden[116:152]) || r.Meta(0).FrameID != 42 {
		t.Errorf("mapped shard reads wrong: Len %d", r.Len())
	}
	if err := r.Check(); err != nil {
		t.Error(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	tests := []struct {
		name    string
		content []byte
		want    string
	}{
		{"empty", nil, "shard: corrupt: file is 0 bytes, shorter than the 80-byte header"},
		{"corrupt", golden[:459], "shard: corrupt: file is 459 bytes, header implies 460"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".twh")
			if err := os.WriteFile(p, tc.content, 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Open(p)
			if !errors.Is(err, ErrCorrupt) || err.Error() != p+": "+tc.want {
				t.Errorf("Open error = %v, want %q", err, p+": "+tc.want)
			}
		})
	}
	if _, err := Open(filepath.Join(dir, "missing.twh")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing) = %v, want ErrNotExist", err)
	}
	if _, err := Open(dir); errString(err) != dir+": not a regular file" {
		t.Errorf("Open(directory) = %v, want %q", err, dir+": not a regular file")
	}
}
