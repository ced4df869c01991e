// Command kdbgen writes the demo kinodb dataset in testdata/kdb: one .kdb
// file with five episodes, written byte by byte from
// ../shared/formats/kdb.md (format 0.1; it shares no code with
// sources/kdb, so the reader is tested against an independent writer).
// No third-party .kdb writer is available here: the reference is a Rust
// crate that is not installed.
//
//	go run ./testdata/kdbgen -out testdata/kdb
//
// Every value is a formula of (episode id, frame, index), listed in the
// README it writes, so tests can compute what the reader must return
// without reading the file. Images are drawn from the same formulas;
// JPEGs come from image/jpeg, PNGs from image/png, so a rerun with the
// same Go version rewrites the same bytes. The header's created_timestamp
// is fixed for the same reason.
package main

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	out := flag.String("out", "", "output directory, e.g. testdata/kdb")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "kdbgen: -out is required")
		os.Exit(2)
	}
	if err := generate(*out); err != nil {
		fmt.Fprintln(os.Stderr, "kdbgen:", err)
		os.Exit(1)
	}
}

// createdTimestamp is the header's created_timestamp: 2024-06-11 00:00 UTC.
const createdTimestamp = 1718064000

const (
	stateDim  = 4
	actionDim = 7
	frontW    = 64 // camera "front": compressed (JPEG, PNG in episode 2)
	frontH    = 48
	wristW    = 32 // camera "wrist": raw HWC RGB
	wristH    = 24
)

// The per-frame formulas; every value is exact in float32.
func stateValue(id uint64, t, j int) float32 {
	return float32(id) + float32(t)/4 + float32(j)/16
}
func actionValue(t, k int) float32 { return float32(k) - float32(t)/2 }
func rewardValue(t, n int) float32 {
	if t == n-1 {
		return 1
	}
	return float32(t) / 8
}
func frontPixel(id uint64, t, x, y int) color.RGBA {
	return color.RGBA{uint8(x * 4), uint8(y * 5), uint8(int(id)*20 + t*30), 255}
}
func wristPixel(id uint64, t, x, y int) [3]byte {
	return [3]byte{uint8(255 - x*8), uint8(y * 10), uint8(t*40 + int(id))}
}

type camera struct {
	name          string
	width, height uint32
	channels      uint8
	format        uint8 // 0 raw, 1 compressed
	data          []byte
}

type frame struct {
	state, action []float32
	reward        float32
	terminal      bool
	cameras       []camera
}

type episode struct {
	id          uint64
	embodiment  string
	task        string
	fps         float32
	success     uint8 // 0 unknown, 1 false, 2 true
	totalReward *float32
	frames      []frame
	// what the README says about the episode, and per defective frame
	note    string
	defects map[int]string
}

func generate(out string) error {
	eps, err := episodes()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "demo.kdb"), encodeFile(eps), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "README.md"), []byte(readme(eps)), 0o644)
}

