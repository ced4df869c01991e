package wshard

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cespare/xxhash/v2"

	"warehouse-etl/sources"
	"warehouse-etl/sources/wshard/container"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// TestScanCleanEpisodes: two clean episodes in natural order become one
// sample per step with the frame size, times and extras of the formulas.
func TestScanCleanEpisodes(t *testing.T) {
	dir := t.TempDir()
	writeEpisode(t, dir, "ep_10.wshard", cleanEpisode(1, 3, 4, 6))
	writeEpisode(t, dir, "ep_2.wshard", cleanEpisode(0, 5, 4, 6))
	s := newSource(t, dir, Options{Extras: allExtras})
	if s.Camera() != "signal/cam0/rgb" {
		t.Fatalf("default camera %q", s.Camera())
	}
	wantSpecs := []sources.ExtraSpec{
		{Name: "signal/joint_pos", Shape: []int{3}, SourceDType: "f32"},
		{Name: "action/ctrl", Shape: []int{2}, SourceDType: "f64"},
		{Name: "gripper", Shape: []int{1}, SourceDType: "bf16"},
		{Name: "reward", Shape: []int{}, SourceDType: "f32"},
		{Name: "done", Shape: []int{}, SourceDType: "u8"},
	}
	got := s.Extras()
	if len(got) != len(wantSpecs) {
		t.Fatalf("extras %+v", got)
	}
	for i := range got {
		if got[i].Name != wantSpecs[i].Name || !slices.Equal(got[i].Shape, wantSpecs[i].Shape) || got[i].SourceDType != wantSpecs[i].SourceDType {
			t.Fatalf("extra %d = %+v, want %+v", i, got[i], wantSpecs[i])
		}
	}
	samples := scan(t, s)
	if len(samples) != 8 {
		t.Fatalf("%d samples, want 8", len(samples))
	}
	for i, smp := range samples {
		e, T, step, file, id := 0, 5, i, "ep_2.wshard", "epA" // ep_2 sorts first
		if i >= 5 {
			e, T, step, file, id = 1, 3, i-5, "ep_10.wshard", "epB"
		}
		if smp.Source != id || smp.SourceIndex != int32(e) || smp.Frame != uint64(step) || smp.Width != 6 || smp.Height != 4 ||
			smp.ImagePath != file || smp.Locator != fmt.Sprintf("%s#%d", file, step) || len(smp.Reasons) != 0 || smp.ValidBoxes != 0 {
			t.Fatalf("sample %d = %+v", i, smp)
		}
		if smp.SimTime != float64(step)/10 || smp.UnixTimeNs != 0 {
			t.Fatalf("sample %d times %v %d", i, smp.SimTime, smp.UnixTimeNs)
		}
		if want := expectedExtras(e, step, T); !slices.Equal(smp.Extras, want) {
			t.Fatalf("sample %d extras %v, want %v", i, smp.Extras, want)
		}
	}
	entries := s.Entries()
	if len(entries) != 2 || entries[0].Name != "epA" || entries[1].Index != 1 ||
		entries[0].Attributes["file"] != "ep_2.wshard" || entries[0].Attributes["steps"] != "5" ||
		entries[0].Attributes["env_id"] != "Pick-v1" || entries[0].Attributes["tick_hz"] != "10" ||
		entries[0].Attributes["camera"] != "signal/cam0/rgb" || entries[0].Attributes["error"] != "" {
		t.Fatalf("entries %+v", entries)
	}
}

