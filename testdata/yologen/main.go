// Command yologen writes the demo Ultralytics YOLO dataset in testdata/yolo:
// a data.yaml with three classes, a train split of synthetic images with
// boxes that line up with the drawn shapes, most of them clean and a
// handful with one planted defect each, and a small clean val split.
//
//	go run ./testdata/yologen -out testdata/yolo
//
// The output is a pure function of -seed and the Go version (images are
// drawn from a seeded PCG generator and encoded by image/png and
// image/jpeg). Image sizes are powers of two and box corners whole pixels,
// so every normalised value in a label is a short exact decimal and the
// pixel boxes a reader computes, (cx - w/2) * W and so on, are exact.
//
// It replaces only the files and folders it writes. README.md (every image,
// its boxes in pixels, every planted defect and the reasons it must get)
// and expected.jsonl (the same, one scanned sample per line, in scan order)
// are written from the same table as the data.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

func main() {
	out := flag.String("out", "", "output directory (the dataset root), e.g. testdata/yolo")
	seed := flag.Uint64("seed", 20240914, "seed of the pseudo-random scene generator")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "yologen: -out is required")
		os.Exit(2)
	}
	if err := generate(*out, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "yologen:", err)
		os.Exit(1)
	}
}

// classes is the names list of data.yaml; each class is drawn as a shape
// that fills its box.
var classes = []string{"disc", "square", "diamond"}

var classColors = []color.RGBA{
	{220, 70, 60, 255},   // disc
	{235, 235, 240, 255}, // square
	{60, 170, 90, 255},   // diamond
}

// defect is one planted problem: how the sample is written differently and
// what the scan must report for it.
type defect struct {
	id      string
	what    string   // description for the README
	reasons []string // expected reason codes at scan time
	note    string   // anything else the README should say
}

var (
	defMissingLabel = defect{"missing_label", "no label file (the image shows no object)", []string{"empty"}, "label_path is empty; kept unless skip_empty"}
	defEmptyLabel   = defect{"empty_label", "the label file is empty (0 bytes; the image shows no object)", []string{"empty"}, "kept unless skip_empty"}
	defMalformed    = defect{"malformed", "a good box, then the line `1 0.5 0.5 0.25` (4 fields)", []string{"bad_schema"}, "valid_boxes 1: the good box is still resolved"}
	defUnknownClass = defect{"unknown_class", "a good box, then a line with class 3 (names has 3 classes: 0..2)", []string{"unknown_class"}, "valid_boxes 1"}
	defZeroWidth    = defect{"zero_width", "a box with w = 0", []string{"invalid_bbox"}, ""}
	defFarOutside   = defect{"far_outside", "a box centred at cx = 1.5 (x0 = 176 px in a 128 px wide image)", []string{"bbox_out_of_bounds"}, ""}
	defSlightly     = defect{"slightly_outside", "a box from x = -0.25 to x = 128.25 px: outside by less than 0.5 px", nil, "clean: clamped to [0, 128]"}
	defPolygon      = defect{"polygon", "the diamond is labelled as a 4-point polygon (`2 x1 y1 ... x4 y4`)", nil, "clean: the polygon becomes its bounding box"}
	defUndecodable  = defect{"undecodable", "the .jpg file holds text, not a JPEG; its label has one good box", []string{"decode_error"}, "width and height 0, no boxes; valid_boxes 1 (the box is within [0,1])"}
	defDuplicate    = defect{"duplicate_line", "the first box line is written twice", nil, "clean: the duplicate line is dropped (entry attribute duplicate_lines 1)"}
	defCRLF         = defect{"crlf", "the label file has CRLF line endings", nil, "clean"}
	defUpperExt     = defect{"upper_ext", "the extension is upper case (.PNG)", nil, "clean: extensions compare without case"}
)

// imageSpec is one image of a split.
type imageSpec struct {
	rel    string // path relative to the dataset root
	format string // jpeg or png
	w, h   int
	defect defect
}

