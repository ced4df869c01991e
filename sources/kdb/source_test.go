package kdb

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/png"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"warehouse-etl/sources"
	"warehouse-etl/warehouse"
)

func writeFiles(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for name, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRoots(t *testing.T) {
	dir := t.TempDir()
	tiny := build(tinyEpisodes(t)).file
	writeFiles(t, dir, map[string][]byte{
		"demo_10.kdb": tiny, "demo_2.kdb": tiny, "_scratch.kdb": tiny, ".hidden.kdb": tiny,
		"notes.txt": []byte("x"), "sub/demo_1.kdb": tiny, "empty/readme": []byte("x"),
	})
	tests := []struct {
		root string
		base string
		want []string
		err  string
	}{
		{root: dir, base: dir, want: []string{"demo_2.kdb", "demo_10.kdb"}},
		{root: filepath.Join(dir, "demo_10.kdb"), base: dir, want: []string{"demo_10.kdb"}},
		{root: filepath.Join(dir, "*", "demo_*.kdb"), base: dir, want: []string{"sub/demo_1.kdb"}},
		{root: filepath.Join(dir, "demo_*.kdb"), base: dir, want: []string{"demo_2.kdb", "demo_10.kdb"}},
		{root: filepath.Join(dir, "empty"), err: fmt.Sprintf("kdb: %s holds no .kdb files", filepath.Join(dir, "empty"))},
		{root: filepath.Join(dir, "nope_*.kdb"), err: fmt.Sprintf("kdb: %s matches no files", filepath.Join(dir, "nope_*.kdb"))},
		{root: filepath.Join(dir, "missing.kdb"), err: fmt.Sprintf("kdb: dataset root: stat %s: no such file or directory", filepath.Join(dir, "missing.kdb"))},
		{root: filepath.Join(dir, "[.kdb"), err: fmt.Sprintf("kdb: dataset root %q: syntax error in pattern", filepath.Join(dir, "[.kdb"))},
	}
	for _, tc := range tests {
		base, rels, err := listFiles(tc.root)
		if tc.err != "" {
			if err == nil || err.Error() != tc.err {
				t.Errorf("%s: error %v, want %q", tc.root, err, tc.err)
			}
			continue
		}
		if err != nil || base != tc.base || !slices.Equal(rels, tc.want) {
			t.Errorf("%s: %s %v %v, want %s %v", tc.root, base, rels, err, tc.base, tc.want)
		}
	}
}

func TestNaturalCompare(t *testing.T) {
	sorted := []string{"a.kdb", "demo_02.kdb", "demo_2.kdb", "demo_10.kdb", "demo_10a.kdb", "demo_100.kdb", "demo_b.kdb"}
	for i := range sorted {
		for j := range sorted {
			got := sources.NaturalCompare(sorted[i], sorted[j])
			if (got < 0) != (i < j) || (got == 0) != (i == j) {
				t.Errorf("sources.NaturalCompare(%q, %q) = %d", sorted[i], sorted[j], got)
			}
		}
	}
}

func TestNewErrors(t *testing.T) {
	dir := t.TempDir()
	tiny := build(tinyEpisodes(t)).file
	bad := bytes.Clone(tiny)
	bad[0] = 'X'
	noState := build([]tEpisode{{id: 0, frames: frames(0, 1, rawCams), stateDim: 0, actionDim: -1}}).file
	writeFiles(t, dir, map[string][]byte{"ok.kdb": tiny, "bad/x.kdb": bad, "nostate/x.kdb": noState})
	tests := []struct {
		root string
		opts Options
		err  string
	}{
		{dir, Options{Extras: []string{"velocity"}}, `kdb: extra "velocity": known fields are state, action, reward, is_terminal`},
		{dir, Options{Extras: []string{"reward", "reward"}}, `kdb: extra "reward" is listed twice`},
		{dir, Options{MaxImageBytes: -1}, "kdb: MaxImageBytes must not be negative"},
		{filepath.Join(dir, "bad"), Options{}, filepath.Join(dir, "bad", "x.kdb") + `: kdb: corrupt file: bad magic "XINO", want "KINO"`},
		{filepath.Join(dir, "nostate"), Options{Extras: []string{"state"}}, `kdb: extra "state": x.kdb/episode_0 has state_dim 0`},
	}
	for _, tc := range tests {
		s, err := New(tc.root, tc.opts)
		if err == nil {
			s.Close()
		}
		if err == nil || err.Error() != tc.err {
			t.Errorf("%s %+v: error %v, want %q", tc.root, tc.opts, err, tc.err)
		}
	}
}

func TestSeveralFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string][]byte{
		"run_10.kdb": build([]tEpisode{{id: 0, frames: frames(0, 2, rawCams), stateDim: -1, actionDim: -1}}).file,
		"run_2.kdb":  build([]tEpisode{{id: 5, frames: frames(5, 1, rawCams), stateDim: -1, actionDim: -1}, {id: 1}}).file,
	})
	s, err := New(dir, Options{Extras: []string{FieldReward}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got []string
	for _, smp := range scanAll(t, s) {
		got = append(got, fmt.Sprintf("%d %s %d #%d %v %v", smp.Seq, smp.Source, smp.SourceIndex, smp.Frame, smp.Reasons, smp.Extras))
	}
	want := []string{
		"0 run_2.kdb/episode_1 0 #0 [zero_frames] []",
		"1 run_2.kdb/episode_5 1 #0 [] [0]",
		"2 run_10.kdb/episode_0 2 #0 [] [0]",
		"3 run_10.kdb/episode_0 2 #1 [] [0.5]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var paths []string
	if err := s.Fingerprint(context.Background(), func(fi warehouse.FileEntry) error { paths = append(paths, fi.Path); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(paths, []string{"run_2.kdb", "run_10.kdb"}) {
		t.Errorf("fingerprint paths %v", paths)
	}
}

func TestReadImageRaw(t *testing.T) {
	for _, ch := range []uint8{1, 3, 4} {
		cam := rawCamera("cam", 3, 2, ch, 10)
		lay := build(oneEpisode(1, func(int) []tCamera { return []tCamera{cam} }))
		s, err := memSource(map[string][]byte{"f.kdb": lay.file}, []string{"f.kdb"}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		smp := scanAll(t, s)[0]
		im, err := s.ReadImage(&smp)
		if err != nil {
			t.Fatal(err)
		}
		var want []byte
		for p := range 6 {
			px := cam.data[p*int(ch):]
			switch ch {
			case 1:
				want = append(want, px[0], px[0], px[0])
			default:
				want = append(want, px[:3]...)
			}
		}
		if im.Width != 3 || im.Height != 2 || im.Stride != 9 || !bytes.Equal(im.Pixels, want) || im.Encoded != nil {
			t.Errorf("%d channels: %+v, want pixels %v", ch, im, want)
		}
	}
}

func TestReadImageRefusesBadLocators(t *testing.T) {
	lay := build([]tEpisode{{id: 7, frames: frames(7, 2, func(int) []tCamera {
		return []tCamera{rawCamera("cam", 2, 2, 3, 0), rawCamera("other", 2, 2, 3, 0)}
	}), stateDim: -1, actionDim: -1}})
	s, err := memSource(map[string][]byte{"f.kdb": lay.file}, []string{"f.kdb"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	good := scanAll(t, s)[0]
	ent := lay.entries[0]
	if want := fmt.Sprintf("7#0@%d", ent.records[0][0]); good.Locator != want {
		t.Fatalf("locator %q, want %q", good.Locator, want)
	}
	imgEnd := ent.images[0] + ent.images[1]
	tests := []struct {
		name    string
		index   int32
		locator string
		err     string
	}{
		{"source index out of range", 3, good.Locator, "kdb: sample 0: source index 3 out of range"},
		{"not a locator", 0, "frame 0", `kdb: f.kdb/episode_7: malformed locator "frame 0"`},
		{"trailing text", 0, good.Locator + "x", fmt.Sprintf(`kdb: f.kdb/episode_7: malformed locator "%sx"`, good.Locator)},
		{"other episode", 0, fmt.Sprintf("8#0@%d", ent.records[0][0]), fmt.Sprintf(`kdb: f.kdb/episode_7: locator "8#0@%d" names episode 8`, ent.records[0][0])},
		{"offset outside the image section", 0, "7#0@64", fmt.Sprintf("kdb: corrupt file: episode 7 (index entry 0): offset 64 is outside the image section [%d, %d)", ent.images[0], imgEnd)},
		{"offset of another camera", 0, fmt.Sprintf("7#0@%d", ent.records[0][1]), fmt.Sprintf(`kdb: f.kdb/episode_7 frame 0: record at %d is camera "other", want "cam"`, ent.records[0][1])},
		{"offset inside image data", 0, fmt.Sprintf("7#0@%d", imgEnd-3), fmt.Sprintf("kdb: corrupt file: episode 7 (index entry 0): camera record at offset %d: name (%d bytes) runs past the end of its section", imgEnd-3, 0x0a09)},
	}
	for _, tc := range tests {
		smp := good
		smp.SourceIndex, smp.Locator = tc.index, tc.locator
		_, err := s.ReadImage(&smp)
		if err == nil || err.Error() != tc.err {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.err)
		}
	}
}

// TestScanReadsNoImageData records every read of a scan: raw image data
// and the data of cameras not configured are never read, and of the
// configured compressed camera only the header probe.
func TestScanReadsNoImageData(t *testing.T) {
	big := noisyPNG(t, 160, 120) // several probe sizes long
	if len(big.data) < 3*headerProbes[0] {
		t.Fatalf("PNG of %d bytes is too small for this test", len(big.data))
	}
	eps := []tEpisode{{id: 0, frames: frames(0, 3, func(int) []tCamera {
		return []tCamera{rawCamera("raw", 64, 64, 3, 0), big}
	}), stateDim: -1, actionDim: -1}}
	lay := build(eps)
	for _, camera := range []string{"raw", "png"} {
		h := newMem(lay.file)
		s, err := newSource("mem", Options{Camera: camera, Extras: Fields})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.add("f.kdb", h); err != nil {
			t.Fatal(err)
		}
		if err := s.finish(); err != nil {
			t.Fatal(err)
		}
		h.rec = true
		samples := scanAll(t, s)
		if len(samples) != 3 || len(samples[0].Reasons) != 0 {
			t.Fatalf("samples %+v", samples)
		}
		ent := lay.entries[0]
		for f := range 3 {
			for c, off := range ent.dataOffsets[f] {
				n := len(eps[0].frames[f].cams[c].data)
				allowed := 0
				if eps[0].frames[f].cams[c].name == camera && c == 1 {
					allowed = headerProbes[0]
				}
				for _, r := range h.reads {
					lo, hi := max(r[0], int64(off)+int64(allowed)), min(r[0]+r[1], int64(off+n))
					if lo < hi {
						t.Errorf("camera %s: read [%d, %d) touches bytes %d..%d of frame %d camera %d's data", camera, r[0], r[0]+r[1], lo-int64(off), hi-int64(off), f, c)
					}
				}
			}
		}
		// Steps alone read the state/action section and nothing else.
		h.reads = nil
		steps, err := s.files[0].kdb.Steps(0)
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			if _, err := steps.Next(); err != nil {
				t.Fatal(err)
			}
		}
		for _, r := range h.reads {
			if r[0] < int64(ent.actions[0]) || r[0]+r[1] > int64(ent.actions[0]+ent.actions[1]) {
				t.Errorf("Steps read [%d, %d) outside the state/action section", r[0], r[0]+r[1])
			}
		}
	}
}

func noisyPNG(t testing.TB, w, h int) tCamera {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range img.Pix {
		img.Pix[i] = byte(rng.Uint32())
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return tCamera{name: "png", w: uint32(w), h: uint32(h), ch: 3, format: FormatCompressed, data: buf.Bytes()}
}

func TestWarningsAndDefaultCamera(t *testing.T) {
	// The first frame has no camera; the default is the next frame's first.
	lay := build(oneEpisode(2, func(t int) []tCamera {
		if t == 0 {
			return nil
		}
		return []tCamera{rawCamera("side", 2, 2, 3, 0), rawCamera("cam", 2, 2, 3, 0)}
	}))
	b := append(bytes.Clone(lay.file), 0, 0)
	b[offVersionMinor] = 4
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	s, err := memSource(map[string][]byte{"f.kdb": b}, []string{"f.kdb"}, Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if s.Camera() != "side" {
		t.Errorf("default camera %q", s.Camera())
	}
	got := describeSamples(t, s)
	if want := "episode_0#0 0x0 [camera_missing]\nepisode_0#1 2x2 []"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if v := s.Entries()[0].Attributes["version"]; v != "0.4" {
		t.Errorf("version attribute %q", v)
	}
	want := `level=WARN msg="kdb file has a newer minor version; reading what version 0.1 defines" file=f.kdb version=0.4 reader=0.1
level=WARN msg="kdb file has bytes after its index; they are ignored" file=f.kdb bytes=2
level=INFO msg="kdb camera not configured; using the first one found" camera=side episode=f.kdb/episode_0
`
	if logs.String() != want {
		t.Errorf("logs\n%s\nwant\n%s", logs.String(), want)
	}
}

func TestConcurrentReadImage(t *testing.T) {
	s := demoSource(t, Options{Camera: "wrist"})
	samples := scanAll(t, s)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(samples); i += 4 {
				if len(samples[i].Reasons) > 0 {
					continue
				}
				if _, err := s.ReadImage(&samples[i]); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestScanHonoursCancellation(t *testing.T) {
	s := demoSource(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	err := s.Scan(ctx, func(*sources.Sample) error {
		n++
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) || n != 1 {
		t.Errorf("scan after cancel: %v after %d samples", err, n)
	}
}
