package kdb

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"testing"

	"warehouse-etl/sources"
)

func TestParseHeader(t *testing.T) {
	good := build(nil).file[:HeaderSize]
	patch := func(off int, b ...byte) []byte {
		h := bytes.Clone(good)
		copy(h[off:], b)
		return h
	}
	tests := []struct {
		name    string
		in      []byte
		err     string
		is      error
		wantMin uint16
	}{
		{"ok", good, "", nil, 1},
		{"newer minor", patch(6, 7, 0), "", nil, 7},
		{"63 bytes", good[:63], "kdb: corrupt file: 63 bytes, shorter than the 64-byte header", ErrCorrupt, 0},
		{"empty", nil, "kdb: corrupt file: 0 bytes, shorter than the 64-byte header", ErrCorrupt, 0},
		{"bad magic", patch(3, 'X'), `kdb: corrupt file: bad magic "KINX", want "KINO"`, ErrCorrupt, 0},
		{"zero header (writer died before finish)", make([]byte, 64), `kdb: corrupt file: bad magic "\x00\x00\x00\x00", want "KINO"`, ErrCorrupt, 0},
		{"newer major", patch(4, 1, 0, 0, 0), "kdb: unsupported version: file version 1.0, this reader supports 0.1 (major 0 only)", ErrVersion, 0},
		{"newer major and minor", patch(4, 2, 0, 3, 0), "kdb: unsupported version: file version 2.3, this reader supports 0.1 (major 0 only)", ErrVersion, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ParseHeader(tc.in)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if h.VersionMinor != tc.wantMin || h.NewerMinor() != (tc.wantMin > 1) {
					t.Errorf("header %+v", h)
				}
				return
			}
			if err == nil || err.Error() != tc.err || !errors.Is(err, tc.is) {
				t.Errorf("error %v, want %q (is %v)", err, tc.err, tc.is)
			}
		})
	}
}

