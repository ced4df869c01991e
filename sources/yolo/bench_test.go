package yolo

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"warehouse-etl/sources"
)

// BenchmarkParseLabel parses label files: a demo file of three boxes, a
// file of 100 boxes, and a segmentation label of 10 polygons of 50 points.
func BenchmarkParseLabel(b *testing.B) {
	demo, err := os.ReadFile(filepath.Join(demoRoot, "labels", "train", "frame_2.txt"))
	if err != nil {
		b.Fatal(err)
	}
	var many, poly strings.Builder
	for i := range 100 {
		many.WriteString(strings.Join([]string{"1", num01(i, 100), num01(i*7%100, 100), "0.0625", "0.125"}, " "))
		many.WriteString("\n")
	}
	for i := range 10 {
		poly.WriteString("2")
		for j := range 50 {
			poly.WriteString(" " + num01((i*50+j)%97, 97) + " " + num01((j*13)%89, 89))
		}
		poly.WriteString("\n")
	}
	for _, bb := range []struct {
		name string
		text string
	}{{"demo", string(demo)}, {"boxes100", many.String()}, {"polygons10x50", poly.String()}} {
		b.Run(bb.name, func(b *testing.B) {
			p := newParser(3, 0, 0)
			b.SetBytes(int64(len(bb.text)))
			b.ReportAllocs()
			for b.Loop() {
				p.parse(bb.text)
			}
		})
	}
}

// num01 writes i/n with six decimals, as exporters do.
func num01(i, n int) string {
	v := float64(i)/float64(n)*0.8 + 0.1
	return strconv.FormatFloat(v, 'f', 6, 64)
}

// BenchmarkScanDemo scans the 30 samples of the demo train split: label
// files read and parsed, image headers read.
func BenchmarkScanDemo(b *testing.B) {
	src := newSource(b, demoRoot, Options{})
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if err := src.Scan(context.Background(), func(*sources.Sample) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/float64(b.N), "samples/op")
}
