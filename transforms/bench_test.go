package transforms

import (
	"testing"

	"warehouse-etl/dtype"
)

// Throughput (MB/s) is always measured in bytes of packed source RGB
// (3 x width x height of the input image), so the numbers compare across
// stages.

// benchmarkDecode decodes for a 640x640 letterbox (which decides the
// turbojpeg build's DCT scale).
func benchmarkDecode(b *testing.B, data []byte, w, h int) {
	spec := Spec{Width: 640, Height: 640, Mode: Letterbox, DType: dtype.F16}
	tr := mustTransformer(b, spec)
	g, err := PlanGeometry(spec, w, h)
	if err != nil {
		b.Fatal(err)
	}
	// One decode first: it grows the Transformer's buffers, which every
	// later call reuses, so allocs/op shows the steady state.
	hdr, err := readHeader(data, MaxSourcePixels)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := tr.decodePixels(data, hdr, g); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(3 * w * h))
	b.ReportAllocs()
	for b.Loop() {
		hdr, err := readHeader(data, MaxSourcePixels)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tr.decodePixels(data, hdr, g); err != nil {
			b.Fatal(err)
		}
	}
}

// Decode (+ convert to packed RGB on the image/jpeg path, which allocates
// its image; libjpeg-turbo decodes at 1/2 scale into a reused buffer).
func BenchmarkDecodeJPEG1920x1080(b *testing.B) {
	data := encodeJPEG(b, rgbToRGBA(gradientNoiseRGB(1920, 1080, 1, 12), 1920, 1080), 90)
	benchmarkDecode(b, data, 1920, 1080)
}

// The fast PNG path: no allocation.
func BenchmarkDecodePNGRGBA1280x720(b *testing.B) {
	data := encodePNG(b, withAlpha(gradientNoiseRGB(1280, 720, 2, 12), 1280, 720))
	benchmarkDecode(b, data, 1280, 720)
}

func benchmarkApplyRGB(b *testing.B, spec Spec, w, h int) {
	tr := mustTransformer(b, spec)
	src := gradientNoiseRGB(w, h, 3, 12)
	out := make([]byte, spec.OutputBytes())
	b.SetBytes(int64(3 * w * h))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.ApplyRGB(src, w, h, 3*w, out); err != nil {
			b.Fatal(err)
		}
	}
}

// Resize 1920x1080 -> 640x360 letterboxed into 640x640, then normalize.
func BenchmarkResizeLetterbox1920x1080To640(b *testing.B) {
	for _, dt := range []dtype.DType{dtype.F16, dtype.F32} {
		b.Run(dt.String(), func(b *testing.B) {
			benchmarkApplyRGB(b, Spec{Width: 640, Height: 640, Mode: Letterbox, Pad: 114, DType: dt}, 1920, 1080)
		})
	}
}

// Normalization alone: a 640x640 image into 640x640 skips both resize passes.
func BenchmarkNormalize640x640(b *testing.B) {
	for _, dt := range []dtype.DType{dtype.F16, dtype.F32} {
		b.Run(dt.String(), func(b *testing.B) {
			benchmarkApplyRGB(b, Spec{Width: 640, Height: 640, Mode: Letterbox, DType: dt,
				Mean: [3]float64{0.485, 0.456, 0.406}, Std: [3]float64{0.229, 0.224, 0.225}}, 640, 640)
		})
	}
}

// The worker's hot loop, Transformer.Apply: header, decode, resize,
// normalize into a reused output buffer. Run with -benchmem: the PNG path
// (both builds) and the JPEG path of the turbojpeg build report 0 allocs/op;
// image/jpeg allocates its decoded image (3 allocs, ~3.4 MB per 1080p
// frame), the documented exception.
func benchmarkApply(b *testing.B, data []byte, w, h int) {
	spec := Spec{Width: 640, Height: 640, Mode: Letterbox, Pad: 114, DType: dtype.F16}
	tr := mustTransformer(b, spec)
	out := make([]byte, spec.OutputBytes())
	if _, err := tr.Apply(data, out); err != nil { // grow the buffers: steady state below
		b.Fatal(err)
	}
	b.SetBytes(int64(3 * w * h))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := tr.Apply(data, out); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkApplyJPEG1920x1080To640(b *testing.B) {
	data := encodeJPEG(b, rgbToRGBA(gradientNoiseRGB(1920, 1080, 4, 12), 1920, 1080), 90)
	benchmarkApply(b, data, 1920, 1080)
}

func BenchmarkApplyPNGRGBA1280x720To640(b *testing.B) {
	data := encodePNG(b, withAlpha(gradientNoiseRGB(1280, 720, 5, 12), 1280, 720))
	benchmarkApply(b, data, 1280, 720)
}
