package coco

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"warehouse-etl/sources"
)

// writeBigCOCO writes an instances file shaped like COCO's own: info,
// licenses, images, annotations with polygon segmentations (1 or 2 parts of
// 5 to 11 points, coordinates with two decimals; every 50th a crowd RLE),
// categories. Annotations are not grouped by image: image ids run from 1
// to images, perImage times over. It returns the file size.
func writeBigCOCO(tb testing.TB, name string, images, perImage int) int64 {
	tb.Helper()
	f, err := os.Create(name)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	w.WriteString(`{"info": {"description": "synthetic COCO", "url": "http://example.com", "version": "1.0", "year": 2017, "contributor": "bench", "date_created": "2017/09/01"},` + "\n")
	w.WriteString(`"licenses": [{"url": "http://creativecommons.org/licenses/by/2.0/", "id": 1, "name": "Attribution License"}],` + "\n")
	w.WriteString(`"images": [`)
	for i := range images {
		if i > 0 {
			w.WriteByte(',')
		}
		fmt.Fprintf(w, "\n{\"license\": 1, \"file_name\": \"%012d.jpg\", \"coco_url\": \"http://images.example.com/train2017/%012d.jpg\", \"height\": 480, \"width\": 640, \"date_captured\": \"2013-11-14 16:28:13\", \"flickr_url\": \"http://farm4.example.com/%d.jpg\", \"id\": %d}", i+1, i+1, i+1, i+1)
	}
	w.WriteString("],\n\"annotations\": [")
	var num []byte
	coord := func(v float64) {
		num = strconv.AppendFloat(num[:0], float64(int(v*100))/100, 'f', -1, 64)
		w.Write(num)
	}
	id := 0
	// Round by round rather than image by image, so that New must sort.
	for range perImage {
		for i := range images {
			if id > 0 {
				w.WriteByte(',')
			}
			id++
			x, y := rng.Float64()*500, rng.Float64()*380
			bw, bh := 1+rng.Float64()*130, 1+rng.Float64()*90
			crowd := id%50 == 0
			w.WriteString("\n{\"segmentation\": ")
			if crowd {
				w.WriteString(`{"counts": [`)
				for k := range 200 {
					if k > 0 {
						w.WriteByte(',')
					}
					w.WriteString(strconv.Itoa(rng.IntN(400)))
				}
				w.WriteString(`], "size": [480, 640]}`)
			} else {
				w.WriteByte('[')
				for part := range 1 + rng.IntN(2) {
					if part > 0 {
						w.WriteByte(',')
					}
					w.WriteByte('[')
					for k := range 2 * (5 + rng.IntN(7)) {
						if k > 0 {
							w.WriteByte(',')
						}
						if k%2 == 0 {
							coord(x + rng.Float64()*bw)
						} else {
							coord(y + rng.Float64()*bh)
						}
					}
					w.WriteByte(']')
				}
				w.WriteByte(']')
			}
			fmt.Fprintf(w, ", \"area\": %.4f, \"iscrowd\": %d, \"image_id\": %d, \"bbox\": [", bw*bh*0.7, map[bool]int{false: 0, true: 1}[crowd], i+1)
			coord(x)
			w.WriteByte(',')
			coord(y)
			w.WriteByte(',')
			coord(bw)
			w.WriteByte(',')
			coord(bh)
			fmt.Fprintf(w, "], \"category_id\": %d, \"id\": %d}", 1+rng.IntN(80), id)
		}
	}
	w.WriteString("],\n\"categories\": [")
	for c := 1; c <= 80; c++ {
		if c > 1 {
			w.WriteByte(',')
		}
		fmt.Fprintf(w, "\n{\"supercategory\": \"thing\", \"id\": %d, \"name\": \"class_%d\"}", c, c)
	}
	w.WriteString("]}\n")
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	st, err := f.Stat()
	if err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return st.Size()
}

// peakRSS returns VmHWM from /proc/self/status in bytes, 0 when unknown.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// resetPeakRSS starts VmHWM again from the current RSS (Linux 4.0 on);
// it reports whether it could.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

// BenchmarkPlanMillion plans a 1,000,000-annotation file (100,000 images x
// 10 annotations with polygons, 343 MB): New and a Scan over every
// sample, images absent (every sample missing_file, as the scan then reads
// no header). It reports the file size, the planning time and the peak
// RSS of the process during planning:
//
//	go test ./sources/coco -run '^$' -bench PlanMillion -benchtime 1x
func BenchmarkPlanMillion(b *testing.B) {
	dir := b.TempDir()
	name := filepath.Join(dir, "instances_big.json")
	size := writeBigCOCO(b, name, 100_000, 10)
	root := filepath.Join(dir, "images")
	if err := os.Mkdir(root, 0o755); err != nil {
		b.Fatal(err)
	}
	runtime.GC()
	reset := resetPeakRSS()
	var ms runtime.MemStats
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		src, err := New(name, root, Options{})
		if err != nil {
			b.Fatal(err)
		}
		parsed := time.Since(t0)
		var n, boxes int
		err = src.Scan(context.Background(), func(s *sources.Sample) error {
			n++
			boxes += s.ValidBoxes
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		total := time.Since(t0)
		runtime.ReadMemStats(&ms)
		if n != 100_000 || boxes != 980_000 {
			b.Fatalf("%d samples, %d valid boxes; want 100000, 980000", n, boxes)
		}
		b.ReportMetric(float64(size)/1e6, "file-MB")
		b.ReportMetric(parsed.Seconds(), "new-s")
		b.ReportMetric(total.Seconds(), "plan-s")
		b.ReportMetric(float64(ms.HeapSys)/(1<<20), "heapsys-MiB")
		if reset {
			b.ReportMetric(float64(peakRSS())/(1<<20), "peak-rss-MiB")
		}
		runtime.KeepAlive(src)
	}
}

// TestPlanMillion is BenchmarkPlanMillion as a pass/fail check of the
// bounds (10 s, 300 MiB peak RSS), run only when COCO_PLAN_MILLION=1: it
// writes 343 MB and takes about 10 s.
func TestPlanMillion(t *testing.T) {
	if os.Getenv("COCO_PLAN_MILLION") != "1" {
		t.Skip("set COCO_PLAN_MILLION=1 to plan a 1,000,000-annotation file")
	}
	res := testing.Benchmark(BenchmarkPlanMillion)
	t.Logf("%s %s", res, res.MemString())
	if s := res.Extra["plan-s"]; s > 10 {
		t.Errorf("planning took %.1f s, want < 10 s", s)
	}
	if m := res.Extra["peak-rss-MiB"]; m > 300 {
		t.Errorf("peak RSS %.0f MiB, want < 300 MiB", m)
	}
	if m := res.Extra["heapsys-MiB"]; m > 300 {
		t.Errorf("heap %.0f MiB, want < 300 MiB", m)
	}
}
