package kdb

import (
	"bytes"
	"image"
	"image/jpeg"
	"testing"
)

// benchFile is 8 episodes of 60 frames, each frame with a 640x480 JPEG
// "front" camera and a 160x120 raw "wrist" camera: about 18 MB, of which
// a scan should read a few KiB per frame.
func benchFile(b *testing.B) ([]byte, int) {
	img := image.NewRGBA(image.Rect(0, 0, 640, 480))
	for i := range img.Pix {
		img.Pix[i] = byte(i*7 + i/2560)
	}
	var jp bytes.Buffer
	if err := jpeg.Encode(&jp, img, &jpeg.Options{Quality: 85}); err != nil {
		b.Fatal(err)
	}
	front := tCamera{name: "front", w: 640, h: 480, ch: 3, format: FormatCompressed, data: jp.Bytes()}
	wrist := rawCamera("wrist", 160, 120, 3, 0)
	var eps []tEpisode
	for id := range 8 {
		ep := tEpisode{id: uint64(id), stateDim: -1, actionDim: -1}
		for t := range 60 {
			fr := tStep(uint64(id), t, 60, 14, 7)
			fr.cams = []tCamera{front, wrist}
			ep.frames = append(ep.frames, fr)
		}
		eps = append(eps, ep)
	}
	return build(eps).file, 8 * 60
}

func BenchmarkScan(b *testing.B) {
	file, frames := benchFile(b)
	for _, camera := range []string{"front", "wrist"} {
		b.Run("camera="+camera, func(b *testing.B) {
			h := newMem(file)
			s, err := newSource("bench", Options{Camera: camera, Extras: Fields})
			if err != nil {
				b.Fatal(err)
			}
			if err := s.add("bench.kdb", h); err != nil {
				b.Fatal(err)
			}
			if err := s.finish(); err != nil {
				b.Fatal(err)
			}
			h.rec = true
			b.ResetTimer()
			for b.Loop() {
				h.reads = h.reads[:0]
				scanAll(b, s)
			}
			var read int64
			for _, r := range h.reads {
				read += r[1]
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*frames), "ns/frame")
			b.ReportMetric(float64(read)/float64(frames), "read-B/frame")
			b.ReportMetric(float64(len(file))/float64(frames), "file-B/frame")
		})
	}
}

func BenchmarkReadImage(b *testing.B) {
	file, _ := benchFile(b)
	for _, camera := range []string{"front", "wrist"} {
		b.Run("camera="+camera, func(b *testing.B) {
			s, err := memSource(map[string][]byte{"bench.kdb": file}, []string{"bench.kdb"}, Options{Camera: camera})
			if err != nil {
				b.Fatal(err)
			}
			samples := scanAll(b, s)
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if _, err := s.ReadImage(&samples[i%len(samples)]); err != nil {
					b.Fatal(err)
				}
				i++
			}
		})
	}
}
