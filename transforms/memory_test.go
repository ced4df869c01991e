package transforms

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"runtime"
	"testing"

	"warehouse-etl/dtype"
	"warehouse-etl/internal/testfiles"
)

// recordingBudget is what SetMemory's callers (pipeline) give a
// Transformer, reduced to counting: what is reserved now, the most at
// once, and an optional refusal.
type recordingBudget struct {
	held, peak int64
	refuse     error
}

func (b *recordingBudget) acquire(n int64) error {
	if b.refuse != nil {
		return b.refuse
	}
	b.held += n
	b.peak = max(b.peak, b.held)
	return nil
}

func (b *recordingBudget) release(n int64, _ bool) { b.held -= n }

// palettedPNG is a PNG that the fast path leaves to image/png.
func palettedPNG(t *testing.T, w, h int) []byte {
	pal := color.Palette{color.Black, color.White, color.RGBA{200, 10, 10, 255}}
	img := image.NewPaletted(image.Rect(0, 0, w, h), pal)
	for i := range img.Pix {
		img.Pix[i] = uint8(i % 3)
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReservationCoversAllocation checks that what a Transformer reserves
// before decoding is at least what Apply allocates, for every decoder
// path: the fast PNG path (a 249 KB-per-64-megapixel hostile file at a
// smaller size), image/png, jpegdec, GIF, BMP and TIFF. It measures the
// bytes allocated by one Apply of a fresh Transformer (no scratch kept
// from an earlier image) with runtime.MemStats.
func TestReservationCoversAllocation(t *testing.T) {
	spec := Spec{Width: 384, Height: 384, Mode: Letterbox, DType: dtype.F16}
	inputs := []struct {
		name string
		data []byte
	}{
		{"hostile png 3000x3000 (fast path)", testfiles.HostilePNG(t, 3000, 3000, "x")},
		{"png 1200x900 rgba (fast path)", testfiles.Image(t, "png", 1200, 900)},
		{"paletted png 1200x900 (image/png)", palettedPNG(t, 1200, 900)},
		{"jpeg 1600x1200 (jpegdec, scaled)", testfiles.Image(t, "jpeg", 1600, 1200)},
		{"jpeg 500x300 (jpegdec, 1/1)", testfiles.Image(t, "jpeg", 500, 300)},
		{"gif 800x600", testfiles.Image(t, "gif", 800, 600)},
		{"bmp 800x600", testfiles.Image(t, "bmp", 800, 600)},
		{"tiff 800x600", testfiles.Image(t, "tiff", 800, 600)},
	}
	out := make([]byte, spec.OutputBytes())
	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			tr, err := NewTransformer(spec)
			if err != nil {
				t.Fatal(err)
			}
			var b recordingBudget
			tr.SetMemory(b.acquire, b.release, 1<<20)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			if _, err := tr.Apply(in.data, out); err != nil {
				t.Fatal(err)
			}
			runtime.ReadMemStats(&after)
			allocated := int64(after.TotalAlloc - before.TotalAlloc)
			if b.peak < allocated {
				t.Errorf("reserved at most %d bytes, Apply allocated %d", b.peak, allocated)
			}
			if b.held != 0 {
				t.Errorf("%d bytes still reserved after Apply", b.held)
			}
			t.Logf("reserved %d, allocated %d (%.2fx)", b.peak, allocated, float64(b.peak)/float64(max(allocated, 1)))
		})
	}
}

// TestReservationRefused checks that a refused reservation fails the image
// before anything is decoded, wrapping both ErrDecode and the budget's
// error, and that nothing stays reserved.
func TestReservationRefused(t *testing.T) {
	spec := Spec{Width: 64, Height: 64, Mode: Letterbox, DType: dtype.F16}
	tr, err := NewTransformer(spec)
	if err != nil {
		t.Fatal(err)
	}
	over := errors.New("over the budget")
	b := recordingBudget{refuse: over}
	tr.SetMemory(b.acquire, b.release, 1<<20)
	out := make([]byte, spec.OutputBytes())
	var before, after runtime.MemStats
	data := testfiles.HostilePNG(t, 3000, 3000, "x")
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = tr.Apply(data, out)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrDecode) || !errors.Is(err, over) {
		t.Fatalf("Apply = %v, want ErrDecode wrapping the budget's error", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 1<<20 {
		t.Errorf("a refused decode allocated %d bytes", got)
	}
	if _, err := tr.ApplyRGB(make([]byte, 3*8*8), 8, 8, 24, out); err != nil {
		t.Errorf("ApplyRGB = %v: raw frames reserve nothing (their source does)", err)
	}
}

// TestScratchDroppedAfterLargeImage checks that a Transformer does not keep
// the buffers of an image larger than its keep size (a hostile PNG would
// otherwise stay resident in every worker), and keeps those of small ones.
func TestScratchDroppedAfterLargeImage(t *testing.T) {
	spec := Spec{Width: 64, Height: 64, Mode: Letterbox, DType: dtype.F16}
	tr, err := NewTransformer(spec)
	if err != nil {
		t.Fatal(err)
	}
	var b recordingBudget
	tr.SetMemory(b.acquire, b.release, 8<<20)
	out := make([]byte, spec.OutputBytes())
	if _, err := tr.Apply(testfiles.Image(t, "png", 300, 200), out); err != nil {
		t.Fatal(err)
	}
	if cap(tr.png.raw) == 0 {
		t.Fatal("a small image's rows were not kept")
	}
	if _, err := tr.Apply(testfiles.HostilePNG(t, 3000, 3000, "x"), out); err != nil {
		t.Fatal(err)
	}
	if n := cap(tr.png.raw) + cap(tr.png.idat) + cap(tr.inter); n != 0 {
		t.Errorf("kept %d bytes of scratch after a 36 MB image with keep 8 MiB", n)
	}
}
