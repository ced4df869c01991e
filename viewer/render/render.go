// Package render draws warehouse samples as pictures a person can check:
// the stored tensor turned back into RGB, the letterbox content outlined,
// every box outlined in its class colour with its class name. `inspect
// --png` and the viewer (serve, report) draw through it, so a box looks
// the same wherever it is shown.
package render

import (
	"image"
	"image/color"
	"math"
	"strconv"

	"github.com/x448/float16"
	"golang.org/x/image/draw"
	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"

	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// classColors are distinct, saturated outline colours, by class index.
var classColors = []color.RGBA{
	{255, 64, 64, 255}, {64, 255, 64, 255}, {64, 160, 255, 255}, {255, 220, 0, 255},
	{255, 0, 255, 255}, {0, 255, 255, 255}, {255, 128, 0, 255}, {160, 96, 255, 255},
}

// ClassColor is the outline colour of class index i.
func ClassColor(i int) color.RGBA {
	return classColors[((i%len(classColors))+len(classColors))%len(classColors)]
}

// RefusedColor outlines the boxes of a label validation refused: white,
// which no class colour is, so a refused box never passes for a kept one.
var RefusedColor = color.RGBA{255, 255, 255, 255}

// LetterboxColor outlines the image content inside the letterbox.
var LetterboxColor = color.RGBA{128, 128, 128, 255}

// Box is one box to draw: normalized corners (x0, y0, x1, y1, in [0, 1]
// of the picture), the name written above it and its colour.
type Box struct {
	Box   [4]float32
	Name  string
	Color color.RGBA
}

// SampleBoxes are sample s's boxes in their class colours, named from the
// manifest's class table.
func SampleBoxes(m *warehouse.Manifest, s warehouse.Sample) []Box {
	classes := s.ClassIndex()
	boxes := s.Boxes()
	out := make([]Box, len(boxes))
	for j, b := range boxes {
		out[j] = Box{Box: b, Name: ClassName(m, classes[j]), Color: ClassColor(int(classes[j]))}
	}
	return out
}

// ClassName is the manifest's name of class index idx ("class N" when the
// table does not list it).
func ClassName(m *warehouse.Manifest, idx int32) string {
	for _, c := range m.Classes {
		if c.Index == int(idx) {
			return c.Name
		}
	}
	return "class " + strconv.Itoa(int(idx))
}

// Sample turns sample s back into an RGB picture at the warehouse's target
// size (Picture), outlines the letterbox content rectangle in grey
// (dashed) and draws every box (Draw).
func Sample(m *warehouse.Manifest, s warehouse.Sample) *image.RGBA {
	return SampleScaled(m, s, m.Transform.TargetWidth, m.Transform.TargetHeight)
}

// SampleScaled is Sample at w x h pixels: the picture is scaled first and
// the outlines drawn at the new size, so thumbnails keep 2-pixel boxes.
func SampleScaled(m *warehouse.Manifest, s warehouse.Sample, w, h int) *image.RGBA {
	img := Picture(m, s)
	tw, th := m.Transform.TargetWidth, m.Transform.TargetHeight
	if w != tw || h != th {
		img = Scale(img, w, h)
	}
	meta := s.Meta()
	if int(meta.ResizedWidth) != tw || int(meta.ResizedHeight) != th {
		sx, sy := float64(w)/float64(tw), float64(h)/float64(th)
		x0, y0 := int(math.Round(float64(meta.PadX)*sx)), int(math.Round(float64(meta.PadY)*sy))
		x1 := int(math.Round(float64(int(meta.PadX)+int(meta.ResizedWidth))*sx)) - 1
		y1 := int(math.Round(float64(int(meta.PadY)+int(meta.ResizedHeight))*sy)) - 1
		dashedRect(img, x0, y0, x1, y1, LetterboxColor)
	}
	Draw(img, SampleBoxes(m, s))
	return img
}

// Picture is sample s's stored image as RGB: each stored value v is
// de-normalized (v*std + mean when the warehouse normalizes, v otherwise),
// scaled by 255, rounded and clamped; a U8 image is drawn as stored.
func Picture(m *warehouse.Manifest, s warehouse.Sample) *image.RGBA {
	t := m.Transform
	w, h := t.TargetWidth, t.TargetHeight
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	if s.DType() == shard.U8 {
		// The stored pixels are the image before normalization.
		pix := s.ImageU8()
		for c := range 3 {
			for i, v := range pix[c*w*h : (c+1)*w*h] {
				img.Pix[4*i+c] = v
			}
		}
	} else {
		values := imageFloat32(s)
		normalized := len(t.Mean) == 3 && len(t.Std) == 3
		for c := range 3 {
			for i, v := range values[c*w*h : (c+1)*w*h] {
				x := float64(v)
				if normalized {
					x = x*t.Std[c] + t.Mean[c]
				}
				img.Pix[4*i+c] = uint8(math.Round(math.Min(255, math.Max(0, x*255))))
			}
		}
	}
	for i := range w * h {
		img.Pix[4*i+3] = 255
	}
	return img
}

// Scale returns img resized to w x h (bilinear).
func Scale(img image.Image, w, h int) *image.RGBA {
	out := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.ApproxBiLinear.Scale(out, out.Bounds(), img, img.Bounds(), draw.Src, nil)
	return out
}

// Fit is the size of a w x h picture scaled to fit inside limit x limit,
// never enlarged, aspect ratio kept.
func Fit(w, h, limit int) (int, int) {
	if w <= limit && h <= limit || w <= 0 || h <= 0 {
		return w, h
	}
	if w >= h {
		return limit, max(1, int(math.Round(float64(h)*float64(limit)/float64(w))))
	}
	return max(1, int(math.Round(float64(w)*float64(limit)/float64(h)))), limit
}

// Draw outlines every box in its colour (2 pixels, inside the box) with
// its name above it.
func Draw(img *image.RGBA, boxes []Box) {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	for _, b := range boxes {
		x0, y0, x1, y1 := BoxPixels(b.Box, w, h)
		for k := range 2 {
			rect(img, x0+k, y0+k, x1-k, y1-k, b.Color)
		}
		label(img, x0, y0, b.Name, b.Color)
	}
}

// BoxPixels are the first and last pixel columns and rows a normalized box
// covers in a w x h image.
func BoxPixels(b [4]float32, w, h int) (x0, y0, x1, y1 int) {
	clampTo := func(v, n int) int { return min(max(v, 0), n-1) }
	x0 = clampTo(int(math.Floor(float64(b[0])*float64(w))), w)
	y0 = clampTo(int(math.Floor(float64(b[1])*float64(h))), h)
	x1 = clampTo(int(math.Ceil(float64(b[2])*float64(w)))-1, w)
	y1 = clampTo(int(math.Ceil(float64(b[3])*float64(h)))-1, h)
	return x0, y0, max(x0, x1), max(y0, y1)
}

// imageFloat32 returns the sample's image values as float32, CHW.
func imageFloat32(s warehouse.Sample) []float32 {
	if s.DType() == shard.F32 {
		return s.ImageF32()
	}
	bits := s.ImageF16()
	out := make([]float32, len(bits))
	for i, b := range bits {
		out[i] = float16.Frombits(b).Float32()
	}
	return out
}

func rect(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	if x1 < x0 || y1 < y0 {
		return
	}
	for x := x0; x <= x1; x++ {
		img.SetRGBA(x, y0, c)
		img.SetRGBA(x, y1, c)
	}
	for y := y0; y <= y1; y++ {
		img.SetRGBA(x0, y, c)
		img.SetRGBA(x1, y, c)
	}
}

// DashedRect outlines the pixel rectangle (x0, y0)-(x1, y1) in c, dashed.
func DashedRect(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	dashedRect(img, x0, y0, x1, y1, c)
}

func dashedRect(img *image.RGBA, x0, y0, x1, y1 int, c color.RGBA) {
	for x := x0; x <= x1; x++ {
		if x/4%2 == 0 {
			img.SetRGBA(x, y0, c)
			img.SetRGBA(x, y1, c)
		}
	}
	for y := y0; y <= y1; y++ {
		if y/4%2 == 0 {
			img.SetRGBA(x0, y, c)
			img.SetRGBA(x1, y, c)
		}
	}
}

// label writes text in c on a black strip just above (x, y), or just
// inside the box when there is no room above.
func label(img *image.RGBA, x, y int, text string, c color.RGBA) {
	face := basicfont.Face7x13
	width := font.MeasureString(face, text).Ceil()
	top := y - 13
	if top < 0 {
		top = y + 2
	}
	for yy := top; yy < top+13 && yy < img.Rect.Max.Y; yy++ {
		for xx := x; xx < x+width+2 && xx < img.Rect.Max.X; xx++ {
			img.SetRGBA(xx, yy, color.RGBA{0, 0, 0, 255})
		}
	}
	d := font.Drawer{Dst: img, Src: image.NewUniform(c), Face: face, Dot: fixed.P(x+1, top+10)}
	d.DrawString(text)
}
