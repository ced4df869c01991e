package avi

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"warehouse-etl/internal/fuzzmem"
)

// FuzzAVI checks that ReadIndex never panics, that every error wraps a
// sentinel, and that every frame it returns lies inside the file; frames
// found by walking movi must read back, frames from idx1 either read back
// or fail as corrupt.
func FuzzAVI(f *testing.F) {
	f.Add(readFile(f, openCVVideo))
	f.Add(readFile(f, filepath.Join("testdata", "ffmpeg_mjpeg.avi")))
	f.Add(readFile(f, filepath.Join("testdata", "ffmpeg_killed.avi"))[:7000])
	f.Add(listBytes("RIFF", "AVI ", hdrlBytes(2, 2, "MJPG", true),
		listBytes("LIST", "movi", listBytes("LIST", "rec ", chunkBytes("01dc", jpegA)), chunkBytes("01db", jpegB))))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzmem.Check(t, aviAllocBound, func() {
			ix, err := index(data)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupported) {
					t.Fatalf("error %v wraps no sentinel", err)
				}
				return
			}
			if len(ix.Frames) > len(data)/chunkHeaderSize {
				t.Fatalf("%d frames in %d bytes", len(ix.Frames), len(data))
			}
			r := bytes.NewReader(data)
			for i, fr := range ix.Frames {
				if fr.Offset < chunkHeaderSize || fr.Size < 0 || fr.Offset+fr.Size > int64(len(data)) {
					t.Fatalf("frame %d %+v outside the %d-byte file", i, fr, len(data))
				}
				b, err := ix.ReadFrame(r, i)
				switch {
				case err == nil && int64(len(b)) != fr.Size:
					t.Fatalf("frame %d: read %d bytes, indexed %d", i, len(b), fr.Size)
				case err != nil && (!ix.UsedIdx1 || !errors.Is(err, ErrCorrupt)):
					t.Fatalf("frame %d (idx1 %v): %v", i, ix.UsedIdx1, err)
				}
			}
		})
	})
}
