package zarr

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"warehouse-etl/shard"
)

// BenchmarkExportVsCopy exports a synthetic warehouse (192 samples of
// 3x384x384 f16 in 3 shards, 162 MiB) and, in the same iteration, copies
// its shard files with io.Copy (copy_file_range on Linux); both make what
// they wrote durable. It reports both throughputs over the shard bytes and
// export/copy, the ratio of the throughputs:
//
//	go test ./zarr -run '^$' -bench ExportVsCopy -benchtime 3x
func BenchmarkExportVsCopy(b *testing.B) {
	fx := writeFixture(b, fixtureSpec{dtype: shard.F16, width: 384, height: 384, maxBoxes: 16, shardSizes: []int{64, 64, 64},
		extras: []fixtureExtra{{"action", []int{7}}}})
	var shardBytes int64
	for _, e := range fx.m.Shards {
		shardBytes += e.Bytes
	}
	for _, level := range []struct {
		name string
		zstd int
	}{{"raw", 0}, {"zstd1", 1}} {
		b.Run(level.name, func(b *testing.B) {
			var copyTime, exportTime time.Duration
			for i := 0; b.Loop(); i++ {
				out := b.TempDir()
				start := time.Now()
				copyShards(b, fx, filepath.Join(out, "copy"))
				copyTime += time.Since(start)
				start = time.Now()
				if _, err := Write(context.Background(), fx.dir, fx.m, filepath.Join(out, "s.zarr"), Options{ZstdLevel: level.zstd}); err != nil {
					b.Fatal(err)
				}
				exportTime += time.Since(start)
			}
			mb := float64(shardBytes) / (1 << 20) * float64(b.N)
			b.ReportMetric(mb/copyTime.Seconds(), "copy_MiB/s")
			b.ReportMetric(mb/exportTime.Seconds(), "export_MiB/s")
			b.ReportMetric(copyTime.Seconds()/exportTime.Seconds(), "export/copy")
		})
	}
}

// copyShards copies every shard file of fx into dir and fsyncs each.
func copyShards(b *testing.B, fx *fixture, dir string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	for _, e := range fx.m.Shards {
		src, err := os.Open(filepath.Join(fx.dir, filepath.FromSlash(e.RelativePath)))
		if err != nil {
			b.Fatal(err)
		}
		dst, err := os.Create(filepath.Join(dir, e.ID))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			b.Fatal(err)
		}
		if err := dst.Sync(); err != nil {
			b.Fatal(err)
		}
		if err := dst.Close(); err != nil {
			b.Fatal(err)
		}
		src.Close()
	}
}