// trainImages: frame_1 .. frame_29 in images/train (JPEG 128x64, every
// fourth a PNG 64x64) and one image in a nested folder.
func trainImages() []imageSpec {
	defects := map[int]defect{
		3: defMissingLabel, 5: defEmptyLabel, 7: defMalformed, 9: defUnknownClass, 11: defZeroWidth,
		13: defFarOutside, 15: defSlightly, 17: defPolygon, 19: defUndecodable, 21: defDuplicate,
		23: defCRLF, 25: defUpperExt,
	}
	var out []imageSpec
	for i := 1; i <= 29; i++ {
		s := imageSpec{rel: fmt.Sprintf("images/train/frame_%d.jpg", i), format: "jpeg", w: 128, h: 64, defect: defects[i]}
		if i%4 == 0 {
			s.rel, s.format, s.w, s.h = fmt.Sprintf("images/train/frame_%d.png", i), "png", 64, 64
		}
		if s.defect.id == defUpperExt.id {
			s.rel, s.format, s.w, s.h = fmt.Sprintf("images/train/frame_%d.PNG", i), "png", 64, 64
		}
		out = append(out, s)
	}
	return append(out, imageSpec{rel: "images/train/night/frame_1.jpg", format: "jpeg", w: 128, h: 64})
}

// valImages: six clean portrait PNGs.
func valImages() []imageSpec {
	var out []imageSpec
	for i := 1; i <= 6; i++ {
		out = append(out, imageSpec{rel: fmt.Sprintf("images/val/val_%d.png", i), format: "png", w: 64, h: 128})
	}
	return out
}

// owned are the entries of the output directory this program writes and
// may therefore replace.
var owned = []string{"data.yaml", "images", "labels", "README.md", "expected.jsonl"}

const dataYAML = `# Demo Ultralytics YOLO dataset for warehouse-etl.
# Written by: go run ./testdata/yologen -out testdata/yolo (see README.md).
path: .
train: images/train
val: images/val
names:
  - disc
  - square
  - diamond
`

// object is one drawn and labelled shape, corners in whole pixels.
type object struct {
	class          int
	x0, y0, x1, y1 int
}

// box is an expected box in source pixels, after clamping.
type box struct {
	Class int     `json:"class"`
	Name  string  `json:"name"`
	X0    float64 `json:"x0"`
	Y0    float64 `json:"y0"`
	X1    float64 `json:"x1"`
	Y1    float64 `json:"y1"`
}

// expected is one sample as the scan must report it.
type expected struct {
	Split       string   `json:"split"`
	Seq         int      `json:"seq"`
	Source      string   `json:"source"`
	SourceIndex int      `json:"source_index"`
	Frame       int      `json:"frame"`
	Image       string   `json:"image_path"`
	Label       string   `json:"label_path"`
	Width       int      `json:"width"`
	Height      int      `json:"height"`
	Boxes       []box    `json:"boxes"`
	ValidBoxes  int      `json:"valid_boxes"`
	Reasons     []string `json:"reasons"`
	Defect      string   `json:"defect,omitempty"`
}

