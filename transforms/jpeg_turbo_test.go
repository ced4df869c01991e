//go:build turbojpeg

package transforms

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"image"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"warehouse-etl/dtype"
	"warehouse-etl/transforms/jpegdec"
)

// goldenSums pins the outputs of the turbojpeg build: the same cases as the
// pure-Go build, whose JPEG cases differ (another IDCT, fancy upsampling,
// DCT scaling).
const goldenSums = "testdata/golden/outputs-turbojpeg.sha256"

// jpegFormatTolerance is the largest per-channel difference allowed between
// this build's JPEG pixels and image/jpeg's in TestApplyFormats (mode None,
// no scaling). Its 29x19 input carries +-40 noise in every channel, i.e.
// chroma that changes at pixel scale, the worst case for the one real
// difference: libjpeg-turbo upsamples 4:2:0 chroma with a triangle filter,
// image/jpeg's YCbCr is read with nearest-neighbour chroma (observed: max
// 64, mean 5.9). It still catches swapped channels or a wrong orientation;
// TestTurboJPEGMatchesImageJPEG bounds the realistic cases tightly.
const jpegFormatTolerance = 72

// Tolerances of TestJPEGMatchesImageJPEG, in 8-bit levels (1/255 of
// the output range), per channel over the letterboxed image: libjpeg-turbo
// and image/jpeg use different IDCTs and chroma upsampling, and a scaled
// decode averages in the DCT domain before the antialiased resample. The
// mean is what matters (no bias); the maximum bounds single pixels at
// hard colour edges.
const (
	jpegMeanTolerance = 1.5
	jpegP99Tolerance  = 8
	jpegMaxTolerance  = 80
)

// Corrupt and truncated JPEGs fail with ErrDecode (STOPONWARNING: a
// truncated scan is an error, not a gray-filled image), and a CMYK-free
// header that libjpeg-turbo reads differently from image/jpeg cannot slip
// through.
func TestTurboJPEGErrors(t *testing.T) {
	good := encodeJPEG(t, rgbToRGBA(gradientNoiseRGB(64, 48, 51, 20), 64, 48), 90)
	sos := bytes.Index(good, []byte{0xff, 0xda})
	tests := map[string][]byte{
		"truncated in scan": good[:sos+200],
		"scan data zeroed": func() []byte {
			b := bytes.Clone(good)
			clear(b[sos+20 : len(b)-2])
			return b
		}(),
	}
	spec := Spec{Width: 32, Height: 32, Mode: Letterbox, DType: dtype.F16}
	for name, data := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := mustTransformer(t, spec).Apply(data, make([]byte, spec.OutputBytes()))
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("Apply = %v, want ErrDecode", err)
			}
		})
	}
}

// turboHelperEnv makes the test binary print the sha256 of the outputs of
// turboInputs and exit; TestTurboJPEGSIMDIndependent runs it with
// libjpeg-turbo's SIMD code switched off.
const turboHelperEnv = "WAREHOUSE_TURBOJPEG_HASH_HELPER"

