//go:build linux

package warehouse_test

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"warehouse-etl/shard"
	. "warehouse-etl/warehouse"
	"warehouse-etl/warehouse/warehousetest"
)

// A mixture forwards read-ahead to its parts: advising mixture index
// Offset(1)+9 brings part 1's sample 9 into the page cache and leaves
// part 0's sample 9 (the same local index) out.
func TestReadAheadMixtureAdvisesItsParts(t *testing.T) {
	spec := warehousetest.Spec{DType: shard.F32, Width: 256, Height: 64, MaxBoxes: 2, ShardSizes: []int{16}}
	var parts []BatchSource
	var readers []*Reader
	var files []*os.File
	for range 2 {
		fx := warehousetest.Write(t, spec)
		r, err := Open(fx.Dir, OpenOptions{SkipSampleChecksums: true})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		f, err := os.Open(fx.ShardPath(0))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		parts, readers, files = append(parts, r), append(readers, r), append(files, f)
	}
	m, err := NewMixture(parts, []float64{1, 1}, 0)
	if err != nil {
		t.Fatal(err)
	}
	image := func(k, i int) []byte {
		s, err := readers[k].Sample(i)
		if err != nil {
			t.Fatal(err)
		}
		return s.Image()
	}
	for k, f := range files {
		image(k, 0) // maps the shard
		_ = f.Sync()
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			t.Skipf("fadvise: %v", err)
		}
	}
	if resident(t, image(0, 9)) || resident(t, image(1, 9)) {
		t.Skip("DONTNEED leaves the pages cached here (tmpfs?): nothing to measure")
	}
	m.AdviseWillNeed([]int{m.Offset(1) + 9, -1, m.Len()})
	deadline := time.Now().Add(5 * time.Second)
	for !resident(t, image(1, 9)) {
		if time.Now().After(deadline) {
			t.Fatal("part 1's sample 9 was advised but is not in the page cache after 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if resident(t, image(0, 9)) {
		t.Error("part 0's sample 9 was not advised but is cached")
	}
}