// episodes lists the demo's episodes in the order they are written. The
// ids are not in file order, so a reader that does not sort by id, or
// sorts them as strings (10 before 2), is caught.
func episodes() ([]episode, error) {
	reward := float32(0)
	for t := range 6 {
		reward += rewardValue(t, 6)
	}
	var eps []episode

	e0, err := cleanEpisode(0, 6, "jpeg")
	if err != nil {
		return nil, err
	}
	e0.embodiment, e0.task, e0.fps, e0.success, e0.totalReward = "franka", "pick up the red block", 10, 2, &reward
	e0.note = "clean; front is JPEG"
	eps = append(eps, e0)

	e10, err := cleanEpisode(10, 8, "jpeg")
	if err != nil {
		return nil, err
	}
	e10.embodiment, e10.task, e10.fps, e10.success = "widowx", "put the spoon in the drawer", 5, 1
	e10.note = "defective: one planted defect per frame 1-6"
	e10.defects = map[int]string{}
	// 1: no front camera.
	e10.frames[1].cameras = e10.frames[1].cameras[1:]
	e10.defects[1] = "no `front` record (only `wrist`) | `camera_missing` | clean"
	// 2: a JPEG cut inside its header.
	e10.frames[2].cameras[0].data = e10.frames[2].cameras[0].data[:20]
	e10.defects[2] = "`front` JPEG cut to its first 20 bytes | `decode_error` (scan) | clean"
	// 3: a JPEG cut shortly after its start-of-scan: the header reads, the pixels do not.
	jp := e10.frames[3].cameras[0].data
	sos := bytes.Index(jp, []byte{0xff, 0xda})
	if sos < 0 {
		return nil, fmt.Errorf("no SOS marker in the JPEG")
	}
	e10.frames[3].cameras[0].data = jp[:sos+40]
	e10.defects[3] = "`front` JPEG cut 40 bytes after its SOS marker | `decode_error` (late, at transform) | clean"
	// 4: the front camera changes size.
	e10.frames[4].cameras[0], err = frontCamera(10, 4, frontH, frontW, "jpeg")
	if err != nil {
		return nil, err
	}
	e10.defects[4] = fmt.Sprintf("`front` is %dx%d instead of %dx%d | `dims_mismatch` | clean", frontH, frontW, frontW, frontH)
	// 5: a NaN action.
	e10.frames[5].action[0] = float32(math.NaN())
	e10.defects[5] = "action[0] is NaN | `nonfinite` (with `action` in extras) | `nonfinite` (with `action` in extras)"
	// 6: a raw image one pixel short.
	e10.frames[6].cameras[1].data = e10.frames[6].cameras[1].data[:wristW*wristH*3-3]
	e10.defects[6] = "`wrist` data_len is width x height x 3 - 3 | clean | `block_size_mismatch`"
	eps = append(eps, e10)

	e2, err := cleanEpisode(2, 6, "png")
	if err != nil {
		return nil, err
	}
	e2.embodiment, e2.task, e2.fps, e2.success = "franka", "open the drawer", 15, 0
	e2.note = "clean; front is PNG (format byte 1 as well: the reader sniffs)"
	eps = append(eps, e2)

	eps = append(eps, episode{id: 3, embodiment: "ur5", task: "wait", fps: 10, success: 0,
		note: "zero frames: one placeholder sample with `zero_frames`"})

	e11, err := cleanEpisode(11, 4, "jpeg")
	if err != nil {
		return nil, err
	}
	e11.embodiment, e11.task, e11.fps, e11.success = "franka", "stack the cups", 10, 2
	// The reference writer takes state_dim from the first frame only, so
	// a later frame with a longer state lengthens the section and nothing
	// else: every frame gets length_mismatch.
	e11.frames[2].state = append(e11.frames[2].state, 99)
	e11.note = "frame 2 has 5 state values, the index says state_dim 4: every frame `length_mismatch`"
	eps = append(eps, e11)
	return eps, nil
}

// cleanEpisode makes n frames from the formulas with cameras front (in the
// given compression) and wrist (raw).
func cleanEpisode(id uint64, n int, frontFormat string) (episode, error) {
	ep := episode{id: id}
	for t := range n {
		fr := frame{reward: rewardValue(t, n), terminal: t == n-1}
		for j := range stateDim {
			fr.state = append(fr.state, stateValue(id, t, j))
		}
		for k := range actionDim {
			fr.action = append(fr.action, actionValue(t, k))
		}
		front, err := frontCamera(id, t, frontW, frontH, frontFormat)
		if err != nil {
			return episode{}, err
		}
		raw := make([]byte, 0, wristW*wristH*3)
		for y := range wristH {
			for x := range wristW {
				p := wristPixel(id, t, x, y)
				raw = append(raw, p[:]...)
			}
		}
		fr.cameras = []camera{front, {name: "wrist", width: wristW, height: wristH, channels: 3, format: 0, data: raw}}
		ep.frames = append(ep.frames, fr)
	}
	return ep, nil
}

func frontCamera(id uint64, t, w, h int, format string) (camera, error) {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			img.SetRGBA(x, y, frontPixel(id, t, x, y))
		}
	}
	var buf bytes.Buffer
	var err error
	if format == "png" {
		err = png.Encode(&buf, img)
	} else {
		err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 90})
	}
	return camera{name: "front", width: uint32(w), height: uint32(h), channels: 3, format: 1, data: buf.Bytes()}, err
}

