package shard

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"warehouse-etl/internal/fuzzmem"
)

// FuzzParse feeds arbitrary bytes to Parse. It must never panic; a rejected
// input must wrap ErrCorrupt; an accepted one must let every accessor,
// Check, VerifySample and the batch path's one-pass checks (CopyCRC32C
// with CheckImageCRC, RestoreImageChecked, which must agree with
// VerifySample) run on every sample, with the sizes the layout promises.
// The seeds in testdata/fuzz/FuzzParse are the golden shards as written,
// without the checksum section, and without meta and checksum sections,
// and a compact shard (TestCompactSeeds).
func FuzzParse(f *testing.F) {
	f.Add([]byte(nil))
	f.Add([]byte(Magic))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := fuzzmem.Call(t, parseAllocBound, func() (*Reader, error) { return Parse(b) })
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Parse error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		l := r.Layout()
		if err := l.Validate(); err != nil {
			t.Fatalf("accepted shard has an invalid layout: %v", err)
		}
		size := l.FileSizeWithoutChecksums(r.Len())
		if r.HasSampleChecksums() {
			size = l.FileSize(r.Len())
		}
		if lo, hi := l.CompactFileSizeRange(r.Len()); r.IsCompact() && (int64(len(b)) < lo || int64(len(b)) > hi) {
			t.Fatalf("accepted a compact shard of %d bytes, want %d..%d for %d samples", len(b), lo, hi, r.Len())
		}
		if r.HasMeta() && !r.IsCompact() && int64(len(b)) != size {
			t.Fatalf("accepted %d bytes, want %d for %d samples (checksum section: %v)", len(b), size, r.Len(), r.HasSampleChecksums())
		}
		_ = r.Check()
		for i := range r.Len() {
			if int64(len(r.Image(i))) != l.ImageBytes() {
				t.Fatalf("sample %d: image of %d bytes", i, len(r.Image(i)))
			}
			if r.IsCompact() {
				off, n := r.RegionSpan(i, 1)
				buf := make([]byte, l.ImageBytes())
				r.RestoreImage(buf, b[off:off+int64(n)], i, i%2 == 1)
				if !bytes.Equal(buf, r.Image(i)) {
					t.Fatalf("sample %d: RestoreImage and Image differ", i)
				}
				if err := r.VerifySample(i, buf); (err == nil) != (r.VerifySample(i, nil) == nil) {
					t.Fatalf("sample %d: VerifySample of the restored copy disagrees with the shard's", i)
				}
				if err := r.VerifyRegion(i, b[off:off+int64(n)]); (err == nil) != (r.VerifySample(i, nil) == nil) {
					t.Fatalf("sample %d: VerifyRegion of the stored region disagrees with VerifySample", i)
				}
				// The batch path: restored and checked in one pass.
				clear(buf)
				err := r.RestoreImageChecked(i, buf, b[off:off+int64(n)], i%2 == 0)
				if want := r.VerifySample(i, nil); fmt.Sprint(err) != fmt.Sprint(want) || !bytes.Equal(buf, r.Image(i)) {
					t.Fatalf("sample %d: RestoreImageChecked %v, VerifySample %v (or the images differ)", i, err, want)
				}
			} else {
				// The batch path: copied and checked in one pass.
				buf := make([]byte, l.ImageBytes())
				err := r.CheckImageCRC(i, CopyCRC32C(0, buf, r.Image(i), i%2 == 0))
				if want := r.VerifySample(i, nil); fmt.Sprint(err) != fmt.Sprint(want) || !bytes.Equal(buf, r.Image(i)) {
					t.Fatalf("sample %d: CheckImageCRC %v, VerifySample %v (or the copy differs)", i, err, want)
				}
			}
			switch l.DType {
			case F16:
				_ = r.ImageF16(i)
			case F32:
				_ = r.ImageF32(i)
			}
			n := r.BoxCount(i)
			if n < 0 || n > l.MaxBoxes || len(r.Boxes(i)) != n {
				t.Fatalf("sample %d: BoxCount %d, %d boxes, max_boxes %d", i, n, len(r.Boxes(i)), l.MaxBoxes)
			}
			if len(r.Mask(i)) != l.MaxBoxes || len(r.BoxesRaw(i)) != 4*l.MaxBoxes*l.DType.BoxDType().Size() || len(r.MaskRaw(i)) != l.MaxBoxes*l.DType.BoxDType().Size() {
				t.Fatalf("sample %d: mask/box sizes disagree with the layout", i)
			}
			_ = r.Meta(i)
			if c := r.ClassIndex(i); r.HasMeta() && len(c) != n {
				t.Fatalf("sample %d: %d class indices for %d boxes", i, len(c), n)
			}
			if e := r.Extras(i); len(e) != l.ExtraF32 {
				t.Fatalf("sample %d: %d extras, layout says %d", i, len(e), l.ExtraF32)
			}
			if err := r.VerifySample(i, nil); err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("sample %d: VerifySample error %v does not wrap ErrCorrupt", i, err)
			}
		}
	})
}
