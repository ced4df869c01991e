package roverd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image/jpeg"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"warehouse-etl/sources"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// The demo scan against the generator's formulas: one sample per camera
// frame in dataset natural order, extras joined by the nearest-timestamp
// rule, the dropout frames flagged, the crashed recording truncated to
// its common length with a warning.
func TestScanDemo(t *testing.T) {
	s := mustNew(t, demoRoot, demoOptions())
	if got := fmt.Sprint(s.Extras()); got != "[{imu/acc [3] f32} {imu/avel [3] f32} {imu/rot [3 3] f32}]" {
		t.Fatalf("extras %s", got)
	}
	samples := scanAll(t, s)
	i := 0
	for di, rec := range demo {
		ts, ns := rec.imuRecords()
		ts = ts[:rec.imuCommon]
		for k := range rec.frames {
			smp := samples[i]
			i++
			tf := rec.t0 + 0.1*float64(k)
			where := fmt.Sprintf("%s frame %d", rec.name, k)
			if smp.Source != rec.name || smp.SourceIndex != int32(di) || smp.Frame != uint64(k) {
				t.Fatalf("%s: got %s/%d frame %d", where, smp.Source, smp.SourceIndex, smp.Frame)
			}
			if smp.Width != 64 || smp.Height != 48 || smp.ImagePath != rec.name+"/camera/video.avi" || smp.Locator != fmt.Sprintf("%s/camera#%d", rec.name, k) {
				t.Fatalf("%s: %dx%d %s %s", where, smp.Width, smp.Height, smp.ImagePath, smp.Locator)
			}
			if want := int64(math.Round(tf * 1e9)); smp.UnixTimeNs != want {
				t.Fatalf("%s: unix time %d, want %d", where, smp.UnixTimeNs, want)
			}
			var want []validate.Reason
			if rec.truncated {
				want = append(want, validate.ReasonLengthTruncated)
			}
			j, ok := nearest(ts, tf, 0.050)
			if !ok {
				want = append(want, validate.ReasonNoMatchWithinTolerance)
			}
			if (k >= rec.noMatchFrom && k <= rec.noMatchTo) == ok {
				t.Fatalf("%s: the demo's documented dropout and the join rule disagree", where)
			}
			if !slices.Equal(smp.Reasons, validate.Normalize(want)) {
				t.Fatalf("%s: reasons %v, want %v", where, smp.Reasons, want)
			}
			if !ok {
				if smp.Extras != nil {
					t.Fatalf("%s: extras without a match", where)
				}
				continue
			}
			if n := ns[j]; n != 10*k+2 {
				t.Fatalf("%s: nearest record has n %d, want %d", where, n, 10*k+2)
			}
			if wantV := rec.imuValues(ns[j]); !slices.Equal(smp.Extras, wantV) {
				t.Fatalf("%s: extras %v\nwant %v", where, smp.Extras, wantV)
			}
		}
	}
	if i != len(samples) {
		t.Fatalf("%d samples, want %d", len(samples), i)
	}
	entries := s.Entries()
	if len(entries) != 2 || entries[0].Name != "drive_2" || entries[1].Name != "drive_10" {
		t.Fatalf("entries %+v", entries)
	}
	wantTrunc := "camera: ts 9, video.avi 8 -> 8; imu: ts 91, acc 90 (+ a partial trailing record of 7 of 12 bytes), avel 90, rot 90 -> 90"
	if got := entries[1].Attributes["truncated"]; got != wantTrunc {
		t.Fatalf("truncated = %q\nwant        %q", got, wantTrunc)
	}
	if _, ok := entries[0].Attributes["truncated"]; ok {
		t.Fatal("drive_2 is not truncated")
	}
	if got := entries[0].Attributes["sensors"]; got != "camera,imu,lidar" {
		t.Fatalf("drive_2 sensors %q (lidar has an unknown type on an unread channel: still listed, not read)", got)
	}
}

