package avi

import (
	"bytes"
	"encoding/binary"
	"errors"
	"image/jpeg"
	"os"
	"path/filepath"
	"testing"
)

// openCVVideo is drive_2's camera video, written by OpenCV's MJPG
// VideoWriter (testdata/roverdgen/make_video.py): 12 frames of 64x48.
const openCVVideo = "../../../testdata/roverd/drive_2/camera/video.avi"

// Offsets in openCVVideo, read off the file with a hex dump.
const (
	cvHdrlAt  = 12
	cvMoviAt  = 5666 // the LIST header; its type is at 5674
	cvIdx1At  = 9566
	cvSize    = 9766
	cvFrames  = 12
	cvFrame3  = 6324 // chunk header of frame 2 (the third)
	cvStrhAt  = 100
	cvStrfAt  = 164
	moviFirst = cvMoviAt + listHeaderSize
)

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func index(data []byte) (*Index, error) {
	return ReadIndex(bytes.NewReader(data), int64(len(data)))
}

// jpegChunks finds frame chunks without parsing the container: every
// '00dc' header whose data starts with a JPEG start-of-image marker. It is
// the independent truth the parser is compared with.
func jpegChunks(data []byte) []Frame {
	var out []Frame
	for i := 0; i+10 <= len(data); i++ {
		if string(data[i:i+4]) == "00dc" && data[i+8] == 0xFF && data[i+9] == 0xD8 {
			size := int64(binary.LittleEndian.Uint32(data[i+4:]))
			out = append(out, Frame{Offset: int64(i) + 8, Size: size})
		}
	}
	return out
}

// The OpenCV-written video: idx1 is used, every frame is a JPEG of the
// stream's size, and frame k has make_video.py's background colour.
func TestOpenCVVideo(t *testing.T) {
	data := readFile(t, openCVVideo)
	ix, err := index(data)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Width != 64 || ix.Height != 48 || ix.Codec != "MJPG" || ix.Stream != 0 || !ix.UsedIdx1 || ix.Incomplete || ix.PartialFrame {
		t.Fatalf("index = %+v", ix)
	}
	want := jpegChunks(data)
	if len(want) != cvFrames || !equalFrames(ix.Frames, want) {
		t.Fatalf("frames %v\nwant   %v", ix.Frames, want)
	}
	for k := range ix.Frames {
		b, err := ix.ReadFrame(bytes.NewReader(data), k)
		if err != nil {
			t.Fatal(err)
		}
		img, err := jpeg.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("frame %d: %v", k, err)
		}
		if s := img.Bounds().Size(); s.X != 64 || s.Y != 48 {
			t.Fatalf("frame %d is %v", k, s)
		}
		// Background pixel far from the white square, against
		// make_video.py's formula, with a JPEG tolerance.
		r, g, bl, _ := img.At(60, 40).RGBA()
		wantRGB := [3]int{20 + 15*k, 200 - 10*k, 60}
		for c, v := range []uint32{r >> 8, g >> 8, bl >> 8} {
			if d := int(v) - wantRGB[c]; d < -8 || d > 8 {
				t.Fatalf("frame %d channel %d = %d, want %d +- 8", k, c, v, wantRGB[c])
			}
		}
	}
}

func equalFrames(a, b []Frame) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// FFmpeg's command-line muxer writes the same structure plus a vprp chunk.
func TestFFmpegVideo(t *testing.T) {
	data := readFile(t, filepath.Join("testdata", "ffmpeg_mjpeg.avi"))
	ix, err := index(data)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Width != 32 || ix.Height != 24 || !ix.UsedIdx1 || len(ix.Frames) != 3 || !equalFrames(ix.Frames, jpegChunks(data)) {
		t.Fatalf("index = %+v", ix)
	}
}

// A file from an FFmpeg killed while writing: placeholder sizes, no idx1;
// the frames on disk are found by walking movi.
func TestKilledWriter(t *testing.T) {
	data := readFile(t, filepath.Join("testdata", "ffmpeg_killed.avi"))
	if binary.LittleEndian.Uint32(data[4:]) != unknownSize {
		t.Fatal("fixture: RIFF size is not the placeholder")
	}
	ix, err := index(data)
	if err != nil {
		t.Fatal(err)
	}
	var complete []Frame
	partial := false
	for _, f := range jpegChunks(data) {
		if f.Offset+f.Size <= int64(len(data)) {
			complete = append(complete, f)
		} else {
			partial = true
		}
	}
	if !ix.Incomplete || ix.UsedIdx1 || ix.PartialFrame != partial || !equalFrames(ix.Frames, complete) || len(complete) == 0 {
		t.Fatalf("index %+v\nwant frames %v partial %v", ix, complete, partial)
	}
	for k := range ix.Frames {
		b, err := ix.ReadFrame(bytes.NewReader(data), k)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := jpeg.DecodeConfig(bytes.NewReader(b)); err != nil {
			t.Fatalf("frame %d: %v", k, err)
		}
	}
}

