package shard

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestRoundTrip writes random samples and reads every field back.
func TestRoundTrip(t *testing.T) {
	layouts := []Layout{
		{DType: F16, Width: 7, Height: 5, Channels: 3, MaxBoxes: 4},
		{DType: F32, Width: 6, Height: 3, Channels: 3, MaxBoxes: 5, ExtraF32: 3},
		{DType: F16, Width: 2, Height: 2, Channels: 1, MaxBoxes: 0, ExtraF32: 1},
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, l := range layouts {
		t.Run(l.DType.String(), func(t *testing.T) {
			samples := randomSamples(rng, l, 9)
			b, res := writeShard(t, l, len(samples), samples)
			if res.Bytes != int64(len(b)) || res.Bytes != l.FileSize(len(samples)) || res.SHA256 != sha256.Sum256(b) {
				t.Fatalf("Result %+v does not describe the %d-byte file", res, len(b))
			}
			r := mustParse(t, b)
			if r.Len() != len(samples) || r.Layout() != l || !r.HasMeta() {
				t.Fatalf("Len %d Layout %+v HasMeta %v", r.Len(), r.Layout(), r.HasMeta())
			}
			if err := r.Check(); err != nil {
				t.Fatal(err)
			}
			for i, s := range samples {
				compareSample(t, r, i, s)
			}
		})
	}
}

// compareSample checks every accessor of r for sample i against s.
func compareSample(t *testing.T, r *Reader, i int, s Sample) {
	t.Helper()
	l := r.Layout()
	if !bytes.Equal(r.Image(i), s.Image) {
		t.Errorf("sample %d: image differs", i)
	}
	switch l.DType {
	case F16:
		want := make([]uint16, len(s.Image)/2)
		for k := range want {
			want[k] = uint16(s.Image[2*k]) | uint16(s.Image[2*k+1])<<8
		}
		if !slices.Equal(r.ImageF16(i), want) {
			t.Errorf("sample %d: ImageF16 differs", i)
		}
	case F32:
		got := r.ImageF32(i)
		for k := range len(s.Image) / 4 {
			w := uint32(s.Image[4*k]) | uint32(s.Image[4*k+1])<<8 | uint32(s.Image[4*k+2])<<16 | uint32(s.Image[4*k+3])<<24
			if math.Float32bits(got[k]) != w {
				t.Fatalf("sample %d: ImageF32[%d] = %#x, want %#x", i, k, math.Float32bits(got[k]), w)
			}
		}
	}
	if r.BoxCount(i) != len(s.Boxes) {
		t.Errorf("sample %d: BoxCount %d, want %d", i, r.BoxCount(i), len(s.Boxes))
	}
	if got := r.Boxes(i); !slices.Equal(got, s.Boxes) && !(len(got) == 0 && len(s.Boxes) == 0) {
		t.Errorf("sample %d: Boxes %v, want %v", i, got, s.Boxes)
	}
	wantMask := make([]float32, l.MaxBoxes)
	for j := range s.Boxes {
		wantMask[j] = 1
	}
	if got := r.Mask(i); !slices.Equal(got, wantMask) {
		t.Errorf("sample %d: Mask %v, want %v", i, got, wantMask)
	}
	if got := r.ClassIndex(i); !slices.Equal(got, s.ClassIndex) && !(len(got) == 0 && len(s.ClassIndex) == 0) {
		t.Errorf("sample %d: ClassIndex %v, want %v", i, got, s.ClassIndex)
	}
	if got := r.Meta(i); got != s.Meta {
		t.Errorf("sample %d: Meta %+v, want %+v", i, got, s.Meta)
	}
	if got := r.Extras(i); !slices.Equal(got, s.Extras) && !(len(got) == 0 && len(s.Extras) == 0) {
		t.Errorf("sample %d: Extras %v, want %v", i, got, s.Extras)
	}
	// The Writer's CRC of the sample, against the bitwise definition over
	// the bytes the Reader hands out.
	// A compact shard's CRC covers the sample's table entry and its stored
	// region instead of the whole image.
	image := r.Image(i)
	if r.IsCompact() {
		g := r.Region(i)
		image = slices.Concat(r.compactEntry(i), r.data[g.Offset:g.Offset+int64(g.Bytes(l.Channels))])
	}
	data := slices.Concat(image, r.BoxesRaw(i), r.MaskRaw(i), r.record(i), r.section(r.extrasOffset, r.extraBytes, i))
	if got, ok := r.SampleChecksum(i); !ok || got != crc32cBitwise(data) {
		t.Errorf("sample %d: SampleChecksum 0x%08x (ok %v), bitwise CRC-32C 0x%08x", i, got, ok, crc32cBitwise(data))
	}
	if err := r.VerifySample(i, nil); err != nil {
		t.Errorf("sample %d: %v", i, err)
	}
}

// TestShortClose declares more samples than it appends: the shard must be
// byte-identical to one declared with the appended count.
func TestShortClose(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, l := range []Layout{
		{DType: F16, Width: 5, Height: 3, Channels: 3, MaxBoxes: 3},
		{DType: F32, Width: 4, Height: 4, Channels: 3, MaxBoxes: 2, ExtraF32: 2},
	} {
		t.Run(l.DType.String(), func(t *testing.T) {
			samples := randomSamples(rng, l, 3)
			short, shortRes := writeShard(t, l, 5, samples)
			exact, _ := writeShard(t, l, 3, samples)
			if !bytes.Equal(short, exact) {
				t.Fatalf("short shard differs from the exact one at byte %d (%d vs %d bytes)", firstDiff(short, exact), len(short), len(exact))
			}
			if shortRes.Samples != 3 || shortRes.Bytes != int64(len(short)) || shortRes.SHA256 != sha256.Sum256(short) {
				t.Errorf("Result %+v does not describe the %d-byte file", shortRes, len(short))
			}
			r := mustParse(t, short)
			for i, s := range samples {
				compareSample(t, r, i, s)
			}
		})
	}
}

func TestNewWriterErrors(t *testing.T) {
	l := Layout{DType: F16, Width: 4, Height: 4, Channels: 3, MaxBoxes: 2}
	tests := []struct {
		name    string
		layout  Layout
		samples int
		want    string
	}{
		{"invalid layout", Layout{DType: F16, Width: 4, Height: 4, Channels: 9}, 1, "shard: layout: channels 9 out of range [1, 4]"},
		{"no samples", l, 0, "shard: a shard needs at least 1 sample, got 0"},
		{"overflow", l, math.MaxInt, "shard: 9223372036854775807 samples of 208 bytes overflow the file size"},
		{"tail too large", l, 10_000_000, "shard: 10000000 samples need 1120000044 bytes of boxes, mask, meta and checksums in memory, more than 1073741824"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewWriter(&memFile{}, tc.layout, tc.samples)
			if errString(err) != tc.want {
				t.Errorf("NewWriter error = %q, want %q", errString(err), tc.want)
			}
		})
	}
}

