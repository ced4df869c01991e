package kdb

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"image"
	"image/color"
	"image/gif"
	"strings"
	"testing"
)

// frames makes n frames of episode id with the cameras cams(t) returns
// and state_dim 2, action_dim 3.
func frames(id uint64, n int, cams func(t int) []tCamera) []tFrame {
	var out []tFrame
	for t := range n {
		fr := tStep(id, t, n, 2, 3)
		fr.cams = cams(t)
		out = append(out, fr)
	}
	return out
}

func rawCams(int) []tCamera { return []tCamera{rawCamera("cam", 2, 2, 3, 0)} }

func oneEpisode(n int, cams func(int) []tCamera) []tEpisode {
	return []tEpisode{{id: 0, frames: frames(0, n, cams), stateDim: -1, actionDim: -1}}
}

// describe renders samples as "episode#frame WxH [reasons]" lines.
func describeSamples(t *testing.T, s *Source) string {
	var lines []string
	for _, smp := range scanAll(t, s) {
		lines = append(lines, fmt.Sprintf("%s#%d %dx%d %v", strings.TrimPrefix(smp.Source, "f.kdb/"), smp.Frame, smp.Width, smp.Height, smp.Reasons))
	}
	return strings.Join(lines, "\n")
}

func TestEpisodeReasons(t *testing.T) {
	le := binary.LittleEndian
	var gifBytes bytes.Buffer
	if err := gif.Encode(&gifBytes, image.NewPaletted(image.Rect(0, 0, 2, 2), []color.Color{color.Black}), nil); err != nil {
		t.Fatal(err)
	}
	png2 := pngCamera(t, "cam", 2, 2)
	tests := []struct {
		name  string
		eps   []tEpisode
		patch func(l tLayout, b []byte)
		opts  Options
		want  string
	}{
		{name: "clean", eps: oneEpisode(2, rawCams),
			want: "episode_0#0 2x2 []\nepisode_0#1 2x2 []"},
		{name: "zero frames", eps: []tEpisode{{id: 4}},
			want: "episode_4#0 0x0 [zero_frames]"},
		{name: "meta success byte 7", eps: oneEpisode(2, rawCams),
			patch: func(l tLayout, b []byte) { b[l.entries[0].meta[0]+2+3+2+4+4] = 7 },
			want:  "episode_0#0 2x2 [bad_schema]\nepisode_0#1 2x2 [bad_schema]"},
		{name: "state/action section a byte short", eps: oneEpisode(2, rawCams),
			patch: func(l tLayout, b []byte) {
				le.PutUint64(b[l.entries[0].at+entActionsLength:], uint64(l.entries[0].actions[1]-1))
			},
			want: "episode_0#0 2x2 [length_mismatch]\nepisode_0#1 2x2 [length_mismatch]"},
		{name: "state_dim in the index lies", eps: oneEpisode(2, rawCams),
			patch: func(l tLayout, b []byte) { le.PutUint16(b[l.entries[0].at+entStateDim:], 3) },
			want:  "episode_0#0 2x2 [length_mismatch]\nepisode_0#1 2x2 [length_mismatch]"},
		{name: "a later frame has a longer state (state_dim from the first frame)",
			eps: func() []tEpisode {
				e := oneEpisode(2, rawCams)
				e[0].frames[1].state = append(e[0].frames[1].state, 7)
				return e
			}(),
			want: "episode_0#0 2x2 [length_mismatch]\nepisode_0#1 2x2 [length_mismatch]"},
		{name: "data_len lies", eps: oneEpisode(2, rawCams),
			patch: func(l tLayout, b []byte) { le.PutUint32(b[l.entries[0].dataLenFields[0][0]:], 13) },
			want:  "episode_0#0 0x0 [decode_error]\nepisode_0#1 0x0 [decode_error]"},
		{name: "num_cameras lies", eps: oneEpisode(2, rawCams),
			patch: func(l tLayout, b []byte) { le.PutUint16(b[l.entries[0].frames[0]:], 5) },
			want:  "episode_0#0 0x0 [decode_error]\nepisode_0#1 0x0 [decode_error]"},
		{name: "camera name runs past the section", eps: oneEpisode(2, rawCams),
			patch: func(l tLayout, b []byte) { le.PutUint16(b[l.entries[0].records[1][0]:], 60000) },
			want:  "episode_0#0 0x0 [decode_error]\nepisode_0#1 0x0 [decode_error]"},
		{name: "pre-format-byte layout of the same version",
			eps: oneEpisode(2, func(int) []tCamera {
				c := rawCamera("cam", 8, 8, 3, 0)
				c.legacy = true
				return []tCamera{c}
			}),
			want: "episode_0#0 0x0 [decode_error]\nepisode_0#1 0x0 [decode_error]"},
		{name: "raw image with 2 channels", eps: oneEpisode(1, func(int) []tCamera { return []tCamera{rawCamera("cam", 2, 2, 2, 0)} }),
			want: "episode_0#0 2x2 [decode_error]"},
		{name: "raw image of width 0", eps: oneEpisode(1, func(int) []tCamera {
			c := rawCamera("cam", 2, 2, 3, 0)
			c.w = 0
			return []tCamera{c}
		}),
			want: "episode_0#0 0x2 [decode_error]"},
		{name: "raw image a byte short", eps: oneEpisode(1, func(int) []tCamera {
			c := rawCamera("cam", 2, 2, 3, 0)
			c.data = c.data[:11]
			return []tCamera{c}
		}),
			want: "episode_0#0 2x2 [block_size_mismatch]"},
		{name: "compressed record that is not an image", eps: oneEpisode(1, func(int) []tCamera {
			return []tCamera{{name: "cam", w: 2, h: 2, ch: 3, format: FormatCompressed, data: []byte("hello")}}
		}),
			want: "episode_0#0 2x2 [decode_error]"},
		{name: "compressed record holding a GIF", eps: oneEpisode(1, func(int) []tCamera {
			return []tCamera{{name: "cam", w: 2, h: 2, ch: 3, format: FormatCompressed, data: gifBytes.Bytes()}}
		}),
			want: "episode_0#0 2x2 [decode_error]"},
		{name: "format byte 2 is sniffed like 1 (as the reference does)", eps: oneEpisode(1, func(int) []tCamera {
			c := png2
			c.format = 2
			return []tCamera{c}
		}),
			want: "episode_0#0 2x2 []"},
		{name: "PNG smaller than its record says", eps: oneEpisode(1, func(int) []tCamera {
			c := png2
			c.w, c.h = 3, 3
			return []tCamera{c}
		}),
			want: "episode_0#0 2x2 [dims_mismatch]"},
		{name: "image larger than MaxImageBytes", eps: oneEpisode(1, func(int) []tCamera { return []tCamera{png2} }),
			opts: Options{MaxImageBytes: 10},
			want: "episode_0#0 2x2 [decode_error]"},
		{name: "camera changes size", eps: oneEpisode(3, func(t int) []tCamera {
			if t == 1 {
				return []tCamera{rawCamera("cam", 4, 2, 3, 0)}
			}
			return []tCamera{rawCamera("cam", 2, 2, 3, 0)}
		}),
			want: "episode_0#0 2x2 []\nepisode_0#1 4x2 [dims_mismatch]\nepisode_0#2 2x2 []"},
		{name: "camera missing in a frame", eps: oneEpisode(2, func(t int) []tCamera {
			if t == 1 {
				return []tCamera{rawCamera("other", 2, 2, 3, 0)}
			}
			return []tCamera{rawCamera("cam", 2, 2, 3, 0), rawCamera("other", 2, 2, 3, 0)}
		}),
			want: "episode_0#0 2x2 []\nepisode_0#1 0x0 [camera_missing]"},
		{name: "state_dim differs between episodes, state configured",
			eps: []tEpisode{
				{id: 0, frames: frames(0, 1, rawCams), stateDim: -1, actionDim: -1},
				{id: 1, frames: func() []tFrame { f := frames(1, 1, rawCams); f[0].state = append(f[0].state, 1); return f }(), stateDim: -1, actionDim: -1},
			},
			opts: Options{Extras: []string{FieldState}},
			want: "episode_0#0 2x2 []\nepisode_1#0 2x2 [length_mismatch]"},
		{name: "state_dim differs between episodes, only reward configured",
			eps: []tEpisode{
				{id: 0, frames: frames(0, 1, rawCams), stateDim: -1, actionDim: -1},
				{id: 1, frames: func() []tFrame { f := frames(1, 1, rawCams); f[0].state = append(f[0].state, 1); return f }(), stateDim: -1, actionDim: -1},
			},
			opts: Options{Extras: []string{FieldReward}},
			want: "episode_0#0 2x2 []\nepisode_1#0 2x2 []"},
		{name: "episodes ordered by numeric id, duplicates kept",
			eps: []tEpisode{
				{id: 10, frames: frames(10, 1, rawCams), stateDim: -1, actionDim: -1},
				{id: 2, frames: frames(2, 1, rawCams), stateDim: -1, actionDim: -1},
				{id: 2, frames: frames(2, 1, rawCams), stateDim: -1, actionDim: -1},
			},
			want: "episode_2#0 2x2 []\nepisode_2@entry_2#0 2x2 []\nepisode_10#0 2x2 []"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lay := build(tc.eps)
			if tc.patch != nil {
				tc.patch(lay, lay.file)
			}
			opts := tc.opts
			opts.Camera = "cam"
			s, err := memSource(map[string][]byte{"f.kdb": lay.file}, []string{"f.kdb"}, opts)
			if err != nil {
				t.Fatal(err)
			}
			if got := describeSamples(t, s); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

func TestMetaErrorInEntries(t *testing.T) {
	lay := build(oneEpisode(1, rawCams))
	lay.file[lay.entries[0].meta[0]] = 0xff // embodiment length runs past the blob
	s, err := memSource(map[string][]byte{"f.kdb": lay.file}, []string{"f.kdb"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	scanAll(t, s)
	attrs := s.Entries()[0].Attributes
	want := "kdb: corrupt file: episode 0 (index entry 0): meta blob: embodiment runs past the blob's 17 bytes"
	if attrs["meta_error"] != want || attrs["task"] != "" {
		t.Errorf("attributes %v, want meta_error %q", attrs, want)
	}
}
