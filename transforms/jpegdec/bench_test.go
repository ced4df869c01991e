package jpegdec

import (
	"bytes"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	benchOnce sync.Once
	benchJPEG []byte
)

// benchImage is a 1920x1080 q90 4:2:0 JPEG of a blurred plasma fractal,
// the kind of frame bench/run.sh builds from (bench/gen_dataset.py).
func benchImage(b *testing.B) []byte { return benchImageFrom(b) }

func benchImageFrom(b testing.TB) []byte {
	benchOnce.Do(func() {
		// JPEGDEC_BENCH_FILE: time another frame (one of bench/run.sh's, say: noisier
		// than the plasma, so more of its time is Huffman decoding).
		if f := os.Getenv("JPEGDEC_BENCH_FILE"); f != "" {
			var err error
			if benchJPEG, err = os.ReadFile(f); err != nil {
				b.Fatal(err)
			}
			return
		}
		if _, err := os.Stat(convertCmd); err != nil {
			return
		}
		dst := filepath.Join(b.TempDir(), "frame.jpg")
		cmd := exec.Command(convertCmd, "-seed", "1000", "-size", "1920x1080", "plasma:fractal", "-blur", "0x2",
			"-quality", "90", "-sampling-factor", "2x2", dst)
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("convert: %v\n%s", err, out)
		}
		benchJPEG, _ = os.ReadFile(dst)
	})
	if benchJPEG == nil {
		b.Skip("ImageMagick not installed")
	}
	return benchJPEG
}

// BenchmarkDecode decodes a 1080p q90 4:2:0 frame at each scale, against
// image/jpeg (full size only).
func BenchmarkDecode(b *testing.B) {
	for _, k := range []int{1, 2, 4, 8} {
		b.Run("scale=1/"+string(rune('0'+k)), func(b *testing.B) {
			data := benchImage(b)
			var d Decoder
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := d.Decode(data, k); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("image/jpeg", func(b *testing.B) {
		data := benchImage(b)
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jpeg.Decode(bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
