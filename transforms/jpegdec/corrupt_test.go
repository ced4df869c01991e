package jpegdec

import (
	"bytes"
	"errors"
	"image"
	"image/jpeg"
	"testing"
)

// goodJPEG is a 40x24 4:2:0 baseline file from image/jpeg's encoder.
func goodJPEG(t *testing.T) []byte {
	t.Helper()
	src := image.NewYCbCr(image.Rect(0, 0, 40, 24), image.YCbCrSubsampleRatio420)
	for i := range src.Y {
		src.Y[i] = byte(i * 13)
	}
	for i := range src.Cb {
		src.Cb[i], src.Cr[i] = byte(i*5), byte(200-i)
	}
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, src, &jpeg.Options{Quality: 90}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// segment returns the offset of the first marker m (its 0xFF).
func segment(t *testing.T, data []byte, m byte) int {
	t.Helper()
	i := bytes.Index(data, []byte{0xFF, m})
	if i < 0 {
		t.Fatalf("no marker %02X", m)
	}
	return i
}

// Each corruption fails with its own exact error, and image/jpeg rejects
// the same bytes (or, for ErrUnsupported, decides them itself).
func TestCorruption(t *testing.T) {
	good := goodJPEG(t)
	sof, dht, dqt, sos := segment(t, good, markerSOF0), segment(t, good, markerDHT), segment(t, good, markerDQT), segment(t, good, markerSOS)
	patch := func(off int, b ...byte) []byte {
		out := bytes.Clone(good)
		copy(out[off:], b)
		return out
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "jpegdec: invalid JPEG: missing SOI marker"},
		{"no SOI", patch(1, 0xD9), "jpegdec: invalid JPEG: missing SOI marker"},
		{"truncated header", good[:sof+5], "jpegdec: invalid JPEG: unexpected EOF"},
		{"truncated scan", good[:sos+60], "jpegdec: invalid JPEG: short Huffman data"},
		{"no EOI", good[:len(good)-2], "jpegdec: invalid JPEG: unexpected EOF"},
		{"SOF precision 12", patch(sof+4, 12), "jpegdec: unsupported JPEG: 12-bit precision"},
		{"SOF component count", patch(sof+9, 2), "jpegdec: invalid JPEG: SOF has wrong length"},
		{"SOF repeated id", patch(sof+13, 1), "jpegdec: invalid JPEG: repeated component identifier"},
		{"SOF Tq 4", patch(sof+12, 4), "jpegdec: invalid JPEG: bad Tq value"},
		{"SOF sampling 3", patch(sof+11, 0x33), "jpegdec: invalid JPEG: unsupported luma/chroma subsampling ratio"},
		{"SOF sampling 0", patch(sof+11, 0x20), "jpegdec: invalid JPEG: luma/chroma subsampling ratio"},
		{"SOF chroma above luma", patch(sof+14, 0x44), "jpegdec: invalid JPEG: unsupported luma/chroma subsampling ratio"},
		{"too large", patch(sof+5, 0xFF, 0xFF, 0xFF, 0xFF), "jpegdec: image too large: 65535x65535 exceeds 67108864 pixels"},
		{"zero height", patch(sof+5, 0, 0), "jpegdec: unsupported JPEG: frame size 40x0 (DNL)"},
		{"progressive", patch(sof+1, markerSOF2), "jpegdec: unsupported JPEG: progressive"},
		{"arithmetic", patch(sof+1, 0xC9), "jpegdec: unsupported JPEG: SOF9 frame"},
		{"DQT Pq 2", patch(dqt+4, 0x20), "jpegdec: invalid JPEG: bad Pq value"},
		{"DQT length", patch(dqt+2, 0, 10), "jpegdec: invalid JPEG: DQT has wrong length"},
		{"DHT Tc 2", patch(dht+4, 0x20), "jpegdec: invalid JPEG: bad Tc value"},
		{"DHT Th 2 in baseline", patch(dht+4, 0x02), "jpegdec: invalid JPEG: bad Th value"},
		{"DHT no codes", patch(dht+5, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), "jpegdec: invalid JPEG: Huffman table has zero length"},
		{"DHT over-subscribed", patch(dht+5, 3), "jpegdec: unsupported JPEG: over-subscribed Huffman code lengths"},
		{"SOS unknown component", patch(sos+5, 9), "jpegdec: invalid JPEG: unknown component selector"},
		{"SOS length", patch(sos+3, 9), "jpegdec: invalid JPEG: SOS has wrong length"},
		{"SOS Td 2", patch(sos+6, 0x20), "jpegdec: invalid JPEG: bad Td value"},
		{"marker inside scan", patch(sos+20, 0xFF, 0xFF, 0xFF, 0xFF), "jpegdec: invalid JPEG: short Huffman data"},
		{"unknown marker", patch(dqt+1, 0x02), "jpegdec: invalid JPEG: unknown marker"},
	}
	// Restart markers out of sequence, in an ImageMagick file with one
	// restart per MCU.
	for _, data := range makeCorpus(t, []corpusCase{{w: 48, h: 16, quality: 90, sampling: "2x2", restart: 1}}) {
		rst := segment(t, data, markerRST0)
		wrong := bytes.Clone(data)
		wrong[rst+1] = markerRST0 + 3
		tests = append(tests, struct {
			name string
			data []byte
			want string
		}{"RST out of sequence", wrong, "jpegdec: invalid JPEG: bad RST marker"})
	}
	var d Decoder
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.Decode(tc.data, 1)
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
			if errors.Is(err, ErrUnsupported) || errors.Is(err, ErrTooLarge) {
				return
			}
			if !errors.Is(err, ErrFormat) {
				t.Errorf("%v does not wrap ErrFormat", err)
			}
			if _, stdErr := jpeg.Decode(bytes.NewReader(tc.data)); stdErr == nil {
				t.Errorf("image/jpeg decodes what jpegdec rejects")
			}
		})
	}
}
