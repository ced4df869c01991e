package shard

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// benchLayout is a 640x640 RGB f16 image with 16 box slots: 2.4 MB a sample.
var benchLayout = Layout{DType: F16, Width: 640, Height: 640, Channels: 3, MaxBoxes: 16}

const benchShardSamples = 16

// BenchmarkWriterAppend measures Append into a temp file; bytes/op is the
// image size. Starting a new shard every benchShardSamples samples happens
// with the timer (and allocation counting) stopped, so allocs/op is what
// Append itself allocates.
func BenchmarkWriterAppend(b *testing.B) {
	samples := randomSamples(rand.New(rand.NewPCG(7, 8)), benchLayout, 4)
	f, err := os.Create(filepath.Join(b.TempDir(), "bench.twh"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	newShard := func() *Writer {
		if err := f.Truncate(0); err != nil {
			b.Fatal(err)
		}
		if _, err := f.Seek(0, 0); err != nil {
			b.Fatal(err)
		}
		w, err := NewWriter(f, benchLayout, benchShardSamples)
		if err != nil {
			b.Fatal(err)
		}
		return w
	}
	w := newShard()
	n := 0
	b.SetBytes(benchLayout.ImageBytes())
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := w.Append(samples[i%len(samples)]); err != nil {
			b.Fatal(err)
		}
		if n++; n == benchShardSamples {
			b.StopTimer()
			if _, err := w.Close(); err != nil {
				b.Fatal(err)
			}
			w, n = newShard(), 0
			b.StartTimer()
		}
	}
}

// BenchmarkOpenRead maps a shard, reads every element of every image and
// unmaps it; bytes/op is the file size.
func BenchmarkOpenRead(b *testing.B) {
	samples := randomSamples(rand.New(rand.NewPCG(9, 10)), benchLayout, benchShardSamples)
	data, _ := writeShard(b, benchLayout, len(samples), samples)
	path := filepath.Join(b.TempDir(), "bench.twh")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var sink uint64
	for b.Loop() {
		r, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		for i := range r.Len() {
			for _, v := range r.ImageF16(i) {
				sink += uint64(v)
			}
		}
		if err := r.Close(); err != nil {
			b.Fatal(err)
		}
	}
	_ = sink
}

// BenchmarkParse measures validating a shard already in memory.
func BenchmarkParse(b *testing.B) {
	samples := randomSamples(rand.New(rand.NewPCG(11, 12)), benchLayout, benchShardSamples)
	data, _ := writeShard(b, benchLayout, len(samples), samples)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