func turboOutputsHash(t *testing.T) string {
	h := sha256.New()
	for _, in := range jpegScaleInputs(t) {
		out := make([]byte, in.spec.OutputBytes())
		if _, err := mustTransformer(t, in.spec).Apply(in.data, out); err != nil {
			t.Fatal(err)
		}
		h.Write(out)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestTurboJPEGHashHelper(t *testing.T) {
	if os.Getenv(turboHelperEnv) != "1" {
		t.Skip("helper for TestTurboJPEGSIMDIndependent")
	}
	fmt.Println("hash=" + turboOutputsHash(t))
}

// The pixels do not depend on the CPU: libjpeg-turbo's SIMD paths (AVX2 or
// SSE2 here, NEON on arm64) give the same bytes as its portable C code,
// which JSIMD_FORCENONE=1 selects. This stands in for running on another
// architecture.
func TestTurboJPEGSIMDIndependent(t *testing.T) {
	want := turboOutputsHash(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestTurboJPEGHashHelper$", "-test.v")
	cmd.Env = append(os.Environ(), turboHelperEnv+"=1", "JSIMD_FORCENONE=1")
	outb, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, outb)
	}
	_, got, ok := strings.Cut(string(outb), "hash=")
	if !ok {
		t.Fatalf("helper printed no hash:\n%s", outb)
	}
	got, _, _ = strings.Cut(got, "\n")
	if got != want {
		t.Fatalf("outputs with SIMD off hash to %s, with SIMD %s", got, want)
	}
}

// turboJPEGVersion must name the library being linked: compare it with the
// installed libturbojpeg's pkg-config version (the .pc file ships with
// libturbojpeg0-dev, which the build needs anyway).
func TestTurboJPEGVersionMatchesInstalled(t *testing.T) {
	version := ""
	if out, err := exec.Command("pkg-config", "--modversion", "libturbojpeg").Output(); err == nil {
		version = strings.TrimSpace(string(out))
	} else {
		files, _ := filepath.Glob("/usr/lib/*/pkgconfig/libturbojpeg.pc")
		more, _ := filepath.Glob("/usr/*/lib*/pkgconfig/libturbojpeg.pc")
		for _, f := range append(files, more...) {
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, line := range strings.Split(string(data), "\n") {
				if v, ok := strings.CutPrefix(line, "Version:"); ok {
					version = strings.TrimSpace(v)
				}
			}
		}
	}
	if version == "" {
		t.Fatal("cannot find libturbojpeg's version (pkg-config or libturbojpeg.pc)")
	}
	if version != turboJPEGVersion {
		t.Fatalf("installed libturbojpeg is %s, turboJPEGVersion says %s: update it (new pixels, new warehouse versions)", version, turboJPEGVersion)
	}
	if !strings.Contains(DecoderIdentity(), "libjpeg-turbo/"+turboJPEGVersion) {
		t.Fatalf("DecoderIdentity %q does not name libjpeg-turbo %s", DecoderIdentity(), turboJPEGVersion)
	}
}

// The libjpeg-turbo path allocates nothing in Go once the Transformer's
// buffers have grown (libjpeg-turbo's own working memory is C memory,
// freed at the end of each decode).
func TestApplyTurboJPEGDoesNotAllocate(t *testing.T) {
	data := encodeJPEG(t, rgbToRGBA(gradientNoiseRGB(640, 360, 121, 12), 640, 360), 90)
	spec := Spec{Width: 160, Height: 160, Mode: Letterbox, DType: dtype.F16}
	tr := mustTransformer(t, spec)
	out := make([]byte, spec.OutputBytes())
	if _, err := tr.Apply(data, out); err != nil {
		t.Fatal(err)
	}
	if allocs := testing.AllocsPerRun(10, func() {
		if _, err := tr.Apply(data, out); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Fatalf("%v allocations per Apply, want 0", allocs)
	}
}

// Bounds of TestJPEGDecMatchesTurboScaled, in 8-bit levels per channel of
// the decoded (scaled, not yet resampled) RGB. Scaled, jpegdec decodes as
// libjpeg-turbo does (jidctred-style reduced IDCTs, 4:2:0 chroma at twice
// the luma's DCT scale, FancyScaled): gray images come out identical and
// color differs by the YCbCr to RGB rounding (color.YCbCrToRGB's 16-bit
// constants against libjpeg's tables). At 1/1 jpegdec is image/jpeg, with
// replicated chroma where libjpeg-turbo interpolates. Observed on
// jpegScaleInputs, whose pixel-scale noise in every channel is the worst
// case for chroma: scaled mean <= 0.21, max 3; 1/1 mean <= 0.47, max 67.
var turboScaledBounds = map[bool]struct{ mean, max float64 }{
	true:  {mean: 0.3, max: 4},  // scaled
	false: {mean: 0.6, max: 80}, // 1/1
}

// jpegdec's decode stays within documented bounds of libjpeg-turbo's at
// every DCT scale.
func TestJPEGDecMatchesTurboScaled(t *testing.T) {
	for _, in := range jpegScaleInputs(t) {
		t.Run(in.name, func(t *testing.T) {
			tr := mustTransformer(t, in.spec)
			hdr, err := readHeader(in.data, MaxSourcePixels)
			if err != nil {
				t.Fatal(err)
			}
			w, h := hdr.displayedSize()
			g, err := planGeometry(in.spec, w, h)
			if err != nil {
				t.Fatal(err)
			}
			turbo, err := tr.decodeJPEG(in.data, hdr, g)
			if err != nil {
				t.Fatal(err)
			}
			d := jpegdec.Decoder{FancyScaled: true}
			m, err := d.Decode(in.data, in.k)
			if err != nil {
				t.Fatal(err)
			}
			var img image.Image = &m.YCbCr
			if m.Color == jpegdec.ColorGray {
				img = &m.Gray
			}
			b := img.Bounds()
			own := mustTransformer(t, in.spec).orientRGB(straightPixels(img), b.Dx(), b.Dy(), hdr.orientation)
			if own.w != turbo.w || own.h != turbo.h {
				t.Fatalf("jpegdec %dx%d, libjpeg-turbo %dx%d", own.w, own.h, turbo.w, turbo.h)
			}
			sum, maxDiff := 0, 0
			for y := range own.h {
				a := own.pix[y*own.stride : y*own.stride+3*own.w]
				c := turbo.pix[y*turbo.stride : y*turbo.stride+3*turbo.w]
				for i := range a {
					d := int(a[i]) - int(c[i])
					d = max(d, -d)
					sum += d
					maxDiff = max(maxDiff, d)
				}
			}
			mean := float64(sum) / float64(3*own.w*own.h)
			t.Logf("1/%d vs libjpeg-turbo: |diff| mean %.3f, max %d", in.k, mean, maxDiff)
			if b := turboScaledBounds[in.k > 1]; mean > b.mean || float64(maxDiff) > b.max {
				t.Fatalf("|diff| mean %.3f max %d beyond %v / %v", mean, maxDiff, b.mean, b.max)
			}
		})
	}
}
