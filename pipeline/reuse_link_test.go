package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"warehouse-etl/internal/fsfault"
	"warehouse-etl/outputroot"
	"warehouse-etl/shard"
	"warehouse-etl/sources"
	"warehouse-etl/warehouse"
)

// fileSource is genSource over real image files, so that the build
// hashes them from disk and keeps their identities in the input cache
// (sources.ImageFiler): sample i's image is dir/frames/%07d.png, a 10x10
// PNG of its own colours. moved lists samples whose first box is moved
// (an edited label).
type fileSource struct {
	genSource
	dir   string
	moved map[int]bool
}

func newFileSource(t *testing.T, n int) *fileSource {
	t.Helper()
	f := &fileSource{genSource: genSource{n: n}, dir: t.TempDir(), moved: map[int]bool{}}
	if err := os.MkdirAll(filepath.Join(f.dir, "frames"), 0o755); err != nil {
		t.Fatal(err)
	}
	f.grow(t, n)
	return f
}

// grow writes the images of samples up to n that do not exist yet.
func (f *fileSource) grow(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		p := filepath.Join(f.dir, "frames", fmt.Sprintf("%07d.png", i))
		if _, err := os.Stat(p); err == nil {
			continue
		}
		if err := os.WriteFile(p, pngBytes(t, 10, 10, uint8(7*i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	f.n = n
}

func (f *fileSource) Scan(ctx context.Context, fn func(*sources.Sample) error) error {
	for i := range f.n {
		s := f.sample(i)
		if f.moved[i] {
			s.Boxes[0].X0++
		}
		if err := fn(&s); err != nil {
			return err
		}
	}
	return nil
}

func (f *fileSource) ImageFile(s *sources.Sample) (string, int64, error) {
	return filepath.Join(f.dir, filepath.FromSlash(s.ImagePath)), 1 << 20, nil
}

func (f *fileSource) ReadImage(s *sources.Sample) (sources.Image, error) {
	return sources.ReadImageFile(f, "files", s)
}

// inAnHour is a clock an hour ahead: every file written by the test is
// then old enough for the input cache to keep (racyWindow).
func inAnHour() time.Time { return time.Now().Add(time.Hour) }

// buildFiles builds src with opts (Clear: a rebuild of the same version).
func buildFiles(t *testing.T, src sources.Source, opts Options) *Result {
	t.Helper()
	opts.Source, opts.Workers, opts.Clear = src, 2, true
	res, err := Build(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// sameBuild fails unless the version directories a and b hold the same
// shards, samples.jsonl and shard_sums.json, and manifests that agree on
// the shards and the image statistics.
func sameBuild(t *testing.T, what, a, b string) {
	t.Helper()
	ma, err := warehouse.ReadManifest(a)
	if err != nil {
		t.Fatal(err)
	}
	mb, err := warehouse.ReadManifest(b)
	if err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal([]any{ma.Shards, ma.ImageStats})
	jb, _ := json.Marshal([]any{mb.Shards, mb.ImageStats})
	if !bytes.Equal(ja, jb) {
		t.Errorf("%s: manifests differ:\n%s\n%s", what, ja, jb)
	}
	names := []string{warehouse.SamplesName, ShardSumsName}
	for _, s := range mb.Shards {
		names = append(names, s.RelativePath)
	}
	for _, n := range names {
		x, err1 := os.ReadFile(filepath.Join(a, n))
		y, err2 := os.ReadFile(filepath.Join(b, n))
		if err1 != nil || err2 != nil || !bytes.Equal(x, y) {
			t.Errorf("%s: %s differs from the clean build's (%v, %v)", what, n, err1, err2)
		}
	}
}

// TestReuseTakesWholeShards: a rebuild after a dataset grew at its end
// takes every full shard whole from the published version (hard links to
// the same files), builds the rest, and writes what a clean build writes;
// an edited label, a damaged old sample or damaged shard sums make only
// their shard be built sample by sample, or its sums be added up again.
func TestReuseTakesWholeShards(t *testing.T) {
	src := newFileSource(t, 40)
	cfg := testConfig(t, 8) // 5 shards of 8
	opts := Options{Config: cfg, Now: inAnHour}
	first := buildFiles(t, src, opts)
	if len(first.Manifest.Shards) != 5 {
		t.Fatalf("%d shards, want 5", len(first.Manifest.Shards))
	}
	// Keep a link to each shard: a shard taken whole is the same file.
	kept := t.TempDir()
	for i, s := range first.Manifest.Shards {
		if err := os.Link(filepath.Join(first.Dir, s.RelativePath), filepath.Join(kept, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	clean := func(what string, src sources.Source) string {
		t.Helper()
		c := *cfg
		c.OutputRoot = filepath.Join(t.TempDir(), "clean")
		return buildFiles(t, src, Options{Config: &c, Reuse: ReuseOptions{Off: true}}).Dir
	}
	rebuild := func(what string, want reuseCounts) *Result {
		t.Helper()
		res := buildFiles(t, src, opts)
		if got := res.Report.Reuse.reuseCounts; got != want {
			t.Errorf("%s: reuse %+v, want %+v", what, got, want)
		}
		sameBuild(t, what, res.Dir, clean(what, src))
		return res
	}
	image := shardLayout(cfg, 0).ImageBytes()

	src.grow(t, 44)
	res := rebuild("four samples added", reuseCounts{Reused: 40, Decoded: 4, BytesCopied: 40 * image, ShardsLinked: 5})
	for i, s := range res.Manifest.Shards[:5] {
		a, err1 := os.Stat(filepath.Join(res.Dir, s.RelativePath))
		b, err2 := os.Stat(filepath.Join(kept, fmt.Sprint(i)))
		if err1 != nil || err2 != nil || !os.SameFile(a, b) {
			t.Errorf("%s is not the published version's file (%v, %v)", s.RelativePath, err1, err2)
		}
	}

	src.moved[17] = true // shard 2
	rebuild("a label edited", reuseCounts{Reused: 44, BytesCopied: 44 * image, ShardsLinked: 5})

	// A flipped image byte of sample 25 (shard 3) in the published version.
	res = buildFiles(t, src, opts)
	p := filepath.Join(res.Dir, res.Manifest.Shards[3].RelativePath)
	r, err := shard.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	off, _ := r.ImageSpan(1, 1)
	r.Close()
	flipByte(t, p, off+5)
	rebuild("an old sample damaged", reuseCounts{Reused: 43, Decoded: 1, FellBack: 1, BytesCopied: 43 * image, ShardsLinked: 5})

	// Damaged shard sums: the shards are still taken whole, their sums
	// added up from their images.
	res = buildFiles(t, src, opts)
	flipByte(t, filepath.Join(res.Dir, ShardSumsName), 20)
	rebuild("shard sums damaged", reuseCounts{Reused: 44, BytesCopied: 44 * image, ShardsLinked: 6})
}

// TestInputCache: the second build of a version takes the identity of
// every image file whose status did not change from the input cache; an
// image replaced by another of the same size with its mtime put back is
// hashed again (its ctime changed); a file changed within racyWindow of
// the build is hashed and not kept; a damaged cache is ignored; and
// --no-reuse neither reads nor writes it.
func TestInputCache(t *testing.T) {
	src := newFileSource(t, 40)
	cfg := testConfig(t, 8)
	opts := Options{Config: cfg, Now: inAnHour}
	inputs := func(res *Result) [2]int64 {
		return [2]int64{res.Report.Reuse.InputsHashed, res.Report.Reuse.InputsFromCache}
	}
	check := func(what string, res *Result, want [2]int64) {
		t.Helper()
		if got := inputs(res); got != want {
			t.Errorf("%s: hashed, from cache %v, want %v", what, got, want)
		}
	}
	clean := func() *Result {
		c := *cfg
		c.OutputRoot = filepath.Join(t.TempDir(), "clean")
		return buildFiles(t, src, Options{Config: &c, Reuse: ReuseOptions{Off: true}})
	}

	check("first build", buildFiles(t, src, opts), [2]int64{40, 0})
	cache := filepath.Join(cfg.OutputRoot, outputroot.InputCacheFile(warehouseDir(t, cfg.OutputRoot)))
	if _, err := os.Stat(cache); err != nil {
		t.Fatal(err)
	}
	check("second build", buildFiles(t, src, opts), [2]int64{0, 40})

	// Sample 7's image replaced by other bytes of the same size, mtime
	// put back.
	p := filepath.Join(src.dir, "frames", "0000007.png")
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(p)
	raw[len(raw)-1] ^= 1 // the IEND CRC: the pixels decode the same, the bytes differ
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	res := buildFiles(t, src, opts)
	check("an image replaced, same size and mtime", res, [2]int64{1, 39})
	sameBuild(t, "an image replaced", res.Dir, clean().Dir)

	// A file written at the moment the build reads it is hashed every
	// time until it is racyWindow old.
	raw[len(raw)-1] ^= 1
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	written, _ := os.Stat(p)
	fixed := Options{Config: cfg, Now: func() time.Time { return written.ModTime() }}
	check("a file just written", buildFiles(t, src, fixed), [2]int64{1, 39})
	check("a file just written, again", buildFiles(t, src, fixed), [2]int64{1, 39})
	check("the file older", buildFiles(t, src, opts), [2]int64{1, 39})
	check("the file kept", buildFiles(t, src, opts), [2]int64{0, 40})

	// A damaged cache is ignored: everything is hashed, and kept again.
	flipByte(t, cache, 100)
	check("a damaged cache", buildFiles(t, src, opts), [2]int64{40, 0})
	check("after a damaged cache", buildFiles(t, src, opts), [2]int64{0, 40})

	// --no-reuse trusts nothing of earlier builds.
	before, _ := os.ReadFile(cache)
	off := opts
	off.Reuse.Off = true
	check("--no-reuse", buildFiles(t, src, off), [2]int64{0, 0})
	if after, _ := os.ReadFile(cache); !bytes.Equal(before, after) {
		t.Error("--no-reuse rewrote the input cache")
	}
}

// warehouseDir is the name of the only version directory under root.
func warehouseDir(t *testing.T, root string) string {
	t.Helper()
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() && versionDirRE.MatchString(e.Name()) {
			return e.Name()
		}
	}
	t.Fatalf("no version under %s", root)
	return ""
}

// TestReuseWholeShardsWhereLinksAreRefused: where the filesystem refuses
// hard links (another filesystem under --reuse-from, EXDEV), a shard taken
// whole is copied and fsynced instead: the same bytes, another file.
func TestReuseWholeShardsWhereLinksAreRefused(t *testing.T) {
	src := newFileSource(t, 40)
	cfg := testConfig(t, 8)
	opts := Options{Config: cfg, Now: inAnHour}
	first := buildFiles(t, src, opts)
	kept := filepath.Join(t.TempDir(), "shard-0")
	if err := os.Link(filepath.Join(first.Dir, first.Manifest.Shards[0].RelativePath), kept); err != nil {
		t.Fatal(err)
	}
	src.grow(t, 44)
	restore := fsfault.Set(func(op fsfault.Op, path string) error {
		if op == fsfault.Link {
			return syscall.EXDEV
		}
		return nil
	})
	res := buildFiles(t, src, opts)
	restore()
	if got := res.Report.Reuse.reuseCounts; got.ShardsLinked != 5 || got.Reused != 40 || got.Decoded != 4 {
		t.Errorf("reuse %+v, want 5 shards taken whole, 40 reused, 4 decoded", got)
	}
	a, err1 := os.Stat(filepath.Join(res.Dir, res.Manifest.Shards[0].RelativePath))
	b, err2 := os.Stat(kept)
	if err1 != nil || err2 != nil || os.SameFile(a, b) {
		t.Errorf("shard 0 is the old file, not a copy (%v, %v)", err1, err2)
	}
	c := *cfg
	c.OutputRoot = filepath.Join(t.TempDir(), "clean")
	sameBuild(t, "links refused", res.Dir, buildFiles(t, src, Options{Config: &c, Reuse: ReuseOptions{Off: true}}).Dir)
}
