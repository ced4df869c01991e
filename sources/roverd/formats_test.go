package roverd

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"path/filepath"
	"slices"
	"testing"

	"warehouse-etl/sources"
	"warehouse-etl/validate"
)

const npzFixtures = "testdata/npz"

// solidJPEG encodes a w x h JPEG of one colour with image/jpeg.
func solidJPEG(t *testing.T, w, h int, c color.RGBA) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := 0; i < len(img.Pix); i += 4 {
		img.Pix[i], img.Pix[i+1], img.Pix[i+2], img.Pix[i+3] = c.R, c.G, c.B, 255
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pixel is the test pattern of raw camera frames: frame k, row y, column
// x, channel c.
func pixel(k, y, x, c int) byte { return byte(40*k + 7*y + 3*x + c) }

// formatsDataset writes one recording whose camera is stored in every
// format a camera can use, each as its own sensor, plus a sensor of npz
// extras; all sensors share timestamps 0, 1, 2 s (npz camera: 0 s only).
func formatsDataset(t *testing.T) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "formats")
	rec := filepath.Join(root, "rec_1")
	ts := f64bytes(0, 1, 2)
	const w, h = 8, 6

	writeJSON(t, filepath.Join(rec, "cam_jpg", "meta.json"), map[string]any{"ts": tsMeta, "img": meta("jpg", "u1", h, w, 3)})
	writeFile(t, filepath.Join(rec, "cam_jpg", "ts"), ts)
	for k := range 3 {
		writeFile(t, filepath.Join(rec, "cam_jpg", "img", fmt.Sprintf("%06d.jpg", k)), solidJPEG(t, w, h, color.RGBA{R: uint8(50 * (k + 1)), G: 100, B: 30}))
	}
	// After a gap: not read, reported.
	writeFile(t, filepath.Join(rec, "cam_jpg", "img", "000004.jpg"), solidJPEG(t, w, h, color.RGBA{}))

	var raw, gray []byte
	for k := range 3 {
		for y := range h {
			for x := range w {
				for c := range 3 {
					raw = append(raw, pixel(k, y, x, c))
				}
				gray = append(gray, pixel(k, y, x, 0))
			}
		}
	}
	writeJSON(t, filepath.Join(rec, "cam_raw", "meta.json"), map[string]any{"ts": tsMeta, "img": meta("raw", "u1", h, w, 3)})
	writeFile(t, filepath.Join(rec, "cam_raw", "ts"), ts)
	writeFile(t, filepath.Join(rec, "cam_raw", "img"), raw)

	writeJSON(t, filepath.Join(rec, "cam_gray", "meta.json"), map[string]any{"ts": tsMeta, "img": meta("lzmaf", "u1", h, w)})
	writeFile(t, filepath.Join(rec, "cam_gray", "ts"), ts)
	var data, idx []byte
	idx = binary.LittleEndian.AppendUint64(idx, 0)
	for k := range 3 {
		data = append(data, xzBytes(t, gray[k*w*h:(k+1)*w*h])...)
		idx = binary.LittleEndian.AppendUint64(idx, uint64(len(data)))
	}
	writeFile(t, filepath.Join(rec, "cam_gray", "img"), data)
	writeFile(t, filepath.Join(rec, "cam_gray", "img_i"), idx)

	writeJSON(t, filepath.Join(rec, "cam_npz", "meta.json"), map[string]any{"ts": tsMeta, "img": meta("npz", "u1", 4, 5, 3)})
	writeFile(t, filepath.Join(rec, "cam_npz", "ts"), f64bytes(0))
	writeFile(t, filepath.Join(rec, "cam_npz", "img", "000000.npz"), readFile(t, filepath.Join(npzFixtures, "img", "000000.npz")))

	writeJSON(t, filepath.Join(rec, "cam_lzma", "meta.json"), map[string]any{"ts": tsMeta, "img": meta("lzma", "u1", h, w, 3)})
	writeFile(t, filepath.Join(rec, "cam_lzma", "ts"), ts)
	writeFile(t, filepath.Join(rec, "cam_lzma", "img"), xzBytes(t, raw))

	writeJSON(t, filepath.Join(rec, "vec", "meta.json"), map[string]any{"ts": tsMeta, "v": meta("npz", "f4", 3), "vz": meta("npz", "<f4", 3)})
	writeFile(t, filepath.Join(rec, "vec", "ts"), ts)
	for _, sub := range []string{"vec", "vecz"} {
		name := map[string]string{"vec": "v", "vecz": "vz"}[sub]
		for k := range 3 {
			f := fmt.Sprintf("%06d.npz", k)
			writeFile(t, filepath.Join(rec, "vec", name, f), readFile(t, filepath.Join(npzFixtures, sub, f)))
		}
	}
	return root
}

