package wshard

import (
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"warehouse-etl/internal/membudget"
	"warehouse-etl/sources"
	"warehouse-etl/sources/wshard/container"
)

// readAll reads every sample's frame with `workers` goroutines taking
// samples in order, releasing each image as the pipeline does.
func readAll(t *testing.T, s *Source, samples []sources.Sample, workers int) []error {
	t.Helper()
	errs := make([]error, len(samples))
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				im, err := s.ReadImage(&samples[i])
				errs[i] = err
				if im.Release != nil {
					im.Release()
				}
			}
		})
	}
	for i := range samples {
		next <- i
	}
	close(next)
	wg.Wait()
	return errs
}

// A camera block larger than the frame cache's limit used to be evicted
// whenever no frame of it was being read, and decompressed again for the
// next frame: 86 frames of a 258 MB block decompressed it 86 times. Each
// block must be read whole once per build, under a build budget at 1 and
// 4 readers and without one at 1 reader; once all its frames are read it
// is evicted, and under a budget the cached block is reserved until then.
func TestCameraBlockDecompressedOnce(t *testing.T) {
	const T, H, W = 24, 64, 64 // 288 KiB blocks
	for _, c := range []struct {
		name    string
		workers int
		budget  int64
	}{
		{"1 reader", 1, 0}, {"1 reader, budget", 1, 8 << 20}, {"4 readers, budget", 4, 8 << 20},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for e, name := range []string{"a.wshard", "b.wshard"} {
				ep := cleanEpisode(e, T, H, W)
				ep.Channels[0].Compression = container.CompressZstd
				writeEpisode(t, dir, name, ep)
			}
			s := newSource(t, dir, Options{FrameCacheBytes: 64 << 10}) // below one block
			var b *membudget.Budget
			if c.budget > 0 {
				b = membudget.New(c.budget)
				s.SetMemoryBudget(b)
			}
			samples := scan(t, s)
			if len(samples) != 2*T {
				t.Fatalf("%d samples", len(samples))
			}
			for i, err := range readAll(t, s, samples, c.workers) {
				if err != nil {
					t.Fatalf("sample %d: %v", i, err)
				}
			}
			if s.frames.loads != 2 {
				t.Errorf("camera blocks read whole %d times for 2 episodes", s.frames.loads)
			}
			if got := len(s.frames.files); got != 0 {
				t.Errorf("%d episode files cached after all their frames were read", got)
			}
			if b != nil {
				if st := b.Stats(); st.Used != st.Garbage || st.Peak < T*H*W*3 {
					t.Errorf("budget %+v: want every byte given back, a block's %d reserved at the peak", st, T*H*W*3)
				}
			}
		})
	}
}

// A camera block that declares more bytes than the build's budget (here a
// 1020 MiB block from an 84 KB zstd stream, as in issue 23 where such a
// block grew past 6 GB) is refused before anything is allocated for it:
// every frame fails with an error naming the block and both sizes, at
// once, and the cache holds nothing.
func TestCameraBlockOverBudgetRefused(t *testing.T) {
	const T, H, W = 340, 1024, 1024
	// Two random bits a byte: compressible (a raw block cannot lie about
	// its size), and still over the 32 KB that zstd needs to claim 1 GiB
	// (container.zstdMaxDecoded).
	noise := make([]byte, 256<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range noise {
		noise[i] = byte(rng.Uint32() & 3)
	}
	ep := &EpisodeFile{ID: "big", Length: T, TickHz: 5, Channels: []ChannelData{
		{ID: "cam", Block: "signal/cam/rgb", DType: "u8", Shape: []int{H, W, 3}, Modality: "rgb", Data: noise, Compression: container.CompressZstd},
	}}
	b, err := ep.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	patchEntry(t, b, "signal/cam/rgb", 32, T*H*W*3, 8) // original_size
	dir := t.TempDir()
	writeBytes(t, dir, "big.wshard", b)
	s := newSource(t, dir, Options{})
	budget := membudget.New(256 << 20)
	s.SetMemoryBudget(budget)
	samples := scan(t, s)
	if len(samples) != T || len(samples[0].Reasons) != 0 {
		t.Fatalf("%d samples, first with reasons %v", len(samples), samples[0].Reasons)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	errs := readAll(t, s, samples[:8], 4)
	runtime.ReadMemStats(&after)
	for i, err := range errs {
		if !errors.Is(err, errBlockBudget) || !errors.Is(err, membudget.ErrOverBudget) {
			t.Fatalf("frame %d: %v, want the budget's refusal", i, err)
		}
	}
	want := "wshard: big.wshard: block signal/cam/rgb of 1069547520 bytes (" // stored size follows
	if got := errs[0].Error(); len(got) < len(want) || got[:len(want)] != want {
		t.Errorf("error %q, want it to start %q", got, want)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Errorf("refusing the block allocated %d bytes", got)
	}
	if st := budget.Stats(); st.Used != 0 {
		t.Errorf("budget holds %d bytes after the refusal", st.Used)
	}
}
