package shard

import (
	"math"
	"testing"
)

// TestLayoutSizes checks the size methods against sizes worked out by hand
// (the same numbers appear in docs/format/shard.md).
func TestLayoutSizes(t *testing.T) {
	tests := []struct {
		name        string
		layout      Layout
		samples     int
		imageBytes  int64
		recordSize  int
		sampleBytes int64
		fileSize    int64
		// uncheckedSize is the size without the checksum section, as
		// shards were written before it existed.
		uncheckedSize int64
	}{{
		// 384*384*3*4; boxes 16*4*4=256, mask 64, record 80+64=144, CRC 4.
		name:       "original defaults 384 f32",
		layout:     Layout{DType: F32, Width: 384, Height: 384, Channels: 3, MaxBoxes: 16},
		samples:    1024,
		imageBytes: 1769472, recordSize: 144, sampleBytes: 1769940,
		// 80 + 1024*(1769472+256+64) = 1812267088 (8-aligned), +24 +1024*144
		// = 1812414568 (8-aligned), +16 +1024*4 +4.
		fileSize: 1812418684, uncheckedSize: 1812414568,
	}, {
		name:       "640 f16",
		layout:     Layout{DType: F16, Width: 640, Height: 640, Channels: 3, MaxBoxes: 16},
		samples:    1024,
		imageBytes: 2457600, recordSize: 144, sampleBytes: 2457908,
		// 80 + 1024*(2457600+128+32) = 2516746320, +24 +1024*144 =
		// 2516893800, +16 +1024*4 +4.
		fileSize: 2516897916, uncheckedSize: 2516893800,
	}, {
		// mask ends at 80+3*2 = 86, meta at 88, records 3*80, extras 3*4
		// end at 364; 4 bytes of padding, checksum section 368..400.
		name:       "no boxes with extras",
		layout:     Layout{DType: F16, Width: 1, Height: 1, Channels: 1, MaxBoxes: 0, ExtraF32: 1},
		samples:    3,
		imageBytes: 2, recordSize: 80, sampleBytes: 90,
		fileSize: 400, uncheckedSize: 364,
	}, {
		// record 80+4*3 = 92 rounds up to 96.
		name:       "golden f16",
		layout:     Layout{DType: F16, Width: 3, Height: 2, Channels: 3, MaxBoxes: 3},
		samples:    2,
		imageBytes: 36, recordSize: 96, sampleBytes: 36 + 24 + 6 + 96 + 4,
		fileSize: 460, uncheckedSize: 432,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := tc.layout
			if err := l.Validate(); err != nil {
				t.Fatal(err)
			}
			if got := l.ImageBytes(); got != tc.imageBytes {
				t.Errorf("ImageBytes = %d, want %d", got, tc.imageBytes)
			}
			if got := l.RecordSize(); got != tc.recordSize {
				t.Errorf("RecordSize = %d, want %d", got, tc.recordSize)
			}
			if got := l.SampleBytes(); got != tc.sampleBytes {
				t.Errorf("SampleBytes = %d, want %d", got, tc.sampleBytes)
			}
			if got := l.FileSize(tc.samples); got != tc.fileSize {
				t.Errorf("FileSize(%d) = %d, want %d", tc.samples, got, tc.fileSize)
			}
			if got := l.FileSizeWithoutChecksums(tc.samples); got != tc.uncheckedSize {
				t.Errorf("FileSizeWithoutChecksums(%d) = %d, want %d", tc.samples, got, tc.uncheckedSize)
			}
		})
	}
}

func TestFileSizeInvalid(t *testing.T) {
	valid := Layout{DType: F16, Width: 640, Height: 640, Channels: 3, MaxBoxes: 16}
	tests := []struct {
		name    string
		layout  Layout
		samples int
	}{
		{"invalid layout", Layout{DType: F16}, 1},
		{"negative samples", valid, -1},
		{"overflow", valid, math.MaxInt},
	}
	for _, tc := range tests {
		if got := tc.layout.FileSize(tc.samples); got != -1 {
			t.Errorf("%s: FileSize = %d, want -1", tc.name, got)
		}
		if got := tc.layout.FileSizeWithoutChecksums(tc.samples); got != -1 {
			t.Errorf("%s: FileSizeWithoutChecksums = %d, want -1", tc.name, got)
		}
	}
}

