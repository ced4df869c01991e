package sources

// ImageSize is where the file-based sources (capture, COCO, YOLO) decode
// image bytes during the scan: it reads the header for the size, through the
// transforms package's decoder table, so that a scan accepts exactly the
// images the transform stage decodes and reports the EXIF-oriented size the
// label boxes refer to.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"warehouse-etl/transforms"
	"warehouse-etl/validate"
)

// ErrNotImage marks a file whose header is not a decodable image: unknown
// format, truncated or corrupt header, or a size beyond the decoder limits.
var ErrNotImage = errors.New("image header cannot be decoded")

// DefaultMaxImageBytes bounds the image files a scan reads whole when their
// first 64 KiB do not hold the header: well above an 8K RGBA PNG.
const DefaultMaxImageBytes int64 = 256 << 20

// headerPrefix is how much of an image the first header attempt reads: the
// headers of PNG, GIF, BMP, WebP and nearly every JPEG (EXIF included) fit;
// the rest (large APPn segments, TIFF with trailing IFDs) get a second
// attempt over the whole file.
const headerPrefix = 64 << 10

// ImageSize returns the displayed width and height of the image file at
// path, reading at most maxBytes of it. A header that does not decode wraps
// ErrNotImage; an error of the
// file system (open, read) is returned as such, so that the caller can tell
// a broken image (a sample reason) from an unreadable disk (a failed scan).
func ImageSize(path string, maxBytes int64) (w, h int, err error) {
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
			return 0, 0, fmt.Errorf("%s: %w: %v", path, ErrNotImage, derr)
		}
		n = size
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return 0, 0, err
		}
	}
}

// ProbeImage checks the image file at rel (slash-separated, relative to
// root) and reads its size from the header. Problems of the file are
// reasons: missing_file (absent, not a regular file, removed while being
// read) and decode_error (empty, larger than maxBytes, or a header that does not
// decode to a positive size), each with its cause in words (detail).
// Errors of the file system are errors, naming
// the file.
func ProbeImage(root, rel string, maxBytes int64) (w, h int, r validate.Reason, detail string, err error) {
	abs := filepath.Join(root, filepath.FromSlash(rel))
	st, err := os.Stat(abs)
	switch {
	case err != nil && NotFound(err):
		return 0, 0, validate.ReasonMissingFile, "no file " + rel, nil
	case err != nil:
		return 0, 0, "", "", fmt.Errorf("image %s: %w", rel, err)
	case !st.Mode().IsRegular():
		return 0, 0, validate.ReasonMissingFile, rel + " is not a regular file", nil
	case st.Size() == 0:
		return 0, 0, validate.ReasonDecodeError, rel + ": 0-byte file", nil
	case st.Size() > maxBytes:
		return 0, 0, validate.ReasonDecodeError, fmt.Sprintf("%s: %d bytes, more than the limit of %d", rel, st.Size(), maxBytes), nil
	}
	w, h, err = ImageSize(abs, maxBytes)
	switch {
	case err == nil && (w <= 0 || h <= 0):
		return 0, 0, validate.ReasonDecodeError, fmt.Sprintf("%s: the header declares %dx%d", rel, w, h), nil
	case err == nil:
		return w, h, "", "", nil
	case errors.Is(err, ErrNotImage):
		return 0, 0, validate.ReasonDecodeError, rel + ": " + strings.TrimPrefix(err.Error(), abs+": "), nil
	case NotFound(err):
		return 0, 0, validate.ReasonMissingFile, rel + " was removed while being read", nil // removed since Stat
	}
	return 0, 0, "", "", fmt.Errorf("image %s: %w", rel, err)
}