// Cut the OpenCV video at every length: before the movi list it is an
// error; from there on the index lists exactly the frames whose chunk is
// complete, says the file is incomplete, and flags a cut-off frame chunk.
func TestTruncationAtEveryOffset(t *testing.T) {
	data := readFile(t, openCVVideo)
	all := jpegChunks(data)
	for n := range len(data) {
		ix, err := index(data[:n])
		if n < moviFirst {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("cut at %d: err = %v, want ErrCorrupt", n, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("cut at %d: %v", n, err)
		}
		var want []Frame
		partial := false
		for _, f := range all {
			start := f.Offset - chunkHeaderSize
			switch {
			case f.Offset+f.Size <= int64(n):
				want = append(want, f)
			case start < int64(n):
				partial = true // a header or data cut off
			}
		}
		if !ix.Incomplete || ix.UsedIdx1 || !equalFrames(ix.Frames, want) || ix.PartialFrame != partial {
			t.Fatalf("cut at %d: %d frames partial %v incomplete %v idx1 %v; want %d frames partial %v",
				n, len(ix.Frames), ix.PartialFrame, ix.Incomplete, ix.UsedIdx1, len(want), partial)
		}
	}
}

func put32(b []byte, at int, v uint32) []byte {
	out := append([]byte{}, b...)
	binary.LittleEndian.PutUint32(out[at:], v)
	return out
}

func putStr(b []byte, at int, s string) []byte {
	out := append([]byte{}, b...)
	copy(out[at:], s)
	return out
}

// Corruption table over the OpenCV video: each case names the exact error.
func TestCorruption(t *testing.T) {
	good := readFile(t, openCVVideo)
	noIdx1 := putStr(good, cvIdx1At, "JUNK")
	tests := []struct {
		name string
		data []byte
		is   error
		want string
	}{
		{"empty file", nil, ErrCorrupt, "avi: corrupt file: file is 0 bytes, too short for a RIFF header"},
		{"RIFX", putStr(good, 0, "RIFX"), ErrCorrupt, `avi: corrupt file: not a RIFF AVI file (starts with "RIFX\x1e&\x00\x00AVI ")`},
		{"WAVE", putStr(good, 8, "WAVE"), ErrCorrupt, `avi: corrupt file: not a RIFF AVI file (starts with "RIFF\x1e&\x00\x00WAVE")`},
		{"hdrl size past the file", put32(good, cvHdrlAt+4, 0x7FFFFFF0), ErrCorrupt,
			"avi: corrupt file: hdrl list at offset 12 (size 2147483632) runs past the end of the RIFF list at 9766"},
		{"hdrl past the file, RIFF incomplete", put32(put32(good, 4, unknownSize), cvHdrlAt+4, 0x7FFFFFF0), ErrCorrupt,
			"avi: corrupt file: hdrl list at offset 12 (size 2147483632) runs past the end of the file (9766 bytes)"},
		{"strh chunk past hdrl", put32(good, cvStrhAt+4, 5000), ErrCorrupt,
			`avi: corrupt file: chunk "strh" at offset 100 (size 5000) runs past the end of the strl list at 4340`},
		{"no movi list", putStr(good, cvMoviAt+8, "movX"), ErrCorrupt, "avi: corrupt file: no movi list"},
		{"no hdrl list", putStr(good, cvHdrlAt+8, "hdrX"), ErrCorrupt, "avi: corrupt file: movi list at offset 5666 comes before any hdrl list"},
		{"movi size past RIFF", put32(good, cvMoviAt+4, 0x10000), ErrCorrupt,
			"avi: corrupt file: movi list at offset 5666 (size 65536) runs past the end of the RIFF list at 9766"},
		{"idx1 size past RIFF", put32(good, cvIdx1At+4, 0x1000), ErrCorrupt,
			`avi: corrupt file: chunk "idx1" at offset 9566 (size 4096) runs past the end of the RIFF list at 9766`},
		{"idx1 size not a multiple of 16", put32(good, cvIdx1At+4, 191), ErrCorrupt,
			"avi: corrupt file: idx1 at offset 9566 has size 191, not a multiple of 16"},
		{"idx1 entry 5 size past the movi list", put32(good, cvIdx1At+8+5*16+12, 0x7FFFFFFF), ErrCorrupt,
			"avi: corrupt file: idx1 entry 5: chunk 00dc at offset 7272 (size 2147483647) lies outside the movi list [5678, 9566)"},
		{"idx1 entry 0 points nowhere", put32(good, cvIdx1At+8+8, 6), ErrCorrupt,
			"avi: corrupt file: idx1 entry 0 (00dc at offset 6, size 281): points at no matching chunk in the movi list (neither relative nor absolute)"},
		{"no idx1, frame size past the movi list", put32(noIdx1, cvFrame3+4, 0x100000), ErrCorrupt,
			`avi: corrupt file: chunk "00dc" at offset 6324 (size 1048576) runs past the end of the movi list at 9566`},
		{"stray bytes after the last chunk", append(put32(good, 4, cvSize-8+2), 0, 0), ErrCorrupt,
			"avi: corrupt file: 2 stray bytes at offset 9766 at the end of the RIFF list"},
		{"H264 stream", putStr(putStr(good, cvStrhAt+8+4, "H264"), cvStrfAt+8+16, "H264"), ErrUnsupported,
			`avi: unsupported: video stream codec "H264", want MJPG`},
		{"audio only", putStr(good, cvStrhAt+8, "auds"), ErrUnsupported, "avi: unsupported: no video stream in the hdrl list"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ix, err := index(tc.data)
			if !errors.Is(err, tc.is) || err.Error() != tc.want {
				t.Fatalf("err = %v\nwant  %s\n(index %+v)", err, tc.want, ix)
			}
		})
	}
}

