package wshard

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"warehouse-etl/internal/fuzzmem"
	"warehouse-etl/sources"
	"warehouse-etl/sources/wshard/container"
)

var update = flag.Bool("update", false, "rewrite the seed corpora in testdata/fuzz")

// fuzzSeeds are the seed corpora: the reference golden files and episodes
// from the test writer, one per fuzz target.
func fuzzSeeds(t testing.TB) map[string]map[string][]byte {
	t.Helper()
	seeds := map[string]map[string][]byte{"FuzzEpisode": {}, "FuzzParseMeta": {}, "FuzzParseChannels": {}, "FuzzParseManifest": {}}
	for _, name := range []string{"simple_episode", "dtype_zoo", "per_block_compressed", "omen_uncert"} {
		b, err := os.ReadFile(filepath.Join(goldenDir, name+".wshard"))
		if err != nil {
			t.Fatal(err)
		}
		seeds["FuzzEpisode"]["golden-"+name] = b
	}
	clean, err := cleanEpisode(0, 3, 2, 2).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	seeds["FuzzEpisode"]["rgb-episode"] = clean
	legacy := cleanEpisode(0, 2, 2, 2)
	legacy.LegacyMeta = true
	legacy.TimestampsNs = []int64{5, 9}
	legacy.Channels[0].Compression = container.CompressLZ4
	if seeds["FuzzEpisode"]["legacy-lz4-timestamps"], err = legacy.Bytes(); err != nil {
		t.Fatal(err)
	}
	seeds["FuzzParseMeta"]["golden"] = []byte(`{"env_id":"TestEnv-v1","episode_id":"golden_simple","length_T":10,"timebase":{"dt_ns":33333333,"type":"ticks"},"timestep_range":[0,10]}` + "\x00" + `{"timebase":{"tick_hz":30,"type":"ticks"},"version":1}`)
	seeds["FuzzParseMeta"]["legacy"] = []byte(`{"id":"x","length_t":3,"timestep_range":[7,9],"chunk_index":1,"total_chunks":2,"timebase":{"type":"timestamps_ns"}}` + "\x00")
	seeds["FuzzParseChannels"]["list"] = []byte(`{"channels":[{"dtype":"u8","id":"cam0/rgb","shape":[8,8,3],"signal_block":"signal/cam0/rgb","modality":"rgb"},{"dtype":"f32","id":"ctrl","shape":[2],"signal_block":"action/ctrl"}]}`)
	seeds["FuzzParseChannels"]["map"] = []byte(`{"signal/state":{"dtype":"float32","shape":[4]},"signal/cam":{"dtype":"uint8","shape":[2,2]}}`)
	m, err := (&ManifestFile{EpisodeID: "e", Chunks: []ManifestChunk{
		{ChunkIndex: 0, URI: "e_chunk_0000.wshard", TimestepRange: [2]int64{0, 9}, LengthT: 10, TotalChunks: 2},
		{ChunkIndex: 1, URI: "../x.wshard", TimestepRange: [2]int64{10, 19}, LengthT: 10, TotalChunks: 2},
	}, TotalTimesteps: 20}).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	r, err := container.NewReader(bytes.NewReader(m), int64(len(m)), "m", container.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	e, _ := r.Lookup("meta/manifest")
	if seeds["FuzzParseManifest"]["two-chunks"], err = r.ReadBlock(e); err != nil {
		t.Fatal(err)
	}
	return seeds
}

// TestUpdateFuzzCorpus rewrites testdata/fuzz under -update.
func TestUpdateFuzzCorpus(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz")
	}
	for target, files := range fuzzSeeds(t) {
		dir := filepath.Join("testdata", "fuzz", target)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, b := range files {
			seed := "go test fuzz v1\n[]byte(" + strconv.Quote(string(b)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, name), []byte(seed), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// FuzzEpisode reads arbitrary bytes as an episode file and, when the
// metadata is accepted, every channel, the camera and the timestamps. No
// panic; every failure is a *Problem with a reason; accepted values have
// the sizes the metadata promises.
func FuzzEpisode(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		fuzzmem.Check(t, episodeAllocBound, func() {
			r, err := container.NewReader(bytes.NewReader(b), int64(len(b)), "fuzz", container.Limits{MaxBlockBytes: 1 << 20})
			if err != nil {
				return // the container's own fuzz target covers these
			}
			ep, err := NewEpisode(r)
			if err != nil {
				if !errors.As(err, new(*Problem)) {
					t.Fatalf("NewEpisode: %v is not a *Problem", err)
				}
				return
			}
			problem := func(what string, err error) {
				if err != nil && !errors.As(err, new(*Problem)) {
					t.Fatalf("%s: %v is not a *Problem", what, err)
				}
			}
			for _, c := range ep.Channels {
				v, err := ep.Float32s(c)
				problem(c.Block, err)
				if err == nil && len(v) != ep.Meta.Length*c.Elements() {
					t.Fatalf("%s: %d values for %d steps of %v", c.Block, len(v), ep.Meta.Length, c.Shape)
				}
			}
			// Every channel as a label channel: a Problem or per-step boxes
			// inside the frame, never more than K.
			for _, c := range ep.Channels {
				s := &Source{opts: Options{Boxes: c.Block}}
				pd := &partData{w: 16, h: 16}
				if err := s.readBoxes(ep, pd); err != nil {
					problem("boxes "+c.Block, err)
					continue
				}
				for step := range ep.Meta.Length {
					var smp sources.Sample
					pd.stepBoxes(&smp, step)
					if len(smp.Boxes) > pd.boxK {
						t.Fatalf("%s step %d: %d boxes of %d rows", c.Block, step, len(smp.Boxes), pd.boxK)
					}
					for _, b := range smp.Boxes {
						if !(0 <= b.X0 && b.X0 < b.X1 && b.X1 <= 16 && 0 <= b.Y0 && b.Y0 < b.Y1 && b.Y1 <= 16) {
							t.Fatalf("%s step %d: box %+v outside the 16x16 frame", c.Block, step, b)
						}
					}
				}
			}
			if cam := defaultCamera(ep.Channels); cam != "" {
				img, err := ep.imageChannel(cam)
				problem("camera", err)
				if err == nil && int64(img.entry.OrigSize) != int64(ep.Meta.Length)*int64(img.frameBytes()) {
					t.Fatalf("camera block of %d bytes for %d frames of %d", img.entry.OrigSize, ep.Meta.Length, img.frameBytes())
				}
			}
			ts, err := ep.Timestamps()
			problem("timestamps", err)
			if err == nil && len(ts) != ep.Meta.Length {
				t.Fatalf("%d timestamps for %d steps", len(ts), ep.Meta.Length)
			}
		})
	})
}

// FuzzParseMeta feeds meta/episode and meta/wshard texts (separated by a
// NUL) to parseMeta: never a panic, and an accepted length and rate are
// sane.
func FuzzParseMeta(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		episode, wshard, _ := bytes.Cut(b, []byte{0})
		if len(wshard) == 0 {
			wshard = nil
		}
		m, err := fuzzmem.Call(t, parseMetaAllocBound, func() (Meta, error) { return parseMeta(episode, wshard) })
		if err != nil {
			return
		}
		if m.Length < 0 || m.Length > maxSteps || m.Start < 0 || m.Timebase.TickHz < 0 ||
			(m.Timebase.Type != TimebaseTicks && m.Timebase.Type != TimebaseTimestampsNs) {
			t.Fatalf("accepted %+v", m)
		}
	})
}

// FuzzParseChannels: never a panic; every accepted channel either carries
// its error or has a known dtype and a shape within maxElements.
func FuzzParseChannels(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		channels, err := fuzzmem.Call(t, parseChannelsAllocBound, func() ([]Channel, error) { return parseChannels(b) })
		if err != nil {
			return
		}
		for _, c := range channels {
			if c.err != nil {
				continue
			}
			if c.DType.Size() == 0 || c.Shape == nil || c.Elements() < 0 || c.Elements() > maxElements {
				t.Fatalf("accepted channel %+v", c)
			}
		}
	})
}

// FuzzParseManifest: never a panic; chunk paths never escape; declared
// ranges are consistent.
func FuzzParseManifest(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var m *manifestPlan
		fuzzmem.Check(t, parseManifestAllocBound, func() { m = parseManifest(b, "dir/m.wshard") })
		for _, c := range m.chunks {
			if c.rel != "" && !filepath.IsLocal(filepath.FromSlash(c.rel)) {
				t.Fatalf("chunk path %q escapes", c.rel)
			}
			if c.declared && (c.start < 0 || c.length < 0) {
				t.Fatalf("declared chunk %+v", c)
			}
		}
	})
}
