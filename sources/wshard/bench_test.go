package wshard

import (
	"context"
	"testing"

	"warehouse-etl/sources"
	"warehouse-etl/sources/wshard/container"
)

// benchEpisode is 300 steps of 96x96 RGB (8.3 MB of frames) with the test
// signals, its camera stored as comp.
func benchEpisode(b *testing.B, comp container.Compression) (*Source, []sources.Sample) {
	b.Helper()
	e := cleanEpisode(0, 300, 96, 96)
	e.Channels[0].Compression = comp
	dir := b.TempDir()
	writeEpisode(b, dir, "e.wshard", e)
	s := newSource(b, dir, Options{Extras: allExtras})
	return s, scan(b, s)
}

// BenchmarkScan: headers, metadata and extras of one 300-step episode;
// the camera block is not read.
func BenchmarkScan(b *testing.B) {
	s, _ := benchEpisode(b, container.CompressNone)
	b.ReportAllocs()
	for b.Loop() {
		n := 0
		if err := s.Scan(context.Background(), func(*sources.Sample) error { n++; return nil }); err != nil || n != 300 {
			b.Fatal(err, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/300, "ns/sample")
}

// BenchmarkReadImage reads every frame once per iteration from a fresh
// cache, so the block load (CRC, decompression) is part of the cost.
func BenchmarkReadImage(b *testing.B) {
	for _, c := range []struct {
		name string
		comp container.Compression
	}{{"raw", container.CompressNone}, {"zstd", container.CompressZstd}, {"lz4", container.CompressLZ4}} {
		b.Run(c.name, func(b *testing.B) {
			s, samples := benchEpisode(b, c.comp)
			b.SetBytes(int64(len(samples)) * 96 * 96 * 3)
			for b.Loop() {
				s.frames = newFrameCache(s)
				for i := range samples {
					if _, err := s.ReadImage(&samples[i]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