// Without idx1 a complete file is walked, and finds the same frames.
func TestWalkWithoutIdx1(t *testing.T) {
	data := putStr(readFile(t, openCVVideo), cvIdx1At, "JUNK")
	ix, err := index(data)
	if err != nil {
		t.Fatal(err)
	}
	if ix.UsedIdx1 || ix.Incomplete || !equalFrames(ix.Frames, jpegChunks(data)) {
		t.Fatalf("index = %+v", ix)
	}
}

// ReadFrame re-checks the chunk header: an index that no longer matches
// the file (the file changed after indexing) is an error, not wrong bytes.
func TestReadFrameChecksHeader(t *testing.T) {
	data := readFile(t, openCVVideo)
	ix, err := index(data)
	if err != nil {
		t.Fatal(err)
	}
	changed := putStr(data, cvFrame3, "01dc")
	_, err = ix.ReadFrame(bytes.NewReader(changed), 2)
	want := `avi: corrupt file: frame 2: chunk header at offset 6324 is "01dc" size 275, want 00dc size 275`
	if !errors.Is(err, ErrCorrupt) || err.Error() != want {
		t.Fatalf("err = %v, want %s", err, want)
	}
	if _, err := ix.ReadFrame(bytes.NewReader(data[:cvFrame3+100]), 2); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("shortened file: %v", err)
	}
	if _, err := ix.ReadFrame(bytes.NewReader(data), cvFrames); err == nil || err.Error() != "avi: frame 12 out of range [0, 12)" {
		t.Fatalf("out of range: %v", err)
	}
}