// TestReadImage reads frames of every supported layout and storage: the
// pixels must be the formula's, grayscale expanded, alpha dropped.
func TestReadImage(t *testing.T) {
	const T, H, W = 4, 16, 24
	cases := []struct {
		name  string
		shape []int
		comp  container.Compression
		cache int64 // FrameCacheBytes; small forces range reads
	}{
		{"rgb raw", []int{H, W, 3}, container.CompressNone, 0},
		{"rgb raw by range", []int{H, W, 3}, container.CompressNone, 16},
		{"rgb zstd", []int{H, W, 3}, container.CompressZstd, 0},
		{"rgb lz4", []int{H, W, 3}, container.CompressLZ4, 0},
		{"gray [H,W]", []int{H, W}, container.CompressNone, 0},
		{"gray [H,W,1] lz4", []int{H, W, 1}, container.CompressLZ4, 0},
		{"rgba", []int{H, W, 4}, container.CompressZstd, 16},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			C := 1
			if len(c.shape) == 3 {
				C = c.shape[2]
			}
			data := frames(2, T, H, W, C)
			ep := &EpisodeFile{ID: "img", Length: T, TickHz: 5, Channels: []ChannelData{
				{ID: "cam", Block: "signal/cam/rgb", DType: "uint8", Shape: c.shape, Data: data, Compression: c.comp},
			}}
			dir := t.TempDir()
			b := writeEpisode(t, dir, "e.wshard", ep)
			if c.comp != container.CompressNone {
				r, err := container.NewReader(bytes.NewReader(b), int64(len(b)), "e", container.Limits{})
				if err != nil {
					t.Fatal(err)
				}
				if e, _ := r.Lookup("signal/cam/rgb"); e.Compression() != c.comp {
					t.Fatalf("the test frames did not compress with %s: the case would test raw blocks", c.comp)
				}
			}
			s := newSource(t, dir, Options{Camera: "cam", FrameCacheBytes: c.cache})
			samples := scan(t, s)
			if len(samples) != T {
				t.Fatalf("%d samples", len(samples))
			}
			var wg sync.WaitGroup
			for round := range 3 { // concurrent readers of the same frames
				for i := range samples {
					wg.Go(func() {
						smp := samples[(i+round)%T]
						im, err := s.ReadImage(&smp)
						if err != nil {
							t.Error(err)
							return
						}
						if im.Width != W || im.Height != H || im.Stride != 3*W || len(im.Pixels) != H*W*3 || im.Encoded != nil {
							t.Errorf("image %dx%d stride %d, %d bytes", im.Width, im.Height, im.Stride, len(im.Pixels))
							return
						}
						for y := range H {
							for x := range W {
								for k := range 3 {
									src := k
									if C == 1 {
										src = 0
									}
									if got, want := im.Pixels[y*3*W+3*x+k], pixel(2, int(smp.Frame), y, x, src); got != want {
										t.Errorf("frame %d (%d,%d,%d) = %d, want %d", smp.Frame, x, y, k, got, want)
										return
									}
								}
							}
						}
					})
				}
			}
			wg.Wait()
		})
	}
}

// TestScanNeverReadsCameraBlocks: a camera block whose bytes are broken is
// not noticed by Scan (it never reads it) and fails each frame in
// ReadImage with the container's error naming file and block.
func TestScanNeverReadsCameraBlocks(t *testing.T) {
	for _, c := range []struct {
		name string
		comp container.Compression
		kind error
	}{
		{"raw CRC mismatch", container.CompressNone, container.ErrChecksum},
		{"zstd garbage", container.CompressZstd, container.ErrDecompress},
	} {
		t.Run(c.name, func(t *testing.T) {
			ep := cleanEpisode(0, 3, 8, 8)
			ep.Channels[0].Data = bytes.Repeat([]byte{9}, 3*8*8*3)
			ep.Channels[0].Compression = c.comp
			b, err := ep.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			off, n := blockAt(t, b, "signal/cam0/rgb")
			copy(b[off+n/2:], "XX")
			dir := t.TempDir()
			writeBytes(t, dir, "e.wshard", b)
			s := newSource(t, dir, Options{})
			samples := scan(t, s)
			for _, smp := range samples {
				if len(smp.Reasons) != 0 {
					t.Fatalf("scan flagged %v: it must not read the camera block", smp.Reasons)
				}
			}
			for _, smp := range samples {
				_, err := s.ReadImage(&smp)
				if !errors.Is(err, c.kind) || !strings.Contains(err.Error(), `e.wshard: block "signal/cam0/rgb"`) {
					t.Fatalf("ReadImage: %v, want %v naming the file and block", err, c.kind)
				}
			}
		})
	}
}

// TestTimestamps: a timestamps_ns timebase gives each sample its wall
// clock time; a step not after the previous one is flagged, alone.
func TestTimestamps(t *testing.T) {
	ep := cleanEpisode(0, 5, 2, 2)
	base := int64(1_700_000_000_000_000_000)
	ep.TimestampsNs = []int64{base, base + 10e6, base + 20e6, base + 20e6, base + 40e6}
	dir := t.TempDir()
	writeEpisode(t, dir, "e.wshard", ep)
	samples := scan(t, newSource(t, dir, Options{}))
	wantSim := []float64{0, 0.01, 0.02, 0.02, 0.04}
	for i, smp := range samples {
		if smp.UnixTimeNs != ep.TimestampsNs[i] || math.Abs(smp.SimTime-wantSim[i]) > 1e-12 {
			t.Fatalf("sample %d: unix %d sim %v", i, smp.UnixTimeNs, smp.SimTime)
		}
	}
	want := []string{"0:", "1:", "2:", "3:timestamp_not_monotonic", "4:"}
	if got := reasonsOf(samples); !slices.Equal(got, want) {
		t.Fatalf("reasons %v, want %v", got, want)
	}
}

