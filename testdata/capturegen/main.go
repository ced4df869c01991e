// Command capturegen writes the demo capture dataset in testdata/capture:
// three runs of synthetic frames with boxes that line up with the drawn
// objects, most of them clean and a handful with one planted defect each.
// The output is a pure function of -seed (images are drawn from a seeded
// PCG generator; PNGs are encoded here, JPEGs by image/jpeg), so a rerun
// rewrites the same bytes with the same Go version.
//
//	go run ./testdata/capturegen -out testdata/capture
//
// It replaces only the folders and files it writes; README.md, listing
// every planted defect and the reasons it must produce, is written from the
// same table as the data.
package main

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/crc32"
	"image"
	"image/color"
	"image/jpeg"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
)

func main() {
	out := flag.String("out", "", "output directory (the dataset root), e.g. testdata/capture")
	seed := flag.Uint64("seed", 20240611, "seed of the pseudo-random scene generator")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "capturegen: -out is required")
		os.Exit(2)
	}
	if err := generate(*out, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "capturegen:", err)
		os.Exit(1)
	}
}

// defect is one planted problem: how the frame is written differently and
// what the scan must report for it.
type defect struct {
	id      string
	what    string // description for the README
	reasons string // expected reason codes at scan time, "" for none
	note    string // anything else the README should say
}

var (
	defEmpty          = defect{"empty", "the label list is empty", "empty", "kept unless skip_empty"}
	defNotPresent     = defect{"not_present", "image_present is false (the image is not written)", "missing_image", ""}
	defNoImageField   = defect{"no_image", `image is ""`, "missing_image", ""}
	defNormOnly       = defect{"norm_only", "every box has bbox_px null and only bbox_norm", "", "clean: boxes are bbox_norm times 200x150"}
	defDuplicate      = defect{"duplicate", "frame_id 8, the same as frame_00008.json", "duplicate_frame", "frame_00008.json sorts first (natural file name), so this one is the duplicate"}
	defClassType      = defect{"class_type", `class_name is the number 5`, "bad_schema", ""}
	defMissingFile    = defect{"missing_file", "the image file is not written", "missing_file", ""}
	defInverted       = defect{"inverted", "first box has x0 > x1", "invalid_bbox", ""}
	defNoBox          = defect{"no_box", "one valid box plus a label with bbox_px and bbox_norm both null", "invalid_bbox", "valid_boxes 1: the good box is still resolved"}
	defNormOut        = defect{"norm_out", "bbox_px null, bbox_norm x1 = 1.2", "bbox_out_of_bounds", ""}
	defPxOut          = defect{"px_out", "bbox_px x1 = width + 20", "bbox_out_of_bounds", ""}
	defTolerance      = defect{"tolerance", "bbox_px [-0.4, 10, width+0.3, 60]: outside by less than 0.5 px", "", "clean: clamped to [0, 10, width, 60]"}
	defBadJSON        = defect{"bad_json", "the JSON text is cut off", "bad_schema", "no frame_id can be read: sorts last in its run"}
	defEscape         = defect{"escape", `image is "../escape.png" (which exists, at the dataset root)`, "path_escape", "image_path is empty"}
	defFrameString    = defect{"frame_string", `frame_id is the string "2"`, "bad_schema", "no usable frame_id: sorts after every framed label, frame 0"}
	defTruncatedPNG   = defect{"truncated_png", "the PNG is cut in the middle of its IDAT chunk", "", "the header reads, so the scan is clean; decoding fails at transform time: decode_error then"}
	defCorruptHeader  = defect{"corrupt_header", "the PNG IHDR width is overwritten without fixing its CRC", "decode_error", ""}
	defCounterDiffers = defect{"counter_differs", "file counter 7, frame_id 12", "", "clean: sorts by frame_id, after frame 10"}
)

// frameSpec is one label file of a run.
type frameSpec struct {
	file   int // counter in the file names
	defect defect
}