func generate(out string, seed uint64) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, name := range owned {
		if err := os.RemoveAll(filepath.Join(out, name)); err != nil {
			return err
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	w := &writer{root: out}
	w.file("data.yaml", []byte(dataYAML))
	var all []expected
	splits := []struct {
		name   string
		images []imageSpec
	}{{"train", trainImages()}, {"val", valImages()}}
	for _, sp := range splits {
		for i, img := range sp.images {
			e := writeImage(w, rng, img)
			e.Split, e.Source, e.Frame, e.Seq = sp.name, "images/"+sp.name, i, i
			all = append(all, e)
		}
	}
	w.file("README.md", []byte(readme(seed, all)))
	var jl bytes.Buffer
	for _, e := range all {
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		jl.Write(b)
		jl.WriteByte('\n')
	}
	w.file("expected.jsonl", jl.Bytes())
	return w.err
}

// writer writes files under root and keeps the first error.
type writer struct {
	root string
	err  error
}

func (w *writer) file(rel string, data []byte) {
	if w.err != nil {
		return
	}
	p := filepath.Join(w.root, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		w.err = err
		return
	}
	w.err = os.WriteFile(p, data, 0o644)
}

// writeImage draws, encodes and labels one image and returns what the scan
// must report for it (Source, Frame and Seq are the caller's).
func writeImage(w *writer, rng *rand.Rand, img imageSpec) expected {
	d := img.defect
	objs := make([]object, 1+rng.IntN(3))
	for i := range objs {
		objs[i] = randomObject(rng, img.w, img.h)
	}
	switch d.id {
	case defMissingLabel.id, defEmptyLabel.id:
		objs = nil
	case defPolygon.id:
		objs[0].class = 2
	}

	// Label lines, and the boxes they must give.
	var lines []string
	var boxes []box
	for _, o := range objs {
		lines = append(lines, boxLine(o, img.w, img.h))
		boxes = append(boxes, pixelBox(o))
	}
	valid := len(boxes)
	switch d.id {
	case defMalformed.id:
		lines = append(lines, "1 0.5 0.5 0.25")
	case defUnknownClass.id:
		lines = append(lines, "3 0.5 0.5 0.25 0.25")
	case defZeroWidth.id:
		lines = []string{"0 0.5 0.5 0 0.25"}
		objs, boxes, valid = nil, nil, 0
	case defFarOutside.id:
		lines = []string{"1 1.5 0.5 0.25 0.5"}
		objs, boxes, valid = nil, nil, 0
	case defSlightly.id:
		// x from -0.25 to 128.25 px: cx 0.5, w 128.5/128.
		o := object{class: 1, x0: 0, y0: 8, x1: img.w, y1: 40}
		lines = []string{fmt.Sprintf("1 0.5 %s %s %s", num(float64(o.y0+o.y1)/2/float64(img.h)),
			num((float64(img.w)+0.5)/float64(img.w)), num(float64(o.y1-o.y0)/float64(img.h)))}
		objs, boxes, valid = []object{o}, []box{pixelBox(o)}, 1
	case defPolygon.id:
		o := objs[0]
		cx, cy := float64(o.x0+o.x1)/2, float64(o.y0+o.y1)/2
		pts := [][2]float64{{cx, float64(o.y0)}, {float64(o.x1), cy}, {cx, float64(o.y1)}, {float64(o.x0), cy}}
		var b strings.Builder
		b.WriteString("2")
		for _, p := range pts {
			fmt.Fprintf(&b, " %s %s", num(p[0]/float64(img.w)), num(p[1]/float64(img.h)))
		}
		lines[0] = b.String()
	case defUndecodable.id:
		lines, boxes, valid = lines[:1], nil, 1
	case defDuplicate.id:
		lines = append([]string{lines[0]}, lines...)
	}

	e := expected{Image: img.rel, Width: img.w, Height: img.h, Boxes: boxes, ValidBoxes: valid, Reasons: d.reasons, Defect: d.id}
	if e.Reasons == nil {
		e.Reasons = []string{}
	}
	if e.Boxes == nil {
		e.Boxes = []box{}
	}
	label := labelRel(img.rel)
	if d.id != defMissingLabel.id {
		e.Label = label
		sep := "\n"
		if d.id == defCRLF.id {
			sep = "\r\n"
		}
		text := ""
		if len(lines) > 0 {
			text = strings.Join(lines, sep) + sep
		}
		w.file(label, []byte(text))
	}

	if d.id == defUndecodable.id {
		e.Width, e.Height = 0, 0
		w.file(img.rel, []byte("not a JPEG: a planted decode_error for the demo dataset\n"))
		return e
	}
	pix := scene(rng, img.w, img.h, objs)
	var buf bytes.Buffer
	var err error
	if img.format == "png" {
		err = png.Encode(&buf, pix)
	} else {
		err = jpeg.Encode(&buf, pix, &jpeg.Options{Quality: 85})
	}
	if err != nil && w.err == nil {
		w.err = err
	}
	w.file(img.rel, buf.Bytes())
	return e
}

// labelRel is Ultralytics' label path: images/ -> labels/, extension .txt.
func labelRel(img string) string {
	img = strings.Replace(img, "images/", "labels/", 1)
	return strings.TrimSuffix(img, filepath.Ext(img)) + ".txt"
}

// randomObject places a shape fully inside a w x h image, corners on whole
// pixels, at least 8 px wide and high.
func randomObject(rng *rand.Rand, w, h int) object {
	bw := 8 + rng.IntN(w/3)
	bh := 8 + rng.IntN(h/3)
	x0 := rng.IntN(w - bw + 1)
	y0 := rng.IntN(h - bh + 1)
	return object{class: rng.IntN(len(classes)), x0: x0, y0: y0, x1: x0 + bw, y1: y0 + bh}
}

// boxLine writes an object as "class cx cy w h".
func boxLine(o object, w, h int) string {
	fw, fh := float64(w), float64(h)
	return fmt.Sprintf("%d %s %s %s %s", o.class,
		num(float64(o.x0+o.x1)/2/fw), num(float64(o.y0+o.y1)/2/fh),
		num(float64(o.x1-o.x0)/fw), num(float64(o.y1-o.y0)/fh))
}

// num writes a value in its shortest exact decimal form.
func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func pixelBox(o object) box {
	return box{Class: o.class, Name: classes[o.class], X0: float64(o.x0), Y0: float64(o.y0), X1: float64(o.x1), Y1: float64(o.y1)}
}

// scene draws a gradient background with block noise and the objects: a
// disc as a filled ellipse, a square as a filled rectangle, a diamond as a
// filled rhombus, each filling its box (pixel centres inside).
func scene(rng *rand.Rand, w, h int, objs []object) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	bw, bh := (w+7)/8, (h+7)/8
	noise := make([]int, bw*bh)
	for i := range noise {
		noise[i] = rng.IntN(17) - 8
	}
	for y := range h {
		for x := range w {
			n := noise[(y/8)*bw+x/8]
			img.SetRGBA(x, y, color.RGBA{
				R: clampByte(30 + 120*x/w + n),
				G: clampByte(50 + 100*y/h + n),
				B: clampByte(140 - 50*x/w + n),
				A: 255,
			})
		}
	}
	for _, o := range objs {
		cx, cy := float64(o.x0+o.x1)/2, float64(o.y0+o.y1)/2
		rx, ry := float64(o.x1-o.x0)/2, float64(o.y1-o.y0)/2
		for y := max(0, o.y0); y < min(h, o.y1); y++ {
			for x := max(0, o.x0); x < min(w, o.x1); x++ {
				dx, dy := (float64(x)+0.5-cx)/rx, (float64(y)+0.5-cy)/ry
				switch o.class {
				case 0:
					if dx*dx+dy*dy > 1 {
						continue
					}
				case 2:
					if max(dx, -dx)+max(dy, -dy) > 1 {
						continue
					}
				}
				img.SetRGBA(x, y, classColors[o.class])
			}
		}
	}
	return img
}