// chunkedEpisode writes a manifest and chunks of a T-step episode split at
// the given step boundaries, with the reference chunk writers' inclusive
// ranges. edit may change a chunk before it is written.
func chunkedEpisode(t *testing.T, dir string, bounds []int, edit func(i int, c *EpisodeFile, m *ManifestChunk)) *ManifestFile {
	t.Helper()
	T := bounds[len(bounds)-1]
	full := cleanEpisode(3, T, 4, 4)
	m := &ManifestFile{EpisodeID: "long_ep", EnvID: "Pick-v1", TotalTimesteps: int64(T)}
	for i := 0; i+1 < len(bounds); i++ {
		a, z := bounds[i], bounds[i+1]
		ci, total := i, len(bounds)-1
		c := cleanEpisode(3, T, 4, 4)
		c.ID, c.Length, c.ChunkIndex, c.TotalChunks = "long_ep", z-a, &ci, &total
		c.Range = &[2]int64{int64(a), int64(z - 1)}
		for k, ch := range full.Channels {
			per := len(ch.Data) / T
			c.Channels[k].Data = ch.Data[a*per : z*per]
		}
		c.Reward, c.Done = full.Reward[a:z], full.Done[a:z]
		mc := ManifestChunk{ChunkIndex: i, URI: fmt.Sprintf("chunks/long_ep_chunk_%04d.wshard", i), TimestepRange: [2]int64{int64(a), int64(z - 1)}, LengthT: int64(z - a), TotalChunks: total}
		if edit != nil {
			edit(i, c, &mc)
		}
		if filepath.IsLocal(mc.URI) {
			writeEpisode(t, dir, mc.URI, c)
		}
		m.Chunks = append(m.Chunks, mc)
	}
	return m
}

func writeManifest(t *testing.T, dir, rel string, m *ManifestFile) {
	t.Helper()
	b, err := m.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	writeBytes(t, dir, rel, b)
}

