package sources

import (
	"bytes"
	"errors"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
)

// encoded returns a w x h image in format png, jpeg, gif, bmp or tiff.
func encoded(t *testing.T, format string, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	var buf bytes.Buffer
	var err error
	switch format {
	case "png":
		err = png.Encode(&buf, img)
	case "jpeg":
		err = jpeg.Encode(&buf, img, nil)
	case "gif":
		err = gif.Encode(&buf, img, nil)
	case "bmp":
		err = bmp.Encode(&buf, img)
	case "tiff":
		err = tiff.Encode(&buf, img, nil)
	default:
		t.Fatalf("unknown format %s", format)
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// writeTree creates files under root; a value of nil makes a directory.
func writeTree(t *testing.T, root string, files map[string][]byte) {
	t.Helper()
	for rel, data := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if data == nil {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

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
