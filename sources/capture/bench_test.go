package capture

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"warehouse-etl/sources"
)

func BenchmarkParseLabel(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(demoRoot, "run_2/labels/frame_00008.json"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		parseLabel(data, keys)
	}
}

// BenchmarkScanDemo scans the 33 samples of the demo dataset: label files
// read and parsed, image headers read.
func BenchmarkScanDemo(b *testing.B) {
	src, err := New(demoRoot, Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if err := src.Scan(context.Background(), func(*sources.Sample) error { n++; return nil }); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/float64(b.N), "samples/op")
}
