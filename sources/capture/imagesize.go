package capture

// This file is the only place capture decodes image bytes: it reads the
// header for the size, through the transforms package's decoder table, so
// that the scan accepts exactly the images the transform stage decodes and
// reports the EXIF-oriented size the label boxes refer to.

import (
	"errors"
	"fmt"
	"io"
	"os"

	"warehouse-etl/transforms"
)

// errNotImage marks a file whose header is not a decodable image: unknown
// format, truncated or corrupt header, or a size beyond the decoder limits.
var errNotImage = errors.New("image header cannot be decoded")

// headerPrefix is how much of an image the first header attempt reads: the
// headers of PNG, GIF, BMP, WebP and nearly every JPEG (EXIF included) fit;
// the rest (large APPn segments, TIFF with trailing IFDs) get a second
// attempt over the whole file.
const headerPrefix = 64 << 10

// imageSize returns the displayed width and height of the image file at
// path. A header that does not decode wraps errNotImage; an error of the
// file system (open, read) is returned as such, so that the caller can tell
// a broken image (a sample reason) from an unreadable disk (a failed scan).
func imageSize(path string, maxBytes int64) (w, h int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, 0, err
	}
	size := st.Size()
	n := min(size, headerPrefix)
	for {
		buf := make([]byte, n)
		if _, err := io.ReadFull(f, buf); err != nil {
			return 0, 0, fmt.Errorf("read %s: %w", path, err)
		}
		w, h, _, derr := transforms.DecodeConfig(buf)
		if derr == nil {
			return w, h, nil
		}
		if n == size || size > maxBytes {
			return 0, 0, fmt.Errorf("%s: %w: %v", path, errNotImage, derr)
		}
		n = size
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return 0, 0, err
		}
	}
}