// TestWriterStickyErrors checks that the first failure is returned by every
// later call, whatever the failure.
func TestWriterStickyErrors(t *testing.T) {
	l := Layout{DType: F16, Width: 2, Height: 2, Channels: 3, MaxBoxes: 2, ExtraF32: 1}
	good := func() Sample {
		return Sample{
			Image:      make([]byte, 24),
			Boxes:      [][4]float32{{0, 0, 0.5, 0.5}},
			ClassIndex: []int32{1},
			Extras:     []float32{2},
		}
	}
	tests := []struct {
		name     string
		declared int
		// calls drives the writer up to the failure and returns its error.
		calls func(w *Writer) error
		want  string
	}{
		{"too many appends", 1, func(w *Writer) error {
			if err := w.Append(good()); err != nil {
				return err
			}
			return w.Append(good())
		}, "shard: sample 1 appended to a shard declared with 1 samples"},
		{"wrong image length", 2, func(w *Writer) error {
			s := good()
			s.Image = s.Image[:23]
			return w.Append(s)
		}, "shard: sample 0: image is 23 bytes, layout needs 24"},
		{"too many boxes", 2, func(w *Writer) error {
			s := good()
			s.Boxes = make([][4]float32, 3)
			s.ClassIndex = make([]int32, 3)
			return w.Append(s)
		}, "shard: sample 0: 3 boxes exceed max_boxes 2"},
		{"class indices", 2, func(w *Writer) error {
			s := good()
			s.ClassIndex = nil
			return w.Append(s)
		}, "shard: sample 0: 0 class indices for 1 boxes"},
		{"negative class", 2, func(w *Writer) error {
			s := good()
			s.ClassIndex[0] = -1
			return w.Append(s)
		}, "shard: sample 0: box 0 has negative class index -1"},
		{"extras", 2, func(w *Writer) error {
			s := good()
			s.Extras = nil
			return w.Append(s)
		}, "shard: sample 0: 0 extras, layout needs 1"},
		{"box outside", 2, func(w *Writer) error {
			s := good()
			s.Boxes[0][3] = 1.5
			return w.Append(s)
		}, "shard: sample 0: box 0 [0 0 0.5 1.5]: coordinate outside [0, 1]"},
		{"box NaN", 2, func(w *Writer) error {
			s := good()
			s.Boxes[0][0] = float32(math.NaN())
			return w.Append(s)
		}, "shard: sample 0: box 0 [NaN 0 0.5 0.5]: coordinate outside [0, 1]"},
		{"box inverted", 2, func(w *Writer) error {
			s := good()
			s.Boxes[0] = [4]float32{0.5, 0, 0.25, 1}
			return w.Append(s)
		}, "shard: sample 0: box 0 [0.5 0 0.25 1]: x0 > x1 or y0 > y1"},
		{"close with no samples", 2, func(w *Writer) error {
			_, err := w.Close()
			return err
		}, "shard: closing a shard with no samples"},
		{"append after close", 1, func(w *Writer) error {
			if err := w.Append(good()); err != nil {
				return err
			}
			if _, err := w.Close(); err != nil {
				return err
			}
			return w.Append(good())
		}, "shard: writer is closed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWriter(&memFile{}, l, tc.declared)
			if err != nil {
				t.Fatal(err)
			}
			first := tc.calls(w)
			if errString(first) != tc.want {
				t.Fatalf("error = %q, want %q", errString(first), tc.want)
			}
			assertSticky(t, w, first, good())
		})
	}
}