// runSpec is one run folder.
type runSpec struct {
	name       string
	listKey    string // polyp_labels or labels
	withClass  bool   // objects carry class_name
	ext        string // png or jpg
	w, h       int
	startMs    int64 // unix time of frame 0, milliseconds
	frames     []frameSpec
	withOverly bool // write an overlays/ folder (ignored by readers)
}

func frames(n int, defects map[int]defect) []frameSpec {
	out := make([]frameSpec, n)
	for i := range out {
		out[i] = frameSpec{file: i, defect: defects[i]}
	}
	return out
}

var runs = []runSpec{
	{
		name: "run_2", listKey: "labels", withClass: true, ext: "jpg", w: 200, h: 150, startMs: 1700000002000,
		frames: frames(10, map[int]defect{3: defEmpty, 5: defNotPresent, 6: defNormOnly, 7: defClassType, 9: defDuplicate}),
	},
	{
		name: "run_10", listKey: "polyp_labels", ext: "png", w: 320, h: 240, startMs: 1700000010500, withOverly: true,
		frames: frames(12, map[int]defect{2: defMissingFile, 3: defInverted, 4: defNoBox, 5: defNormOut, 6: defPxOut,
			7: defTolerance, 8: defBadJSON, 9: defEscape}),
	},
	{
		name: "run_1700000000123", listKey: "polyp_labels", ext: "png", w: 200, h: 150, startMs: 1700000000123,
		frames: frames(11, map[int]defect{2: defFrameString, 4: defTruncatedPNG, 5: defCorruptHeader, 7: defCounterDiffers, 8: defNoImageField}),
	},
}

// owned are the entries of the output directory this program writes and
// may therefore replace.
var owned = []string{"run_2", "run_10", "run_1700000000123", "notes", "_scratch", "escape.png", "README.md"}

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
	for _, run := range runs {
		writeRun(w, rng, run, seed)
	}
	// Not runs: a folder without labels/, an underscore folder, and the
	// file the escaping label points at.
	w.file("notes/images/frame_00000.png", encodePNG(scene(rng, 16, 16, nil)))
	w.file("_scratch/labels/frame_00000.json", labelJSON([]field{
		{"frame_id", 0}, {"image", "images/frame_00000.png"}, {"polyp_labels", []any{}},
	}))
	w.file("escape.png", encodePNG(scene(rng, 16, 16, nil)))
	w.file("README.md", []byte(readme(seed)))
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

// object is one drawn and labelled object.
type object struct {
	box   [4]float64 // pixels
	class string
	world [3]float64
}

var classColors = map[string]color.RGBA{
	"polyp":      {214, 82, 74, 255},
	"instrument": {205, 208, 214, 255},
}