// TestOpenCorrupt patches the header and index of a small file and wants
// the exact error for each lie.
func TestOpenCorrupt(t *testing.T) {
	lay := build(tinyEpisodes(t))
	size := len(lay.file)
	io, il := lay.indexOffset, size-lay.indexOffset
	e0, e1 := lay.entries[0], lay.entries[1]
	put64 := func(off int, v uint64) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint64(b[off:], v) }
	}
	put32 := func(off int, v uint32) func([]byte) {
		return func(b []byte) { binary.LittleEndian.PutUint32(b[off:], v) }
	}
	tests := []struct {
		name  string
		patch func([]byte)
		err   string
	}{
		{"index inside header", put64(offIndexOffset, 10),
			"kdb: corrupt file: index offset 10 lies inside the 64-byte header"},
		{"index past the end", put64(offIndexOffset, uint64(io+1)),
			fmt.Sprintf("kdb: corrupt file: index at offset %d, %d bytes long, runs past the end of the file (%d bytes)", io+1, il, size)},
		{"index offset beyond the file", put64(offIndexOffset, math.MaxUint64),
			fmt.Sprintf("kdb: corrupt file: index at offset %d, %d bytes long, runs past the end of the file (%d bytes)", uint64(math.MaxUint64), il, size)},
		{"index length overflows", put64(offIndexLength, math.MaxUint64),
			fmt.Sprintf("kdb: corrupt file: index at offset %d, %d bytes long, runs past the end of the file (%d bytes)", io, uint64(math.MaxUint64), size)},
		{"index length not whole entries", put64(offIndexLength, 100),
			"kdb: corrupt file: index length 100 is not a multiple of the 64-byte entry"},
		{"index shorter than the episodes", put64(offIndexLength, 64),
			"kdb: corrupt file: index holds 1 entries, the header says 2 episodes"},
		{"huge episode count", put64(offNumEpisodes, 1<<63),
			"kdb: corrupt file: index holds 2 entries, the header says 9223372036854775808 episodes"},
		{"header frames too few", put64(offNumFrames, 2),
			"kdb: corrupt file: the index holds more frames than the header's 2"},
		{"header frames too many", put64(offNumFrames, 99),
			"kdb: corrupt file: the index holds 3 frames, the header says 99"},
		{"actions past the index", put64(e0.at+entActionsOffset, uint64(io+1)),
			fmt.Sprintf("kdb: corrupt file: episode 1 (index entry 0): state/action section at offset %d, %d bytes long, lies outside the episode data [64, %d)", io+1, e0.actions[1], io)},
		{"meta inside the header", put64(e0.at+entMetaOffset, 3),
			fmt.Sprintf("kdb: corrupt file: episode 1 (index entry 0): meta section at offset 3, %d bytes long, lies outside the episode data [64, %d)", e0.meta[1], io)},
		{"images length huge", put64(e1.at+entImagesLength, math.MaxUint64),
			fmt.Sprintf("kdb: corrupt file: episode 0 (index entry 1): image section at offset %d, %d bytes long, lies outside the episode data [64, %d)", e1.images[0], uint64(math.MaxUint64), io)},
		{"too many frames for the image section", put32(e1.at+entNumFrames, math.MaxUint32),
			fmt.Sprintf("kdb: corrupt file: episode 0 (index entry 1): 4294967295 frames cannot fit in an image section of %d bytes (2 bytes per frame at least)", e1.images[1])},
		{"sections overlap", put64(e1.at+entMetaOffset, uint64(e0.actions[0]+1)),
			fmt.Sprintf("kdb: corrupt file: episode 0 (index entry 1): meta section at offset %d overlaps the state/action section of episode 1 (index entry 0) at offset %d, %d bytes long", e0.actions[0]+1, e0.actions[0], e0.actions[1])},
		{"newer major", func(b []byte) { b[offVersionMajor] = 1 },
			"kdb: unsupported version: file version 1.1, this reader supports 0.1 (major 0 only)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := bytes.Clone(lay.file)
			tc.patch(b)
			var err error
			alloc := allocated(func() { _, err = Open(bytes.NewReader(b), int64(len(b))) })
			if err == nil || err.Error() != tc.err || !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrVersion) {
				t.Errorf("error\n %v\nwant\n %s", err, tc.err)
			}
			if alloc > 64<<10 {
				t.Errorf("Open allocated %d bytes for a %d-byte file", alloc, len(b))
			}
		})
	}
	t.Run("newer minor and trailing bytes are accepted", func(t *testing.T) {
		b := append(bytes.Clone(lay.file), 1, 2, 3, 4, 5)
		b[offVersionMinor] = 9
		f, err := Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatal(err)
		}
		if !f.Header().NewerMinor() || f.TrailingBytes() != 5 || f.Len() != 2 {
			t.Errorf("newer minor %v, trailing %d, %d episodes", f.Header().NewerMinor(), f.TrailingBytes(), f.Len())
		}
	})
}