// assertSticky checks that Append and Close keep returning first.
func assertSticky(t *testing.T, w *Writer, first error, s Sample) {
	t.Helper()
	for range 2 {
		if err := w.Append(s); err != first {
			t.Errorf("later Append = %v, want the first error %v", err, first)
		}
		if _, err := w.Close(); err != first {
			t.Errorf("later Close = %v, want the first error %v", err, first)
		}
	}
}

// TestWriterDiskErrors fails the file at several points: the error surfaces
// wrapped, from Append or Close, and is sticky from then on.
func TestWriterDiskErrors(t *testing.T) {
	// 64x64x3 f32 images are 48 KiB: the 1 MiB buffer reaches the file
	// during Append after ~21 samples.
	l := Layout{DType: F32, Width: 64, Height: 64, Channels: 3, MaxBoxes: 1}
	samples := randomSamples(rand.New(rand.NewPCG(5, 6)), l, 40)
	full := l.FileSize(40)
	tests := []struct {
		name        string
		file        *failingFile
		declared    int
		append      int
		wantWrapped string
	}{
		{"fails in Append", &failingFile{limit: 100}, 40, 40, "shard: write image of sample"},
		{"fails in Close", &failingFile{limit: int(full) - 10}, 40, 40, "shard: write trailing sections: test: disk full"},
		{"fails in the short path", &failingFile{limit: math.MaxInt, failWriteAt: true}, 40, 30, "shard: write trailing sections: test: disk full"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w, err := NewWriter(tc.file, l, tc.declared)
			if err != nil {
				t.Fatal(err)
			}
			var first error
			for _, s := range samples[:tc.append] {
				if first = w.Append(s); first != nil {
					break
				}
			}
			if first == nil {
				_, first = w.Close()
			}
			if !errors.Is(first, errDiskFull) || !strings.HasPrefix(first.Error(), tc.wantWrapped) {
				t.Fatalf("error = %v, want %q wrapping %v", first, tc.wantWrapped, errDiskFull)
			}
			assertSticky(t, w, first, samples[0])
		})
	}
}