func writeRun(w *writer, rng *rand.Rand, run runSpec, seed uint64) {
	w.file(run.name+"/run_manifest.json", labelJSON([]field{
		{"schema_version", 1},
		{"seed", seed},
		{"output_root", "capture"},
		{"run_dir", "capture/" + run.name},
		{"started_at_unix", run.startMs / 1000},
		{"max_frames", len(run.frames)},
	}))
	if run.withOverly {
		w.file(run.name+"/overlays/frame_00000.png", encodePNG(scene(rng, 16, 16, nil)))
	}
	for _, f := range run.frames {
		frameID := any(f.file)
		switch f.defect {
		case defDuplicate:
			frameID = f.file - 1
		case defCounterDiffers:
			frameID = f.file + 5
		case defFrameString:
			frameID = fmt.Sprint(f.file)
		}
		n := 1 + rng.IntN(3)
		objs := make([]object, n)
		for i := range objs {
			objs[i] = randomObject(rng, run)
		}
		if f.defect == defEmpty {
			objs = nil
		}
		if f.defect == defTolerance {
			objs = []object{{box: [4]float64{-0.4, 10, float64(run.w) + 0.3, 60}, class: "polyp", world: objs[0].world}}
		}
		if f.defect == defPxOut {
			objs[0].box[2] = float64(run.w) + 20
		}
		labels := make([]any, len(objs))
		for i, o := range objs {
			labels[i] = labelEntry(o, run, f.defect, i)
		}
		if f.defect == defNoBox {
			labels = []any{labels[0], []field{{"center_world", objs[0].world}, {"bbox_px", nil}, {"bbox_norm", nil}}}
		}
		base := fmt.Sprintf("frame_%05d", f.file)
		image := "images/" + base + "." + run.ext
		switch f.defect {
		case defEscape:
			image = "../escape.png"
		case defNoImageField:
			image = ""
		}
		id := f.file // timestamps follow frame_id, or the file counter without one
		if v, ok := frameID.(int); ok {
			id = v
		}
		ms := run.startMs + int64(id)*50
		doc := labelJSON([]field{
			{"frame_id", frameID},
			{"sim_time", json.Number(fmt.Sprintf("%d.%02d", id*5/100, id*5%100))},
			{"unix_time", json.Number(fmt.Sprintf("%d.%03d", ms/1000, ms%1000))},
			{"image", image},
			{"image_present", f.defect != defNotPresent},
			{"camera_active", true},
			{run.listKey, labels},
		})
		if f.defect == defBadJSON {
			doc = doc[:len(doc)*2/3]
		}
		w.file(run.name+"/labels/"+base+".json", doc)

		switch f.defect {
		case defNotPresent, defMissingFile, defEscape, defNoImageField:
			continue
		}
		img := scene(rng, run.w, run.h, objs)
		var data []byte
		if run.ext == "jpg" {
			var buf bytes.Buffer
			if err := jpeg.Encode(&buf, img, &jpeg.Options{Quality: 80}); err != nil {
				w.err = errors.Join(w.err, err)
			}
			data = buf.Bytes()
		} else {
			data = encodePNG(img)
		}
		switch f.defect {
		case defTruncatedPNG:
			data = data[:len(data)/2]
		case defCorruptHeader:
			// IHDR data starts at 16 (8 signature + 4 length + 4 type):
			// the two high bytes of the width become 0x7fff and the CRC
			// no longer matches.
			data[16], data[17] = 0x7f, 0xff
		}
		w.file(run.name+"/"+image, data)
	}
}

// randomObject places an object fully inside the image, corners on half
// pixels.
func randomObject(rng *rand.Rand, run runSpec) object {
	half := func(lo, hi float64) float64 { return float64(int((lo+rng.Float64()*(hi-lo))*2)) / 2 }
	bw := half(float64(run.w)/8, float64(run.w)/3)
	bh := half(float64(run.h)/8, float64(run.h)/3)
	x0 := half(0, float64(run.w)-bw)
	y0 := half(0, float64(run.h)-bh)
	class := "polyp"
	if run.withClass && rng.IntN(2) == 0 {
		class = "instrument"
	}
	milli := func() float64 { return float64(rng.IntN(4001)-2000) / 1000 }
	return object{box: [4]float64{x0, y0, x0 + bw, y0 + bh}, class: class, world: [3]float64{milli(), milli(), milli()}}
}

// labelEntry is one object as the capture tool writes it.
func labelEntry(o object, run runSpec, d defect, i int) []field {
	px := o.box
	norm := [4]float64{px[0] / float64(run.w), px[1] / float64(run.h), px[2] / float64(run.w), px[3] / float64(run.h)}
	var pxValue any = px
	var normValue any = norm
	switch {
	case d == defNormOnly:
		pxValue = nil
	case d == defNormOut && i == 0:
		pxValue = nil
		norm[2] = 1.2
		normValue = norm
	case d == defInverted && i == 0:
		px[0], px[2] = px[2], px[0]
		pxValue = px
	}
	e := []field{{"center_world", o.world}, {"bbox_px", pxValue}, {"bbox_norm", normValue}}
	if run.withClass {
		var name any = o.class
		if d == defClassType && i == 0 {
			name = 5
		}
		e = append(e, field{"class_name", name})
	}
	return e
}

