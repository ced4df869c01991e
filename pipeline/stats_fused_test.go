package pipeline

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"math/rand/v2"
	"testing"

	"warehouse-etl/dtype"
	"warehouse-etl/transforms"
)

// The sums the transformer adds up while it writes (what the build keeps)
// are bit for bit the sums of a pass that reads the finished tensor back,
// on many random images: JPEG (jpegdec's scaled paths, or libjpeg-turbo's
// under -tags turbojpeg), PNG RGB and RGBA, raw RGB frames; every dtype and
// resize mode, random normalizations and sizes.
func TestTransformSumsEqualContentSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 5))
	modes := []transforms.ResizeMode{transforms.Letterbox, transforms.Stretch}
	dtypes := []dtype.DType{dtype.U8, dtype.F16, dtype.F32}
	n := 150
	if testing.Short() {
		n = 30
	}
	for i := range n {
		w, h := 1+rng.IntN(300), 1+rng.IntN(200)
		spec := transforms.Spec{Width: 1 + rng.IntN(96), Height: 1 + rng.IntN(96), Mode: modes[rng.IntN(2)],
			Pad: uint8(rng.IntN(256)), DType: dtypes[rng.IntN(3)]}
		if rng.IntN(3) == 0 {
			spec.Mode, spec.Width, spec.Height = transforms.None, w, h
		}
		if rng.IntN(2) == 0 {
			for c := range 3 {
				spec.Mean[c], spec.Std[c] = rng.Float64(), 0.05+rng.Float64()
			}
		}
		tr, err := transforms.NewTransformer(spec)
		if err != nil {
			t.Fatal(err)
		}
		img := image.NewNRGBA(image.Rect(0, 0, w, h))
		for y := range h {
			for x := range w {
				img.SetNRGBA(x, y, color.NRGBA{uint8(x*3 + rng.IntN(40)), uint8(y*5 + rng.IntN(40)), uint8(rng.IntN(256)), uint8(128 + rng.IntN(128))})
			}
		}
		out := make([]byte, spec.OutputBytes())
		var g transforms.Geometry
		kind := []string{"jpeg", "png", "raw"}[i%3]
		switch kind {
		case "jpeg":
			var buf bytes.Buffer
			if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 50 + rng.IntN(50)}); err != nil {
				t.Fatal(err)
			}
			g, err = tr.Apply(buf.Bytes(), out)
		case "png":
			var buf bytes.Buffer
			var m image.Image = img
			if rng.IntN(2) == 0 {
				rgba := image.NewRGBA(img.Bounds()) // opaque: encoded as RGB
				for j := range rgba.Pix {
					rgba.Pix[j] = img.Pix[j] | byte(0xff*(j%4/3))
				}
				m = rgba
			}
			if err := png.Encode(&buf, m); err != nil {
				t.Fatal(err)
			}
			g, err = tr.Apply(buf.Bytes(), out)
		case "raw":
			stride := 3*w + rng.IntN(8)
			pix := make([]byte, stride*h)
			for j := range pix {
				pix[j] = byte(rng.IntN(256))
			}
			g, err = tr.ApplyRGB(pix, w, h, stride, out)
		}
		if err != nil {
			t.Fatalf("image %d (%s %dx%d, spec %+v): %v", i, kind, w, h, spec, err)
		}
		want := contentSums(out, spec, g)
		got := transformSums(tr)
		same := got.n == want.n
		for c := range 3 {
			same = same && math.Float64bits(got.sum[c]) == math.Float64bits(want.sum[c]) &&
				math.Float64bits(got.sumSq[c]) == math.Float64bits(want.sumSq[c])
		}
		if !same {
			t.Fatalf("image %d (%s %dx%d, spec %+v): sums while writing %+v, read back %+v", i, kind, w, h, spec, got, want)
		}
	}
}
