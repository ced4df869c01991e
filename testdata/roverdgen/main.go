// Command roverdgen writes the demo roverd datasets in testdata/roverd:
// everything but the camera videos, which make_video.py writes with
// OpenCV's MJPG VideoWriter (generate.sh runs both, in order).
//
//	go run ./testdata/roverdgen -out testdata/roverd
//
// Two recordings, each a camera sensor (ts + video.avi, 10 Hz) and an IMU
// sensor (100 Hz) with one channel in each of roverd's numeric formats:
// acc raw, avel lzma (one .xz stream), rot lzmaf (an .xz stream per record
// and the acc_i-style offsets file rot_i). Values are closed-form functions
// of the IMU record counter n, so tests recompute them:
//
//	ts   = T0 - 0.018 + 0.01*n            (the nearest record to camera frame k is n = 10k+2, 2 ms away)
//	acc  = (0.01*m, -0.02*m, 9.81 + 0.001*m)          m = base + n
//	avel = (sin(0.1*m), cos(0.1*m), 0.25)
//	rot  = [[cos a, -sin a, 0], [sin a, cos a, 0], [0, 0, 1]], a = 0.05*m (row-major)
//
// stored as little-endian float32 (ts float64). The README lists what each
// recording exercises; it is written from the same table as the data.
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/ulikunitz/xz"
)

func main() {
	out := flag.String("out", "", "output directory (the dataset root), e.g. testdata/roverd")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "roverdgen: -out is required")
		os.Exit(2)
	}
	if err := generate(*out); err != nil {
		fmt.Fprintln(os.Stderr, "roverdgen:", err)
		os.Exit(1)
	}
}

// recording is one dataset folder.
type recording struct {
	name        string
	t0          float64 // camera frame k is at t0 + 0.1k
	cameraTS    int     // camera ts records
	videoFrames int     // frames make_video.py writes (may be fewer than cameraTS: a crash)
	blue        int     // make_video.py's BLUE argument
	base        int     // value counter offset m = base + n
	imuN        int     // IMU records n = 0..imuN-1 before the gap is removed
	gap         [2]int  // IMU records n in [gap0, gap1] are not written (no gap when gap1 < gap0)
	imuTSExtra  int     // ts records written beyond imuN (a crash after writing ts)
	accPartial  int     // bytes of a partial trailing acc record
	notes       string
}

var recordings = []recording{
	{
		name: "drive_2", t0: 1700000000.0, cameraTS: 12, videoFrames: 12, blue: 60, base: 0,
		imuN: 120, gap: [2]int{35, 68},
		notes: "IMU records n = 35..68 are missing (a dropout): camera frames 4, 5 and 6 " +
			"(t0+0.4 s .. t0+0.6 s) have no IMU record within 50 ms and get `no_match_within_tolerance`; " +
			"frames 3 and 7 match n = 32 and n = 72. Also holds `_odom/` (a virtual sensor, skipped) " +
			"and `lidar/` (a sensor with an unknown type name on a channel nobody reads).",
	},
	{
		name: "drive_10", t0: 1700000100.0, cameraTS: 9, videoFrames: 8, blue: 160, base: 1000,
		imuN: 90, gap: [2]int{1, 0}, imuTSExtra: 1, accPartial: 7,
		notes: "A recording cut off by a crash: camera ts has 9 records but video.avi 8 frames; " +
			"imu/ts has one record more than avel and rot, and acc ends in a partial 7-byte record. " +
			"Both sensors use their common length (8 frames, 90 IMU records) and every sample carries " +
			"the `length_truncated` warning.",
	},
}

const (
	videoWidth, videoHeight = 64, 48
	cameraPeriod            = 0.1
	imuPeriod               = 0.01
	imuOffset               = -0.018
)

func generate(out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, r := range recordings {
		if err := writeRecording(filepath.Join(out, r.name), r); err != nil {
			return fmt.Errorf("%s: %w", r.name, err)
		}
	}
	// An underscore folder at the dataset level: not a dataset unless
	// include_underscore is set.
	scratch := filepath.Join(out, "_scratch", "imu")
	if err := writeMeta(scratch, map[string]channelMeta{"ts": tsMeta}); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(scratch, "ts"), f64s([]float64{1}), 0o644); err != nil {
		return err
	}
	return writeReadme(out)
}

type channelMeta struct {
	Format      string `json:"format"`
	Type        string `json:"type"`
	Shape       []int  `json:"shape"`
	Desc        string `json:"desc,omitempty"`
	Description string `json:"description,omitempty"`
}

var tsMeta = channelMeta{Format: "raw", Type: "f8", Shape: []int{}, Desc: "Timestamp, in seconds."}

func writeMeta(dir string, m map[string]channelMeta) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(m, "", "    ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "meta.json"), append(raw, '\n'), 0o644)
}

