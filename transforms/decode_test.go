package transforms

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image"
	"image/jpeg"
	"os"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"warehouse-etl/dtype"
)

func jpegDecodeForReference(data []byte) (image.Image, error) {
	return jpeg.Decode(bytes.NewReader(data))
}

func TestDecodeConfigFormats(t *testing.T) {
	want := map[string]string{
		"png-rgba": "png", "png-rgb": "png", "png-gray": "png", "png-rgba16": "png", "png-paletted": "png",
		"jpeg": "jpeg", "gif": "gif", "gif-partial-frame": "gif", "bmp": "bmp",
		"tiff-nrgba": "tiff", "tiff-premultiplied": "tiff", "webp-lossless": "webp",
	}
	for _, in := range formatInputs(t) {
		w, h, format, err := DecodeConfig(in.data)
		if err != nil || w != in.w || h != in.h || format != want[in.name] {
			t.Errorf("%s: DecodeConfig = %dx%d %q, %v; want %dx%d %q", in.name, w, h, format, err, in.w, in.h, want[in.name])
		}
	}
}

// Big-endian TIFF has its own magic; the encoder only writes little-endian,
// so swap a tiny hand-built file.
func TestDecodeConfigBigEndianTIFF(t *testing.T) {
	data := tiffHeader(binary.BigEndian, 7, 5)
	w, h, format, err := DecodeConfig(data)
	if err != nil || w != 7 || h != 5 || format != "tiff" {
		t.Fatalf("DecodeConfig = %dx%d %q, %v; want 7x5 tiff", w, h, format, err)
	}
}

// tiffHeader is a TIFF header and IFD (8-bit gray) declaring w x h, with no
// pixel data.
func tiffHeader(order binary.AppendByteOrder, w, h uint32) []byte {
	var b []byte
	if order == binary.AppendByteOrder(binary.LittleEndian) {
		b = []byte("II*\x00")
	} else {
		b = []byte("MM\x00*")
	}
	b = order.AppendUint32(b, 8)
	entries := [][3]uint32{ // tag, type, value
		{256, 4, w}, // ImageWidth LONG
		{257, 4, h}, // ImageLength LONG
		{258, 3, 8}, // BitsPerSample SHORT
		{262, 3, 1}, // PhotometricInterpretation SHORT: BlackIsZero
	}
	b = order.AppendUint16(b, uint16(len(entries)))
	for _, e := range entries {
		b = order.AppendUint16(b, uint16(e[0]))
		b = order.AppendUint16(b, uint16(e[1]))
		b = order.AppendUint32(b, 1)
		if e[1] == 3 {
			b = order.AppendUint16(b, uint16(e[2]))
			b = append(b, 0, 0)
		} else {
			b = order.AppendUint32(b, e[2])
		}
	}
	return order.AppendUint32(b, 0)
}

