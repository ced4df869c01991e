package kdb

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"warehouse-etl/sources"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// The demo file testdata/kdb/demo.kdb is written by testdata/kdbgen from
// formats/kdb.md. Everything expected below comes from its README's
// formulas and tables, not from this package.

const demoPath = "../../testdata/kdb/demo.kdb"

type demoEpisode struct {
	id         uint64
	frames     int
	embodiment string
	task       string
	fps        float32
	success    Success
	reward     string // total_reward attribute, "" when absent
}

// demoFileOrder is the README's episode table, in file order.
var demoFileOrder = []demoEpisode{
	{0, 6, "franka", "pick up the red block", 10, SuccessTrue, "2.25"},
	{10, 8, "widowx", "put the spoon in the drawer", 5, SuccessFalse, ""},
	{2, 6, "franka", "open the drawer", 15, SuccessUnknown, ""},
	{3, 0, "ur5", "wait", 10, SuccessUnknown, ""},
	{11, 4, "franka", "stack the cups", 10, SuccessTrue, ""},
}

// demoScanOrder is numeric episode_id order.
var demoScanOrder = []uint64{0, 2, 3, 10, 11}

func demoEpisodeByID(id uint64) demoEpisode {
	for _, e := range demoFileOrder {
		if e.id == id {
			return e
		}
	}
	panic(id)
}

func demoState(id uint64, t, j int) float32 { return float32(id) + float32(t)/4 + float32(j)/16 }
func demoAction(t, k int) float32           { return float32(k) - float32(t)/2 }
func demoReward(t, n int) float32 {
	if t == n-1 {
		return 1
	}
	return float32(t) / 8
}
func demoFront(id uint64, t, x, y int) [3]uint8 {
	return [3]uint8{uint8(x * 4), uint8(y * 5), uint8(int(id)*20 + t*30)}
}
func demoWrist(id uint64, t, x, y int) [3]uint8 {
	return [3]uint8{uint8(255 - x*8), uint8(y * 10), uint8(t*40 + int(id))}
}

// demoReasons is the README's defect table plus the episode-wide reasons.
func demoReasons(camera string, id uint64, t int) []validate.Reason {
	switch id {
	case 3:
		return []validate.Reason{validate.ReasonZeroFrames}
	case 11:
		return []validate.Reason{validate.ReasonLengthMismatch}
	case 10:
		front := map[int]validate.Reason{1: validate.ReasonCameraMissing, 2: validate.ReasonDecodeError, 4: validate.ReasonDimsMismatch}
		wrist := map[int]validate.Reason{6: validate.ReasonBlockSizeMismatch}
		m := front
		if camera == "wrist" {
			m = wrist
		}
		if r, ok := m[t]; ok {
			return []validate.Reason{r}
		}
	}
	return nil
}

func openDemo(t *testing.T) (*File, *os.File) {
	t.Helper()
	fh, err := os.Open(demoPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fh.Close() })
	st, err := fh.Stat()
	if err != nil {
		t.Fatal(err)
	}
	f, err := Open(fh, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	return f, fh
}

func TestDemoFileHeaderIndexMeta(t *testing.T) {
	f, _ := openDemo(t)
	h := f.Header()
	if h.VersionMajor != 0 || h.VersionMinor != 1 || h.NumEpisodes != 5 || h.NumFrames != 24 || h.CreatedUnix != 1718064000 {
		t.Errorf("header %+v", h)
	}
	if f.TrailingBytes() != 0 || h.NewerMinor() {
		t.Errorf("trailing %d, newer minor %v", f.TrailingBytes(), h.NewerMinor())
	}
	if f.Len() != len(demoFileOrder) {
		t.Fatalf("%d episodes", f.Len())
	}
	for i, want := range demoFileOrder {
		e := f.Entry(i)
		if e.EpisodeID != want.id || int(e.NumFrames) != want.frames || e.ActionDim != 7 {
			t.Errorf("entry %d: %+v, want id %d with %d frames", i, e, want.id, want.frames)
		}
		wantSD := uint16(4)
		if want.frames == 0 {
			wantSD = 0 // state_dim comes from the first frame
		}
		if e.StateDim != wantSD {
			t.Errorf("entry %d: state_dim %d, want %d", i, e.StateDim, wantSD)
		}
		m, err := f.Meta(i)
		if err != nil {
			t.Fatal(err)
		}
		if m.Embodiment != want.embodiment || m.Task != want.task || m.FPS != want.fps || m.Success != want.success {
			t.Errorf("episode %d meta %+v", want.id, m)
		}
		if m.HasTotalReward != (want.reward != "") || (m.HasTotalReward && m.TotalReward != 2.25) {
			t.Errorf("episode %d total reward %v %v", want.id, m.HasTotalReward, m.TotalReward)
		}
	}
}