func writeRecording(dir string, r recording) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cfg := fmt.Sprintf("# roverd dataset metadata (not read by warehouse-etl)\nname: %s\ncollector: roverdgen\n", r.name)
	if err := os.WriteFile(filepath.Join(dir, "config.yaml"), []byte(cfg), 0o644); err != nil {
		return err
	}

	// Camera: ts and the meta.json of video.avi (written by make_video.py).
	cam := filepath.Join(dir, "camera")
	if err := writeMeta(cam, map[string]channelMeta{
		"ts":        tsMeta,
		"video.avi": {Format: "mjpg", Type: "u1", Shape: []int{videoHeight, videoWidth, 3}, Desc: "Camera video, RGB."},
	}); err != nil {
		return err
	}
	ts := make([]float64, r.cameraTS)
	for k := range ts {
		ts[k] = r.t0 + cameraPeriod*float64(k)
	}
	if err := os.WriteFile(filepath.Join(cam, "ts"), f64s(ts), 0o644); err != nil {
		return err
	}

	// IMU.
	imu := filepath.Join(dir, "imu")
	if err := writeMeta(imu, map[string]channelMeta{
		"ts":   tsMeta,
		"acc":  {Format: "raw", Type: "f4", Shape: []int{3}, Desc: "Linear acceleration, m/s^2."},
		"avel": {Format: "lzma", Type: "f4", Shape: []int{3}, Description: "Angular velocity, rad/s."},
		"rot":  {Format: "lzmaf", Type: "f4", Shape: []int{3, 3}, Desc: "Orientation, row-major rotation matrix."},
	}); err != nil {
		return err
	}
	var its []float64
	var acc, avel, rot []float32
	var kept []int
	for n := range r.imuN + r.imuTSExtra {
		if n >= r.gap[0] && n <= r.gap[1] {
			continue
		}
		its = append(its, r.t0+imuOffset+imuPeriod*float64(n))
		if n < r.imuN {
			kept = append(kept, n)
		}
	}
	for _, n := range kept {
		m := float64(r.base + n)
		acc = append(acc, float32(0.01*m), float32(-0.02*m), float32(9.81+0.001*m))
		avel = append(avel, float32(math.Sin(0.1*m)), float32(math.Cos(0.1*m)), 0.25)
		a := 0.05 * m
		c, s := math.Cos(a), math.Sin(a)
		rot = append(rot, float32(c), float32(-s), 0, float32(s), float32(c), 0, 0, 0, 1)
	}
	if err := os.WriteFile(filepath.Join(imu, "ts"), f64s(its), 0o644); err != nil {
		return err
	}
	accBytes := f32s(acc)
	for i := range r.accPartial {
		accBytes = append(accBytes, byte(0xA0+i))
	}
	if err := os.WriteFile(filepath.Join(imu, "acc"), accBytes, 0o644); err != nil {
		return err
	}
	avelXZ, err := compress(f32s(avel))
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(imu, "avel"), avelXZ, 0o644); err != nil {
		return err
	}
	// lzmaf: one .xz stream per record; rot_i holds N+1 u64 offsets.
	var rotData, rotIndex []byte
	rotIndex = binary.LittleEndian.AppendUint64(rotIndex, 0)
	for i := range kept {
		rec, err := compress(f32s(rot[9*i : 9*i+9]))
		if err != nil {
			return err
		}
		rotData = append(rotData, rec...)
		rotIndex = binary.LittleEndian.AppendUint64(rotIndex, uint64(len(rotData)))
	}
	if err := os.WriteFile(filepath.Join(imu, "rot"), rotData, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(imu, "rot_i"), rotIndex, 0o644); err != nil {
		return err
	}

	if r.name == "drive_2" {
		// A virtual sensor (skipped unless include_underscore) and a
		// sensor whose unused channel has a type no reader knows.
		odom := filepath.Join(dir, "_odom")
		if err := writeMeta(odom, map[string]channelMeta{"ts": tsMeta}); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(odom, "ts"), f64s(ts), 0o644); err != nil {
			return err
		}
		lidar := filepath.Join(dir, "lidar")
		if err := writeMeta(lidar, map[string]channelMeta{
			"ts":  tsMeta,
			"rng": {Format: "lzmaf", Type: "V12", Shape: []int{64, 1024}, Desc: "Structured points: not readable as numbers."},
		}); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(lidar, "ts"), f64s(ts[:2]), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func compress(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	w, err := xz.NewWriter(&buf)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func f64s(v []float64) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return b
}

func f32s(v []float32) []byte {
	var b []byte
	for _, x := range v {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(x))
	}
	return b
}

func writeReadme(out string) error {
	var b strings.Builder
	b.WriteString(`# Demo roverd datasets

Generated by ` + "`bash testdata/roverdgen/generate.sh`" + ` (do not edit by hand): ` + "`go run ./testdata/roverdgen`" + `
writes the timestamps, meta.json files and IMU channels; ` + "`testdata/roverdgen/make_video.py`" + `
writes each camera's video.avi with OpenCV's ` + "`cv2.VideoWriter`" + ` and the MJPG fourcc (Debian's
python3-opencv through ` + "`/usr/bin/python3`" + `), the writer roverd's collector uses. The format is
described in ../shared/formats/roverd.md and package sources/roverd.

Each recording has a ` + "`camera`" + ` sensor (ts, video.avi: mjpg, u1 [48, 64, 3], 10 Hz) and an ` + "`imu`" + `
sensor (100 Hz): ts, acc (raw f4 [3]), avel (lzma f4 [3]), rot (lzmaf f4 [3, 3] with rot_i). The
values are closed-form functions of the IMU record counter, listed in testdata/roverdgen/main.go.
configs/roverd.jsonc builds a warehouse from this folder with imu/acc, imu/avel and imu/rot as
extras.

## Recordings, in natural order

`)
	for _, r := range recordings {
		fmt.Fprintf(&b, "- `%s`: %d camera frames from t0 = %.1f, IMU values from m = %d. %s\n", r.name, r.videoFrames, r.t0, r.base, r.notes)
	}
	b.WriteString("\n`_scratch/` holds a sensor but is skipped: folders starting with `_` are not read unless\n`source.include_underscore` is set.\n")
	return os.WriteFile(filepath.Join(out, "README.md"), []byte(b.String()), 0o644)
}
