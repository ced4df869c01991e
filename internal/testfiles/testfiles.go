// Package testfiles writes the small file trees and images that the tests
// of the file-based sources (capture, COCO, YOLO, the shared image-size
// probe) build their datasets from.
package testfiles

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"golang.org/x/image/bmp"
	"golang.org/x/image/tiff"
)

// WriteTree creates files under root (slash-separated relative paths); a
// nil value makes a directory.
func WriteTree(t testing.TB, root string, files map[string][]byte) {
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

// Image returns a w x h image with a fixed byte pattern, encoded as png,
// jpeg, gif, bmp or tiff.
func Image(t testing.TB, format string, w, h int) []byte {
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

// HostilePNG returns a w x h 8-bit RGBA PNG of zeros, deflated at the
// best ratio zlib reaches (about 1030:1): a small file that declares a
// large image, inside the pixel limit, which the decoders must allocate in
// full (8000x8000 is a 249 KB file that decodes to 256 MB). tag goes into a
// tEXt chunk so that several such files differ. The rows are compressed as
// they are generated, never held whole.
func HostilePNG(t testing.TB, w, h int, tag string) []byte {
	t.Helper()
	idat := hostileIDAT(t, w, h)
	var out bytes.Buffer
	out.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(data)))
		out.Write(n[:])
		crc := crc32.NewIEEE()
		crc.Write([]byte(typ))
		crc.Write(data)
		out.WriteString(typ)
		out.Write(data)
		binary.BigEndian.PutUint32(n[:], crc.Sum32())
		out.Write(n[:])
	}
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = 8, 6 // 8-bit RGBA
	chunk("IHDR", ihdr)
	chunk("tEXt", []byte("Comment\x00"+tag))
	chunk("IDAT", idat)
	chunk("IEND", nil)
	return out.Bytes()
}

// hostileIDATs caches HostilePNG's zlib streams by size: compressing 256 MB
// of zeros takes a second.
var hostileIDATs sync.Map // [2]int -> []byte

func hostileIDAT(t testing.TB, w, h int) []byte {
	if b, ok := hostileIDATs.Load([2]int{w, h}); ok {
		return b.([]byte)
	}
	var idat bytes.Buffer
	zw, err := zlib.NewWriterLevel(&idat, zlib.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	row := make([]byte, 1+4*w) // filter byte 0 (None), zero pixels
	for range h {
		if _, err := zw.Write(row); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	hostileIDATs.Store([2]int{w, h}, idat.Bytes())
	return idat.Bytes()
}
