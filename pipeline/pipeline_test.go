package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"slices"

	"github.com/x448/float16"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"warehouse-etl/config"
	"warehouse-etl/internal/testfiles"
	"warehouse-etl/shard"
	"warehouse-etl/sources"
	"warehouse-etl/transforms"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// memSource is an in-memory source: samples and their image bytes.
type memSource struct {
	samples []sources.Sample
	images  map[string][]byte // encoded images by ImagePath
	pixels  map[string][]byte // raw RGB frames by Locator
	extras  []sources.ExtraSpec
}

func (m *memSource) Kind() string { return "mem" }

func (m *memSource) Scan(ctx context.Context, fn func(*sources.Sample) error) error {
	for i := range m.samples {
		s := m.samples[i]
		if err := fn(&s); err != nil {
			return err
		}
	}
	return nil
}

func (m *memSource) Fingerprint(ctx context.Context, fn func(warehouse.FileEntry) error) error {
	for _, s := range m.samples {
		if err := fn(warehouse.FileEntry{Path: s.ImagePath, Size: int64(len(m.images[s.ImagePath]))}); err != nil {
			return err
		}
	}
	return nil
}

func (m *memSource) ReadImage(s *sources.Sample) (sources.Image, error) {
	if pix, ok := m.pixels[s.Locator]; ok {
		return sources.Image{Pixels: pix, Width: s.Width, Height: s.Height, Stride: 3 * s.Width}, nil
	}
	b, ok := m.images[s.ImagePath]
	if !ok {
		return sources.Image{}, fmt.Errorf("%s: not found", s.ImagePath)
	}
	return sources.Image{Encoded: b}, nil
}

func (m *memSource) Extras() []sources.ExtraSpec { return m.extras }

func (m *memSource) Entries() []warehouse.SourceEntry {
	return []warehouse.SourceEntry{{Index: 0, Name: "run_1"}}
}

func pngBytes(t testing.TB, w, h int, seed uint8) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(x*20) + seed, uint8(y*20) + seed, seed, 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// newMemSource makes n 10x10 samples with one box each; the images of the
// samples listed in corrupt keep a valid header but lose their pixel data,
// so only the full decode at transform time fails.
func newMemSource(t *testing.T, n int, corrupt ...int) *memSource {
	src := &memSource{images: map[string][]byte{}}
	for i := range n {
		name := fmt.Sprintf("img_%02d.png", i)
		b := pngBytes(t, 10, 10, uint8(i))
		for _, c := range corrupt {
			if c == i {
				b = b[:40] // IHDR intact, IDAT cut
			}
		}
		src.images[name] = b
		src.samples = append(src.samples, sources.Sample{
			Seq: int64(i), Source: "run_1", Frame: uint64(i), ImagePath: name, Width: 10, Height: 10,
			Boxes: []sources.Box{{X0: 1, Y0: 2, X1: 6, Y1: 8}},
		})
	}
	return src
}

func testConfig(t testing.TB, samplesPerShard int) *config.Config {
	cfg := config.Defaults()
	cfg.Source.Root = "mem"
	cfg.TargetSize = [2]int{8, 8}
	cfg.MaxBoxes = 2
	cfg.OutputRoot = filepath.Join(t.TempDir(), "out")
	l := shardLayout(&cfg, 0)
	cfg.ShardTargetMB = float64(int64(samplesPerShard)*l.SampleBytes()+200) / (1 << 20)
	cfg.Thresholds = validate.Thresholds{}
	return &cfg
}