// chunkBytes builds a chunk (with its pad byte); listBytes a LIST or RIFF.
func chunkBytes(id string, data []byte) []byte {
	b := append([]byte(id), 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(b[4:], uint32(len(data)))
	b = append(b, data...)
	if len(data)%2 == 1 {
		b = append(b, 0)
	}
	return b
}

func listBytes(id, typ string, parts ...[]byte) []byte {
	body := []byte(typ)
	for _, p := range parts {
		body = append(body, p...)
	}
	return chunkBytes(id, body)
}

// hdrlBytes is a minimal header list for one video stream of w x h, codec
// fourcc, after an audio stream when withAudio (so video is stream 1).
func hdrlBytes(w, h int, codec string, withAudio bool) []byte {
	avih := make([]byte, avihSize)
	binary.LittleEndian.PutUint32(avih[avihWidthAt:], uint32(w))
	binary.LittleEndian.PutUint32(avih[avihHeightAt:], uint32(h))
	strh := make([]byte, 56)
	copy(strh, "vids")
	copy(strh[4:], codec)
	strf := make([]byte, 40)
	binary.LittleEndian.PutUint32(strf[0:], 40)
	binary.LittleEndian.PutUint32(strf[4:], uint32(w))
	binary.LittleEndian.PutUint32(strf[8:], uint32(int32(-h))) // top-down
	copy(strf[16:], codec)
	var streams [][]byte
	if withAudio {
		ah := make([]byte, 56)
		copy(ah, "auds")
		streams = append(streams, listBytes("LIST", "strl", chunkBytes("strh", ah), chunkBytes("strf", make([]byte, 18))))
	}
	streams = append(streams, listBytes("LIST", "strl", chunkBytes("strh", strh), chunkBytes("strf", strf)))
	return listBytes("LIST", "hdrl", append([][]byte{chunkBytes("avih", avih)}, streams...)...)
}

var (
	jpegA = []byte{0xFF, 0xD8, 'a', 0xFF, 0xD9}      // odd length: padded
	jpegB = []byte{0xFF, 0xD8, 'b', 'b', 0xFF, 0xD9} // even
)

// A hand-built file exercising what OpenCV does not write: a second
// stream before the video, 'rec ' lists, audio and JUNK chunks in movi,
// '##db' frames, absolute idx1 offsets, and an OpenDML AVIX continuation.
func TestStructuresOtherWritersUse(t *testing.T) {
	hdrl := hdrlBytes(20, 10, "mjpg", true)
	movi := listBytes("LIST", "movi",
		listBytes("LIST", "rec ", chunkBytes("01dc", jpegA), chunkBytes("00wb", []byte{1, 2, 3})),
		chunkBytes("JUNK", make([]byte, 7)),
		chunkBytes("01db", jpegB),
	)
	head := len("RIFF....AVI ") + len(hdrl)
	// Absolute offsets of the two frame chunks.
	frameA := head + 12 + 12        // movi header, rec header
	frameB := frameA + 14 + 12 + 16 // 01dc (8+5+pad), 00wb (8+3+pad), JUNK (8+7+pad)
	idx := func(id string, off, size int) []byte {
		e := make([]byte, 16)
		copy(e, id)
		binary.LittleEndian.PutUint32(e[8:], uint32(off))
		binary.LittleEndian.PutUint32(e[12:], uint32(size))
		return e
	}
	idx1 := chunkBytes("idx1", bytes.Join([][]byte{idx("01dc", frameA, 5), idx("00wb", frameA+14, 3), idx("01db", frameB, 6)}, nil))
	file := listBytes("RIFF", "AVI ", hdrl, movi, idx1)
	want := []Frame{{int64(frameA + 8), 5}, {int64(frameB + 8), 6}}

	ix, err := index(file)
	if err != nil {
		t.Fatal(err)
	}
	if ix.Stream != 1 || ix.Width != 20 || ix.Height != 10 || ix.Codec != "mjpg" || !ix.UsedIdx1 || !equalFrames(ix.Frames, want) {
		t.Fatalf("absolute idx1: %+v, want frames %v", ix, want)
	}
	// The same without idx1: the walk reads through 'rec ' and skips the rest.
	walked, err := index(listBytes("RIFF", "AVI ", hdrl, movi))
	if err != nil || walked.UsedIdx1 || !equalFrames(walked.Frames, want) {
		t.Fatalf("walk: %+v, %v", walked, err)
	}
	// An AVIX continuation after a complete first RIFF: every movi list is
	// walked, idx1 (which covers only the first) is not used.
	avix := listBytes("RIFF", "AVIX", listBytes("LIST", "movi", chunkBytes("01dc", jpegB)))
	ext, err := index(append(append([]byte{}, file...), avix...))
	wantExt := append(append([]Frame{}, want...), Frame{int64(len(file) + 12 + 12 + 8), 6})
	if err != nil || ext.UsedIdx1 || !equalFrames(ext.Frames, wantExt) {
		t.Fatalf("AVIX: %+v, %v; want %v", ext, err, wantExt)
	}
	for i := range ext.Frames {
		if _, err := ext.ReadFrame(bytes.NewReader(append(append([]byte{}, file...), avix...)), i); err != nil {
			t.Fatalf("AVIX frame %d: %v", i, err)
		}
	}
}

func BenchmarkReadIndex(b *testing.B) {
	data := readFile(b, openCVVideo)
	r := bytes.NewReader(data)
	for b.Loop() {
		if _, err := ReadIndex(r, int64(len(data))); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadIndexWalk(b *testing.B) {
	data := putStr(readFile(b, openCVVideo), cvIdx1At, "JUNK")
	r := bytes.NewReader(data)
	for b.Loop() {
		if _, err := ReadIndex(r, int64(len(data))); err != nil {
			b.Fatal(err)
		}
	}
}