func clampByte(v int) uint8 { return uint8(min(max(v, 0), 255)) }

// readme lists the layout, every image with its boxes and every planted
// defect with its reasons, from the same table as the data.
func readme(seed uint64, all []expected) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Demo YOLO dataset\n\n"+
		"Generated by `go run ./testdata/yologen -out testdata/yolo` (seed %d); do not edit by hand,\n"+
		"change the generator and rerun it. The layout is Ultralytics' (package `sources/yolo` describes\n"+
		"what it reads): `data.yaml` with `path: .`, `train: images/train`, `val: images/val` and\n"+
		"`names` as a list of three classes, and a label file per image under `labels/`, one\n"+
		"`class cx cy w h` line per object in fractions of the image size. `configs/yolo.jsonc` builds\n"+
		"the train split.\n\n"+
		"Images are synthetic: a gradient with block noise and one to three shapes that fill their boxes\n"+
		"exactly: class 0 `disc` a red ellipse, class 1 `square` a white rectangle, class 2 `diamond` a\n"+
		"green rhombus. Image sizes are powers of two (train: JPEG 128x64, every fourth image a PNG\n"+
		"64x64; val: PNG 64x128) and box corners whole pixels, so the label values are short exact\n"+
		"decimals and the boxes below are exact, in source pixels, after clamping.\n\n"+
		"`expected.jsonl` holds the same table, one scanned sample per line in scan order (the scan test\n"+
		"in `sources/yolo` compares against it).\n\n", seed)

	b.WriteString("## Planted defects (train)\n\nEvery other image is clean.\n\n| image | defect | reasons | note |\n|---|---|---|---|\n")
	for _, e := range all {
		if e.Defect == "" {
			continue
		}
		d := defectByID(e.Defect)
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", e.Image, d.what, reasonText(e.Reasons), d.note)
	}
	counts := map[string]int{}
	for _, e := range all {
		if e.Split == "train" {
			counts["total"]++
			for _, r := range e.Reasons {
				if r == "empty" {
					counts["empty"]++
				} else {
					counts["invalid"]++
				}
			}
		}
	}
	fmt.Fprintf(&b, "\nTrain: %d samples, %d invalid (%.1f%%), 0 missing, %d empty: within the thresholds of\n"+
		"`configs/yolo.jsonc` (invalid 50%%, missing 25%%; empty warns above 30%%).\n\n",
		counts["total"], counts["invalid"], 100*float64(counts["invalid"])/float64(counts["total"]), counts["empty"])

	for _, split := range []string{"train", "val"} {
		fmt.Fprintf(&b, "## Split %s (source `images/%s`), in scan order\n\n", split, split)
		if split == "train" {
			b.WriteString("Natural order of the path: `frame_2` before `frame_10`; `night/` sorts after the `frame_*` files.\n\n")
		}
		b.WriteString("| frame | image | size | label | boxes: class x0,y0,x1,y1 (px) | valid | reasons |\n|---|---|---|---|---|---|---|\n")
		for _, e := range all {
			if e.Source != "images/"+split {
				continue
			}
			size := fmt.Sprintf("%dx%d", e.Width, e.Height)
			if e.Width == 0 {
				size = "(undecodable)"
			}
			label := e.Label
			if label == "" {
				label = "(none)"
			}
			var bs []string
			for _, bx := range e.Boxes {
				bs = append(bs, fmt.Sprintf("%d %s %g,%g,%g,%g", bx.Class, bx.Name, bx.X0, bx.Y0, bx.X1, bx.Y1))
			}
			boxes := strings.Join(bs, "; ")
			if boxes == "" {
				boxes = "-"
			}
			fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %d | %s |\n", e.Frame, e.Image, size, label, boxes, e.ValidBoxes, reasonText(e.Reasons))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func defectByID(id string) defect {
	for _, d := range []defect{defMissingLabel, defEmptyLabel, defMalformed, defUnknownClass, defZeroWidth,
		defFarOutside, defSlightly, defPolygon, defUndecodable, defDuplicate, defCRLF, defUpperExt} {
		if d.id == id {
			return d
		}
	}
	panic("unknown defect " + id)
}

func reasonText(rs []string) string {
	if len(rs) == 0 {
		return "(none)"
	}
	return strings.Join(rs, ", ")
}
