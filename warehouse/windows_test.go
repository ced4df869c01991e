package warehouse

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"testing"

	"warehouse-etl/internal/fuzzmem"
)

// windowsFixture: episode 3 keeps steps 0, 1, 2, 5, 6 (3 and 4 skipped),
// episode 1 keeps 10, 11, and the samples are stored out of (episode,
// step) order; extra 0 of a sample is 100*episode + step.
func windowsFixture() *Episodes {
	ep := &Episodes{E: 2}
	for _, s := range [][2]int{{3, 0}, {3, 1}, {1, 11}, {3, 2}, {3, 6}, {3, 5}, {1, 10}} {
		ep.Episode = append(ep.Episode, uint32(s[0]))
		ep.Step = append(ep.Step, uint64(s[1]))
		ep.Extras = append(ep.Extras, float32(100*s[0]+s[1]), -1)
	}
	return ep
}

func TestEpisodesRoundTripAndRefusals(t *testing.T) {
	ep := windowsFixture()
	var buf bytes.Buffer
	if err := EncodeEpisodes(&buf, ep); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// 24-byte header, 7 u32 episodes (28 bytes, padded to 56), 7 u64 steps, 7x2 f32.
	if len(b) != 56+56+56 || string(b[:4]) != "TWEP" {
		t.Fatalf("%d bytes, magic %q", len(b), b[:4])
	}
	got, err := ParseEpisodes(b, 7, 2)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Episode, ep.Episode) || !slices.Equal(got.Step, ep.Step) || !slices.Equal(got.Extras, ep.Extras) {
		t.Fatalf("round trip: %+v", got)
	}
	for name, c := range map[string]struct {
		b        []byte
		n        int64
		e        int
		contains string
	}{
		"short":    {b[:20], 7, 2, "shorter"},
		"samples":  {b, 8, 2, "the manifest says 8"},
		"extras":   {b, 7, 3, "the manifest says 7 of 3"},
		"size":     {b[:len(b)-4], 7, 2, "want 168"},
		"magic":    {append([]byte("XXXX"), b[4:]...), 7, 2, "magic"},
		"padding":  {func() []byte { c := slices.Clone(b); c[53] = 1; return c }(), 7, 2, "padding"},
		"reserved": {func() []byte { c := slices.Clone(b); c[21] = 1; return c }(), 7, 2, "reserved"},
		"huge": {func() []byte {
			c := slices.Clone(b)
			c[15] = 0x40 // 2^62 samples claimed
			return c
		}(), 1<<62 + 7, 2, "want"},
	} {
		_, err := ParseEpisodes(c.b, c.n, c.e)
		if !errors.Is(err, ErrEpisodes) || !bytes.Contains([]byte(err.Error()), []byte(c.contains)) {
			t.Errorf("%s: %v, want ErrEpisodes mentioning %q", name, err, c.contains)
		}
	}
}

func TestNeighbourPadsAndMasks(t *testing.T) {
	ep := windowsFixture()
	idx := func(e, s int) int {
		for i := range ep.Episode {
			if ep.Episode[i] == uint32(e) && ep.Step[i] == uint64(s) {
				return i
			}
		}
		t.Fatalf("no %d/%d", e, s)
		return -1
	}
	for _, c := range []struct {
		e, s, d   int
		wantStep  int
		wantValid bool
	}{
		{3, 2, 0, 2, true},
		{3, 2, 1, 2, false}, // step 3 skipped: the last kept frame before it
		{3, 2, 2, 2, false},
		{3, 2, 3, 5, true},
		{3, 2, 4, 6, true},
		{3, 2, 5, 6, false},  // past the end: the last frame
		{3, 5, -1, 5, false}, // step 4 skipped: the first kept frame after it
		{3, 5, -3, 2, true},
		{3, 1, -1, 0, true},
		{3, 1, -2, 0, false}, // before the start: the first frame
		{3, 0, math.MinInt, 0, false},
		{3, 6, math.MaxInt, 6, false},
		{1, 10, 1, 11, true}, // another episode, never crossed into
		{1, 11, -5, 10, false},
		{1, 11, 5, 11, false},
	} {
		j, valid := ep.Neighbour(idx(c.e, c.s), c.d)
		if int(ep.Episode[j]) != c.e || int(ep.Step[j]) != c.wantStep || valid != c.wantValid {
			t.Errorf("episode %d step %d offset %d: sample %d (episode %d step %d) valid %v, want step %d valid %v",
				c.e, c.s, c.d, j, ep.Episode[j], ep.Step[j], valid, c.wantStep, c.wantValid)
		}
	}
	dst, valid := make([]float32, 4), make([]bool, 4)
	if err := ep.Window(idx(3, 2), Extra{Name: "x", Shape: []int{}, Offset: 0}, []int{-2, 0, 1, 3}, dst, valid); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(dst, []float32{300, 302, 302, 305}) || !slices.Equal(valid, []bool{true, true, false, true}) {
		t.Fatalf("window %v %v", dst, valid)
	}
	bdst, bvalid := make([]float32, 2*2), make([]bool, 2*2)
	if err := ep.WindowBatch([]int{idx(1, 11), idx(3, 0)}, Extra{Name: "x", Shape: []int{}, Offset: 0}, []int{-1, 1}, bdst, bvalid); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(bdst, []float32{110, 111, 300, 301}) || !slices.Equal(bvalid, []bool{true, false, false, true}) {
		t.Fatalf("batch window %v %v", bdst, bvalid)
	}
	if err := ep.Window(0, Extra{Name: "x", Shape: []int{2}, Offset: 1}, []int{0}, make([]float32, 2), make([]bool, 1)); !errors.Is(err, ErrEpisodes) {
		t.Fatalf("an extra beyond E: %v", err)
	}
}

// FuzzParseEpisodes: any bytes and claimed sizes; nothing panics, nothing
// allocates beyond a few times the input, and what parses re-encodes to
// the same bytes and answers every window in its episode.
func FuzzParseEpisodes(f *testing.F) {
	var buf bytes.Buffer
	if err := EncodeEpisodes(&buf, windowsFixture()); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes(), int64(7), 2)
	f.Add(buf.Bytes()[:40], int64(7), 2)
	f.Add([]byte("TWEP\x01\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\x3f\x02\x00\x00\x00\x00\x00\x00\x00"), int64(math.MaxInt64), 2)
	f.Fuzz(func(t *testing.T, b []byte, n int64, e int) {
		fuzzmem.Check(t, 4*fuzzmem.MiB+16*uint64(len(b)), func() {
			ep, err := ParseEpisodes(b, n, e)
			if err != nil {
				if !errors.Is(err, ErrEpisodes) {
					t.Fatalf("%v does not wrap ErrEpisodes", err)
				}
				return
			}
			var out bytes.Buffer
			if err := EncodeEpisodes(&out, ep); err != nil || !bytes.Equal(out.Bytes(), b) {
				t.Fatalf("re-encoding: %v, equal %v", err, bytes.Equal(out.Bytes(), b))
			}
			for i := range min(ep.Len(), 16) {
				for _, d := range []int{-3, -1, 0, 1, 2, math.MaxInt} {
					if j, _ := ep.Neighbour(i, d); ep.Episode[j] != ep.Episode[i] {
						t.Fatalf("sample %d offset %d: neighbour %d in episode %d, not %d", i, d, j, ep.Episode[j], ep.Episode[i])
					}
				}
			}
		})
	})
}
