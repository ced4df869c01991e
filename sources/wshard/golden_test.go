package wshard

import (
	"math"
	"path/filepath"
	"slices"
	"testing"

	"warehouse-etl/sources/wshard/container"
)

func openGolden(t *testing.T, name string) *Episode {
	t.Helper()
	ep, err := OpenEpisode(filepath.Join(goldenDir, name), name, container.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ep.Close() })
	return ep
}

func readF32(t *testing.T, ep *Episode, name string) []float32 {
	t.Helper()
	c, ok := ep.Channel(name)
	if !ok {
		t.Fatalf("no channel %q", name)
	}
	v, err := ep.Float32s(c)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func wantF32(t *testing.T, what string, got []float32, want func(i int) float32) {
	t.Helper()
	for i, g := range got {
		if math.Float32bits(g) != math.Float32bits(want(i)) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, g, want(i))
		}
	}
}

// TestGoldenEpisodes reads the reference files through the episode layer:
// metadata, channel tables and the values the reference generator wrote.
func TestGoldenEpisodes(t *testing.T) {
	t.Run("simple_episode", func(t *testing.T) {
		ep := openGolden(t, "simple_episode.wshard")
		m := ep.Meta
		if m.EpisodeID != "golden_simple" || m.EnvID != "TestEnv-v1" || m.Length != 10 || m.Start != 0 || !m.RangeGiven ||
			m.Timebase != (Timebase{Type: TimebaseTicks, TickHz: 30}) {
			t.Fatalf("meta %+v", m)
		}
		want := []Channel{
			{ID: "state", Block: "signal/state", DType: F32, Shape: []int{4}},
			{ID: "ctrl", Block: "action/ctrl", DType: F32, Shape: []int{2}},
		}
		if len(ep.Channels) != 2 {
			t.Fatalf("channels %+v", ep.Channels)
		}
		for i, c := range ep.Channels {
			if c.ID != want[i].ID || c.Block != want[i].Block || c.DType != want[i].DType || !slices.Equal(c.Shape, want[i].Shape) {
				t.Fatalf("channel %d = %+v, want %+v", i, c, want[i])
			}
		}
		state := readF32(t, ep, "state")
		if !slices.Equal(state[:4], []float32{0, 1, 2, 3}) || len(state) != 40 {
			t.Fatalf("state[0] = %v (%d values), want [0 1 2 3]", state[:4], len(state))
		}
		wantF32(t, "state", state, func(i int) float32 { return float32(i) })
		wantF32(t, "reward", readF32(t, ep, "reward"), func(i int) float32 { return [2]float32{1, 0.5}[i%2] })
		wantF32(t, "ctrl", readF32(t, ep, "action/ctrl"), func(i int) float32 { return [2]float32{0.1, 0.2}[i%2] })
		wantF32(t, "done", readF32(t, ep, "done"), func(i int) float32 {
			if i == 9 {
				return 1
			}
			return 0
		})
	})
	t.Run("dtype_zoo", func(t *testing.T) {
		ep := openGolden(t, "dtype_zoo.wshard")
		if ep.Meta.EpisodeID != "golden_dtypes" || ep.Meta.Length != 4 || ep.Meta.Timebase.TickHz != 1 {
			t.Fatalf("meta %+v", ep.Meta)
		}
		wantF32(t, "f32", readF32(t, ep, "f32_ch"), func(i int) float32 { return float32(i + 1) })
		wantF32(t, "f64", readF32(t, ep, "signal/f64_ch"), func(i int) float32 { return float32(10 * (i + 1)) })
		wantF32(t, "i32", readF32(t, ep, "i32_ch"), func(i int) float32 { return float32([]int32{-1, 0, 1, math.MaxInt32}[i]) })
		wantF32(t, "u8", readF32(t, ep, "u8_ch"), func(i int) float32 { return []float32{0, 127, 255, 42}[i] })
		wantF32(t, "bf16", readF32(t, ep, "bf16_ch"), func(i int) float32 { return float32(i + 1) })
	})
	t.Run("per_block_compressed", func(t *testing.T) {
		ep := openGolden(t, "per_block_compressed.wshard")
		if ep.Meta.Length != 100 || ep.Meta.Timebase.TickHz != 60 {
			t.Fatalf("meta %+v", ep.Meta)
		}
		obs := readF32(t, ep, "signal/obs")
		if len(obs) != 800 {
			t.Fatalf("obs has %d values", len(obs))
		}
		wantF32(t, "obs", obs, func(int) float32 { return 1.25 })
		wantF32(t, "reward", readF32(t, ep, "reward"), func(int) float32 { return 1 })
	})
	t.Run("omen_uncert", func(t *testing.T) {
		ep := openGolden(t, "omen_uncert.wshard")
		wantF32(t, "joint_pos", readF32(t, ep, "joint_pos"), func(i int) float32 { return float32(i) * 0.1 })
		wantF32(t, "torque", readF32(t, ep, "action/torque"), func(i int) float32 { return float32(i) * 0.01 })
		wantF32(t, "reward", readF32(t, ep, "reward"), func(i int) float32 { return float32(i) * 0.5 })
	})
}

// TestGoldenDirectoryHasNoCamera: the reference files carry no image
// channel, so a source over them needs source.camera, and says so.
func TestGoldenDirectoryHasNoCamera(t *testing.T) {
	_, err := New(goldenDir, Options{})
	want := "wshard: no channel with modality rgb or u8 [H,W,3] in 4 readable episode files (0 unreadable) under container/testdata/golden: set source.camera"
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}