func TestCameraFormats(t *testing.T) {
	root := formatsDataset(t)
	tests := []struct {
		camera string
		frames int
		w, h   int
		check  func(t *testing.T, k int, im sources.Image)
		trunc  string
	}{
		{"cam_jpg", 3, 8, 6, func(t *testing.T, k int, im sources.Image) {
			img, err := jpeg.Decode(bytes.NewReader(im.Encoded))
			if err != nil {
				t.Fatal(err)
			}
			r, _, _, _ := img.At(4, 3).RGBA()
			if d := int(r>>8) - 50*(k+1); d < -4 || d > 4 {
				t.Fatalf("frame %d red %d, want %d", k, r>>8, 50*(k+1))
			}
		}, "cam_jpg: ts 3, img 3 (+ 1 files after the gap at 000003.jpg) -> 3"},
		{"cam_raw", 3, 8, 6, func(t *testing.T, k int, im sources.Image) {
			if im.Encoded != nil || im.Stride != 24 || im.Width != 8 || im.Height != 6 {
				t.Fatalf("image %+v", im)
			}
			for y := range 6 {
				for x := range 8 {
					for c := range 3 {
						if v := im.Pixels[y*im.Stride+3*x+c]; v != pixel(k, y, x, c) {
							t.Fatalf("frame %d (%d,%d,%d) = %d", k, y, x, c, v)
						}
					}
				}
			}
		}, ""},
		{"cam_gray", 3, 8, 6, func(t *testing.T, k int, im sources.Image) {
			for y := range 6 {
				for x := range 8 {
					for c := range 3 {
						if v := im.Pixels[y*im.Stride+3*x+c]; v != pixel(k, y, x, 0) {
							t.Fatalf("frame %d (%d,%d,%d) = %d, want the gray value %d", k, y, x, c, v, pixel(k, y, x, 0))
						}
					}
				}
			}
		}, ""},
		{"cam_npz", 1, 5, 4, func(t *testing.T, k int, im sources.Image) {
			// npz_fixtures.py: pixel (y, x, c) = 10y + 3x + c.
			for y := range 4 {
				for x := range 5 {
					for c := range 3 {
						if v := im.Pixels[y*im.Stride+3*x+c]; int(v) != 10*y+3*x+c {
							t.Fatalf("(%d,%d,%d) = %d", y, x, c, v)
						}
					}
				}
			}
		}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.camera, func(t *testing.T) {
			s := mustNew(t, root, Options{Camera: tc.camera})
			samples := scanAll(t, s)
			if len(samples) != tc.frames {
				t.Fatalf("%d samples", len(samples))
			}
			for k, smp := range samples {
				if smp.Width != tc.w || smp.Height != tc.h {
					t.Fatalf("frame %d is %dx%d", k, smp.Width, smp.Height)
				}
				if validate.Skip(smp.Reasons, false) {
					t.Fatalf("frame %d reasons %v", k, smp.Reasons)
				}
				im, err := s.ReadImage(smp)
				if err != nil {
					t.Fatal(err)
				}
				tc.check(t, k, im)
			}
			if got := s.Entries()[0].Attributes["truncated"]; got != tc.trunc {
				t.Fatalf("truncated %q, want %q", got, tc.trunc)
			}
		})
	}
	// The jpg camera's samples point at their files.
	s := mustNew(t, root, Options{Camera: "cam_jpg"})
	if smp := scanAll(t, s)[2]; smp.ImagePath != "rec_1/cam_jpg/img/000002.jpg" {
		t.Fatalf("image path %s", smp.ImagePath)
	}
	// lzma cannot serve frames one at a time: a clear placeholder.
	s = mustNew(t, root, Options{Camera: "cam_lzma/img"})
	samples := scanAll(t, s)
	want := "channel img: format lzma is one .xz stream for the whole channel; frames cannot be read one at a time (store it as lzmaf)"
	if len(samples) != 1 || !slices.Equal(samples[0].Reasons, []validate.Reason{validate.ReasonDecodeError}) || s.Entries()[0].Attributes["error"] != want {
		t.Fatalf("lzma camera: %+v %v", samples, s.Entries())
	}
}

// Extras from npz folders written by numpy (stored and deflated).
func TestNPZExtras(t *testing.T) {
	root := formatsDataset(t)
	s := mustNew(t, root, Options{Camera: "cam_raw", Extras: []string{"vec/v", "vec/vz"}, ToleranceMs: 1})
	for k, smp := range scanAll(t, s) {
		f := float32(k)
		want := []float32{f + 0.5, f + 1.5, f + 2.5, f + 0.5, f + 1.5, f + 2.5}
		if !slices.Equal(smp.Extras, want) || len(smp.Reasons) != 0 {
			t.Fatalf("frame %d extras %v reasons %v", k, smp.Extras, smp.Reasons)
		}
	}
}

