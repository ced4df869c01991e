package transforms

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// stdCanary pins what the standard library's decoders make of a small
// checked-in corpus (testdata/stdcanary, written by ImageMagick): the
// sha256 of the image type, bounds and straight RGB (referenceRGB). The
// Go toolchain is not in DecoderIdentity: PNG and GIF decoding is exact by
// their specs and the common JPEG path is jpegdec's, so only the streams
// left to image/jpeg (progressive, CMYK; baseline stands for the fallback
// path as a whole) could change pixels under a Go upgrade. If this test
// fails after one, the upgrade changed output pixels: bump
// pixelCodeVersion (a new warehouse version), then update the sums here.
// (WebP goes through golang.org/x/image, whose version is in the identity.)
var stdCanary = map[string]string{
	"baseline-420.jpg": "d91ebd0d06489b1b2db151368959861ab16d57743ebd4b2f8b0574f25b0d4904",
	"cmyk.jpg":         "869093ac15db04406965becca8de1ba6df3b6b1a8af26d2ba7412ba077317e9d",
	"progressive.jpg":  "d91ebd0d06489b1b2db151368959861ab16d57743ebd4b2f8b0574f25b0d4904",
	"gray16.png":       "eb96cac792b76c24558238223d72b48dc3da1c45b08920758c6dc5270b47ab6c",
	"paletted.png":     "41e0fbbaadebfd5c46abf15e5d17cadc02627265d7d763e45a2042ec446bae6a",
	"rgba.png":         "c139b3147aa349e77c342572a8bd72c33d0165030764c83b9e12f71ba43881d7",
	"paletted.gif":     "b067e7f532536718098bfbf3b65a4c5392248ee905779e826f3e78d184c65e31",
}

func TestStdDecoderCanary(t *testing.T) {
	for name, want := range stdCanary {
		data, err := os.ReadFile(filepath.Join("testdata", "stdcanary", name))
		if err != nil {
			t.Fatal(err)
		}
		f := sniffFormat(data)
		if f == nil {
			t.Fatalf("%s: unknown format", name)
		}
		img, err := callDecoder(f.decode, data)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		h := sha256.New()
		fmt.Fprintf(h, "%T %v\n", img, img.Bounds())
		h.Write(straightPixels(img))
		if got := hex.EncodeToString(h.Sum(nil)); got != want {
			t.Errorf("%s: %s decodes to sha256 %s, pinned %s", name, f.name, got, want)
		}
	}
}