func TestParseMeta(t *testing.T) {
	r := float32(2.5)
	full := tMeta("franka", "pick", 15, 2, &r)
	noReward := tMeta("arm", "", 10, 0, nil)
	set := func(b []byte, off int, v byte) []byte { b = bytes.Clone(b); b[off] = v; return b }
	tests := []struct {
		name string
		in   []byte
		want Meta
		err  string
	}{
		{"full", full, Meta{Embodiment: "franka", Task: "pick", FPS: 15, Success: SuccessTrue, HasTotalReward: true, TotalReward: 2.5}, ""},
		{"no reward", noReward, Meta{Embodiment: "arm", FPS: 10, Success: SuccessUnknown}, ""},
		{"bytes of a newer minor after the fields", append(bytes.Clone(noReward), 9, 9, 9), Meta{Embodiment: "arm", FPS: 10}, ""},
		{"empty", nil, Meta{}, "kdb: corrupt file: meta blob: embodiment runs past the blob's 0 bytes"},
		{"embodiment longer than the blob", set(full, 0, 200), Meta{}, "kdb: corrupt file: meta blob: embodiment runs past the blob's 24 bytes"},
		{"embodiment not UTF-8", set(full, 2, 0xff), Meta{}, "kdb: corrupt file: meta blob: embodiment is not UTF-8"},
		{"task longer than the blob", set(full, 8, 30), Meta{}, "kdb: corrupt file: meta blob: task runs past the blob's 24 bytes"},
		{"task not UTF-8", set(full, 10, 0xc3), Meta{}, "kdb: corrupt file: meta blob: task is not UTF-8"},
		{"fixed fields cut", full[:16], Meta{}, "kdb: corrupt file: meta blob: fps, success and reward_present run past the blob's 16 bytes"},
		{"success byte 3", set(full, 18, 3), Meta{}, "kdb: corrupt file: meta blob: success byte 3, want 0, 1 or 2"},
		{"reward_present 2", set(full, 19, 2), Meta{}, "kdb: corrupt file: meta blob: reward_present byte 2, want 0 or 1"},
		{"total reward cut", full[:23], Meta{}, "kdb: corrupt file: meta blob: total_reward runs past the blob's 23 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseMeta(tc.in)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err || !errors.Is(err, ErrCorrupt) {
					t.Errorf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || m != tc.want {
				t.Errorf("got %+v, %v; want %+v", m, err, tc.want)
			}
		})
	}
}

// TestTruncatedAtEveryOffset cuts a small file at every length: the index
// is at the end, so every cut must fail in Open with the exact error, and
// never allocate more than a small multiple of the bytes present.
func TestTruncatedAtEveryOffset(t *testing.T) {
	lay := build(tinyEpisodes(t))
	il := len(lay.file) - lay.indexOffset
	for k := range len(lay.file) {
		b := lay.file[:k]
		var want string
		if k < HeaderSize {
			want = fmt.Sprintf("kdb: corrupt file: %d bytes, shorter than the 64-byte header", k)
		} else {
			want = fmt.Sprintf("kdb: corrupt file: index at offset %d, %d bytes long, runs past the end of the file (%d bytes)", lay.indexOffset, il, k)
		}
		alloc := allocated(func() {
			_, err := Open(bytes.NewReader(b), int64(k))
			if err == nil || err.Error() != want {
				t.Fatalf("cut at %d: %v, want %q", k, err, want)
			}
		})
		if alloc > 64<<10 {
			t.Fatalf("cut at %d: Open allocated %d bytes", k, alloc)
		}
	}
}

// TestEveryByteFlipped inverts each byte of a small file in turn and runs
// the whole source over it: Open, Scan, and ReadImage of every sample the
// scan accepted. Nothing may panic, and memory stays within a small
// multiple of the file, whatever the bytes claim.
func TestEveryByteFlipped(t *testing.T) {
	lay := build(tinyEpisodes(t))
	for k := range len(lay.file) {
		b := bytes.Clone(lay.file)
		b[k] ^= 0xff
		alloc := allocated(func() { exercise(b, "cam") })
		if alloc > 1<<20 {
			t.Fatalf("byte %d flipped: %d bytes allocated", k, alloc)
		}
	}
}

// exercise runs everything a build does on one file's bytes and returns
// how many samples the scan accepted.
func exercise(b []byte, camera string) int {
	s, err := memSource(map[string][]byte{"f.kdb": b}, []string{"f.kdb"},
		Options{Camera: camera, Extras: Fields})
	if err != nil {
		return 0
	}
	var samples []sources.Sample
	if err := s.Scan(context.Background(), func(smp *sources.Sample) error {
		samples = append(samples, *smp)
		return nil
	}); err != nil {
		return 0
	}
	ok := 0
	for i := range samples {
		if len(samples[i].Reasons) == 0 {
			if _, err := s.ReadImage(&samples[i]); err == nil {
				ok++
			}
		}
	}
	return ok
}

// allocated is the number of bytes fn allocated on the heap.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
