package shard

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// memFile is an in-memory File: Write appends at the write position,
// WriteAt/ReadAt work like a file's.
type memFile struct {
	data []byte
	pos  int64
}

func (m *memFile) Write(p []byte) (int, error) {
	n, err := m.WriteAt(p, m.pos)
	m.pos += int64(n)
	return n, err
}

func (m *memFile) WriteAt(p []byte, off int64) (int, error) {
	if end := int(off) + len(p); end > len(m.data) {
		m.data = append(m.data, make([]byte, end-len(m.data))...)
	}
	return copy(m.data[off:], p), nil
}

func (m *memFile) ReadAt(p []byte, off int64) (int, error) {
	if off >= int64(len(m.data)) {
		return 0, io.EOF
	}
	n := copy(p, m.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

var errDiskFull = errors.New("test: disk full")

// failingFile accepts limit bytes through Write and then fails; WriteAt
// fails when failWriteAt is set.
type failingFile struct {
	memFile
	limit       int
	failWriteAt bool
}

func (f *failingFile) Write(p []byte) (int, error) {
	room := f.limit - len(f.data)
	if room >= len(p) {
		return f.memFile.Write(p)
	}
	n, _ := f.memFile.Write(p[:max(room, 0)])
	return n, errDiskFull
}

func (f *failingFile) WriteAt(p []byte, off int64) (int, error) {
	if f.failWriteAt {
		return 0, errDiskFull
	}
	return f.memFile.WriteAt(p, off)
}

// writeShard writes samples into a fresh temp file declared with declared
// samples and returns the file's bytes and the Result.
func writeShard(t testing.TB, l Layout, declared int, samples []Sample) ([]byte, Result) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "shard.twh")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := NewWriter(f, l, declared)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range samples {
		if err := w.Append(s); err != nil {
			t.Fatalf("Append(%d): %v", i, err)
		}
	}
	res, err := w.Close()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b, res
}

// randomSamples returns n samples of layout l with random content. Box
// coordinates are multiples of 1/1024, exactly representable in f16 and
// f32, so a round trip must return them unchanged.
func randomSamples(rng *rand.Rand, l Layout, n int) []Sample {
	out := make([]Sample, n)
	for i := range out {
		s := &out[i]
		s.Image = make([]byte, l.ImageBytes())
		for k := range s.Image {
			s.Image[k] = byte(rng.UintN(256))
		}
		nb := rng.IntN(l.MaxBoxes + 1)
		for range nb {
			x0, x1 := ordered(rng.IntN(1025), rng.IntN(1025))
			y0, y1 := ordered(rng.IntN(1025), rng.IntN(1025))
			s.Boxes = append(s.Boxes, [4]float32{x0, y0, x1, y1})
			s.ClassIndex = append(s.ClassIndex, int32(rng.IntN(80)))
		}
		s.Meta = Meta{
			SourceIndex:   rng.Uint32(),
			FrameID:       rng.Uint64(),
			InputSeq:      rng.Uint64(),
			UnixTimeNs:    rng.Int64() - math.MaxInt64/2,
			SimTime:       rng.NormFloat64() * 1e3,
			SrcWidth:      rng.Uint32(),
			SrcHeight:     rng.Uint32(),
			ResizedWidth:  rng.Uint32(),
			ResizedHeight: rng.Uint32(),
			PadX:          rng.Uint32(),
			PadY:          rng.Uint32(),
			ScaleX:        rng.Float32(),
			ScaleY:        rng.Float32(),
			BoxesDropped:  rng.Uint32(),
		}
		for range l.ExtraF32 {
			s.Extras = append(s.Extras, float32(rng.NormFloat64()))
		}
	}
	return out
}

func ordered(a, b int) (float32, float32) {
	if a > b {
		a, b = b, a
	}
	return float32(a) / 1024, float32(b) / 1024
}

// mustParse parses b or fails the test.
func mustParse(t testing.TB, b []byte) *Reader {
	t.Helper()
	r, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// withoutMeta turns a shard with meta and checksum sections into the
// original layout: the file ends after the mask, shard_version is 1 and
// meta_offset and checksum_offset are 0.
func withoutMeta(t testing.TB, b []byte) []byte {
	t.Helper()
	h := mustParse(t, b).Header()
	end := h.MaskOffset + h.Samples*uint64(h.MaxBoxes)*uint64(h.DType.BoxDType().Size())
	out := bytes.Clone(b[:end])
	le.PutUint32(out[offVersion:], uint32(Version1))
	le.PutUint64(out[offMetaOffset:], 0)
	le.PutUint64(out[offChecksumOffset:], 0)
	return out
}

// withoutChecksums turns a shard into one written before the checksum
// section existed, as older warehouses hold: the file ends after the extras,
// shard_version is 1 (the legacy rule: the meta section is signalled by
// meta_offset alone) and checksum_offset is 0.
func withoutChecksums(t testing.TB, b []byte) []byte {
	t.Helper()
	return withoutChecksumsAs(t, b, Version1)
}

// withoutChecksumsAs is withoutChecksums with shard_version v: Version2 is
// the same bytes as a version that declares its meta section.
func withoutChecksumsAs(t testing.TB, b []byte, v Version) []byte {
	t.Helper()
	r := mustParse(t, b)
	end := r.Layout().FileSizeWithoutChecksums(r.Len())
	out := bytes.Clone(b[:end])
	le.PutUint32(out[offVersion:], uint32(v))
	le.PutUint64(out[offChecksumOffset:], 0)
	return out
}

// asLegacy returns a copy of shard b with shard_version 1, as every shard
// written before versions named features carries: the same bytes but for
// the version, read by the legacy rule.
func asLegacy(b []byte) []byte {
	out := bytes.Clone(b)
	le.PutUint32(out[offVersion:], uint32(Version1))
	return out
}