func TestLayoutValidate(t *testing.T) {
	ok := Layout{DType: F32, Width: 4, Height: 4, Channels: 3, MaxBoxes: 2}
	tests := []struct {
		name   string
		mutate func(*Layout)
		want   string
	}{
		{"valid", func(*Layout) {}, ""},
		{"limits", func(l *Layout) {
			l.Width, l.Height, l.Channels, l.MaxBoxes, l.ExtraF32 = 16384, 16384, 4, 65535, 65535
		}, ""},
		{"no boxes", func(l *Layout) { l.MaxBoxes = 0 }, ""},
		{"dtype", func(l *Layout) { l.DType = 3 }, "shard: layout: unknown dtype 3"},
		{"width 0", func(l *Layout) { l.Width = 0 }, "shard: layout: width 0 out of range [1, 16384]"},
		{"height", func(l *Layout) { l.Height = 16385 }, "shard: layout: height 16385 out of range [1, 16384]"},
		{"channels 0", func(l *Layout) { l.Channels = 0 }, "shard: layout: channels 0 out of range [1, 4]"},
		{"channels 5", func(l *Layout) { l.Channels = 5 }, "shard: layout: channels 5 out of range [1, 4]"},
		{"max_boxes -1", func(l *Layout) { l.MaxBoxes = -1 }, "shard: layout: max_boxes -1 out of range [0, 65535]"},
		{"max_boxes", func(l *Layout) { l.MaxBoxes = 65536 }, "shard: layout: max_boxes 65536 out of range [0, 65535]"},
		{"extra_f32", func(l *Layout) { l.ExtraF32 = 65536 }, "shard: layout: extra_f32 65536 out of range [0, 65535]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			l := ok
			tc.mutate(&l)
			err := l.Validate()
			if got := errString(err); got != tc.want {
				t.Errorf("Validate() = %q, want %q", got, tc.want)
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestSamplesPerShard(t *testing.T) {
	l384 := Layout{DType: F32, Width: 384, Height: 384, Channels: 3, MaxBoxes: 16}
	l640 := Layout{DType: F16, Width: 640, Height: 640, Channels: 3, MaxBoxes: 16}
	tests := []struct {
		name   string
		layout Layout
		target int64
		want   int
	}{
		// (2^30 - 145) / 1769940 and / 2457908, rounded down.
		{"384 f32 in 1 GiB", l384, 1 << 30, 606},
		{"640 f16 in 1 GiB", l640, 1 << 30, 436},
		{"target below one sample", l640, 1 << 20, 1},
		{"target below the fixed overhead", l640, 10, 1},
		{"invalid layout", Layout{}, 1 << 30, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := SamplesPerShard(tc.layout, tc.target)
			if got != tc.want {
				t.Fatalf("SamplesPerShard = %d, want %d", got, tc.want)
			}
			if got > 1 && tc.layout.FileSize(got) > tc.target {
				t.Errorf("FileSize(%d) = %d exceeds the target %d", got, tc.layout.FileSize(got), tc.target)
			}
		})
	}
}

func TestDType(t *testing.T) {
	tests := []struct {
		d    DType
		size int
		name string
	}{
		{F32, 4, "F32"},
		{F16, 2, "F16"},
		{U8, 1, "U8"},
		{7, 0, "DType(7)"},
	}
	for _, tc := range tests {
		if tc.d.Size() != tc.size || tc.d.String() != tc.name {
			t.Errorf("DType %d: Size %d String %q, want %d %q", uint32(tc.d), tc.d.Size(), tc.d.String(), tc.size, tc.name)
		}
		parsed, err := ParseDType(tc.name)
		if tc.size == 0 {
			if err == nil {
				t.Errorf("ParseDType(%q) succeeded", tc.name)
			}
			continue
		}
		if err != nil || parsed != tc.d {
			t.Errorf("ParseDType(%q) = %v, %v; want %v", tc.name, parsed, err, tc.d)
		}
	}
	if _, err := ParseDType("f16"); errString(err) != `shard: unknown dtype "f16" (want F32, F16 or U8)` {
		t.Errorf("ParseDType(f16) error = %v", err)
	}
}

// TestF16Encoding pins the binary16 encoding: round to nearest, ties to even,
// with bit patterns worked out by hand.
func TestF16Encoding(t *testing.T) {
	tests := []struct {
		name string
		in   float32
		bits uint16
	}{
		{"one", 1, 0x3C00},
		{"minus two", -2, 0xC000},
		{"zero", 0, 0x0000},
		{"tie rounds down to even", 1 + 1.0/2048, 0x3C00},
		{"tie rounds up to even", 1 + 3.0/2048, 0x3C02},
		{"above the tie rounds up", 1 + 1.0/2048 + 1.0/(1<<20), 0x3C01},
		{"0.1", 0.1, 0x2E66},
		{"0.3 rounds up", 0.3, 0x34CD},
		{"largest finite", 65504, 0x7BFF},
		{"tie above largest overflows to inf", 65520, 0x7C00},
		{"smallest subnormal", 1.0 / (1 << 24), 0x0001},
	}
	for _, tc := range tests {
		var b [2]byte
		putElement(b[:], F16, tc.in)
		if got := le.Uint16(b[:]); got != tc.bits {
			t.Errorf("%s: f16(%v) = %#04x, want %#04x", tc.name, tc.in, got, tc.bits)
		}
	}
	// Decoding exact values returns them.
	for bits, want := range map[uint16]float32{0x3C00: 1, 0xC000: -2, 0x3A00: 0.75, 0x0001: 1.0 / (1 << 24), 0x7BFF: 65504} {
		if got := element([]byte{byte(bits), byte(bits >> 8)}, F16); got != want {
			t.Errorf("decode %#04x = %v, want %v", bits, got, want)
		}
	}
}
