package warehouse_test

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/x448/float16"

	"warehouse-etl/shard"
	"warehouse-etl/validate"
	. "warehouse-etl/warehouse"
	"warehouse-etl/warehouse/warehousetest"
)

// checkSample compares every accessor of s with the fixture's closed-form
// values for sample i.
func checkSample(t *testing.T, fx *warehousetest.Fixture, s Sample, i int) {
	t.Helper()
	l := fx.Layout
	if s.Index != i {
		t.Fatalf("sample %d: Index %d", i, s.Index)
	}
	if got, want := s.Image(), warehousetest.WantImageBytes(l, i); !bytes.Equal(got, want) {
		t.Fatalf("sample %d: image bytes differ", i)
	}
	switch l.DType {
	case shard.F16:
		for k, h := range s.ImageF16() {
			if v := float16.Frombits(h).Float32(); v != warehousetest.WantImageValue(i, k) {
				t.Fatalf("sample %d: ImageF16[%d] = %v, want %v", i, k, v, warehousetest.WantImageValue(i, k))
			}
		}
	case shard.F32:
		for k, v := range s.ImageF32() {
			if v != warehousetest.WantImageValue(i, k) {
				t.Fatalf("sample %d: ImageF32[%d] = %v, want %v", i, k, v, warehousetest.WantImageValue(i, k))
			}
		}
	}
	boxes := warehousetest.WantBoxes(i, l.MaxBoxes)
	if got := s.Boxes(); !reflect.DeepEqual(got, boxes) {
		t.Fatalf("sample %d: boxes %v, want %v", i, got, boxes)
	}
	if s.BoxCount() != len(boxes) {
		t.Fatalf("sample %d: BoxCount %d, want %d", i, s.BoxCount(), len(boxes))
	}
	mask := make([]float32, l.MaxBoxes)
	for j := range boxes {
		mask[j] = 1
	}
	if got := s.Mask(); !slices.Equal(got, mask) {
		t.Fatalf("sample %d: mask %v, want %v", i, got, mask)
	}
	if got, want := s.ClassIndex(), warehousetest.WantClasses(i, l.MaxBoxes); !slices.Equal(got, want) {
		t.Fatalf("sample %d: class index %v, want %v", i, got, want)
	}
	if got, want := s.Meta(), warehousetest.WantMeta(i); got != want {
		t.Fatalf("sample %d: meta %+v, want %+v", i, got, want)
	}
	if got, want := s.Extras(), warehousetest.WantExtras(i, l.ExtraF32); !slices.Equal(got, want) && len(want) > 0 {
		t.Fatalf("sample %d: extras %v, want %v", i, got, want)
	}
	if s.DType() != l.DType {
		t.Fatalf("sample %d: dtype %v", i, s.DType())
	}
}

