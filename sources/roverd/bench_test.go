package roverd

import (
	"context"
	"testing"

	"warehouse-etl/sources"
)

// BenchmarkScanDemo is a whole demo scan with three joined extras: meta,
// timestamps, AVI indexes and one record of each extra per frame.
func BenchmarkScanDemo(b *testing.B) {
	s := mustNew(b, demoRoot, demoOptions())
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := s.Scan(context.Background(), func(*sources.Sample) error { n++; return nil }); err != nil || n != 20 {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkReadImage reads one MJPEG frame through the cached index.
func BenchmarkReadImage(b *testing.B) {
	s := mustNew(b, demoRoot, Options{})
	smp := scanAll(b, s)[5]
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.ReadImage(smp); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseMeta(b *testing.B) {
	data := readFile(b, demoRoot+"/drive_2/imu/meta.json")
	for b.Loop() {
		if _, err := ParseMeta(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMatch is the nearest-timestamp join against an hour of 1 kHz
// IMU timestamps.
func BenchmarkMatch(b *testing.B) {
	g := &extraGroup{ts: make([]float64, 3_600_000)}
	for i := range g.ts {
		g.ts[i] = 1700000000 + float64(i)/1000
	}
	t := 1700000000.0
	for b.Loop() {
		t += 0.0333
		if t > 1700003599 {
			t = 1700000000
		}
		if _, ok := g.match(t, 0.05); !ok {
			b.Fatal("no match")
		}
	}
}
