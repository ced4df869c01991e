//go:build turbojpeg

package transforms

// JPEG through libjpeg-turbo's TurboJPEG 2.x API (Debian: libturbojpeg0-dev),
// enabled with `go build -tags turbojpeg`. The library is linked statically,
// so the libjpeg-turbo that decodes is the one named in DecoderIdentity, not
// whatever shared library a machine happens to have. A file that imports
// "C" is left out when cgo is disabled, so `-tags turbojpeg` without cgo
// fails to build instead of silently falling back to image/jpeg.

/*
#cgo LDFLAGS: -l:libturbojpeg.a
#include <turbojpeg.h>
#include <jconfig.h>

// The release of the headers this file is compiled against, e.g. 2001005
// for 2.1.5; Debian's libturbojpeg0-dev ships them with the static library
// that is linked, so it is the release that decodes.
enum { turboVersionNumber = LIBJPEG_TURBO_VERSION_NUMBER };

// Flags of every decode; DecoderIdentity names them. ACCURATEDCT: the
// integer "islow" IDCT, whose SIMD and C versions give identical output
// (so do the scaled IDCTs and the upsampling/color conversion used here),
// so pixels do not depend on the CPU. STOPONWARNING: a corrupt or
// truncated stream is an error, as it is for image/jpeg, not a gray-filled
// image. LIMITSCANS: refuse progressive files with absurd scan counts.
enum { decodeFlags = TJFLAG_ACCURATEDCT | TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS };

static int scaleSupported(int denom) {
	int n = 0;
	tjscalingfactor *f = tjGetScalingFactors(&n);
	for (int i = 0; f != NULL && i < n; i++) {
		if (f[i].num == 1 && f[i].denom == denom) return 1;
	}
	return 0;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// turboJPEGVersion is the libjpeg-turbo release the build links, read from
// jconfig.h's LIBJPEG_TURBO_VERSION_NUMBER at compile time (TurboJPEG 2.x
// has no version call): building against another libjpeg-turbo changes
// DecoderIdentity, and with it every warehouse version. A test compares it
// with `pkg-config --modversion libturbojpeg`.
var turboJPEGVersion = fmt.Sprintf("%d.%d.%d",
	C.turboVersionNumber/1000000, C.turboVersionNumber/1000%1000, C.turboVersionNumber%1000)

// TurboJPEGVersion is the libjpeg-turbo release linked into this binary, ""
// in the pure-Go build.
func TurboJPEGVersion() string { return turboJPEGVersion }

// jpegIdentity names the JPEG decoder and its pixel-deciding settings for
// DecoderIdentity.
var jpegIdentity = " jpeg=libjpeg-turbo/" + turboJPEGVersion +
	"(static,islow,fancy-upsampling,stop-on-warning," +
	"dct-scale=largest-of-1/2,1/4,1/8-with-src>=k*new-both-axes,cmyk=image/jpeg)"

// jpegState is the per-Transformer TurboJPEG handle, created on first use
// and destroyed when the Transformer is collected.
type jpegState struct {
	handle C.tjhandle
	// header receives tjDecompressHeader3's width, height, subsampling
	// and colorspace; kept here because locals whose address goes to C
	// are moved to the heap, one allocation per image.
	header [4]C.int
}

func init() {
	for _, d := range dctScales {
		if C.scaleSupported(C.int(d)) == 0 {
			panic(fmt.Sprintf("transforms: libjpeg-turbo does not offer scaling factor 1/%d", d))
		}
	}
}

// decodeJPEG decodes with libjpeg-turbo into t.decoded, shrinking in the
// DCT domain when the planned new size allows it, then applies the EXIF
// orientation. CMYK and YCCK files go to image/jpeg (TurboJPEG cannot turn
// them into RGB), so they decode as in the pure-Go build.
func (t *Transformer) decodeJPEG(data []byte, hdr imageHeader, g Geometry) (pixels, error) {
	if !jpegDataCanHold(data) {
		return pixels{}, fmt.Errorf("%w: %w", ErrDecode, errJPEGShortScan)
	}
	if t.jpeg.handle == nil {
		h := C.tjInitDecompress()
		if h == nil {
			return pixels{}, fmt.Errorf("transforms: tjInitDecompress: %s", C.GoString(C.tjGetErrorStr2(nil)))
		}
		t.jpeg.handle = h
		runtime.AddCleanup(t, func(h C.tjhandle) { C.tjDestroy(h) }, h)
	}
	h := t.jpeg.handle
	src := (*C.uchar)(unsafe.Pointer(&data[0]))
	hd := &t.jpeg.header
	if C.tjDecompressHeader3(h, src, C.ulong(len(data)), &hd[0], &hd[1], &hd[2], &hd[3]) != 0 {
		return pixels{}, fmt.Errorf("%w: jpeg header: %s", ErrDecode, C.GoString(C.tjGetErrorStr2(h)))
	}
	if int(hd[0]) != hdr.storedW || int(hd[1]) != hdr.storedH {
		return pixels{}, fmt.Errorf("%w: jpeg: libjpeg-turbo reads %dx%d, the header said %dx%d",
			ErrDecode, hd[0], hd[1], hdr.storedW, hdr.storedH)
	}
	if colorspace := hd[3]; colorspace == C.TJCS_CMYK || colorspace == C.TJCS_YCCK {
		t.counts.JPEGFallback++
		return t.decodeStd(data, hdr, g)
	}
	nw, nh := g.NewW, g.NewH
	if hdr.orientation >= 5 {
		nw, nh = nh, nw
	}
	k := dctScaleDenom(hdr.storedW, hdr.storedH, nw, nh)
	sw, sh := (hdr.storedW+k-1)/k, (hdr.storedH+k-1)/k
	t.decoded = resize(t.decoded, 3*sw*sh)
	dst := (*C.uchar)(unsafe.Pointer(&t.decoded[0]))
	if C.tjDecompress2(h, src, C.ulong(len(data)), dst, C.int(sw), C.int(3*sw), C.int(sh), C.TJPF_RGB, C.decodeFlags) != 0 {
		return pixels{}, fmt.Errorf("%w: jpeg data: %s", ErrDecode, C.GoString(C.tjGetErrorStr2(h)))
	}
	return t.orientRGB(t.decoded, sw, sh, hdr.orientation), nil
}

// dropScratch: libjpeg-turbo decodes into Transformer.decoded, which
// Transformer.dropScratch drops; the handle keeps no image of ours.
func (s *jpegState) dropScratch() {}