// TestChunkedEpisode: a manifest ties three chunks into one episode whose
// steps run on without a seam; the chunk files are not episodes of their
// own; the fingerprint lists the manifest, then the chunks.
func TestChunkedEpisode(t *testing.T) {
	dir := t.TempDir()
	m := chunkedEpisode(t, dir, []int{0, 4, 7, 10}, nil)
	writeManifest(t, dir, "long_ep_manifest.wshard", m)
	writeEpisode(t, dir, "a_single.wshard", cleanEpisode(0, 2, 4, 4))
	s := newSource(t, dir, Options{Extras: allExtras})
	samples := scan(t, s)
	if len(samples) != 12 {
		t.Fatalf("%d samples, want 12", len(samples))
	}
	for i, smp := range samples[2:] {
		if smp.Source != "long_ep" || smp.SourceIndex != 1 || smp.Frame != uint64(i) || len(smp.Reasons) != 0 {
			t.Fatalf("sample %d = %+v", i, smp)
		}
		if want := expectedExtras(3, i, 10); !slices.Equal(smp.Extras, want) {
			t.Fatalf("step %d extras %v, want %v", i, smp.Extras, want)
		}
		im, err := s.ReadImage(&smp)
		if err != nil || im.Pixels[0] != pixel(3, i, 0, 0, 0) {
			t.Fatalf("step %d image: %v", i, err)
		}
	}
	if e := s.Entries()[1]; e.Attributes["chunks"] != "3" || e.Attributes["file"] != "long_ep_manifest.wshard" || e.Attributes["steps"] != "10" {
		t.Fatalf("entry %+v", e)
	}
	var files []string
	if err := s.Fingerprint(context.Background(), func(fi warehouse.FileEntry) error {
		files = append(files, fi.Path)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{"a_single.wshard", "long_ep_manifest.wshard", "chunks/long_ep_chunk_0000.wshard", "chunks/long_ep_chunk_0001.wshard", "chunks/long_ep_chunk_0002.wshard"}
	if !slices.Equal(files, want) {
		t.Fatalf("fingerprint %v, want %v", files, want)
	}
}

// TestChunkDefects: what goes wrong between chunks, and the exact reasons
// on each sample ("frame:reasons").
func TestChunkDefects(t *testing.T) {
	cases := []struct {
		name     string
		bounds   []int
		edit     func(i int, c *EpisodeFile, m *ManifestChunk)
		manifest func(m *ManifestFile)
		remove   string // a chunk file to delete after writing
		want     []string
	}{
		{"gap: chunk 1 starts two steps late", []int{0, 3, 6}, func(i int, c *EpisodeFile, m *ManifestChunk) {
			if i == 1 {
				c.Range, m.TimestepRange = &[2]int64{5, 7}, [2]int64{5, 7}
			}
		}, func(m *ManifestFile) { m.TotalTimesteps = 8 }, "", cat(repeat(0, 3, ""), []string{"5:episode_gap"}, repeat(6, 2, ""))},
		{"overlap: chunk 1 repeats step 2", []int{0, 3, 6}, func(i int, c *EpisodeFile, m *ManifestChunk) {
			if i == 1 {
				c.Range, m.TimestepRange = &[2]int64{2, 4}, [2]int64{2, 4}
			}
		}, func(m *ManifestFile) { m.TotalTimesteps = 5 }, "", cat(repeat(0, 3, ""), []string{"2:chunk_overlap"}, repeat(3, 2, ""))},
		{"duplicate chunk index", []int{0, 3, 6}, func(i int, c *EpisodeFile, m *ManifestChunk) {
			if i == 1 {
				m.ChunkIndex = 0
			}
		}, nil, "", cat(repeat(0, 3, ""), repeat(3, 2, "chunk_overlap+length_mismatch"), []string{"5:episode_gap+chunk_overlap+length_mismatch"})},
		{"missing chunk file", []int{0, 3, 6, 9}, func(i int, c *EpisodeFile, m *ManifestChunk) {
			if i == 1 {
				m.URI = "chunks/gone.wshard"
			}
		}, nil, "chunks/gone.wshard", cat(repeat(0, 3, ""), []string{"3:missing_file"}, repeat(6, 3, ""))},
		{"chunk uri escapes", []int{0, 3, 6}, func(i int, c *EpisodeFile, m *ManifestChunk) {
			if i == 1 {
				m.URI = "../outside.wshard"
			}
		}, nil, "", cat(repeat(0, 3, ""), []string{"3:path_escape"})},
		{"frame size changes", []int{0, 2, 4}, func(i int, c *EpisodeFile, m *ManifestChunk) {
			if i == 1 {
				c.Channels[0].Shape = []int{2, 8, 3}
			}
		}, nil, "", cat(repeat(0, 2, ""), repeat(2, 2, "dims_mismatch"))},
		{"manifest promises more steps", []int{0, 2, 4}, nil, func(m *ManifestFile) { m.TotalTimesteps = 6 }, "",
			cat(repeat(0, 3, ""), []string{"3:episode_gap"})},
		{"manifest promises more chunks", []int{0, 2, 4}, nil, func(m *ManifestFile) {
			for i := range m.Chunks {
				m.Chunks[i].TotalChunks = 3
			}
		}, "", cat(repeat(0, 3, ""), []string{"3:episode_gap"})},
		{"chunk disagrees with its manifest entry", []int{0, 2, 4}, func(i int, c *EpisodeFile, m *ManifestChunk) {
			if i == 1 {
				m.TimestepRange = [2]int64{2, 4}
				m.LengthT = 3
			}
		}, nil, "", cat(repeat(0, 2, ""), repeat(2, 2, "length_mismatch"))},
		{"chunk index skips one", []int{0, 2, 4}, func(i int, c *EpisodeFile, m *ManifestChunk) {
			if i == 1 {
				m.ChunkIndex = 2
				*c.ChunkIndex = 2
			}
		}, func(m *ManifestFile) {
			for i := range m.Chunks {
				m.Chunks[i].TotalChunks = 0
			}
		}, "", cat(repeat(0, 2, ""), []string{"2:episode_gap", "3:"})},
		{"chunk without range follows on", []int{0, 2, 4}, func(i int, c *EpisodeFile, m *ManifestChunk) {
			if i == 1 {
				c.Range = &[2]int64{0, 0}
			}
		}, nil, "", repeat(0, 4, "")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			m := chunkedEpisode(t, dir, c.bounds, c.edit)
			if c.manifest != nil {
				c.manifest(m)
			}
			if c.remove != "" {
				if err := os.Remove(filepath.Join(dir, c.remove)); err != nil {
					t.Fatal(err)
				}
			}
			writeManifest(t, dir, "m.wshard", m)
			got := reasonsOf(scan(t, newSource(t, dir, Options{})))
			if !slices.Equal(got, c.want) {
				t.Fatalf("samples\n %v\nwant\n %v", got, c.want)
			}
		})
	}
}

// TestMalformedEpisodes: every defect of one file and the exact reasons of
// its samples. The episode has 3 steps; placeholders are one sample.
func TestMalformedEpisodes(t *testing.T) {
	const T = 3
	build := func(t *testing.T, edit func(e *EpisodeFile)) []byte {
		e := cleanEpisode(0, T, 2, 2)
		if edit != nil {
			edit(e)
		}
		b, err := e.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	flip := func(name string) func(t *testing.T, b []byte) []byte {
		return func(t *testing.T, b []byte) []byte {
			off, _ := blockAt(t, b, name)
			b[off] ^= 0x20
			return b
		}
	}
	cases := []struct {
		name  string
		edit  func(e *EpisodeFile)
		bytes func(t *testing.T, b []byte) []byte
		want  []string
	}{
		{"clean", nil, nil, repeat(0, T, "")},
		{"legacy meta and dtype aliases", func(e *EpisodeFile) {
			e.LegacyMeta = true
			e.Channels[0].DType, e.Channels[1].DType = "uint8", "float32"
		}, nil, repeat(0, T, "")},
		{"not a container", nil, func(t *testing.T, b []byte) []byte { return []byte("PK\x03\x04 this is a zip") }, []string{"0:decode_error"}},
		{"truncated", nil, func(t *testing.T, b []byte) []byte { return b[:len(b)-1] }, []string{"0:decode_error"}},
		{"manifest role as episode file", nil, func(t *testing.T, b []byte) []byte { b[5] = 0x01; return b }, []string{"0:decode_error"}},
		{"name hash mismatch", nil, func(t *testing.T, b []byte) []byte { b[container.HeaderSize] ^= 1; return b }, []string{"0:checksum_mismatch"}},
		{"unknown compression flag", nil, func(t *testing.T, b []byte) []byte { patchEntry(t, b, "reward", 14, 0x10, 2); return b }, []string{"0:decompress_error"}},
		{"meta/episode CRC mismatch", nil, flip("meta/episode"), []string{"0:checksum_mismatch"}},
		{"meta/episode not JSON", nil, func(t *testing.T, b []byte) []byte {
			off, n := blockAt(t, b, "meta/episode")
			copy(b[off:off+n], bytes.Repeat([]byte{'!'}, n))
			patchEntry(t, b, "meta/episode", 40, uint64(container.Checksum(b[off:off+n])), 4)
			return b
		}, []string{"0:bad_schema"}},
		{"no meta/episode", nil, func(t *testing.T, b []byte) []byte {
			// rename the block (and its hash) so that it is not found
			return renameBlock(t, b, "meta/episode", "meta/episodf")
		}, []string{"0:missing_block"}},
		{"length_T 0", func(e *EpisodeFile) { e.Length = 0; e.Range = &[2]int64{0, 0} }, nil, []string{"0:zero_frames"}},
		{"range disagrees with length", func(e *EpisodeFile) { e.Range = &[2]int64{0, 7} }, nil, []string{"0:length_mismatch"}},
		{"unknown timebase", nil, func(t *testing.T, b []byte) []byte {
			return rewriteJSON(t, b, "meta/wshard", `{"timebase":{"type":"frames"}}`)
		}, []string{"0:bad_schema"}},
		{"meta/channels not JSON", nil, func(t *testing.T, b []byte) []byte { return rewriteJSON(t, b, "meta/channels", `{"channels":[`) }, []string{"0:bad_schema"}},
		{"camera not declared", func(e *EpisodeFile) { e.Channels[0].Undeclared = true }, nil, repeat(0, T, "camera_missing")},
		{"camera block absent", func(e *EpisodeFile) { e.Channels[0].Data = nil }, nil, repeat(0, T, "missing_block")},
		{"camera block size", func(e *EpisodeFile) { e.Channels[0].Data = e.Channels[0].Data[1:] }, nil, repeat(0, T, "block_size_mismatch")},
		{"camera not an image", func(e *EpisodeFile) { e.Channels[0].DType = "f32"; e.Channels[0].Data = make([]byte, 4*T*2*2*3) }, nil, repeat(0, T, "decode_error")},
		{"camera unknown dtype", func(e *EpisodeFile) { e.Channels[0].DType = "qint4" }, nil, repeat(0, T, "bad_schema")},
		{"extra block absent", func(e *EpisodeFile) { e.Channels[1].Data = nil }, nil, repeat(0, T, "missing_block")},
		{"extra undeclared", func(e *EpisodeFile) { e.Channels[3].Undeclared = true }, nil, repeat(0, T, "missing_block")},
		{"extra block size", func(e *EpisodeFile) { e.Channels[2].Data = e.Channels[2].Data[:8] }, nil, repeat(0, T, "block_size_mismatch")},
		{"extra shape differs", func(e *EpisodeFile) { e.Channels[1].Shape = []int{1, 3} }, nil, repeat(0, T, "length_mismatch")},
		{"extra CRC mismatch", nil, flip("reward"), repeat(0, T, "checksum_mismatch")},
		{"extra zstd garbage", func(e *EpisodeFile) {
			e.Channels[1].Data = f32Bytes(make([]float32, 3*T))
			e.Channels[1].Compression = container.CompressZstd
		}, func(t *testing.T, b []byte) []byte {
			off, _ := blockAt(t, b, "signal/joint_pos")
			copy(b[off:], "nope")
			return b
		}, repeat(0, T, "decompress_error")},
		{"timestamps block absent", func(e *EpisodeFile) { e.TimestampsNs = []int64{1, 2, 3} }, func(t *testing.T, b []byte) []byte {
			return renameBlock(t, b, "time/timestamps_ns", "time/timestamps_nX")
		}, repeat(0, T, "missing_block")},
		{"several problems at once", func(e *EpisodeFile) { e.Channels[0].Data = nil; e.Channels[1].Data = nil }, flip("reward"), repeat(0, T, "checksum_mismatch+missing_block")},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := build(t, c.edit)
			if c.bytes != nil {
				b = c.bytes(t, b)
			}
			dir := t.TempDir()
			writeEpisode(t, dir, "a_good.wshard", cleanEpisode(1, 1, 2, 2)) // resolves camera and extras
			writeBytes(t, dir, "b_bad.wshard", b)
			s := newSource(t, dir, Options{Extras: allExtras})
			samples := scan(t, s)
			if got := reasonsOf(samples[1:]); !slices.Equal(got, c.want) {
				t.Fatalf("reasons %v, want %v", got, c.want)
			}
			e := s.Entries()[1]
			if (len(c.want) > 0 && c.want[0] != "0:") != (e.Attributes["error"] != "") || (e.Attributes["error"] != "" && !strings.Contains(e.Attributes["error"], "b_bad.wshard")) {
				t.Fatalf("entry attributes %v: the error must name the file", e.Attributes)
			}
			for _, smp := range samples[1:] {
				if validate.Skip(smp.Reasons, false) {
					continue
				}
				if len(smp.Extras) != 8 {
					t.Fatalf("kept sample without its extras: %+v", smp)
				}
			}
		})
	}
}