// ReadImage returns each frame's JPEG, and the decoded background is the
// colour make_video.py drew for that frame: the right frame, in RGB.
func TestReadImageDemo(t *testing.T) {
	s := mustNew(t, demoRoot, Options{})
	samples := scanAll(t, s)
	i := 0
	for _, rec := range demo {
		for k := range rec.frames {
			im, err := s.ReadImage(samples[i])
			i++
			if err != nil {
				t.Fatal(err)
			}
			img, err := jpeg.Decode(bytes.NewReader(im.Encoded))
			if err != nil {
				t.Fatalf("%s frame %d: %v", rec.name, k, err)
			}
			r, g, b, _ := img.At(60, 40).RGBA()
			want := [3]int{20 + 15*k, 200 - 10*k, rec.blue}
			for c, v := range []uint32{r >> 8, g >> 8, b >> 8} {
				if d := int(v) - want[c]; d < -8 || d > 8 {
					t.Fatalf("%s frame %d channel %d = %d, want %d +- 8", rec.name, k, c, v, want[c])
				}
			}
		}
	}
}

// Workers call ReadImage concurrently, across datasets, with a reader
// cache smaller than the number of datasets touched.
func TestReadImageConcurrent(t *testing.T) {
	s := mustNew(t, demoRoot, Options{})
	samples := scanAll(t, s)
	want := make([][]byte, len(samples))
	for i, smp := range samples {
		im, err := s.ReadImage(smp)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = im.Encoded
	}
	errs := make(chan error, 8)
	for w := range 8 {
		go func() {
			for r := range 20 {
				i := (w*7 + r*5) % len(samples)
				s.readers.reset() // force reopening under contention
				im, err := s.ReadImage(samples[i])
				if err == nil && !bytes.Equal(im.Encoded, want[i]) {
					err = fmt.Errorf("sample %d: different bytes", i)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// The root may be one dataset: paths are relative to it.
func TestRootIsADataset(t *testing.T) {
	s := mustNew(t, filepath.Join(demoRoot, "drive_2"), demoOptions())
	samples := scanAll(t, s)
	if len(samples) != 12 || samples[0].Source != "drive_2" || samples[0].ImagePath != "camera/video.avi" {
		t.Fatalf("%d samples, first %+v", len(samples), samples[0])
	}
	var paths []string
	s.Fingerprint(context.Background(), func(fi warehouse.FileEntry) error { paths = append(paths, fi.Path); return nil })
	if paths[0] != "camera/meta.json" {
		t.Fatalf("fingerprint paths %v", paths)
	}
}

// The fingerprint lists exactly the files Scan reads: the camera's and
// the extras sensors' meta.json, ts and used channels; never _odom, lidar
// or _scratch.
func TestFingerprintDemo(t *testing.T) {
	s := mustNew(t, demoRoot, demoOptions())
	var got []string
	err := s.Fingerprint(context.Background(), func(fi warehouse.FileEntry) error {
		st, err := os.Stat(filepath.Join(demoRoot, fi.Path))
		if err != nil || st.Size() != fi.Size || st.ModTime().UnixNano() != fi.MtimeNs {
			t.Errorf("%s: recorded %d bytes, %v", fi.Path, fi.Size, err)
		}
		got = append(got, fi.Path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, ds := range []string{"drive_2", "drive_10"} {
		for _, f := range []string{"camera/meta.json", "camera/ts", "camera/video.avi", "imu/acc", "imu/avel", "imu/meta.json", "imu/rot", "imu/rot_i", "imu/ts"} {
			want = append(want, ds+"/"+f)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("fingerprint\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Without extras only the camera is read.
	s = mustNew(t, demoRoot, Options{})
	got = got[:0]
	s.Fingerprint(context.Background(), func(fi warehouse.FileEntry) error { got = append(got, fi.Path); return nil })
	if len(got) != 6 || got[0] != "drive_2/camera/meta.json" {
		t.Fatalf("camera-only fingerprint %v", got)
	}
}

// Folders starting with "_" are datasets and sensors only on request.
func TestIncludeUnderscore(t *testing.T) {
	s := mustNew(t, demoRoot, Options{IncludeUnderscore: true, Extras: []string{"_odom/ts"}, ToleranceMs: 1})
	samples := scanAll(t, s)
	// _scratch sorts before drive_2 ('_' < 'd') and has no camera.
	if samples[0].Source != "_scratch" || !slices.Equal(samples[0].Reasons, []validate.Reason{validate.ReasonCameraMissing}) {
		t.Fatalf("first sample %+v", samples[0])
	}
	if got := s.Entries()[0].Attributes["error"]; got != `no camera sensor "camera" (sensors: imu)` {
		t.Fatalf("_scratch error %q", got)
	}
	// drive_2's _odom/ts is the camera's ts: each frame joins its own time.
	if smp := samples[1]; smp.Source != "drive_2" || len(smp.Extras) != 1 || smp.Extras[0] != float32(1700000000.0) {
		t.Fatalf("drive_2 frame 0 %+v", smp)
	}
	// drive_10 has no _odom.
	if smp := samples[len(samples)-1]; smp.Source != "drive_10" || !slices.Contains(smp.Reasons, validate.ReasonMissingBlock) {
		t.Fatalf("drive_10 last %+v", smp)
	}
	if _, err := New(demoRoot, Options{Extras: []string{"_odom/ts"}}); err == nil ||
		err.Error() != `roverd: source.extras "_odom/ts": sensor folders starting with "_" are skipped; set source.include_underscore to read them` {
		t.Fatalf("underscore extra without the option: %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		root string
		opts Options
		want string
	}{
		{"missing root", "does-not-exist", Options{}, "roverd: dataset root: stat does-not-exist: no such file or directory"},
		{"root is a file", filepath.Join(demoRoot, "README.md"), Options{}, "roverd: dataset root " + filepath.Join(demoRoot, "README.md") + " is not a directory"},
		{"negative tolerance", demoRoot, Options{ToleranceMs: -1}, "roverd: tolerance must be finite and not negative"},
		{"extra without channel", demoRoot, Options{Extras: []string{"imu"}}, `roverd: source.extras "imu": want sensor/channel, e.g. imu/acc`},
		{"extra with a path", demoRoot, Options{Extras: []string{"imu/a/b"}}, `roverd: source.extras "imu/a/b": not a channel name`},
		{"extra repeated", demoRoot, Options{Extras: []string{"imu/acc", "imu/acc"}}, `roverd: source.extras: "imu/acc" is repeated`},
		{"dot camera", demoRoot, Options{Camera: ".."}, `roverd: source.camera "..": not a sensor name`},
		{"undeclared extra", demoRoot, Options{Extras: []string{"imu/mag"}},
			`roverd: source.extras "imu/mag": no dataset declares it readably: drive_2/imu: roverd: no such channel: channel "mag" is not declared (declared: acc, avel, rot, ts)`},
		{"no such sensor", demoRoot, Options{Extras: []string{"gps/fix"}}, `roverd: source.extras "gps/fix": no dataset declares it readably: no dataset has a sensor "gps"`},
		{"image extra", demoRoot, Options{Extras: []string{"camera/video.avi"}},
			`roverd: source.extras "camera/video.avi": no dataset declares it readably: drive_2/camera: roverd: bad meta.json: channel "video.avi": format mjpg holds images, not numbers`},
		{"unknown type extra", demoRoot, Options{Extras: []string{"lidar/rng"}},
			`roverd: source.extras "lidar/rng": no dataset declares it readably: drive_2/lidar: channel "rng": roverd: unknown type name: "V12" (numpy size-in-bytes names: b1, i1, i2, i4, i8, u1, u2, u4, u8, f2, f4, f8)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.root, tc.opts)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("err = %v\nwant  %s", err, tc.want)
			}
		})
	}
}

// damage is one change to a copy of the demo and what the scan must say.
type damage struct {
	name   string
	apply  func(t *testing.T, root string)
	opts   func(*Options)
	check  func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry)
	noScan bool
}

// reasonsOf lists drive_2's samples' reasons (the first dataset).
func reasonsOf(samples []*sources.Sample, source string) [][]validate.Reason {
	var out [][]validate.Reason
	for _, s := range samples {
		if s.Source == source {
			out = append(out, s.Reasons)
		}
	}
	return out
}

// every checks that all of a dataset's samples have exactly these reasons.
func every(t *testing.T, samples []*sources.Sample, source string, want ...validate.Reason) {
	t.Helper()
	rs := reasonsOf(samples, source)
	if len(rs) == 0 {
		t.Fatalf("no samples of %s", source)
	}
	for k, r := range rs {
		if !slices.Equal(r, validate.Normalize(want)) {
			t.Fatalf("%s sample %d: reasons %v, want %v", source, k, r, want)
		}
	}
}

// placeholder checks that a dataset is one placeholder sample with reason
// and its entry's error.
func placeholder(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry, source string, reason validate.Reason, msg string) {
	t.Helper()
	rs := reasonsOf(samples, source)
	if len(rs) != 1 || !slices.Equal(rs[0], []validate.Reason{reason}) {
		t.Fatalf("%s: samples' reasons %v, want one placeholder with %s", source, rs, reason)
	}
	for _, e := range entries {
		if e.Name == source && e.Attributes["error"] != msg {
			t.Fatalf("%s error = %q\nwant %q", source, e.Attributes["error"], msg)
		}
	}
}

// Bad input: every damage to one recording becomes reason codes for that
// recording only, with a message in its entry; the other recording and
// the scan go on.
func TestDamagedDatasets(t *testing.T) {
	d2 := func(root string, p ...string) string {
		return filepath.Join(append([]string{root, "drive_2"}, p...)...)
	}
	drive10Clean := func(t *testing.T, samples []*sources.Sample) {
		t.Helper()
		every(t, samples, "drive_10", validate.ReasonLengthTruncated)
	}
	tests := []damage{
		{name: "camera meta.json is not JSON", apply: func(t *testing.T, root string) {
			writeFile(t, d2(root, "camera", "meta.json"), []byte("{ts: raw"))
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			placeholder(t, samples, entries, "drive_2", validate.ReasonBadSchema,
				"roverd: bad meta.json: not a JSON object: invalid character 't' looking for beginning of object key string")
			drive10Clean(t, samples)
		}},
		{name: "video type unknown", apply: func(t *testing.T, root string) {
			writeJSON(t, d2(root, "camera", "meta.json"), map[string]any{"ts": tsMeta, "video.avi": meta("mjpg", "rgb8", 48, 64, 3)})
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			placeholder(t, samples, entries, "drive_2", validate.ReasonBadSchema,
				`sensor camera has no readable image channel: channel "video.avi": roverd: unknown type name: "rgb8" (numpy size-in-bytes names: b1, i1, i2, i4, i8, u1, u2, u4, u8, f2, f4, f8)`)
		}},
		{name: "video format unknown", apply: func(t *testing.T, root string) {
			writeJSON(t, d2(root, "camera", "meta.json"), map[string]any{"ts": tsMeta, "video.avi": meta("h264", "u1", 48, 64, 3)})
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			placeholder(t, samples, entries, "drive_2", validate.ReasonBadSchema,
				`sensor camera has no readable image channel: roverd: bad meta.json: channel "video.avi": unknown format "h264" (known: raw, lzma, lzmaf, mjpg, npz, jpg)`)
		}},
		{name: "camera sensor missing", apply: func(t *testing.T, root string) {
			os.RemoveAll(d2(root, "camera"))
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			placeholder(t, samples, entries, "drive_2", validate.ReasonCameraMissing, `no camera sensor "camera" (sensors: imu, lidar)`)
		}},
		{name: "video.avi missing", apply: func(t *testing.T, root string) {
			os.Remove(d2(root, "camera", "video.avi"))
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			placeholder(t, samples, entries, "drive_2", validate.ReasonMissingFile, "open drive_2/camera/video.avi: no such file or directory")
		}},
		{name: "video.avi is not an AVI", apply: func(t *testing.T, root string) {
			writeFile(t, d2(root, "camera", "video.avi"), []byte("\xff\xd8\xff\xe0 a JPEG, not an AVI"))
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			placeholder(t, samples, entries, "drive_2", validate.ReasonDecodeError,
				`video.avi: avi: corrupt file: not a RIFF AVI file (starts with "\xff\xd8\xff\xe0 a JPEG,")`)
		}},
		{name: "camera ts missing", apply: func(t *testing.T, root string) {
			os.Remove(d2(root, "camera", "ts"))
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			placeholder(t, samples, entries, "drive_2", validate.ReasonMissingBlock, "stat drive_2/camera/ts: no such file or directory")
		}},
		{name: "camera ts not declared", apply: func(t *testing.T, root string) {
			writeJSON(t, d2(root, "camera", "meta.json"), map[string]any{"video.avi": meta("mjpg", "u1", 48, 64, 3)})
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			placeholder(t, samples, entries, "drive_2", validate.ReasonMissingBlock, `roverd: no such channel: channel "ts" is not declared (declared: video.avi)`)
		}},
		{name: "camera ts is f4", apply: func(t *testing.T, root string) {
			writeJSON(t, d2(root, "camera", "meta.json"), map[string]any{"ts": meta("raw", "f4"), "video.avi": meta("mjpg", "u1", 48, 64, 3)})
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			placeholder(t, samples, entries, "drive_2", validate.ReasonBadSchema, "roverd: bad meta.json: channel ts: format raw, type f4, shape []; want raw, f8, []")
		}},
		{name: "camera has no frames", apply: func(t *testing.T, root string) {
			writeFile(t, d2(root, "camera", "ts"), []byte{1, 2, 3})
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			placeholder(t, samples, entries, "drive_2", validate.ReasonZeroFrames,
				"the camera has no complete frame (camera: ts 0 (+ a partial trailing record of 3 of 8 bytes), video.avi 12 -> 0)")
		}},
		{name: "two image channels", apply: func(t *testing.T, root string) {
			writeJSON(t, d2(root, "camera", "meta.json"), map[string]any{"ts": tsMeta, "video.avi": meta("mjpg", "u1", 48, 64, 3), "b.avi": meta("mjpg", "u1", 48, 64, 3)})
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			placeholder(t, samples, entries, "drive_2", validate.ReasonBadSchema, "sensor camera has several image channels (b.avi, video.avi): set source.camera to camera/<channel>")
		}},
		{name: "camera shape disagrees with the frames", apply: func(t *testing.T, root string) {
			writeJSON(t, d2(root, "camera", "meta.json"), map[string]any{"ts": tsMeta, "video.avi": meta("mjpg", "u1", 1080, 1920, 3)})
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			for k, r := range reasonsOf(samples, "drive_2") {
				if !slices.Contains(r, validate.ReasonDimsMismatch) {
					t.Fatalf("frame %d reasons %v", k, r)
				}
			}
			if got := entries[0].Attributes["dims"]; got != "meta.json shape [1080 1920 3], frames are 64x48 (width x height)" {
				t.Fatalf("dims %q", got)
			}
		}},
		{name: "camera ts goes back at frame 5 and is NaN at frame 9", apply: func(t *testing.T, root string) {
			ts := make([]float64, 12)
			for k := range ts {
				ts[k] = 1700000000.0 + 0.1*float64(k)
			}
			ts[5] = ts[3]
			ts[9] = math.NaN()
			writeFile(t, d2(root, "camera", "ts"), f64bytes(ts...))
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			rs := reasonsOf(samples, "drive_2")
			for k, r := range rs {
				bad := k == 5 || k == 9
				if bad != slices.Contains(r, validate.ReasonTimestampNotMonotonic) {
					t.Fatalf("frame %d reasons %v", k, r)
				}
			}
			if samples[9].UnixTimeNs != 0 || samples[9].Extras != nil {
				t.Fatalf("NaN frame %+v", samples[9])
			}
			// Frame 10 follows a NaN: nothing to compare with, not flagged.
			if len(rs[10]) != 0 {
				t.Fatalf("frame 10 reasons %v", rs[10])
			}
		}},
		{name: "imu meta.json is not JSON", apply: func(t *testing.T, root string) {
			writeFile(t, d2(root, "imu", "meta.json"), []byte("[1, 2"))
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			every(t, samples, "drive_2", validate.ReasonBadSchema)
			if got := entries[0].Attributes["extras_error"]; got != "imu: roverd: bad meta.json: not a JSON object: unexpected EOF" {
				t.Fatalf("extras_error %q", got)
			}
			drive10Clean(t, samples)
		}},
		{name: "imu acc type unknown", apply: func(t *testing.T, root string) {
			writeJSON(t, d2(root, "imu", "meta.json"), map[string]any{"ts": tsMeta, "acc": meta("raw", "q9", 3), "avel": meta("lzma", "f4", 3), "rot": meta("lzmaf", "f4", 3, 3)})
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			every(t, samples, "drive_2", validate.ReasonBadSchema)
		}},
		{name: "imu acc not declared", apply: func(t *testing.T, root string) {
			writeJSON(t, d2(root, "imu", "meta.json"), map[string]any{"ts": tsMeta, "avel": meta("lzma", "f4", 3), "rot": meta("lzmaf", "f4", 3, 3)})
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			every(t, samples, "drive_2", validate.ReasonMissingBlock)
		}},
		{name: "imu acc shape differs", apply: func(t *testing.T, root string) {
			writeJSON(t, filepath.Join(root, "drive_10", "imu", "meta.json"), map[string]any{"ts": tsMeta, "acc": meta("raw", "f4", 4), "avel": meta("lzma", "f4", 3), "rot": meta("lzmaf", "f4", 3, 3)})
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			every(t, samples, "drive_10", validate.ReasonLengthMismatch, validate.ReasonLengthTruncated)
			if got := entries[1].Attributes["extras_error"]; got != "imu: channel acc has shape [4], the extra is [3]" {
				t.Fatalf("extras_error %q", got)
			}
		}},
		{name: "imu ts missing", apply: func(t *testing.T, root string) {
			os.Remove(d2(root, "imu", "ts"))
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			every(t, samples, "drive_2", validate.ReasonMissingBlock)
		}},
		{name: "imu ts repeats a time", apply: func(t *testing.T, root string) {
			b := readFile(t, d2(root, "imu", "ts"))
			copy(b[8*10:8*11], b[8*9:8*10])
			writeFile(t, d2(root, "imu", "ts"), b)
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			every(t, samples, "drive_2", validate.ReasonTimestampNotMonotonic)
			if got := entries[0].Attributes["extras_error"]; got != "imu: ts record 10 (1.700000000072e+09) is not finite or not after record 9" {
				t.Fatalf("extras_error %q", got)
			}
		}},
		{name: "imu sensor missing", apply: func(t *testing.T, root string) {
			os.RemoveAll(d2(root, "imu"))
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			every(t, samples, "drive_2", validate.ReasonMissingBlock)
		}},
		{name: "avel is an xz bomb", apply: func(t *testing.T, root string) {
			writeFile(t, d2(root, "imu", "avel"), readFile(t, "xzstream/testdata/zeros64m.xz"))
		}, opts: func(o *Options) { o.MaxChannelBytes = 1 << 20 }, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			every(t, samples, "drive_2", validate.ReasonDecompressError)
			want := "imu: xz: uncompressed size over the limit: the data declares at least 67108864 bytes uncompressed, more than the limit of 1048576"
			if got := entries[0].Attributes["extras_error"]; got != want {
				t.Fatalf("extras_error %q", got)
			}
		}},
		{name: "avel is not xz", apply: func(t *testing.T, root string) {
			writeFile(t, d2(root, "imu", "avel"), []byte("plain bytes"))
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			every(t, samples, "drive_2", validate.ReasonDecompressError)
		}},
		{name: "rot record 2 corrupt", apply: func(t *testing.T, root string) {
			idx := readFile(t, d2(root, "imu", "rot_i"))
			data := readFile(t, d2(root, "imu", "rot"))
			off := leUint64(idx[16:]) // record 2: frame 0's match (n = 2)
			data[off+30] ^= 0xFF
			writeFile(t, d2(root, "imu", "rot"), data)
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			rs := reasonsOf(samples, "drive_2")
			if !slices.Equal(rs[0], []validate.Reason{validate.ReasonDecompressError}) || len(rs[1]) != 0 {
				t.Fatalf("frame 0 %v, frame 1 %v", rs[0], rs[1])
			}
		}},
		{name: "rot record 2 has 8 values", apply: func(t *testing.T, root string) {
			idx := readFile(t, d2(root, "imu", "rot_i"))
			data := readFile(t, d2(root, "imu", "rot"))
			bad := xzBytes(t, f32bytes(1, 2, 3, 4, 5, 6, 7, 8))
			a, b := leUint64(idx[16:]), leUint64(idx[24:])
			nd := append(append(append([]byte{}, data[:a]...), bad...), data[b:]...)
			shift := uint64(len(bad)) - (b - a)
			for i := 3; i < len(idx)/8; i++ {
				v := leUint64(idx[8*i:]) + shift
				for j := range 8 {
					idx[8*i+j] = byte(v >> (8 * j))
				}
			}
			writeFile(t, d2(root, "imu", "rot"), nd)
			writeFile(t, d2(root, "imu", "rot_i"), idx)
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			rs := reasonsOf(samples, "drive_2")
			if !slices.Equal(rs[0], []validate.Reason{validate.ReasonBlockSizeMismatch}) || len(rs[1]) != 0 || samples[1].Extras == nil {
				t.Fatalf("frame 0 %v, frame 1 %v", rs[0], rs[1])
			}
		}},
		{name: "rot_i goes backwards", apply: func(t *testing.T, root string) {
			idx := readFile(t, d2(root, "imu", "rot_i"))
			copy(idx[8*5:8*6], make([]byte, 8))
			writeFile(t, d2(root, "imu", "rot_i"), idx)
		}, check: func(t *testing.T, samples []*sources.Sample, entries []warehouse.SourceEntry) {
			every(t, samples, "drive_2", validate.ReasonDecompressError)
			if got := entries[0].Attributes["extras_error"]; !strings.HasPrefix(got, "imu: roverd: corrupt channel: rot_i: offset 5 (0) is before offset 4 (") {
				t.Fatalf("extras_error %q", got)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyDemo(t)
			tc.apply(t, root)
			opts := demoOptions()
			if tc.opts != nil {
				tc.opts(&opts)
			}
			s := mustNew(t, root, opts)
			samples := scanAll(t, s)
			tc.check(t, samples, s.Entries())
			// Whatever was damaged, every sample that passed the scan
			// must also read back (or fail only as a late decode error).
			for _, smp := range samples {
				if validate.Skip(smp.Reasons, false) {
					continue
				}
				if _, err := s.ReadImage(smp); err != nil {
					t.Fatalf("kept sample %d: %v", smp.Seq, err)
				}
			}
		})
	}
}

// Crashes, as roverd promises to survive them: each becomes the common
// length and a length_truncated warning, never a failed dataset.
func TestCrashTruncation(t *testing.T) {
	d2 := func(root string, p ...string) string {
		return filepath.Join(append([]string{root, "drive_2"}, p...)...)
	}
	tests := []struct {
		name   string
		apply  func(t *testing.T, root string)
		frames int
		note   string
	}{
		{"video cut inside frame 10", func(t *testing.T, root string) {
			b := readFile(t, d2(root, "camera", "video.avi"))
			writeFile(t, d2(root, "camera", "video.avi"), b[:8896+100]) // frame 10's chunk starts at 8896
		}, 10, "camera: ts 12, video.avi 10 (+ a partial trailing frame) -> 10"},
		{"rot data cut, rot_i ahead", func(t *testing.T, root string) {
			idx := readFile(t, d2(root, "imu", "rot_i"))
			b := readFile(t, d2(root, "imu", "rot"))
			writeFile(t, d2(root, "imu", "rot"), b[:leUint64(idx[8*80:])+5])
		}, 12, "imu: ts 86, acc 86, avel 86, rot 80 (+ rot_i lists 86 records, rot holds 80) -> 80"},
		{"rot_i ends in half an offset", func(t *testing.T, root string) {
			idx := readFile(t, d2(root, "imu", "rot_i"))
			writeFile(t, d2(root, "imu", "rot_i"), idx[:len(idx)-4])
		}, 12, "imu: ts 86, acc 86, avel 86, rot 85 (+ rot_i ends in a partial offset of 4 bytes) -> 85"},
		{"ts ends in a partial record", func(t *testing.T, root string) {
			b := readFile(t, d2(root, "imu", "ts"))
			writeFile(t, d2(root, "imu", "ts"), b[:len(b)-3])
		}, 12, "imu: ts 85 (+ a partial trailing record of 5 of 8 bytes), acc 86, avel 86, rot 86 -> 85"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			root := copyDemo(t)
			tc.apply(t, root)
			s := mustNew(t, root, demoOptions())
			samples := scanAll(t, s)
			rs := reasonsOf(samples, "drive_2")
			if len(rs) != tc.frames {
				t.Fatalf("%d frames, want %d", len(rs), tc.frames)
			}
			for k, r := range rs {
				if !slices.Contains(r, validate.ReasonLengthTruncated) {
					t.Fatalf("frame %d reasons %v", k, r)
				}
			}
			if got := s.Entries()[0].Attributes["truncated"]; got != tc.note {
				t.Fatalf("truncated = %q\nwant        %q", got, tc.note)
			}
			for _, smp := range samples {
				if !validate.Skip(smp.Reasons, false) {
					if _, err := s.ReadImage(smp); err != nil {
						t.Fatalf("sample %d: %v", smp.Seq, err)
					}
				}
			}
		})
	}
}

// ReadImage refuses samples the scan did not produce.
func TestReadImageErrors(t *testing.T) {
	s := mustNew(t, demoRoot, Options{})
	samples := scanAll(t, s)
	bad := *samples[0]
	bad.Frame = 12
	if _, err := s.ReadImage(&bad); err == nil || err.Error() != "roverd: sample 0: frame 12 out of range [0, 12)" {
		t.Fatalf("frame out of range: %v", err)
	}
	bad.SourceIndex = 7
	if _, err := s.ReadImage(&bad); err == nil || err.Error() != "roverd: sample 0: dataset 7 has no readable camera" {
		t.Fatalf("dataset out of range: %v", err)
	}
}

// A scan stops when its context is cancelled or fn fails.
func TestScanStops(t *testing.T) {
	s := mustNew(t, demoRoot, demoOptions())
	stop := errors.New("stop")
	n := 0
	err := s.Scan(context.Background(), func(*sources.Sample) error {
		n++
		if n == 3 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 3 {
		t.Fatalf("err %v after %d samples", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Scan(ctx, func(*sources.Sample) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// Cut each file the scan reads at many lengths (every length for the
// small ones, whose every byte is structure): the scan never fails and
// never panics, drive_10 is untouched, and every kept drive_2 sample still
// reads back. Per-format decoders are cut at every offset in their own
// packages (avi, xzstream).
func TestTruncatedFiles(t *testing.T) {
	root := copyDemo(t)
	files := []struct {
		path   string
		stride int
	}{
		{"camera/meta.json", 1}, {"camera/ts", 1}, {"imu/meta.json", 1}, {"imu/ts", 1},
		{"imu/avel", 1}, {"imu/rot_i", 1}, {"imu/acc", 5}, {"imu/rot", 29}, {"camera/video.avi", 37},
	}
	drive10 := scanAll(t, mustNew(t, root, demoOptions()))[12:]
	for _, f := range files {
		p := filepath.Join(root, "drive_2", filepath.FromSlash(f.path))
		orig := readFile(t, p)
		for n := 0; n < len(orig); n += f.stride {
			writeFile(t, p, orig[:n])
			s, err := New(root, demoOptions())
			if err != nil {
				t.Fatalf("%s cut at %d: New: %v", f.path, n, err)
			}
			var samples []*sources.Sample
			err = s.Scan(context.Background(), func(smp *sources.Sample) error {
				c := *smp
				samples = append(samples, &c)
				return nil
			})
			if err != nil {
				t.Fatalf("%s cut at %d: Scan: %v", f.path, n, err)
			}
			read := 0
			for _, smp := range samples {
				if smp.Source == "drive_10" {
					want := drive10[smp.Frame]
					if !slices.Equal(smp.Reasons, want.Reasons) || !slices.Equal(smp.Extras, want.Extras) {
						t.Fatalf("%s cut at %d: drive_10 frame %d changed", f.path, n, smp.Frame)
					}
					continue
				}
				if validate.Skip(smp.Reasons, false) || read == 2 {
					continue
				}
				read++ // two frames a cut keep the test fast
				if _, err := s.ReadImage(smp); err != nil {
					t.Fatalf("%s cut at %d: frame %d: %v", f.path, n, smp.Frame, err)
				}
			}
		}
		writeFile(t, p, orig)
	}
}