// hugeHeaders are headers of every format that declare an image far beyond
// the limits, with no pixel data behind them.
func hugeHeaders() map[string][]byte {
	png := func(w, h uint32) []byte {
		ihdr := binary.BigEndian.AppendUint32([]byte("IHDR"), w)
		ihdr = binary.BigEndian.AppendUint32(ihdr, h)
		ihdr = append(ihdr, 8, 6, 0, 0, 0) // 8-bit RGBA, no interlace
		b := []byte("\x89PNG\r\n\x1a\n")
		b = binary.BigEndian.AppendUint32(b, 13)
		b = append(b, ihdr...)
		return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(ihdr))
	}
	jpg := []byte{0xFF, 0xD8, 0xFF, 0xC0, 0x00, 0x11, 8, 0xFF, 0xFF, 0xFF, 0xFF, 3,
		1, 0x11, 0, 2, 0x11, 0, 3, 0x11, 0, // SOF0 65535x65535, 3 components
		0xFF, 0xDA, 0x00, 0x0C, 3, 1, 0, 2, 0x11, 3, 0x11, 0, 0x3F, 0} // SOS header, no scan data
	gif := []byte("GIF89a\x60\xea\x60\xea\x00\x00\x00") // 60000x60000, no color table
	bmp := []byte("BM")
	bmp = binary.LittleEndian.AppendUint32(bmp, 0)  // file size (unchecked)
	bmp = binary.LittleEndian.AppendUint32(bmp, 0)  // reserved
	bmp = binary.LittleEndian.AppendUint32(bmp, 54) // pixel offset
	bmp = binary.LittleEndian.AppendUint32(bmp, 40) // BITMAPINFOHEADER
	bmp = binary.LittleEndian.AppendUint32(bmp, 60000)
	bmp = binary.LittleEndian.AppendUint32(bmp, 60000)
	bmp = binary.LittleEndian.AppendUint16(bmp, 1)  // planes
	bmp = binary.LittleEndian.AppendUint16(bmp, 24) // bits per pixel
	bmp = append(bmp, make([]byte, 24)...)          // compression 0 and the rest
	var webp vp8lBits
	webp.write(0x2f, 8)
	webp.write(16383, 14) // 16384 wide
	webp.write(16383, 14) // 16384 high: 2^28 pixels
	webp.write(0, 4)
	chunk := binary.LittleEndian.AppendUint32([]byte("VP8L"), uint32(len(webp.buf)))
	chunk = append(chunk, webp.buf...)
	riff := binary.LittleEndian.AppendUint32([]byte("RIFF"), uint32(4+len(chunk)))
	riff = append(append(riff, "WEBP"...), chunk...)
	return map[string][]byte{
		"png 20000x20000":  png(20000, 20000),
		"png side 70000":   png(70000, 1),
		"jpeg 65535x65535": jpg,
		"gif 60000x60000":  gif,
		"bmp 60000x60000":  bmp,
		"tiff 60000x60000": tiffHeader(binary.LittleEndian, 60000, 60000),
		"webp 16384x16384": riff,
	}
}

// A small file that declares a huge image is refused from its header:
// ErrImageTooLarge (and ErrDecode), and no big allocation happens.
func TestHugeDimensionsRefused(t *testing.T) {
	spec := Spec{Width: 64, Height: 64, Mode: Letterbox, DType: dtype.F16}
	tr := mustTransformer(t, spec)
	out := make([]byte, spec.OutputBytes())
	for name, data := range hugeHeaders() {
		t.Run(name, func(t *testing.T) {
			if _, _, _, err := DecodeConfig(data); !errors.Is(err, ErrImageTooLarge) || !errors.Is(err, ErrDecode) {
				t.Fatalf("DecodeConfig: %v, want ErrImageTooLarge and ErrDecode", err)
			}
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := tr.Apply(data, out)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrImageTooLarge) || !errors.Is(err, ErrDecode) {
				t.Fatalf("Apply: %v, want ErrImageTooLarge and ErrDecode", err)
			}
			if n := after.TotalAlloc - before.TotalAlloc; n > 1<<20 {
				t.Fatalf("Apply allocated %d bytes before refusing", n)
			}
		})
	}
}

// A lower limit on the Transformer applies to Apply as a whole.
func TestTransformerPixelLimit(t *testing.T) {
	spec := Spec{Width: 16, Height: 16, Mode: Letterbox, DType: dtype.F16}
	tr := mustTransformer(t, spec)
	tr.maxPixels = 29*19 - 1
	data := formatInputs(t)[0].data // 29x19
	if _, err := tr.Apply(data, make([]byte, spec.OutputBytes())); !errors.Is(err, ErrImageTooLarge) {
		t.Fatalf("Apply: %v, want ErrImageTooLarge", err)
	}
	tr.maxPixels = 29 * 19
	if _, err := tr.Apply(data, make([]byte, spec.OutputBytes())); err != nil {
		t.Fatalf("Apply at the limit: %v", err)
	}
}

