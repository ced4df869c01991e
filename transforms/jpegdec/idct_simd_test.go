package jpegdec

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
)

// TestIDCT8LevelSIMD: reconstruct at scale 1 through idct8Level (where the
// CPU has AVX2) writes the bytes idct8 and level8 in Go write, for blocks
// of every kind (randomBlock), into a destination whose other bytes stay
// as they were.
func TestIDCT8LevelSIMD(t *testing.T) {
	if !idctSIMD {
		t.Skip("no AVX2 here: reconstruct is idct8 in Go")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	const stride = 13
	for n := range 30000 {
		blk := randomBlock(rng, n)
		want := bytes.Repeat([]byte{0xA5}, 8*stride)
		got := bytes.Repeat([]byte{0xA5}, 8*stride)
		b := blk
		idct8(&b)
		for y := range 8 {
			for x := range 8 {
				want[y*stride+x] = level8(b[8*y+x])
			}
		}
		b = blk
		reconstruct(&b, 1, got, stride)
		if !bytes.Equal(got, want) {
			t.Fatalf("block %d %v:\nSIMD %v\nGo   %v", n, blk, got, want)
		}
	}
}

// randomBlock is block n of the SIMD tests' mix: DC only, sparse, dense
// dequantized, anything a corrupt file can dequantize to (so that the
// passes overflow int32), one row or one column, blocks whose columns and
// rows are zero past their first coefficient in some places only, and a
// large first column alone (whose work rows take the shortcut where the
// general formula would overflow).
func randomBlock(rng *rand.Rand, n int) (blk [blockSize]int32) {
	switch n % 7 {
	case 0:
		blk[0] = int32(rng.IntN(4096)) - 2048
	case 1:
		for range 1 + rng.IntN(6) {
			blk[rng.IntN(blockSize)] = int32(rng.IntN(512)) - 256
		}
	case 2:
		for i := range blk {
			blk[i] = (int32(rng.IntN(64)) - 32) * int32(1+rng.IntN(60))
		}
	case 3:
		for i := range blk {
			blk[i] = int32(rng.Uint32()>>1) - 1<<30
		}
	case 4:
		for i := range 8 {
			if n%2 == 0 {
				blk[8*3+i] = int32(rng.IntN(2048)) - 1024
			} else {
				blk[8*i+5] = int32(rng.IntN(2048)) - 1024
			}
		}
	case 6: // column 0 only, large: every work row is its first value only
		for r := range 8 {
			blk[8*r] = int32(rng.Uint32()>>2) - 1<<29
		}
	case 5: // the first row and column large, a few columns with more
		for i := range 8 {
			blk[i] = int32(rng.Uint32()>>4) - 1<<27
			blk[8*i] = int32(rng.Uint32()>>4) - 1<<27
		}
		for range rng.IntN(4) {
			c := rng.IntN(8)
			for r := 1; r < 8; r++ {
				blk[8*r+c] = int32(rng.IntN(200)) - 100
			}
		}
	}
	return blk
}

// TestIDCT4SIMD: reconstruct at scale 2 through idct4SIMD (where the CPU
// has AVX2) writes the bytes idct4 in Go writes.
func TestIDCT4SIMD(t *testing.T) {
	if !idctSIMD {
		t.Skip("no AVX2 here: reconstruct is idct4 in Go")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	const stride = 7
	for n := range 30000 {
		blk := randomBlock(rng, n)
		want := bytes.Repeat([]byte{0xA5}, 4*stride)
		got := bytes.Repeat([]byte{0xA5}, 4*stride)
		b := blk
		idct4(&b, want, stride)
		b = blk
		reconstruct(&b, 2, got, stride)
		if !bytes.Equal(got, want) {
			t.Fatalf("block %d %v:\nSIMD %v\nGo   %v", n, blk, got, want)
		}
	}
}

// TestIDCT8LevelGenerated: idct_amd64.s is what idct_amd64_gen.py writes.
func TestIDCT8LevelGenerated(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 to run idct_amd64_gen.py")
	}
	want, err := exec.Command(py, "idct_amd64_gen.py").Output()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("idct_amd64.s")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("idct_amd64.s is not idct_amd64_gen.py's output: python3 idct_amd64_gen.py > idct_amd64.s")
	}
}