func TestOpenReadsEverySample(t *testing.T) {
	tests := []struct {
		name string
		spec warehousetest.Spec
	}{
		{"f16 three shards", warehousetest.DefaultSpec()},
		{"f32 with extras", warehousetest.Spec{DType: shard.F32, Width: 5, Height: 3, MaxBoxes: 2, Extras: [][]int{{3}, {}, {2, 2}}, ShardSizes: []int{2, 2, 2, 1}}},
		{"one shard of one sample", warehousetest.Spec{DType: shard.F16, Width: 1, Height: 1, MaxBoxes: 1, ShardSizes: []int{1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := warehousetest.Write(t, tt.spec)
			for _, path := range []string{fx.Dir, fx.Root} {
				r, err := Open(path, OpenOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if r.Dir() != fx.Dir {
					t.Fatalf("Open(%s).Dir() = %s, want %s", path, r.Dir(), fx.Dir)
				}
				total := 0
				for _, n := range tt.spec.ShardSizes {
					total += n
				}
				if r.Len() != total || r.Layout() != fx.Layout {
					t.Fatalf("Len %d Layout %+v; want %d %+v", r.Len(), r.Layout(), total, fx.Layout)
				}
				i := 0
				for k, n := range tt.spec.ShardSizes {
					for local := range n {
						s, err := r.Sample(i)
						if err != nil {
							t.Fatal(err)
						}
						if s.Shard != fx.M.Shards[k].ID || s.ShardIndex != local {
							t.Fatalf("sample %d in %s[%d], want %s[%d]", i, s.Shard, s.ShardIndex, fx.M.Shards[k].ID, local)
						}
						checkSample(t, fx, s, i)
						i++
					}
				}
				if err := r.Close(); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func TestLazyMappingAndStats(t *testing.T) {
	fx := warehousetest.Write(t, warehousetest.DefaultSpec())
	r, err := Open(fx.Dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if st := r.Stats(); st.ShardsOpened != 0 || st.ShardsTotal != 3 || st.SamplesRead != 0 {
		t.Fatalf("after Open: %+v; nothing should be mapped yet", st)
	}
	for _, i := range []int{9, 10, 8, 0} { // shard 2 three times, then shard 0
		if _, err := r.Sample(i); err != nil {
			t.Fatal(err)
		}
	}
	st := r.Stats()
	wantBytes := fx.M.Shards[2].Bytes + fx.M.Shards[0].Bytes
	if st.ShardsOpened != 2 || st.SamplesRead != 4 || st.BytesMapped != wantBytes {
		t.Fatalf("stats %+v; want 2 shards, 4 samples, %d bytes", st, wantBytes)
	}
	var ids []string
	for _, l := range r.ShardLoads() {
		ids = append(ids, l.ID)
		if l.Open <= 0 || l.Total() < l.Open {
			t.Fatalf("load %+v has no open time", l)
		}
	}
	if got := strings.Join(ids, ","); got != "shard-00002,shard-00000" {
		t.Fatalf("loads in order %s", got)
	}
	if st.LoadMax < st.LoadP50 || st.LoadP99 > st.LoadMax {
		t.Fatalf("percentiles out of order: %+v", st)
	}
}

// TestBatchLoadsTouchNoMappedImage: a shard first opened by the batch path
// (pread) records no first touch, as it faults in no image page of its
// mapping; one first opened by Sample (mapped views) does.
func TestBatchLoadsTouchNoMappedImage(t *testing.T) {
	fx := warehousetest.Write(t, warehousetest.DefaultSpec())
	r, err := Open(fx.Dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	b := NewBatch(r.Layout(), 2)
	if err := r.ReadRunInto(0, 2, b, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Sample(10); err != nil {
		t.Fatal(err)
	}
	loads := r.ShardLoads()
	if len(loads) != 2 || loads[0].ID != "shard-00000" || loads[1].ID != "shard-00002" {
		t.Fatalf("loads %+v; want shard-00000 (batch), then shard-00002 (Sample)", loads)
	}
	if loads[0].FirstTouch != 0 {
		t.Fatalf("batch load %+v: first touch %v, want 0 (no mapped image read)", loads[0], loads[0].FirstTouch)
	}
	if loads[1].FirstTouch <= 0 {
		t.Fatalf("Sample load %+v: no first touch", loads[1])
	}
}

func TestConcurrentReaders(t *testing.T) {
	fx := warehousetest.Write(t, warehousetest.Spec{DType: shard.F32, Width: 8, Height: 8, MaxBoxes: 4, Extras: [][]int{{2}}, ShardSizes: []int{5, 5, 5, 5, 2}})
	r, err := Open(fx.Root, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for step := range 3 * r.Len() {
				i := (g*7 + step*5) % r.Len()
				s, err := r.Sample(i)
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(s.Image(), warehousetest.WantImageBytes(fx.Layout, i)) || s.Meta() != warehousetest.WantMeta(i) {
					errs <- fmt.Errorf("goroutine %d: sample %d differs", g, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if st := r.Stats(); st.ShardsOpened != 5 || st.SamplesRead != int64(8*3*r.Len()) {
		t.Fatalf("stats %+v: every shard must be mapped exactly once", st)
	}
}

func TestSampleRangeAndClose(t *testing.T) {
	fx := warehousetest.Write(t, warehousetest.DefaultSpec())
	r, err := Open(fx.Dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{-1, 11, 1 << 40} {
		want := fmt.Sprintf("%s: sample %d out of range [0, 11)", fx.Dir, i)
		if _, err := r.Sample(i); err == nil || err.Error() != want {
			t.Errorf("Sample(%d): %v, want %q", i, err, want)
		}
	}
	if _, err := r.Sample(0); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	want := fx.ShardPath(0) + ": warehouse reader closed"
	if _, err := r.Sample(0); err == nil || err.Error() != want {
		t.Fatalf("Sample after Close: %v, want %q", err, want)
	}
}

func TestOpenThresholds(t *testing.T) {
	strict := validate.Thresholds{Invalid: validate.Limit{MaxCount: warehousetest.Ptr(int64(0)), Action: validate.ActionFail}}
	warnOnly := validate.Thresholds{Invalid: validate.Limit{MaxCount: warehousetest.Ptr(int64(0)), Action: validate.ActionWarn}}
	tests := []struct {
		name    string
		summary func(c *validate.Counts)
		opts    OpenOptions
		want    string // "" = opens
	}{
		{name: "within the recorded limits"},
		{name: "summary exceeds the recorded ratio", summary: func(c *validate.Counts) { c.Invalid = 7 },
			want: "%s: refusing a warehouse whose validation summary exceeds its thresholds: threshold invalid.max_ratio exceeded: 0.5833333333333334 (7 of 12 samples) > limit 0.5 (action fail)"},
		{name: "ignored on request", summary: func(c *validate.Counts) { c.Invalid = 7 }, opts: OpenOptions{IgnoreThresholds: true}},
		{name: "stricter caller thresholds", opts: OpenOptions{Thresholds: &strict},
			want: "%s: refusing a warehouse whose validation summary exceeds its thresholds: threshold invalid.max_count exceeded: 1 (1 of 12 samples) > limit 0 (action fail)"},
		{name: "warn action opens", opts: OpenOptions{Thresholds: &warnOnly}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fx := warehousetest.Write(t, warehousetest.DefaultSpec())
			if tt.summary != nil {
				tt.summary(&fx.M.Summary.Total)
				fx.WriteManifest(t)
			}
			r, err := Open(fx.Root, tt.opts)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				r.Close()
				return
			}
			var te *validate.ThresholdError
			if want := fmt.Sprintf(tt.want, fx.Dir); err == nil || err.Error() != want || !errors.As(err, &te) {
				t.Fatalf("Open: %v\nwant *validate.ThresholdError %q", err, want)
			}
		})
	}
}
