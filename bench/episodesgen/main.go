// Command episodesgen writes the episode dataset bench/read_windows.sh
// reads: EPISODES WShard episodes of STEPS steps each (the default 6 x 100
// is bench/read.sh's 600 frames), a 64x48 rgb camera, joint_pos [7] f32,
// action/ctrl [7] f64, reward and done. The build letterboxes the frames
// to bench/read.sh's size, so a sample holds the same bytes as there and
// the benchmark measures what windows add to the same reads.
//
//	go run ./bench/episodesgen -out /tmp/episodes -episodes 6 -steps 100
package main

import (
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"

	"warehouse-etl/sources/wshard"
)

func main() {
	out := flag.String("out", "", "output directory (the dataset root)")
	episodes := flag.Int("episodes", 6, "episodes")
	steps := flag.Int("steps", 100, "steps per episode")
	flag.Parse()
	if *out == "" || *episodes < 1 || *steps < 1 {
		fmt.Fprintln(os.Stderr, "episodesgen: -out, -episodes >= 1 and -steps >= 1 are required")
		os.Exit(2)
	}
	if err := generate(*out, *episodes, *steps); err != nil {
		fmt.Fprintln(os.Stderr, "episodesgen:", err)
		os.Exit(1)
	}
}

const W, H = 64, 48

func generate(root string, episodes, steps int) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	for e := range episodes {
		frames := make([]byte, 0, steps*H*W*3)
		var jp []byte
		var ct []float64
		rw, done := make([]float32, steps), make([]bool, steps)
		for t := range steps {
			for y := range H {
				for x := range W {
					frames = append(frames, byte(x*4+t), byte(y*5+e*30), byte((x+y+t)*3))
				}
			}
			for j := range 7 {
				jp = binary.LittleEndian.AppendUint32(jp, math.Float32bits(float32(e)+float32(t)*0.125-float32(j)*0.25))
				ct = append(ct, float64(0.01*float64(t))+float64(j))
			}
			rw[t], done[t] = float32(t)*0.25, t == steps-1
		}
		ctBytes, err := wshard.Encode(wshard.F64, ct)
		if err != nil {
			return err
		}
		f := &wshard.EpisodeFile{
			ID: fmt.Sprintf("ep_%d", e), EnvID: "Bench-v1", Length: steps, TickHz: 10,
			Channels: []wshard.ChannelData{
				{ID: "cam0/rgb", Block: "signal/cam0/rgb", DType: "u8", Shape: []int{H, W, 3}, Modality: "rgb", Data: frames},
				{ID: "joint_pos", Block: "signal/joint_pos", DType: "f32", Shape: []int{7}, Data: jp},
				{ID: "ctrl", Block: "action/ctrl", DType: "f64", Shape: []int{7}, Data: ctBytes},
			},
			Reward: rw, Done: done,
		}
		b, err := f.Bytes()
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(root, fmt.Sprintf("ep_%d.wshard", e)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