// encodeFile lays the file out as formats/kdb.md describes: a 64-byte
// header, each episode's meta blob, state/action section and image
// section, then the index; the header is filled in last.
func encodeFile(eps []episode) []byte {
	le := binary.LittleEndian
	f := make([]byte, 64)
	type section struct{ off, len uint64 }
	var index []byte
	var frames uint64
	for _, ep := range eps {
		var meta, acts, imgs section

		meta.off = uint64(len(f))
		f = putString(f, ep.embodiment)
		f = putString(f, ep.task)
		f = le.AppendUint32(f, math.Float32bits(ep.fps))
		f = append(f, ep.success)
		if ep.totalReward == nil {
			f = append(f, 0)
		} else {
			f = append(f, 1)
			f = le.AppendUint32(f, math.Float32bits(*ep.totalReward))
		}
		meta.len = uint64(len(f)) - meta.off

		acts.off = uint64(len(f))
		for _, fr := range ep.frames {
			for _, v := range fr.state {
				f = le.AppendUint32(f, math.Float32bits(v))
			}
			for _, v := range fr.action {
				f = le.AppendUint32(f, math.Float32bits(v))
			}
			f = le.AppendUint32(f, math.Float32bits(fr.reward))
			if fr.terminal {
				f = append(f, 1)
			} else {
				f = append(f, 0)
			}
		}
		acts.len = uint64(len(f)) - acts.off

		imgs.off = uint64(len(f))
		for _, fr := range ep.frames {
			f = le.AppendUint16(f, uint16(len(fr.cameras)))
			for _, c := range fr.cameras {
				f = putString(f, c.name)
				f = le.AppendUint32(f, c.width)
				f = le.AppendUint32(f, c.height)
				f = append(f, c.channels, c.format)
				f = le.AppendUint32(f, uint32(len(c.data)))
				f = append(f, c.data...)
			}
		}
		imgs.len = uint64(len(f)) - imgs.off

		// state_dim from the first frame, as the reference writer does.
		sd := 0
		if len(ep.frames) > 0 {
			sd = len(ep.frames[0].state)
		}
		index = le.AppendUint64(index, ep.id)
		index = le.AppendUint32(index, uint32(len(ep.frames)))
		index = le.AppendUint16(index, actionDim)
		index = le.AppendUint16(index, uint16(sd))
		for _, s := range []section{acts, imgs, meta} {
			index = le.AppendUint64(index, s.off)
			index = le.AppendUint64(index, s.len)
		}
		frames += uint64(len(ep.frames))
	}
	indexOffset := uint64(len(f))
	f = append(f, index...)

	// The writer reserved 64 zero bytes; the header goes over them last.
	h := []byte("KINO")
	h = le.AppendUint16(h, 0) // version_major
	h = le.AppendUint16(h, 1) // version_minor
	h = le.AppendUint64(h, uint64(len(eps)))
	h = le.AppendUint64(h, frames)
	h = le.AppendUint64(h, indexOffset)
	h = le.AppendUint64(h, uint64(len(index)))
	h = le.AppendUint64(h, createdTimestamp)
	h = append(h, make([]byte, 16)...) // reserved
	copy(f, h)
	return f
}

func putString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint16(b, uint16(len(s)))
	return append(b, s...)
}

func readme(eps []episode) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# Demo kinodb dataset

Generated by `+"`go run ./testdata/kdbgen -out testdata/kdb`"+`; do not edit by hand, change the
generator and rerun it. `+"`demo.kdb`"+` is a kinodb file of format 0.1 written byte by byte from
`+"`../shared/formats/kdb.md`"+` (header, per-episode meta blob, state/action section and image
section, index at the end; created_timestamp %d). No third-party .kdb writer is available here.

Every frame has two cameras: `+"`front`"+`, %dx%d, compressed (format byte 1: JPEG quality 90,
PNG in episode 2), and `+"`wrist`"+`, %dx%d, raw interleaved RGB (format byte 0). state_dim %d,
action_dim %d. Values, for episode id `+"`e`"+`, frame `+"`t`"+` of `+"`n`"+`:

- state[j] = e + t/4 + j/16
- action[k] = k - t/2
- reward = t/8, and 1 on the last frame; is_terminal = 1 on the last frame only
- front pixel (x, y) = RGB(4x, 5y, 20e + 30t) (mod 256), before compression
- wrist pixel (x, y) = RGB(255 - 8x, 10y, 40t + e) (mod 256)

## Episodes, in file order

Readers must order them by numeric episode_id: 0, 2, 3, 10, 11.

| episode_id | frames | embodiment | task | fps | success | total_reward | note |
|---|---|---|---|---|---|---|---|
`, createdTimestamp, frontW, frontH, wristW, wristH, stateDim, actionDim)
	success := []string{"unknown", "false", "true"}
	for _, ep := range eps {
		tr := "absent"
		if ep.totalReward != nil {
			tr = fmt.Sprint(*ep.totalReward)
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %s | %v | %s | %s | %s |\n",
			ep.id, len(ep.frames), ep.embodiment, ep.task, ep.fps, success[ep.success], tr, ep.note)
	}
	b.WriteString("\n## Planted defects of episode 10\n\nReasons with camera `front` (the default: the first camera) and with camera `wrist`.\n\n| frame | defect | reasons (front) | reasons (wrist) |\n|---|---|---|---|\n")
	for _, ep := range eps {
		for t := range ep.frames {
			if d, ok := ep.defects[t]; ok {
				fmt.Fprintf(&b, "| %d | %s |\n", t, d)
			}
		}
	}
	b.WriteString("\nFrames 0 and 7 of episode 10 are clean.\n")
	return b.String()
}