// The report counts the JPEGs left to image/jpeg: a CMYK one (a fallback
// in both builds) among a baseline JPEG and PNGs.
func TestReportCountsJPEGFallbacks(t *testing.T) {
	cmyk, err := os.ReadFile("../transforms/testdata/stdcanary/cmyk.jpg")
	if err != nil {
		t.Fatal(err)
	}
	src := newMemSource(t, 4)
	for i, data := range [][]byte{cmyk, testfiles.Image(t, "jpeg", 10, 10)} {
		name := src.samples[i].ImagePath
		src.images[name] = data
		w, h, _, err := transforms.DecodeConfig(data)
		if err != nil {
			t.Fatal(err)
		}
		src.samples[i].Width, src.samples[i].Height = w, h
	}
	res, err := Build(context.Background(), Options{Config: testConfig(t, 4), Source: src, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if res.Report.JPEGFallbacks != 1 {
		t.Fatalf("jpeg_fallbacks = %d, want 1 (the CMYK JPEG)", res.Report.JPEGFallbacks)
	}
	// A partitioned build counts it where the shard is built and reports
	// it from the shard records at commit.
	cfg := testConfig(t, 1)
	for i := range 2 {
		if _, err := BuildPartition(context.Background(), Options{Config: cfg, Source: src, Workers: 1}, Partition{i, 2}); err != nil {
			t.Fatal(err)
		}
	}
	res, err = Commit(context.Background(), CommitOptions{Options: Options{Config: cfg, Source: src}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Report.JPEGFallbacks != 1 {
		t.Fatalf("partitioned: jpeg_fallbacks = %d, want 1", res.Report.JPEGFallbacks)
	}
}

// A full-decode failure in the last shard after it was opened: the sample
// becomes a late decode_error, the shard is closed short, and everything
// stays consistent and readable.
func TestLateDecodeFailureShortensLastShard(t *testing.T) {
	cfg := testConfig(t, 4)
	res, err := Build(context.Background(), Options{Config: cfg, Source: newMemSource(t, 6, 5), Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	if m.SamplesPerShard != 4 {
		t.Fatalf("samples_per_shard %d, test wants 4", m.SamplesPerShard)
	}
	if m.Samples != 5 || len(m.Shards) != 2 || m.Shards[0].Samples != 4 || m.Shards[1].Samples != 1 {
		t.Fatalf("samples %d, shards %+v", m.Samples, m.Shards)
	}
	tot := m.Summary.Total
	if tot.Total != 6 || tot.Kept != 5 || tot.Skipped != 1 || tot.Invalid != 1 || tot.ByReason[validate.ReasonDecodeError] != 1 {
		t.Fatalf("summary %+v", tot)
	}
	for _, s := range m.Shards {
		r, err := shard.Open(filepath.Join(res.Dir, s.RelativePath))
		if err != nil {
			t.Fatalf("%s: %v", s.ID, err)
		}
		if int64(r.Len()) != s.Samples {
			t.Fatalf("%s holds %d samples, manifest %d", s.ID, r.Len(), s.Samples)
		}
		r.Close()
	}
	// Reopening the manifest runs its consistency checks.
	if _, err := warehouse.ReadManifest(res.Dir); err != nil {
		t.Fatal(err)
	}
}

// Every worker count writes the same bytes, also around late failures.
func TestWorkerCountsAgreeWithLateFailures(t *testing.T) {
	var sums []string
	for _, workers := range []int{1, 2, 5} {
		cfg := testConfig(t, 3)
		res, err := Build(context.Background(), Options{Config: cfg, Source: newMemSource(t, 11, 2, 7), Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		var all string
		for _, s := range res.Manifest.Shards {
			all += s.ChecksumSHA256 + ","
		}
		sums = append(sums, all)
	}
	if sums[0] != sums[1] || sums[1] != sums[2] {
		t.Fatalf("shard checksums differ across worker counts:\n%s", sums)
	}
}

func TestCancelledBuildLeavesNothing(t *testing.T) {
	cfg := testConfig(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Build(ctx, Options{Config: cfg, Source: newMemSource(t, 5)})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	entries, _ := os.ReadDir(cfg.OutputRoot)
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".lock") {
			t.Errorf("a cancelled build left %s", e.Name())
		}
	}
}

// Raw RGB frames with extras, as episode sources hand them over: extras
// land in the shards and the manifest; a NaN extra is a nonfinite sample;
// image statistics are those of the constant frames.
func TestRawFramesWithExtras(t *testing.T) {
	src := &memSource{pixels: map[string][]byte{}, extras: []sources.ExtraSpec{
		{Name: "action", Shape: []int{2}, SourceDType: "f64"}, {Name: "reward", Shape: []int{}, SourceDType: "f32"},
	}}
	const w, h = 6, 4
	frame := bytes.Repeat([]byte{10, 20, 30}, w*h)
	for i := range 5 {
		loc := fmt.Sprintf("ep0#%d", i)
		src.pixels[loc] = frame
		extras := []float32{float32(i), float32(2 * i), 0.5}
		if i == 3 {
			extras[1] = float32(math.NaN())
		}
		src.samples = append(src.samples, sources.Sample{
			Seq: int64(i), Source: "ep0", Frame: uint64(i), Locator: loc, Width: w, Height: h, Extras: extras,
			Reasons: []validate.Reason{validate.ReasonEmpty},
		})
	}
	cfg := testConfig(t, 100)
	res, err := Build(context.Background(), Options{Config: cfg, Source: src, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest
	wantExtras := []warehouse.Extra{{Name: "action", Shape: []int{2}, SourceDType: "f64", Offset: 0}, {Name: "reward", Shape: []int{}, SourceDType: "f32", Offset: 2}}
	if fmt.Sprint(m.Extras) != fmt.Sprint(wantExtras) {
		t.Fatalf("manifest extras %+v, want %+v", m.Extras, wantExtras)
	}
	if m.Samples != 4 || m.Summary.Total.ByReason[validate.ReasonNonFinite] != 1 {
		t.Fatalf("samples %d, reasons %v", m.Samples, m.Summary.Total.ByReason)
	}
	r, err := shard.Open(filepath.Join(res.Dir, m.Shards[0].RelativePath))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for i, step := range []float32{0, 1, 2, 4} {
		if got, want := r.Extras(i), []float32{step, 2 * step, 0.5}; !slices.Equal(got, want) {
			t.Errorf("sample %d extras %v, want %v", i, got, want)
		}
	}
	// 8x8 letterbox of a 6x4 frame: content 8x5 (5.33 rounds to 5); every
	// content value is the f16 of v/255.
	st := m.ImageStats
	if st.Values != 4*8*5 {
		t.Fatalf("image stats over %d values, want %d", st.Values, 4*8*5)
	}
	for c, v := range []float64{10, 20, 30} {
		want := float64(float16.Fromfloat32(float32(v / 255)).Float32())
		if st.Mean[c] != want || st.Std[c] > 1e-9 {
			t.Errorf("channel %d: mean %v std %v, want mean %v std 0", c, st.Mean[c], st.Std[c], want)
		}
	}
}

// The build report splits the worker time into read, decode, resize and
// normalize, and the scan into scan and validate; worker sums are CPU time
// of the write pass, so with one worker none exceeds it.
func TestReportPhases(t *testing.T) {
	cfg := testConfig(t, 4)
	res, err := Build(context.Background(), Options{Config: cfg, Source: newMemSource(t, 6), Workers: 1})
	if err != nil {
		t.Fatal(err)
	}
	p := res.Report.Phases
	for name, v := range map[string]float64{
		"validate": p.Validate, "read": p.Read, "decode": p.Decode, "resize": p.Resize, "normalize": p.Normalize,
		"write": p.Write, "publish": p.Publish, "total": p.Total,
	} {
		if !(v > 0) {
			t.Errorf("phase %s = %v, want > 0 (%+v)", name, v, p)
		}
	}
	if work := p.Read + p.Decode + p.Resize + p.Normalize; work > p.Write {
		t.Errorf("one worker spent %v s in read+decode+resize+normalize, more than the %v s write pass", work, p.Write)
	}
	if sum := p.Scan + p.Validate + p.Write + p.Publish; sum > p.Total {
		t.Errorf("scan+validate+write+publish %v s > total %v s", sum, p.Total)
	}
}