// field is one key of a JSON object; []field marshals as an object with
// the keys in order, as the capture tool writes them.
type field struct {
	key   string
	value any
}

// labelJSON writes an object with one key per line and compact values.
func labelJSON(fields []field) []byte {
	var b bytes.Buffer
	b.WriteString("{\n")
	for i, f := range fields {
		fmt.Fprintf(&b, "  %q: %s", f.key, compact(f.value))
		if i < len(fields)-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// compact marshals v; []field and []any holding []field marshal in order.
func compact(v any) string {
	switch v := v.(type) {
	case []field:
		parts := make([]string, len(v))
		for i, f := range v {
			parts[i] = fmt.Sprintf("%q: %s", f.key, compact(f.value))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		if len(v) == 0 {
			return "[]"
		}
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = "\n    " + compact(e)
		}
		return "[" + strings.Join(parts, ",") + "\n  ]"
	}
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only fixed, marshalable values reach here
	}
	return string(b)
}

// scene draws a gradient background with block noise (8x8 blocks keep the
// files small) and the objects: polyps as filled ellipses, instruments as
// filled rectangles, each filling exactly its box (pixel centres inside).
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
				R: clampByte(40 + 150*x/w + n),
				G: clampByte(60 + 110*y/h + n),
				B: clampByte(120 - 40*x/w + n),
				A: 255,
			})
		}
	}
	for _, o := range objs {
		c := classColors[o.class]
		b := o.box
		cx, cy := (b[0]+b[2])/2, (b[1]+b[3])/2
		rx, ry := (b[2]-b[0])/2, (b[3]-b[1])/2
		for y := max(0, int(b[1])); y < min(h, int(b[3])+1); y++ {
			for x := max(0, int(b[0])); x < min(w, int(b[2])+1); x++ {
				px, py := float64(x)+0.5, float64(y)+0.5
				if px < b[0] || px > b[2] || py < b[1] || py > b[3] {
					continue
				}
				if o.class == "polyp" {
					dx, dy := (px-cx)/rx, (py-cy)/ry
					if dx*dx+dy*dy > 1 {
						continue
					}
				}
				img.SetRGBA(x, y, c)
			}
		}
	}
	return img
}

func clampByte(v int) uint8 { return uint8(min(max(v, 0), 255)) }

// encodePNG writes an 8-bit RGBA PNG (colour type 6), as the capture tool
// does. image/png would write an opaque image as RGB, so the chunks are
// written here: IHDR, one IDAT with per-row filters chosen by the usual
// minimum-sum-of-absolute-differences rule, IEND.
func encodePNG(img *image.RGBA) []byte {
	w, h := img.Rect.Dx(), img.Rect.Dy()
	var out bytes.Buffer
	out.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr[0:], uint32(w))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(h))
	ihdr[8], ihdr[9] = 8, 6 // bit depth 8, colour type RGBA; compression, filter, interlace 0
	writeChunk(&out, "IHDR", ihdr)

	var z bytes.Buffer
	zw, err := zlib.NewWriterLevel(&z, zlib.BestCompression)
	if err != nil {
		panic(err) // the level is a valid constant
	}
	stride := w * 4
	prev := make([]byte, stride)
	cand := make([][]byte, 5)
	for i := range cand {
		cand[i] = make([]byte, stride)
	}
	for y := range h {
		row := img.Pix[y*img.Stride : y*img.Stride+stride]
		best, bestSum := 0, -1
		for f := range cand {
			filterRow(byte(f), row, prev, cand[f])
			sum := 0
			for _, v := range cand[f] {
				sum += min(int(v), 256-int(v))
			}
			if bestSum < 0 || sum < bestSum {
				best, bestSum = f, sum
			}
		}
		zw.Write([]byte{byte(best)})
		zw.Write(cand[best])
		copy(prev, row)
	}
	zw.Close()
	writeChunk(&out, "IDAT", z.Bytes())
	writeChunk(&out, "IEND", nil)
	return out.Bytes()
}

