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
// corpus at every scale. The decoder is integer-only, so this holds on
// every architecture: `GOARCH=arm64 go test -exec qemu-aarch64 -run
// TestOutputsPinned ./transforms/jpegdec/` checks arm64 against the amd64
// value. A change here is a change of output: bump Version.
const seedOutputsSHA256 = "198989b73d85d0b9bfc66eca5544647af1e61e257ca62213a4a1b4b71d6bb315"

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
		for _, k := range []int{1, 2, 4, 8} {
			m, err := d.Decode(data, k)
			if err != nil {
				fmt.Fprintf(h, "%s 1/%d: %v\n", name, k, err)
				continue
			}
			decoded++
			img := decodedImage(m)
			b := img.Bounds()
			fmt.Fprintf(h, "%s 1/%d: %v %v\n", name, k, m.Color, b)
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
