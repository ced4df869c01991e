package transforms

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"warehouse-etl/dtype"
)

// openCVAreaTolerance is the largest mean |difference| (8-bit levels) the
// letterboxed image may have from the OpenCV + NumPy reference
// (bench/reference.py: cv2.imread, cv2.resize INTER_AREA) on a bench-like
// 1080p q90 4:2:0 frame, the accuracy target for the warehouse.
const openCVAreaTolerance = 1.0

// The warehouse pixels of a 1080p frame like bench/gen_dataset.py's
// (blurred plasma, two shapes, mild noise) letterboxed to 384 and 640
// stay within openCVAreaTolerance of OpenCV's INTER_AREA, in both builds
// (DCT-scaled at 1/4 and 1/2).
func TestJPEGMatchesOpenCVArea(t *testing.T) {
	const convert, python = "/usr/bin/convert", "/usr/bin/python3"
	for _, tool := range []string{convert, python} {
		if _, err := os.Stat(tool); err != nil {
			t.Skipf("%s missing: %v", tool, err)
		}
	}
	if err := exec.Command(python, "-c", "import cv2, numpy").Run(); err != nil {
		t.Skipf("python3 cannot import cv2, numpy: %v", err)
	}
	dir := t.TempDir()
	frame := filepath.Join(dir, "frame.jpg")
	cmd := exec.Command(convert, "-seed", "1001", "-size", "1920x1080", "plasma:fractal", "-blur", "0x2",
		"-fill", "rgb(210,50,40)", "-draw", "circle 460,259 532,259",
		"-fill", "rgb(30,40,200)", "-draw", "rectangle 793,432 952,533",
		"-seed", "31", "-attenuate", "0.25", "+noise", "Gaussian",
		"-quality", "90", "-sampling-factor", "2x2", frame)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("convert: %v\n%s", err, out)
	}
	data, err := os.ReadFile(frame)
	if err != nil {
		t.Fatal(err)
	}
	for _, size := range []int{384, 640} {
		spec := Spec{Width: size, Height: size, Mode: Letterbox, DType: dtype.F32}
		out := make([]byte, spec.OutputBytes())
		g, err := mustTransformer(t, spec).Apply(data, out)
		if err != nil {
			t.Fatal(err)
		}
		got := outputRGB(t, out, spec, g)
		code := fmt.Sprintf("import cv2, sys; img = cv2.imread(sys.argv[1], cv2.IMREAD_COLOR); "+
			"sys.stdout.buffer.write(cv2.cvtColor(cv2.resize(img, (%d, %d), interpolation=cv2.INTER_AREA), "+
			"cv2.COLOR_BGR2RGB).tobytes())", g.NewW, g.NewH)
		var stderr bytes.Buffer
		py := exec.Command(python, "-c", code, frame)
		py.Stderr = &stderr
		want, err := py.Output()
		if err != nil {
			t.Fatalf("opencv: %v\n%s", err, stderr.Bytes())
		}
		if len(want) != len(got) {
			t.Fatalf("opencv wrote %d bytes, want %d", len(want), len(got))
		}
		meanDiff := func(a []byte) float64 {
			sum := 0
			for i := range a {
				d := int(a[i]) - int(want[i])
				sum += max(d, -d)
			}
			return float64(sum) / float64(len(a))
		}
		mean := meanDiff(got)
		full, _ := applyStd(t, spec, data)
		t.Logf("%d: %dx%d, mean |diff| vs OpenCV INTER_AREA %.3f levels (image/jpeg at full size, same resampler: %.3f)",
			size, g.NewW, g.NewH, mean, meanDiff(outputRGB(t, full, spec, g)))
		if mean > openCVAreaTolerance {
			t.Errorf("%d: mean |diff| %.3f > %.1f", size, mean, openCVAreaTolerance)
		}
	}
}