// filterRow applies PNG filter f (0 None, 1 Sub, 2 Up, 3 Average, 4 Paeth)
// with 4 bytes per pixel.
func filterRow(f byte, row, prev, dst []byte) {
	for i := range row {
		var a, b, c int
		if i >= 4 {
			a, c = int(row[i-4]), int(prev[i-4])
		}
		b = int(prev[i])
		var p int
		switch f {
		case 1:
			p = a
		case 2:
			p = b
		case 3:
			p = (a + b) / 2
		case 4:
			p = paeth(a, b, c)
		}
		dst[i] = row[i] - byte(p)
	}
}

func paeth(a, b, c int) int {
	p := a + b - c
	pa, pb, pc := abs(p-a), abs(p-b), abs(p-c)
	switch {
	case pa <= pb && pa <= pc:
		return a
	case pb <= pc:
		return b
	}
	return c
}

func abs(v int) int { return max(v, -v) }

func writeChunk(out *bytes.Buffer, typ string, data []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(data)))
	out.Write(n[:])
	crc := crc32.NewIEEE()
	crc.Write([]byte(typ))
	crc.Write(data)
	out.WriteString(typ)
	out.Write(data)
	binary.BigEndian.PutUint32(n[:], crc.Sum32())
	out.Write(n[:])
}

// readme lists the layout and every planted defect with its expected
// reasons, from the same table the data is written from.
func readme(seed uint64) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# Demo capture dataset

Generated by `+"`go run ./testdata/capturegen -out testdata/capture`"+` (seed %d); do not edit by
hand, change the generator and rerun it. The layout is described in package
`+"`sources/capture`"+` and docs of the capture format: runs of `+"`images/`"+` and
`+"`labels/`"+` with a `+"`run_manifest.json`"+`. Images are synthetic: a gradient with block
noise, polyps drawn as filled ellipses and instruments as filled rectangles that
exactly fill their boxes, so a rendered sample visibly lines up with its boxes.
PNGs are 8-bit RGBA like the original capture tool's; run_2 is JPEG.

## Runs, in natural order

`, seed)
	for _, r := range runs {
		fmt.Fprintf(&b, "- `%s`: %d labels, %s %dx%d, label list key `%s`%s\n",
			r.name, len(r.frames), strings.ToUpper(r.ext), r.w, r.h, r.listKey,
			map[bool]string{true: ", objects with `class_name` polyp or instrument", false: ""}[r.withClass])
	}
	b.WriteString(`
Plain string order would put run_10 and run_1700000000123 before run_2.
Not runs: ` + "`notes/`" + ` (has images/ but no labels/), ` + "`_scratch/`" + ` (underscore
folders are skipped even with labels/), ` + "`escape.png`" + ` (a file; the target of the
escaping label, which must not be read). ` + "`run_10/overlays/`" + ` is ignored.

## Planted defects

Every other label is clean. "Reasons" are the codes the scan must attach
(package validate); the golden scan is sources/capture/testdata/golden/scan.jsonl.

| label file | defect | reasons | note |
|---|---|---|---|
`)
	for _, r := range runs {
		for _, f := range r.frames {
			if f.defect.id == "" {
				continue
			}
			reasons := f.defect.reasons
			if reasons == "" {
				reasons = "(none)"
			}
			fmt.Fprintf(&b, "| %s/labels/frame_%05d.json | %s | %s | %s |\n", r.name, f.file, f.defect.what, reasons, f.defect.note)
		}
	}
	return b.String()
}