// renameBlock changes a block's name in place (same length) and its name
// hash, so that the block is no longer found under its old name. The
// string table precedes every block, so the first occurrence is the name.
func renameBlock(t *testing.T, b []byte, from, to string) []byte {
	t.Helper()
	if len(from) != len(to) {
		t.Fatal("renameBlock needs names of equal length")
	}
	copy(b[bytes.Index(b, []byte(from)):], to)
	le := binary.LittleEndian
	for k := range int(le.Uint32(b[12:])) {
		at := container.HeaderSize + k*container.EntrySize
		if le.Uint64(b[at:]) == xxhash.Sum64String(from) {
			le.PutUint64(b[at:], xxhash.Sum64String(to))
		}
	}
	return b
}

// rewriteJSON replaces a JSON block by a new container with the same blocks
// except that one.
func rewriteJSON(t *testing.T, b []byte, name, text string) []byte {
	t.Helper()
	r, err := container.NewReader(bytes.NewReader(b), int64(len(b)), "x", container.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	w := container.Writer{Role: r.Header().Role, Alignment: r.Header().Alignment}
	for _, e := range r.Entries() {
		data, err := r.ReadBlock(e)
		if err != nil {
			t.Fatal(err)
		}
		if e.Name == name {
			data = []byte(text)
		}
		w.Add(container.Block{Name: e.Name, Data: data, Compression: e.Compression(), ContentType: e.ContentType})
	}
	out, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestTruncatedEveryOffset: an episode file cut at any length is one
// placeholder sample with decode_error, never a panic or a failed scan.
func TestTruncatedEveryOffset(t *testing.T) {
	full, err := cleanEpisode(0, 2, 2, 2).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeEpisode(t, dir, "a.wshard", cleanEpisode(1, 1, 2, 2))
	s := newSource(t, dir, Options{Extras: allExtras})
	for n := range len(full) {
		writeBytes(t, dir, "b.wshard", full[:n])
		got := reasonsOf(scan(t, s)[1:])
		if !slices.Equal(got, []string{"0:decode_error"}) {
			t.Fatalf("cut at %d of %d: %v", n, len(full), got)
		}
	}
}

// TestInputs: the dataset root as a file, a directory (recursive, hidden
// names skipped, natural order) and a glob; and the errors for roots that
// hold nothing.
func TestInputs(t *testing.T) {
	dir := t.TempDir()
	for _, rel := range []string{"b/ep_10.wshard", "b/ep_9.wshard", "a/ep_1.wshard", ".hidden/x.wshard", "a/.y.wshard", "a/notes.txt"} {
		if strings.HasSuffix(rel, ".txt") {
			writeBytes(t, dir, rel, []byte("x"))
			continue
		}
		writeEpisode(t, dir, rel, cleanEpisode(0, 1, 2, 2))
	}
	names := func(s *Source) []string {
		var out []string
		for _, smp := range scan(t, s) {
			out = append(out, smp.ImagePath)
		}
		return out
	}
	if got := names(newSource(t, dir, Options{})); !slices.Equal(got, []string{"a/ep_1.wshard", "b/ep_9.wshard", "b/ep_10.wshard"}) {
		t.Fatalf("directory: %v", got)
	}
	if got := names(newSource(t, filepath.Join(dir, "b", "ep_10.wshard"), Options{})); !slices.Equal(got, []string{"ep_10.wshard"}) {
		t.Fatalf("file: %v", got)
	}
	if got := names(newSource(t, filepath.Join(dir, "*", "ep_?*.wshard"), Options{})); !slices.Equal(got, []string{"a/ep_1.wshard", "b/ep_9.wshard", "b/ep_10.wshard"}) {
		t.Fatalf("glob: %v", got)
	}
	empty := t.TempDir()
	for _, c := range []struct{ root, want string }{
		{filepath.Join(dir, "nope"), "wshard: dataset root: stat " + filepath.Join(dir, "nope") + ": no such file or directory"},
		{empty, "wshard: dataset root " + empty + " holds no .wshard files"},
		{filepath.Join(dir, "*.nothing"), `wshard: dataset root "` + filepath.Join(dir, "*.nothing") + `" matches no files`},
	} {
		if _, err := New(c.root, Options{}); err == nil || err.Error() != c.want {
			t.Errorf("New(%s): %v, want %q", c.root, err, c.want)
		}
	}
}

// TestNewErrors: configuration the episodes cannot satisfy fails New.
func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	writeEpisode(t, dir, "e.wshard", cleanEpisode(0, 1, 2, 2))
	big := &EpisodeFile{ID: "big", Length: 1, Channels: []ChannelData{
		{ID: "cam", Block: "signal/cam", DType: "u8", Shape: []int{1, 1, 3}, Data: []byte{1, 2, 3}},
		{ID: "depth", Block: "signal/depth", DType: "f32", Shape: []int{256, 256}, Data: make([]byte, 4*256*256)},
	}}
	bigDir := t.TempDir()
	writeEpisode(t, bigDir, "big.wshard", big)
	for _, c := range []struct {
		root string
		opts Options
		want string
	}{
		{dir, Options{Extras: []string{"signal/force"}}, `wshard: extra "signal/force": no channel or block of that name is declared in 1 readable episode files (0 unreadable) under ` + dir},
		{dir, Options{Extras: []string{"reward", "reward"}}, `wshard: extra "reward" is empty or repeated`},
		{bigDir, Options{Extras: []string{"depth"}}, "wshard: the extras take 65536 float32 values per sample; a shard holds at most 65535"},
	} {
		if _, err := New(c.root, c.opts); err == nil || err.Error() != c.want {
			t.Errorf("New(%+v): %v\nwant %q", c.opts, err, c.want)
		}
	}
	// A named camera that no episode has is not a configuration error: it
	// is camera_missing on every sample, like a camera missing in one.
	samples := scan(t, newSource(t, dir, Options{Camera: "signal/wrist/rgb"}))
	if got := reasonsOf(samples); !slices.Equal(got, []string{"0:camera_missing"}) {
		t.Fatalf("unknown camera: %v", got)
	}
}

// TestNonFiniteExtrasPassThrough: NaN and Inf reach the pipeline, which
// flags them (nonfinite); the source does not hide them.
func TestNonFiniteExtrasPassThrough(t *testing.T) {
	e := cleanEpisode(0, 2, 2, 2)
	e.Reward = []float32{float32(math.NaN()), float32(math.Inf(1))}
	dir := t.TempDir()
	writeEpisode(t, dir, "e.wshard", e)
	samples := scan(t, newSource(t, dir, Options{Extras: []string{"reward"}}))
	if !math.IsNaN(float64(samples[0].Extras[0])) || !math.IsInf(float64(samples[1].Extras[0]), 1) || len(samples[0].Reasons) != 0 {
		t.Fatalf("samples %+v", samples)
	}
}

// TestReadImageErrors: locators and sizes that do not match the file.
func TestReadImageErrors(t *testing.T) {
	dir := t.TempDir()
	writeEpisode(t, dir, "e.wshard", cleanEpisode(0, 2, 2, 2))
	s := newSource(t, dir, Options{})
	for _, c := range []struct {
		smp  sources.Sample
		want string
	}{
		{sources.Sample{Locator: "e.wshard", Width: 2, Height: 2}, `wshard: locator "e.wshard" is not <file>#<step>`},
		{sources.Sample{Locator: "e.wshard#9", Width: 2, Height: 2}, "wshard: e.wshard: step 9 outside length_T 2"},
		{sources.Sample{Locator: "e.wshard#1", Width: 3, Height: 2}, "wshard: e.wshard: frames are 2x2, the scan saw 3x2"},
		{sources.Sample{Locator: "gone.wshard#0", Width: 2, Height: 2}, "wshard: gone.wshard: no such file"},
	} {
		if _, err := s.ReadImage(&c.smp); err == nil || err.Error() != c.want {
			t.Errorf("ReadImage(%s): %v, want %q", c.smp.Locator, err, c.want)
		}
	}
	if err := os.Remove(filepath.Join(dir, "e.wshard")); err != nil {
		t.Fatal(err)
	}
}

// TestUntrustedLengths: length_T is believed only as far as blocks confirm
// it, and float32 copies stay within the block limit.
func TestUntrustedLengths(t *testing.T) {
	dir := t.TempDir()
	writeEpisode(t, dir, "a.wshard", cleanEpisode(0, 1, 2, 2))
	huge := cleanEpisode(1, 1, 2, 2)
	huge.Length, huge.Range = 1<<30, &[2]int64{0, 1 << 30}
	huge.Channels[0].Undeclared = true
	writeEpisode(t, dir, "b.wshard", huge)
	samples := scan(t, newSource(t, dir, Options{}))
	if got := reasonsOf(samples[1:]); !slices.Equal(got, []string{"0:camera_missing"}) {
		t.Fatalf("a billion steps without a camera block: %v", got)
	}

	// u8 [100] over 3 steps is a 300-byte block but 1200 bytes as float32.
	wide := &EpisodeFile{ID: "wide", Length: 3, Channels: []ChannelData{
		{ID: "cam", Block: "signal/cam", DType: "u8", Shape: []int{1, 1, 3}, Data: make([]byte, 9)},
		{ID: "tactile", Block: "signal/tactile", DType: "u8", Shape: []int{100}, Data: make([]byte, 300)},
	}}
	dir = t.TempDir()
	writeEpisode(t, dir, "w.wshard", wide)
	s := newSource(t, dir, Options{Extras: []string{"tactile"}, Limits: container.Limits{MaxBlockBytes: 1024}})
	if got := reasonsOf(scan(t, s)); !slices.Equal(got, repeat(0, 3, "decode_error")) {
		t.Fatalf("extras beyond the limit: %v", got)
	}
	if e := s.Entries()[0].Attributes["error"]; e != "wshard: w.wshard: the extras: 3 steps of 100 float32 values exceed the limit of 1024 bytes" {
		t.Fatalf("error %q", e)
	}
}
