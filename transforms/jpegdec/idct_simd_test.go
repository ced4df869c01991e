package jpegdec

import (
	"bytes"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
)

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

// TestIDCTSIMD: reconstruct through the AVX2 IDCTs (where the CPU has
// them) writes the bytes the Go IDCTs write, for 30,000 blocks of every
// kind (randomBlock) per scale, into a destination whose other bytes stay
// as they were.
func TestIDCTSIMD(t *testing.T) {
	if !idctSIMD {
		t.Skip("no AVX2 here: reconstruct runs the Go IDCTs")
	}
	for _, tc := range []struct {
		scale, side int
		goIDCT      func(b *[blockSize]int32, dst []byte, stride int)
	}{
		{1, 8, func(b *[blockSize]int32, dst []byte, stride int) {
			idct8(b)
			for y := range 8 {
				for x := range 8 {
					dst[y*stride+x] = level8(b[8*y+x])
				}
			}
		}},
		{2, 4, idct4},
		{4, 2, idct2},
	} {
		rng := rand.New(rand.NewPCG(uint64(tc.scale), 6))
		stride := 2*tc.side + 3
		for n := range 30000 {
			blk := randomBlock(rng, n)
			want := bytes.Repeat([]byte{0xA5}, tc.side*stride)
			got := bytes.Repeat([]byte{0xA5}, tc.side*stride)
			b := blk
			tc.goIDCT(&b, want, stride)
			b = blk
			reconstruct(&b, tc.scale, got, stride)
			if !bytes.Equal(got, want) {
				t.Fatalf("scale 1/%d, block %d %v:\nSIMD %v\nGo   %v", tc.scale, n, blk, got, want)
			}
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