// The numpy fixtures no record reader should accept, each with its error.
func TestNPZRecordErrors(t *testing.T) {
	vec := Channel{Name: "v", Format: FormatNPZ, DType: DType{'f', 4}, Shape: []int{3}, RecordBytes: 12}
	tests := []struct {
		file string
		is   error
		want string
	}{
		{"bad/bigendian.npz", ErrNPY, `roverd: bad npy data: descr: roverd: unknown type name: ">f4" is big-endian; roverd data is little-endian`},
		{"bad/fortran.npz", ErrNPY, "roverd: bad npy data: fortran_order arrays are not supported"},
		{"bad/object.npz", ErrNPY, `roverd: bad npy data: descr: roverd: unknown type name: "|O" (numpy size-in-bytes names: b1, i1, i2, i4, i8, u1, u2, u4, u8, f2, f4, f8)`},
		{"bad/nodata.npz", ErrNPY, "roverd: bad npy data: npz has no data.npy member"},
		{"bad/shape.npz", ErrRecordSize, "roverd: record size mismatch: npz record is <f4 [2], channel v is f4 [3]"},
		{"vec/000001.npz", nil, ""},
		{"vecz/000002.npz", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			b := readFile(t, filepath.Join(npzFixtures, tc.file))
			rec, err := readNPZRecord(bytes.NewReader(b), int64(len(b)), vec)
			if tc.is == nil {
				if err != nil || len(rec) != 12 {
					t.Fatalf("%d bytes, %v", len(rec), err)
				}
				return
			}
			if !errors.Is(err, tc.is) || err.Error() != tc.want {
				t.Fatalf("err = %v\nwant  %s", err, tc.want)
			}
		})
	}
	// An npz whose member declares more than a record can need is refused
	// before it is decompressed.
	big := Channel{Name: "v", Format: FormatNPZ, DType: DType{'u', 1}, Shape: []int{1}, RecordBytes: 1}
	b := readFile(t, filepath.Join(npzFixtures, "img", "000000.npz"))
	if _, err := readNPZRecord(bytes.NewReader(b), int64(len(b)), big); err == nil || !errors.Is(err, ErrRecordSize) {
		t.Fatalf("oversized member: %v", err)
	}
}

// A zero-size frame chunk (the idx1 entry and the chunk header both say
// 0) is a decode_error on that frame alone.
func TestEmptyFrameChunk(t *testing.T) {
	root := copyDemo(t)
	p := filepath.Join(root, "drive_2", "camera", "video.avi")
	b := readFile(t, p)
	binary.LittleEndian.PutUint32(b[6324+4:], 0)         // frame 2's chunk header (see sources/roverd/avi tests)
	binary.LittleEndian.PutUint32(b[9566+8+2*16+12:], 0) // its idx1 entry
	writeFile(t, p, b)
	s := mustNew(t, root, Options{})
	for k, smp := range scanAll(t, s)[:12] {
		if bad := slices.Contains(smp.Reasons, validate.ReasonDecodeError); bad != (k == 2) {
			t.Fatalf("frame %d reasons %v", k, smp.Reasons)
		}
	}
}

// A first frame whose JPEG header is damaged does not cost the dataset:
// the size comes from the next readable frame.
func TestSizeFromLaterFrame(t *testing.T) {
	root := copyDemo(t)
	p := filepath.Join(root, "drive_2", "camera", "video.avi")
	b := readFile(t, p)
	copy(b[5678+8:], "not a jpeg") // frame 0's data
	writeFile(t, p, b)
	s := mustNew(t, root, Options{})
	samples := scanAll(t, s)
	if samples[0].Width != 64 || samples[0].Height != 48 || len(samples[0].Reasons) != 0 {
		t.Fatalf("frame 0 %+v", samples[0])
	}
	if _, err := s.ReadImage(samples[0]); err != nil {
		t.Fatal(err) // the bytes are returned; decoding them fails later, as a late decode_error
	}
	// Every frame damaged: the size is unknown and every frame says so.
	ix := []int{5678, 5968, 6324, 6608, 6994, 7272, 7626, 7902}
	for _, off := range ix {
		copy(b[off+8:], "not a jpeg")
	}
	writeFile(t, p, b)
	s = mustNew(t, root, Options{})
	samples = scanAll(t, s)
	if !slices.Equal(samples[0].Reasons, []validate.Reason{validate.ReasonDecodeError}) {
		t.Fatalf("frame 0 %v", samples[0].Reasons)
	}
	want := "no readable frame header among the first 8 frames: frame 0: transforms: cannot decode image: unknown image format"
	if got := s.Entries()[0].Attributes["size_error"]; got != want {
		t.Fatalf("size_error %q", got)
	}
}
