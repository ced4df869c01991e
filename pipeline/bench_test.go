package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"runtime"
	"testing"

	"warehouse-etl/sources"
)

// BenchmarkBuild runs the whole pipeline (scan, transform pool, ordered
// shard writes, publish) over 32 synthetic 1280x720 JPEG frames into
// 640x640 f16, reporting samples/s. Inputs are in memory, so this measures
// our work, not the disk.
func BenchmarkBuild(b *testing.B) {
	const n, w, h = 32, 1280, 720
	src := &memSource{images: map[string][]byte{}}
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range n {
		for y := range h {
			for x := range w {
				img.SetRGBA(x, y, color.RGBA{uint8(x + 3*i), uint8(y ^ x), uint8(y), 255})
			}
		}
		var buf bytes.Buffer
		if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90}); err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("f%02d.jpg", i)
		src.images[name] = buf.Bytes()
		src.samples = append(src.samples, sources.Sample{
			Seq: int64(i), Source: "run_1", Frame: uint64(i), ImagePath: name, Width: w, Height: h,
			Boxes: []sources.Box{{X0: 100, Y0: 100, X1: 400, Y1: 300}}, ValidBoxes: 1,
		})
	}
	for _, workers := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			for b.Loop() {
				cfg := testConfig(b, 64)
				cfg.TargetSize = [2]int{640, 640}
				cfg.MaxBoxes = 16
				cfg.ShardTargetMB = 192
				if _, err := Build(context.Background(), Options{Config: cfg, Source: src, Workers: workers}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "samples/s")
		})
	}
}
