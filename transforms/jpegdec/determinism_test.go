package jpegdec

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// seedOutputsSHA256 pins the samples Decode makes of the checked-in seed
// corpus at every scale, with and without FancyScaled. The decoder is integer-only, so this holds on
// every architecture: `GOARCH=arm64 go test -exec qemu-aarch64 -run
// TestOutputsPinned ./transforms/jpegdec/` checks arm64 against the amd64
// value. A change here is a change of output: bump Version.
const seedOutputsSHA256 = "a5d40e5c67ce1e664e8fd1da75eb0bab901a44d37768f8f37a0295356dbd9574"

func TestOutputsPinned(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	h := sha256.New()
	var d Decoder
	decoded := 0
	for _, name := range names {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		data := seedBytes(t, string(raw))
		for _, mode := range []struct {
			k     int
			fancy bool
		}{{1, false}, {2, false}, {4, false}, {8, false}, {2, true}, {4, true}, {8, true}} {
			k := mode.k
			d.FancyScaled = mode.fancy
			m, err := d.Decode(data, k)
			if err != nil {
				fmt.Fprintf(h, "%s 1/%d %v: %v\n", name, k, mode.fancy, err)
				continue
			}
			decoded++
			img := decodedImage(m)
			b := img.Bounds()
			fmt.Fprintf(h, "%s 1/%d %v: %v %v\n", name, k, mode.fancy, m.Color, b)
			for y := b.Min.Y; y < b.Max.Y; y++ {
				for x := b.Min.X; x < b.Max.X; x++ {
					s := samplesAt(img, x, y)
					h.Write(s[:])
				}
			}
		}
	}
	if decoded < 40 {
		t.Fatalf("only %d decodes of the seed corpus succeeded", decoded)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != seedOutputsSHA256 {
		t.Fatalf("seed corpus outputs sha256 %s, pinned %s", got, seedOutputsSHA256)
	}
}

// seedBytes parses a Go fuzz corpus file holding one []byte.
func seedBytes(t *testing.T, file string) []byte {
	t.Helper()
	_, body, ok := strings.Cut(file, "\n")
	body = strings.TrimSpace(body)
	if !ok || !strings.HasPrefix(body, "[]byte(") || !strings.HasSuffix(body, ")") {
		t.Fatalf("not a []byte corpus file: %.40q", file)
	}
	s, err := strconv.Unquote(body[len("[]byte(") : len(body)-1])
	if err != nil {
		t.Fatal(err)
	}
	return []byte(s)
}
