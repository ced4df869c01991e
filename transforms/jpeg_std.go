//go:build !turbojpeg

package transforms

// decodeJPEG decodes with image/jpeg in the default, pure-Go build; the
// turbojpeg build replaces it with libjpeg-turbo (jpeg_turbo.go).
func (t *Transformer) decodeJPEG(data []byte, hdr imageHeader, g Geometry) (pixels, error) {
	return t.decodeStd(data, hdr, g)
}

// jpegIdentity is what DecoderIdentity adds for the JPEG decoder. image/jpeg
// is part of the Go toolchain the identity already names, so the pure-Go
// build adds nothing and its versions stay those of earlier releases.
const jpegIdentity = ""

// TurboJPEGVersion is the libjpeg-turbo release linked into this binary, ""
// in the pure-Go build.
func TurboJPEGVersion() string { return "" }

// jpegState is the per-Transformer state of the JPEG decoder: none for
// image/jpeg.
type jpegState struct{}

// jpegQuickSize is nil: the pure-Go build reads JPEG headers with
// jpeg.DecodeConfig, as image/jpeg will decode the file anyway.
var jpegQuickSize func([]byte) (int, int, bool)
