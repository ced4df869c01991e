package sources

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"warehouse-etl/internal/testfiles"
)

// The shared test helpers (internal/testfiles).
var (
	writeTree = testfiles.WriteTree
	encoded   = testfiles.Image
)

// webpLossless3x2 is a hand-made WebP header: RIFF, WEBP, a VP8L chunk with
// the signature 0x2f and 14-bit width-1 = 2, height-1 = 1 (no pixels: the
// size is all DecodeConfig reads).
var webpLossless3x2 = []byte("RIFF\x12\x00\x00\x00WEBPVP8L\x05\x00\x00\x00\x2f\x02\x40\x00\x00\x00")

func TestImageSize(t *testing.T) {
	dir := t.TempDir()
	files := map[string][]byte{
		"a.png":  encoded(t, "png", 7, 5),
		"a.jpg":  encoded(t, "jpeg", 16, 9),
		"a.gif":  encoded(t, "gif", 3, 11),
		"a.bmp":  encoded(t, "bmp", 6, 2),
		"a.tiff": encoded(t, "tiff", 1, 4),
		"a.webp": webpLossless3x2,
		"text":   []byte("hello"),
		"empty":  {},
		"jpgcut": encoded(t, "jpeg", 16, 9)[:20],
	}
	writeTree(t, dir, files)
	writeTree(t, dir, map[string][]byte{"sub": nil})
	tests := []struct {
		name       string
		w, h       int
		notImage   bool // wraps ErrNotImage
		otherError bool // a file system error
	}{
		{name: "a.png", w: 7, h: 5},
		{name: "a.jpg", w: 16, h: 9},
		{name: "a.gif", w: 3, h: 11},
		{name: "a.bmp", w: 6, h: 2},
		{name: "a.tiff", w: 1, h: 4},
		{name: "a.webp", w: 3, h: 2},
		{name: "text", notImage: true},
		{name: "empty", notImage: true},
		{name: "jpgcut", notImage: true},
		{name: "sub", otherError: true}, // reading a directory fails in the file system
		{name: "absent", otherError: true},
	}
	for _, tt := range tests {
		w, h, err := ImageSize(filepath.Join(dir, tt.name), DefaultMaxImageBytes)
		switch {
		case tt.notImage:
			if !errors.Is(err, ErrNotImage) {
				t.Errorf("%s: err = %v, want ErrNotImage", tt.name, err)
			}
		case tt.otherError:
			if err == nil || errors.Is(err, ErrNotImage) {
				t.Errorf("%s: err = %v, want a file system error", tt.name, err)
			}
		case err != nil || w != tt.w || h != tt.h:
			t.Errorf("%s: %dx%d, %v; want %dx%d", tt.name, w, h, err, tt.w, tt.h)
		}
	}
	if _, _, err := ImageSize(filepath.Join(dir, "absent"), DefaultMaxImageBytes); !os.IsNotExist(err) {
		t.Errorf("absent file: %v, want a not-exist error", err)
	}
}
