package transforms

import (
	"fmt"
	"testing"
)

// BenchmarkResample times the two resampling passes alone (no decode, no
// normalization), as Transformer.resample runs them: every source row
// horizontally into a packed RGB intermediate, then every output row
// vertically. Throughput is in bytes of source pixels.
func BenchmarkResample(b *testing.B) {
	cases := []struct{ w, h, bpp, nw, nh int }{
		{1920, 1080, 3, 384, 216}, // 9 taps both ways
		{1280, 720, 3, 224, 126},  // 12 taps (720p PNG -> 224)
		{1920, 1080, 3, 224, 126}, // 18 taps (1080p PNG -> 224)
		{1280, 720, 4, 224, 126},  // RGBA
		{3840, 2160, 3, 640, 360}, // 12 taps
		{3840, 2160, 3, 224, 126}, // 35 taps
		{480, 270, 3, 384, 216},   // 3 taps (1080p JPEG at 1/4 -> 384)
		{1920, 1080, 3, 640, 360}, // 5 taps
	}
	for _, c := range cases {
		name := fmt.Sprintf("%dx%dx%d_to_%dx%d", c.w, c.h, c.bpp, c.nw, c.nh)
		b.Run(name, func(b *testing.B) {
			src := make([]byte, c.bpp*c.w*c.h)
			fillRandom(src, 1)
			var hz, vt axisWeights
			hz.prepare(c.w, c.nw)
			vt.prepare(c.h, c.nh)
			rowLen := 3 * c.nw
			inter := make([]byte, rowLen*c.h)
			row := make([]byte, rowLen)
			acc := make([]int32, rowLen)
			b.SetBytes(int64(len(src)))
			for b.Loop() {
				for y := range c.h {
					hz.resampleRow(inter[y*rowLen:(y+1)*rowLen], src[y*c.bpp*c.w:], c.bpp)
				}
				for y := range c.nh {
					vt.resampleColumn(row, acc, inter, rowLen, y)
				}
			}
		})
	}
}
