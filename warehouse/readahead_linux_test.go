//go:build linux

package warehouse_test

import (
	"context"
	"io"
	"os"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"warehouse-etl/shard"
	. "warehouse-etl/warehouse"
	"warehouse-etl/warehouse/warehousetest"
)

// resident reports whether the first page of b (a view into a mapping) is
// in the page cache.
func resident(t *testing.T, b []byte) bool {
	t.Helper()
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b))) &^ (page - 1)
	vec := make([]byte, 1)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, start, page, uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Skipf("mincore: %v", errno)
	}
	return vec[0]&1 != 0
}

// adviseWillNeed reads into the page cache the images of the samples it is
// given, which were evicted: the cold read the batches after it then find
// cached. A sample it is not given stays out.
func TestReadAheadBringsPagesIn(t *testing.T) {
	spec := warehousetest.Spec{DType: shard.F32, Width: 256, Height: 64, MaxBoxes: 2, ShardSizes: []int{16}}
	fx := warehousetest.Write(t, spec) // 196 KiB images: many pages each
	// Unchecked: a CRC check would read the pages this test watches.
	r, err := Open(fx.Dir, OpenOptions{SkipSampleChecksums: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	image := func(i int) []byte {
		s, err := r.Sample(i) // a view into the mapping
		if err != nil {
			t.Fatal(err)
		}
		return s.Image()
	}
	image(0) // maps the shard
	f, err := os.Open(fx.ShardPath(0))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	evict := func() {
		_ = f.Sync() // DONTNEED keeps dirty pages
		if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
			t.Skipf("fadvise: %v", err)
		}
	}
	evict()
	if resident(t, image(9)) || resident(t, image(12)) {
		t.Skip("DONTNEED leaves the pages cached here (tmpfs?): nothing to measure")
	}
	r.AdviseWillNeed([]int{8, 9, 10, 3})
	deadline := time.Now().Add(5 * time.Second)
	for !resident(t, image(9)) || !resident(t, image(3)) {
		if time.Now().After(deadline) {
			t.Fatal("samples 9 and 3 were advised but are not in the page cache after 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if resident(t, image(12)) {
		t.Error("sample 12 was not advised but is cached")
	}

	// Batches with and without read-ahead are the same batches.
	read := func(ahead int) [][]byte {
		evict()
		it, err := r.Batches(context.Background(), BatchOptions{BatchSize: 3, Seed: 1, Shuffle: ShuffleGlobal, ReadAhead: ahead})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var out [][]byte
		for {
			b, err := it.Next()
			if err == io.EOF {
				return out
			}
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, append([]byte(nil), b.Images...))
		}
	}
	a, b := read(0), read(4)
	if len(a) != len(b) || len(a) == 0 {
		t.Fatalf("%d batches without read-ahead, %d with", len(a), len(b))
	}
	for k := range a {
		if string(a[k]) != string(b[k]) {
			t.Fatalf("batch %d differs with read-ahead", k)
		}
	}
}

// dropFromCache drops the file at path from the page cache (pages another
// mapping holds stay).
func dropFromCache(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_ = f.Sync() // DONTNEED keeps dirty pages
	_ = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

// readAheadEpoch reads one epoch of r (batches of 2, global shuffle,
// ReadAhead 2, one worker): its images in batch order, the batches
// advised, the batches and the samples counted cold.
func readAheadEpoch(t *testing.T, r *Reader) (images []byte, advised, batches int, cold int64) {
	t.Helper()
	before := r.Stats().ColdSamples
	it, err := r.Batches(context.Background(), BatchOptions{BatchSize: 2, Seed: 1, Shuffle: ShuffleGlobal, ReadAhead: 2, Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := it.Next()
		if err == io.EOF {
			break
		} else if err != nil {
			it.Close()
			t.Fatal(err)
		}
		images = append(images, b.Images...)
		batches++
	}
	it.Close() // Advised is read after it
	return images, it.Advised(), batches, r.Stats().ColdSamples - before
}

// A batch iterator counts the samples it read from disk (Stats.ColdSamples:
// preadv2 RWF_NOWAIT found them out of the page cache) and advises the
// batches ahead only then: a warm epoch is read with no cold sample and no
// advice beyond its first two batches (advised before any read ends), an
// evicted one is advised once its reads are cold, and the epoch after a
// cold one from its first batch. (Compact shards read their regions
// through the same Reader.readAt: cmd/warehouse-etl's TestLoadColdSamples.)
func TestReadAheadOnlyWhenCold(t *testing.T) {
	spec := warehousetest.Spec{DType: shard.F32, Width: 256, Height: 64, MaxBoxes: 2, ShardSizes: []int{40, 40}}
	fx := warehousetest.Write(t, spec) // 196 KiB images
	r, err := Open(fx.Dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for range 2 { // the first epoch's reads make every page cached
		readAheadEpoch(t, r)
	}
	if _, advised, _, cold := readAheadEpoch(t, r); cold != 0 || advised != 2 {
		t.Fatalf("a warm epoch read %d samples from disk and advised %d batches, want 0 and 2", cold, advised)
	}
	for k := range 2 {
		dropFromCache(t, fx.ShardPath(k))
	}
	_, advised, batches, cold := readAheadEpoch(t, r)
	if cold == 0 {
		t.Skipf("no sample was read from disk after DONTNEED (tmpfs, or a kernel without RWF_NOWAIT)")
	}
	if advised <= 2 || advised >= batches {
		t.Errorf("a cold epoch (%d of 80 samples from disk) advised %d of %d batches, want more than 2, not the first", cold, advised, batches)
	}
	if _, advised, batches, cold := readAheadEpoch(t, r); cold != 0 || advised != batches-1 {
		t.Errorf("the epoch after a cold one read %d samples from disk and advised %d of %d batches, want all but the first", cold, advised, batches)
	}
	if _, advised, _, _ := readAheadEpoch(t, r); advised != 2 {
		t.Errorf("a warm epoch after a warm one advised %d batches, want 2", advised)
	}
}

// Where the kernel cannot say what the page cache holds (ReadCached asked
// false: NFS, old kernels), every sample counts as cold and the batches
// are advised from the first window on, as on a cold cache; the batches
// are the same.
func TestReadAheadWhenTheCacheCannotBeAsked(t *testing.T) {
	fx := warehousetest.Write(t, warehousetest.Spec{DType: shard.F32, Width: 256, Height: 64, MaxBoxes: 2, ShardSizes: []int{20, 20}})
	r, err := Open(fx.Dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want, _, _, _ := readAheadEpoch(t, r)
	defer SetReadCached(func(*os.File, []byte, int64) (int, bool) { return 0, false })()
	got, advised, batches, cold := readAheadEpoch(t, r)
	if string(got) != string(want) {
		t.Fatal("the batches differ where the cache cannot be asked")
	}
	if cold != 40 {
		t.Errorf("%d of 40 samples counted cold where the cache cannot be asked, want all", cold)
	}
	if advised < batches-4 {
		t.Errorf("%d of %d batches advised where the cache cannot be asked, want all but the few before the first window", advised, batches)
	}
	if _, advised, batches, _ := readAheadEpoch(t, r); advised != batches-1 {
		t.Errorf("the next epoch advised %d of %d batches, want all but the first", advised, batches)
	}
}