func TestDemoFileStepsAndFrames(t *testing.T) {
	f, _ := openDemo(t)
	for i, want := range demoFileOrder {
		steps, err := f.Steps(i)
		if want.id == 11 {
			// frame 2 carries a fifth state value: the section is 4 bytes
			// longer than 4 frames x (4*(4+7)+5) bytes.
			if err == nil || err.Error() != "kdb: corrupt file: episode 11 (index entry 4): state/action section is 200 bytes, the index gives 4 frames x 49 bytes (state_dim 4, action_dim 7) = 196" {
				t.Errorf("episode 11 steps: %v", err)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := f.CheckFraming(i); err != nil {
			t.Fatal(err)
		}
		fr := f.Frames(i)
		for tt := range want.frames {
			st, err := steps.Next()
			if err != nil {
				t.Fatal(err)
			}
			for j, v := range st.State {
				if v != demoState(want.id, tt, j) {
					t.Errorf("episode %d frame %d state[%d] = %v", want.id, tt, j, v)
				}
			}
			for k, v := range st.Action {
				w := demoAction(tt, k)
				if want.id == 10 && tt == 5 && k == 0 {
					if !math.IsNaN(float64(v)) {
						t.Errorf("episode 10 frame 5 action[0] = %v, want NaN", v)
					}
					continue
				}
				if v != w {
					t.Errorf("episode %d frame %d action[%d] = %v, want %v", want.id, tt, k, v, w)
				}
			}
			if st.Reward != demoReward(tt, want.frames) || st.Terminal != (tt == want.frames-1) {
				t.Errorf("episode %d frame %d reward %v terminal %v", want.id, tt, st.Reward, st.Terminal)
			}
			cams, err := fr.Next()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range cams {
				names = append(names, c.Name)
			}
			wantNames := []string{"front", "wrist"}
			if want.id == 10 && tt == 1 {
				wantNames = wantNames[1:]
			}
			if !slices.Equal(names, wantNames) {
				t.Errorf("episode %d frame %d cameras %v", want.id, tt, names)
			}
			for _, c := range cams {
				switch c.Name {
				case "front":
					wantW, wantH := uint32(64), uint32(48)
					if want.id == 10 && tt == 4 {
						wantW, wantH = 48, 64
					}
					if c.Width != wantW || c.Height != wantH || c.Format != FormatCompressed || c.Channels != 3 {
						t.Errorf("episode %d frame %d front %+v", want.id, tt, c)
					}
				case "wrist":
					wantLen := uint32(32 * 24 * 3)
					if want.id == 10 && tt == 6 {
						wantLen -= 3
					}
					if c.Width != 32 || c.Height != 24 || c.Format != FormatRaw || c.Channels != 3 || c.DataLen != wantLen {
						t.Errorf("episode %d frame %d wrist %+v", want.id, tt, c)
					}
				}
			}
		}
		if fr.Rest() != 0 {
			t.Errorf("episode %d: %d bytes left in the image section", want.id, fr.Rest())
		}
	}
}

func demoSource(t *testing.T, opts Options) *Source {
	t.Helper()
	s, err := New(demoPath, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestDemoScan(t *testing.T) {
	all := []string{FieldState, FieldAction, FieldReward, FieldIsTerminal}
	for _, camera := range []string{"", "wrist"} {
		t.Run("camera="+camera, func(t *testing.T) {
			s := demoSource(t, Options{Camera: camera, Extras: all})
			effective := camera
			if effective == "" {
				effective = "front" // the first camera of the first frame
			}
			if s.Camera() != effective {
				t.Fatalf("camera %q, want %q", s.Camera(), effective)
			}
			specs := s.Extras()
			wantSpecs := fmt.Sprint([]sources.ExtraSpec{
				{Name: "state", Shape: []int{4}, SourceDType: "f32"}, {Name: "action", Shape: []int{7}, SourceDType: "f32"},
				{Name: "reward", Shape: []int{}, SourceDType: "f32"}, {Name: "is_terminal", Shape: []int{}, SourceDType: "u8"}})
			if fmt.Sprint(specs) != wantSpecs {
				t.Errorf("extras %v, want %v", specs, wantSpecs)
			}
			got := scanAll(t, s)
			k := 0
			for idx, id := range demoScanOrder {
				ep := demoEpisodeByID(id)
				n := max(ep.frames, 1) // a zero-frame episode has one placeholder
				for tt := range n {
					if k >= len(got) {
						t.Fatalf("only %d samples", len(got))
					}
					smp := got[k]
					name := fmt.Sprintf("demo.kdb/episode_%d", id)
					if smp.Seq != int64(k) || smp.Source != name || smp.SourceIndex != int32(idx) || smp.Frame != uint64(tt) || smp.ImagePath != "demo.kdb" {
						t.Errorf("sample %d: seq %d source %q index %d frame %d path %q, want episode %d frame %d",
							k, smp.Seq, smp.Source, smp.SourceIndex, smp.Frame, smp.ImagePath, id, tt)
					}
					if want := demoReasons(effective, id, tt); !slices.Equal(smp.Reasons, want) {
						t.Errorf("episode %d frame %d: reasons %v, want %v", id, tt, smp.Reasons, want)
					}
					if wantSim := float64(tt) / float64(ep.fps); smp.SimTime != wantSim {
						t.Errorf("episode %d frame %d: sim time %v, want %v", id, tt, smp.SimTime, wantSim)
					}
					checkDemoSize(t, effective, id, tt, smp)
					checkDemoExtras(t, id, tt, ep.frames, smp.Extras)
					k++
				}
			}
			if k != len(got) {
				t.Errorf("%d samples, want %d", len(got), k)
			}
			checkDemoEntries(t, s.Entries(), effective)
		})
	}
}

func checkDemoSize(t *testing.T, camera string, id uint64, tt int, smp sources.Sample) {
	t.Helper()
	w, h := 64, 48
	if camera == "wrist" {
		w, h = 32, 24
	}
	switch {
	case id == 3, camera == "front" && id == 10 && tt == 1:
		w, h = 0, 0 // no image
	case camera == "front" && id == 10 && tt == 4:
		w, h = 48, 64
	}
	if smp.Width != w || smp.Height != h {
		t.Errorf("episode %d frame %d: %dx%d, want %dx%d", id, tt, smp.Width, smp.Height, w, h)
	}
	if (w == 0) != (smp.Locator == "") {
		t.Errorf("episode %d frame %d: locator %q", id, tt, smp.Locator)
	}
}

func checkDemoExtras(t *testing.T, id uint64, tt, n int, got []float32) {
	t.Helper()
	if id == 3 || id == 11 {
		if got != nil {
			t.Errorf("episode %d frame %d: extras %v, want none", id, tt, got)
		}
		return
	}
	var want []float32
	for j := range 4 {
		want = append(want, demoState(id, tt, j))
	}
	for k := range 7 {
		want = append(want, demoAction(tt, k))
	}
	term := float32(0)
	if tt == n-1 {
		term = 1
	}
	want = append(want, demoReward(tt, n), term)
	if id == 10 && tt == 5 {
		if len(got) != len(want) || !math.IsNaN(float64(got[4])) {
			t.Errorf("episode 10 frame 5: extras %v, want NaN at action[0]", got)
		}
		return
	}
	if !slices.Equal(got, want) {
		t.Errorf("episode %d frame %d: extras %v, want %v", id, tt, got, want)
	}
}

func checkDemoEntries(t *testing.T, entries []warehouse.SourceEntry, camera string) {
	t.Helper()
	if len(entries) != len(demoScanOrder) {
		t.Fatalf("%d entries", len(entries))
	}
	for i, id := range demoScanOrder {
		ep := demoEpisodeByID(id)
		e := entries[i]
		want := map[string]string{
			"file": "demo.kdb", "episode_id": fmt.Sprint(id), "num_frames": fmt.Sprint(ep.frames),
			"state_dim": "4", "action_dim": "7", "camera": camera, "version": "0.1",
			"embodiment": ep.embodiment, "task": ep.task, "fps": fmt.Sprint(ep.fps), "success": ep.success.String(),
		}
		if ep.frames == 0 {
			want["state_dim"] = "0"
		}
		if ep.reward != "" {
			want["total_reward"] = ep.reward
		}
		if e.Index != i || e.Name != fmt.Sprintf("demo.kdb/episode_%d", id) || fmt.Sprint(e.Attributes) != fmt.Sprint(want) {
			t.Errorf("entry %d: %+v\nwant attributes %v", i, e, want)
		}
	}
}

// TestDemoReadImage checks the pixels ReadImage hands over against the
// generator's formulas: raw frames exactly, PNG frames exactly after
// decoding, JPEG frames within JPEG's error.
func TestDemoReadImage(t *testing.T) {
	for _, camera := range []string{"front", "wrist"} {
		s := demoSource(t, Options{Camera: camera})
		for _, smp := range scanAll(t, s) {
			if smp.Locator == "" {
				continue
			}
			id := demoScanOrder[smp.SourceIndex]
			tt := int(smp.Frame)
			im, err := s.ReadImage(&smp)
			if camera == "wrist" && id == 10 && tt == 6 {
				// block_size_mismatch: skipped by the pipeline, refused here too.
				if err == nil || err.Error() != "kdb: raw image 32x24 with 3 channels does not match its 2301 bytes" {
					t.Errorf("short raw frame: %v", err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s frame %d: %v", smp.Source, tt, err)
			}
			switch {
			case camera == "wrist":
				if im.Encoded != nil || im.Width != 32 || im.Height != 24 || im.Stride != 96 {
					t.Fatalf("%s frame %d: raw image %dx%d stride %d", smp.Source, tt, im.Width, im.Height, im.Stride)
				}
				for y := range 24 {
					for x := range 32 {
						if p, want := [3]uint8(im.Pixels[y*96+3*x:]), demoWrist(id, tt, x, y); p != want {
							t.Fatalf("%s frame %d pixel (%d,%d) = %v, want %v", smp.Source, tt, x, y, p, want)
						}
					}
				}
			default:
				checkDemoFront(t, id, tt, smp, im.Encoded)
			}
		}
	}
}

func checkDemoFront(t *testing.T, id uint64, tt int, smp sources.Sample, enc []byte) {
	t.Helper()
	var img image.Image
	var err error
	switch {
	case bytes.HasPrefix(enc, []byte("\x89PNG")):
		if id != 2 {
			t.Errorf("%s frame %d is PNG", smp.Source, tt)
		}
		img, err = png.Decode(bytes.NewReader(enc))
	case bytes.HasPrefix(enc, []byte{0xff, 0xd8}):
		img, err = jpeg.Decode(bytes.NewReader(enc))
	default:
		t.Fatalf("%s frame %d: neither PNG nor JPEG", smp.Source, tt)
	}
	if id == 10 && (tt == 2 || tt == 3) {
		if err == nil {
			t.Errorf("%s frame %d: the cut JPEG decodes", smp.Source, tt)
		}
		return
	}
	if err != nil {
		t.Fatalf("%s frame %d: %v", smp.Source, tt, err)
	}
	b := img.Bounds()
	if b.Dx() != smp.Width || b.Dy() != smp.Height {
		t.Fatalf("%s frame %d: decoded %v, scan said %dx%d", smp.Source, tt, b, smp.Width, smp.Height)
	}
	tol := 0
	if id != 2 {
		tol = 16 // JPEG quality 90 on smooth gradients
	}
	for y := range b.Dy() {
		for x := range b.Dx() {
			r, g, bl, _ := img.At(x, y).RGBA()
			got := [3]int{int(r >> 8), int(g >> 8), int(bl >> 8)}
			want := demoFront(id, tt, x, y)
			for c := range 3 {
				if d := got[c] - int(want[c]); d > tol || d < -tol {
					t.Fatalf("%s frame %d pixel (%d,%d) = %v, want %v ± %d", smp.Source, tt, x, y, got, want, tol)
				}
			}
		}
	}
}

func TestDemoFingerprint(t *testing.T) {
	s := demoSource(t, Options{})
	st, err := os.Stat(demoPath)
	if err != nil {
		t.Fatal(err)
	}
	var got []warehouse.FileEntry
	if err := s.Fingerprint(context.Background(), func(fi warehouse.FileEntry) error { got = append(got, fi); return nil }); err != nil {
		t.Fatal(err)
	}
	want := []warehouse.FileEntry{{Path: "demo.kdb", Size: st.Size(), MtimeNs: st.ModTime().UnixNano()}}
	if !slices.Equal(got, want) {
		t.Errorf("fingerprint %v, want %v", got, want)
	}
	// The directory root finds the same file.
	d, err := New(filepath.Dir(demoPath), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if len(d.files) != 1 || d.files[0].rel != "demo.kdb" {
		t.Errorf("directory root lists %v", d.files)
	}
}