// Corrupt inputs: a table of specific damage, each must fail with ErrDecode.
func TestCorruptInputs(t *testing.T) {
	inputs := map[string][]byte{}
	for _, in := range formatInputs(t) {
		inputs[in.name] = in.data
	}
	damage := func(name string, f func(b []byte) []byte) []byte {
		return f(append([]byte{}, inputs[name]...))
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"unknown format", []byte("hello, this is not an image at all")},
		{"jpeg SOI only", []byte{0xFF, 0xD8}},
		{"png signature only", []byte("\x89PNG\r\n\x1a\n")},
		// signature(8) length(4) "IHDR"(4) data(13) crc(4): flip a CRC byte.
		{"png IHDR checksum", damage("png-rgb", func(b []byte) []byte { b[29] ^= 0xFF; return b })},
		{"png zero width", damage("png-rgb", func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[16:], 0)
			binary.BigEndian.PutUint32(b[29:], crc32.ChecksumIEEE(b[12:29]))
			return b
		})},
		{"png pixel data checksum", damage("png-rgba", func(b []byte) []byte {
			i := bytes.Index(b, []byte("IDAT"))
			b[i+10] ^= 0x55
			return b
		})},
		{"jpeg zero components", damage("jpeg", func(b []byte) []byte {
			i := bytes.Index(b, []byte{0xFF, 0xC0})
			b[i+9] = 0
			return b
		})},
		{"jpeg scan replaced by EOI", damage("jpeg", func(b []byte) []byte {
			i := bytes.Index(b, []byte{0xFF, 0xDA})
			return append(b[:i], 0xFF, 0xD9)
		})},
		{"gif bad LZW code size", damage("gif", func(b []byte) []byte {
			i := bytes.IndexByte(b[13+48:], 0x2C) + 13 + 48 // image descriptor after the 16-color table
			b[i+10] = 12
			return b
		})},
		{"bmp 7 bits per pixel", damage("bmp", func(b []byte) []byte { b[28] = 7; return b })},
		{"tiff IFD offset out of file", damage("tiff-nrgba", func(b []byte) []byte {
			binary.LittleEndian.PutUint32(b[4:], 0xFFFFFF00)
			return b
		})},
		{"webp bad VP8L signature", damage("webp-lossless", func(b []byte) []byte { b[20] = 0; return b })},
		{"webp RIFF only", []byte("RIFF\x04\x00\x00\x00WEBPVP8L")},
	}
	spec := Spec{Width: 32, Height: 32, Mode: Letterbox, DType: dtype.F16}
	tr := mustTransformer(t, spec)
	out := make([]byte, spec.OutputBytes())
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tr.Apply(tt.data, out)
			if !errors.Is(err, ErrDecode) {
				t.Fatalf("Apply: %v, want ErrDecode", err)
			}
			t.Log(err)
		})
	}
}

// Every prefix of every test file: never a panic, every error wraps
// ErrDecode, and a file cut to half its length or less always fails (the
// pixel data of these noisy images cannot be complete).
func TestTruncatedInputs(t *testing.T) {
	spec := Spec{Width: 32, Height: 32, Mode: Letterbox, DType: dtype.F16}
	tr := mustTransformer(t, spec)
	out := make([]byte, spec.OutputBytes())
	for _, in := range formatInputs(t) {
		t.Run(in.name, func(t *testing.T) {
			for n := range len(in.data) {
				_, err := tr.Apply(in.data[:n], out)
				if err != nil && !errors.Is(err, ErrDecode) {
					t.Fatalf("prefix %d: %v does not wrap ErrDecode", n, err)
				}
				if err == nil && n <= len(in.data)/2 {
					t.Fatalf("prefix %d of %d decoded without error", n, len(in.data))
				}
			}
		})
	}
}

// The version strings in DecoderIdentity must follow go.mod: bumping a
// dependency that decides pixels without bumping the identity would let a
// new decoder write into an old warehouse version.
func TestDecoderIdentityMatchesGoMod(t *testing.T) {
	mod, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for module, constant := range map[string]string{
		"golang.org/x/image":      xImageVersion,
		"github.com/x448/float16": float16Version,
	} {
		m := regexp.MustCompile(regexp.QuoteMeta(module) + `\s+(v\S+)`).FindSubmatch(mod)
		if m == nil {
			t.Fatalf("go.mod does not require %s", module)
		}
		if string(m[1]) != constant {
			t.Errorf("go.mod has %s %s, DecoderIdentity says %s: update the constant (and expect new warehouse versions)", module, m[1], constant)
		}
	}
	id := DecoderIdentity()
	for _, part := range []string{"x/image=" + xImageVersion, "float16=" + float16Version, "transforms/" + pixelCodeVersion} {
		if !strings.Contains(id, part) {
			t.Errorf("DecoderIdentity %q lacks %q", id, part)
		}
	}
	if DecoderIdentity() != id {
		t.Error("DecoderIdentity is not stable")
	}
}
