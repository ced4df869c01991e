// Command cocogen writes the demo COCO dataset in testdata/coco: an
// instances file and small synthetic images, most of them clean and a
// handful with one planted defect each, every defect package sources/coco
// reports.
//
//	go run ./testdata/cocogen -out testdata/coco
//
// The output is a pure function of -seed (images are drawn from a seeded
// PCG generator and encoded by image/png and image/jpeg), so a rerun
// rewrites the same bytes with the same Go version. It replaces only the
// files and folders it writes; README.md, listing every image, its boxes
// and the reasons the scan must give, is written from the same table as
// the data.
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
	"slices"
	"strconv"
	"strings"
)

func main() {
	out := flag.String("out", "", "output directory, e.g. testdata/coco")
	seed := flag.Uint64("seed", 20260514, "seed of the pseudo-random scene generator")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "cocogen: -out is required")
		os.Exit(2)
	}
	if err := generate(*out, *seed); err != nil {
		fmt.Fprintln(os.Stderr, "cocogen:", err)
		os.Exit(1)
	}
}

// The two image kinds of the demo.
type kind struct {
	ext  string
	w, h int
}

var (
	jpg  = kind{"jpg", 96, 64}
	pngK = kind{"png", 80, 120}
)

// category is one entry of categories.
type category struct {
	id                  int
	name, supercategory string
	color               color.RGBA
}

// categories in the order the file lists them: ids are not contiguous and
// not in order, as in COCO (whose ids run 1..90 with gaps).
var categories = []category{
	{7, "bicycle", "vehicle", color.RGBA{70, 190, 90, 255}},
	{1, "person", "person", color.RGBA{220, 80, 70, 255}},
	{90, "toothbrush", "indoor", color.RGBA{240, 220, 60, 255}},
	{3, "car", "vehicle", color.RGBA{80, 120, 230, 255}},
}

// unknownCategory is the category_id no category has.
const unknownCategory = 5

// defect is one planted problem and what the scan must report for it.
type defect struct {
	id      string
	what    string // for the README
	reasons string // expected reasons of the sample, "" for none
	note    string
}

var (
	defNone          = defect{}
	defUnknownClass  = defect{"unknown_class", "two annotations of the same box, one with category_id 5, which categories does not list", "unknown_class", "valid_boxes 1: the other one is fine"}
	defCrowd         = defect{"crowd", "a box plus an iscrowd 1 annotation (RLE segmentation)", "crowd_skipped", "kept (warning): one box, the crowd region is not a box"}
	defCrowdOnly     = defect{"crowd_only", "only an iscrowd 1 annotation", "empty crowd_skipped", "no training box: empty, kept unless skip_empty"}
	defZeroWidth     = defect{"zero_width", "the box has width 0", "invalid_bbox", ""}
	defFarOutside    = defect{"far_outside", "bbox [90, 10, 30, 20] in a 96 px wide image: x+w = 120", "bbox_out_of_bounds", ""}
	defSlightly      = defect{"slightly_outside", "bbox [-0.4, 10, 96.7, 30]: outside by 0.4 and 0.3 px", "", "clean: clamped to [0, 10, 96, 40]"}
	defMissingFile   = defect{"missing_file", "the image file is not written", "missing_file", "boxes checked on their own: valid_boxes 1"}
	defUndecodable   = defect{"undecodable", "the .jpg file holds text, not an image", "decode_error", "valid_boxes 1"}
	defDuplicateID   = defect{"duplicate_id", "a second images entry with id 209 (file 000209_second.png, which exists)", "duplicate_image", "the later entry in file order; it gets no annotations (id 209's belong to the first)"}
	defDuplicateFile = defect{"duplicate_file", "file_name 000101.jpg, the file of image 101, listed earlier", "duplicate_image", "its own annotations are still checked against 000101.jpg (valid_boxes 1)"}
	defSizeMismatch  = defect{"size_mismatch", "width 100 listed, the file is 96 wide", "image_size_mismatch", "boxes are checked against the file's 96x64"}
	defNoAnnotations = defect{"no_annotations", "no annotation names this image", "empty", "kept unless skip_empty"}
	defEscape        = defect{"escape", `file_name "../escape.jpg" (which exists, beside images/)`, "path_escape", "image_path is empty, valid_boxes 1"}
	defBadSchema     = defect{"bad_schema", `the annotation's bbox is the string "10,10,20,20"`, "bad_schema", ""}
	defUnknownImage  = defect{"unknown_image", "an annotation names image_id 999, which images does not list", "unknown_image", "a placeholder sample after the images, frame 999, no image; valid_boxes 1"}
)

// imageSpec is one images entry (or, for defUnknownImage, an id only
// annotations name).
type imageSpec struct {
	id     int
	kind   kind
	defect defect
	file   string // file_name; default %06d.<ext>
}

// objects are the boxes of one image as the file lists them.
type object struct {
	bbox  [4]float64 // x, y, w, h
	cat   int
	crowd bool
	raw   string // the bbox as written, when it is not numbers
}

func specs() []imageSpec {
	var out []imageSpec
	for i := range 20 {
		k := jpg
		if i%2 == 1 {
			k = pngK
		}
		out = append(out, imageSpec{id: 101 + i, kind: k})
	}
	for i, d := range []defect{defUnknownClass, defCrowd, defCrowdOnly, defZeroWidth, defFarOutside, defSlightly,
		defMissingFile, defUndecodable, defDuplicateID, defDuplicateFile, defSizeMismatch, defNoAnnotations, defEscape, defBadSchema} {
		s := imageSpec{id: 201 + i, kind: jpg, defect: d}
		switch d {
		case defCrowd, defCrowdOnly, defNoAnnotations, defBadSchema:
			s.kind = pngK
		case defDuplicateFile:
			s.file = "000101.jpg"
		case defEscape:
			s.file = "../escape.jpg"
		}
		out = append(out, s)
	}
	out = append(out, imageSpec{id: 209, kind: pngK, defect: defDuplicateID, file: "000209_second.png"})
	out = append(out, imageSpec{id: 999, kind: jpg, defect: defUnknownImage})
	return out
}

func (s imageSpec) fileName() string {
	if s.file != "" {
		return s.file
	}
	return fmt.Sprintf("%06d.%s", s.id, s.kind.ext)
}

// second reports the duplicate-id entry, which has no annotations.
func (s imageSpec) second() bool { return s.defect == defDuplicateID && s.file != "" }

// listed reports whether images lists the spec.
func (s imageSpec) listed() bool { return s.defect != defUnknownImage }

// owned are the entries of the output directory this program writes.
var owned = []string{"annotations", "images", "escape.jpg", "README.md"}

func generate(out string, seed uint64) error {
	for _, name := range owned {
		if err := os.RemoveAll(filepath.Join(out, name)); err != nil {
			return err
		}
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	all := specs()
	objs := map[int][]object{} // by spec index
	for i, s := range all {
		if s.second() {
			continue
		}
		objs[i] = objects(rng, s)
	}

	// Files. The duplicate file entry draws nothing: it shares 101's.
	w := &writer{root: out}
	for i, s := range all {
		switch s.defect {
		case defMissingFile, defDuplicateFile, defUnknownImage:
			continue
		case defUndecodable:
			w.file("images/"+s.fileName(), []byte("this is not an image, only text with a .jpg name\n"))
			continue
		case defEscape:
			w.file("escape.jpg", encode(scene(rng, s.kind, objs[i]), s.kind))
			continue
		}
		w.file("images/"+s.fileName(), encode(scene(rng, s.kind, objs[i]), s.kind))
	}

	// Images in a shuffled order (the scan sorts by id), except that each
	// duplicate comes after what it duplicates.
	order := make([]int, len(all))
	for i := range order {
		order[i] = i
	}
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	pos := func(pred func(imageSpec) bool) int {
		return slices.IndexFunc(order, func(i int) bool { return pred(all[i]) })
	}
	fix := func(first, later func(imageSpec) bool) {
		a, b := pos(first), pos(later)
		if a > b {
			order[a], order[b] = order[b], order[a]
		}
	}
	fix(func(s imageSpec) bool { return s.id == 101 }, func(s imageSpec) bool { return s.defect == defDuplicateFile })
	fix(func(s imageSpec) bool { return s.defect == defDuplicateID && !s.second() }, imageSpec.second)

	// Annotations: every object, shuffled, ids in file order.
	type annRef struct{ spec, obj int }
	var anns []annRef
	for i := range all {
		for j := range objs[i] {
			anns = append(anns, annRef{i, j})
		}
	}
	rng.Shuffle(len(anns), func(i, j int) { anns[i], anns[j] = anns[j], anns[i] })

	var b bytes.Buffer
	b.WriteString("{\n")
	b.WriteString(`"info": {"description": "warehouse-etl COCO demo", "url": "https://example.com/warehouse-etl", "version": "1.0", "year": 2026, "contributor": "testdata/cocogen", "date_created": "2026/05/14"},` + "\n")
	b.WriteString(`"licenses": [{"url": "https://creativecommons.org/publicdomain/zero/1.0/", "id": 1, "name": "CC0 1.0"}],` + "\n")
	b.WriteString(`"annotations": [`)
	listedBoxes := map[int][]object{} // by spec index, in file order
	for n, a := range anns {
		s, o := all[a.spec], objs[a.spec][a.obj]
		listedBoxes[a.spec] = append(listedBoxes[a.spec], o)
		if n > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n  ")
		b.WriteString(annotationJSON(n+1, s, o))
	}
	b.WriteString("\n],\n")
	b.WriteString(`"images": [`)
	for n, i := range order {
		s := all[i]
		if !s.listed() {
			continue
		}
		if n > 0 && b.Bytes()[b.Len()-1] != '[' {
			b.WriteByte(',')
		}
		width := s.kind.w
		if s.defect == defSizeMismatch {
			width = 100
		}
		fmt.Fprintf(&b, "\n  {\"license\": 1, \"file_name\": %s, \"height\": %d, \"width\": %d, \"date_captured\": \"2026-05-14 12:%02d:00\", \"id\": %d}",
			quote(s.fileName()), s.kind.h, width, s.id%60, s.id)
	}
	b.WriteString("\n],\n")
	b.WriteString(`"categories": [`)
	for n, c := range categories {
		if n > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "\n  {\"supercategory\": %s, \"id\": %d, \"name\": %s}", quote(c.supercategory), c.id, quote(c.name))
	}
	b.WriteString("\n]\n}\n")
	w.file("annotations/instances_demo.json", b.Bytes())
	w.file("README.md", []byte(readme(seed, all, order, listedBoxes)))
	return w.err
}

// objects draws the boxes of one image and applies its defect.
func objects(rng *rand.Rand, s imageSpec) []object {
	if s.defect == defNoAnnotations {
		return nil
	}
	W, H := float64(s.kind.w), float64(s.kind.h)
	if s.defect == defDuplicateFile {
		W, H = float64(jpg.w), float64(jpg.h) // 000101.jpg
	}
	n := 1 + rng.IntN(3)
	if s.defect != defNone {
		n = 1
	}
	var out []object
	for range n {
		// Whole pixels: x in [0, W-w], sizes a sixth to a half of the image.
		bw := float64(int(W/6) + rng.IntN(int(W/3)))
		bh := float64(int(H/6) + rng.IntN(int(H/3)))
		x := float64(rng.IntN(int(W-bw) + 1))
		y := float64(rng.IntN(int(H-bh) + 1))
		out = append(out, object{bbox: [4]float64{x, y, bw, bh}, cat: categories[rng.IntN(len(categories))].id})
	}
	switch s.defect {
	case defUnknownClass:
		o := out[0]
		o.cat = unknownCategory
		out = append(out, o)
	case defCrowd:
		out = append(out, object{bbox: [4]float64{0, H / 2, W, H / 2}, cat: 1, crowd: true})
	case defCrowdOnly:
		out = []object{{bbox: [4]float64{0, 0, W, H / 3}, cat: 1, crowd: true}}
	case defZeroWidth:
		out[0].bbox[2] = 0
	case defFarOutside:
		out[0].bbox = [4]float64{90, 10, 30, 20}
	case defSlightly:
		out[0].bbox = [4]float64{-0.4, 10, 96.7, 30}
	case defBadSchema:
		out[0].raw = `"10,10,20,20"`
	}
	return out
}

func annotationJSON(id int, s imageSpec, o object) string {
	b := o.bbox
	bbox := "[" + num(b[0]) + ", " + num(b[1]) + ", " + num(b[2]) + ", " + num(b[3]) + "]"
	if o.raw != "" {
		bbox = o.raw
	}
	var seg string
	if o.crowd {
		seg = rle(s.kind, b)
	} else {
		x0, y0, x1, y1 := num(b[0]), num(b[1]), num(b[0]+b[2]), num(b[1]+b[3])
		seg = "[[" + strings.Join([]string{x0, y0, x1, y0, x1, y1, x0, y1}, ", ") + "]]"
	}
	crowd := 0
	if o.crowd {
		crowd = 1
	}
	return fmt.Sprintf(`{"segmentation": %s, "area": %s, "iscrowd": %d, "image_id": %d, "bbox": %s, "category_id": %d, "id": %d}`,
		seg, num(b[2]*b[3]), crowd, s.id, bbox, o.cat, id)
}

// rle is the uncompressed COCO RLE of a box: run lengths of 0 and 1 in
// column-major order, starting with 0s.
func rle(k kind, b [4]float64) string {
	var counts []string
	run, cur := 0, 0
	for x := range k.w {
		for y := range k.h {
			v := 0
			if float64(x)+0.5 > b[0] && float64(x)+0.5 < b[0]+b[2] && float64(y)+0.5 > b[1] && float64(y)+0.5 < b[1]+b[3] {
				v = 1
			}
			if v != cur {
				counts = append(counts, strconv.Itoa(run))
				run, cur = 0, v
			}
			run++
		}
	}
	counts = append(counts, strconv.Itoa(run))
	return fmt.Sprintf(`{"counts": [%s], "size": [%d, %d]}`, strings.Join(counts, ", "), k.h, k.w)
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// scene draws a gradient with 16x16 block noise and the boxes as filled
// rectangles in their category's colour (pixel centres inside the box).
func scene(rng *rand.Rand, k kind, objs []object) *image.RGBA {
	img := image.NewRGBA(image.Rect(0, 0, k.w, k.h))
	bw := (k.w + 15) / 16
	noise := make([]int, bw*((k.h+15)/16))
	for i := range noise {
		noise[i] = rng.IntN(13) - 6
	}
	for y := range k.h {
		for x := range k.w {
			n := noise[(y/16)*bw+x/16]
			img.SetRGBA(x, y, color.RGBA{
				R: clampByte(50 + 120*x/k.w + n),
				G: clampByte(70 + 100*y/k.h + n),
				B: clampByte(110 - 40*x/k.w + n),
				A: 255,
			})
		}
	}
	for _, o := range objs {
		c := color.RGBA{128, 128, 128, 255}
		for _, cat := range categories {
			if cat.id == o.cat {
				c = cat.color
			}
		}
		if o.crowd {
			c = color.RGBA{200, 200, 200, 255}
		}
		b := o.bbox
		for y := range k.h {
			for x := range k.w {
				px, py := float64(x)+0.5, float64(y)+0.5
				if px > b[0] && px < b[0]+b[2] && py > b[1] && py < b[1]+b[3] {
					img.SetRGBA(x, y, c)
				}
			}
		}
	}
	return img
}

func clampByte(v int) uint8 { return uint8(min(max(v, 0), 255)) }

func encode(img *image.RGBA, k kind) []byte {
	var buf bytes.Buffer
	var err error
	if k.ext == "jpg" {
		err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 85})
	} else {
		err = png.Encode(&buf, img)
	}
	if err != nil {
		panic(err) // in-memory encoding of a valid image does not fail
	}
	return buf.Bytes()
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

// readme lists the images in scan order with their boxes and reasons.
func readme(seed uint64, all []imageSpec, order []int, boxes map[int][]object) string {
	var b strings.Builder
	fmt.Fprintf(&b, `# Demo COCO dataset

Generated by `+"`go run ./testdata/cocogen -out testdata/coco`"+` (seed %d); do not edit by
hand, change the generator and rerun it. Package `+"`sources/coco`"+` reads it:
`+"`annotations/instances_demo.json`"+` is the instances file, `+"`images/`"+` the image root
(`+"`source.annotations`"+` and `+"`source.root`"+` of a coco config).

Images are synthetic: a gradient with block noise and every box drawn as a filled rectangle in
its category's colour (crowd regions light grey), exactly covering the pixels whose centres lie
inside the box. JPEGs are 96x64, PNGs 80x120.

The file lists its keys in the order info, licenses, annotations, images, categories
(annotations before images), images in a shuffled order and annotations shuffled, not grouped
by image: the scan orders samples by image id and boxes by their order in the file.

## Categories

Listed in the file as bicycle (7), person (1), toothbrush (90), car (3). The class table is
ordered by id:

| index | id | name |
|---|---|---|
`, seed)
	sorted := slices.Clone(categories)
	slices.SortFunc(sorted, func(a, c category) int { return a.id - c.id })
	for i, c := range sorted {
		fmt.Fprintf(&b, "| %d | %d | %s |\n", i, c.id, c.name)
	}
	b.WriteString(`
## Samples, in scan order

Boxes are given as listed (` + "`bbox` [x, y, w, h]" + `, pixels, category id) and, after ` + "`->`" + `, as the
sample's box [x0, y0, x1, y1] once checked and clamped (only for an image whose header was
read). "reasons" are the codes the scan attaches (package validate); an image with none is
clean. ` + "`valid`" + ` is Sample.ValidBoxes. Every sample's source is ` + "`instances_demo.json`" + `.

| # | id | file_name | file | boxes | valid | reasons | defect |
|---|---|---|---|---|---|---|---|
`)
	// Scan order: listed images by id, the duplicate id after the first,
	// then the unknown image id.
	type row struct {
		spec int
		pos  int
	}
	var rows []row
	for p, i := range order {
		if all[i].listed() {
			rows = append(rows, row{i, p})
		}
	}
	slices.SortFunc(rows, func(a, c row) int {
		if d := all[a.spec].id - all[c.spec].id; d != 0 {
			return d
		}
		return a.pos - c.pos
	})
	for i, s := range all {
		if !s.listed() {
			rows = append(rows, row{i, -1})
		}
	}
	totals := map[string]int{}
	for n, r := range rows {
		s := all[r.spec]
		fileDesc := fmt.Sprintf("%s %dx%d", strings.ToUpper(s.kind.ext), s.kind.w, s.kind.h)
		switch s.defect {
		case defMissingFile:
			fileDesc = "absent"
		case defUndecodable:
			fileDesc = "text"
		case defDuplicateFile:
			fileDesc = "= 000101.jpg"
		case defUnknownImage:
			fileDesc = "(not listed)"
		case defEscape:
			fileDesc = "JPG 96x64, outside images/"
		}
		readable := true // the scan reads the header
		switch s.defect {
		case defMissingFile, defUndecodable, defEscape, defUnknownImage:
			readable = false
		}
		W, H := float64(s.kind.w), float64(s.kind.h)
		var parts []string
		valid := 0
		for _, o := range boxes[r.spec] {
			if o.raw != "" {
				parts = append(parts, fmt.Sprintf("bbox %s cat %d", o.raw, o.cat))
				continue
			}
			p := fmt.Sprintf("[%s, %s, %s, %s] cat %d", num(o.bbox[0]), num(o.bbox[1]), num(o.bbox[2]), num(o.bbox[3]), o.cat)
			if o.crowd {
				parts = append(parts, p+" crowd")
				continue
			}
			c := [4]float64{o.bbox[0], o.bbox[1], o.bbox[0] + o.bbox[2], o.bbox[1] + o.bbox[3]}
			ok := o.bbox[2] > 0 && o.bbox[3] > 0 && o.cat != unknownCategory
			if readable && (c[0] < -0.5 || c[1] < -0.5 || c[2] > W+0.5 || c[3] > H+0.5) {
				ok = false
			}
			if ok {
				valid++
				if readable {
					c = [4]float64{max(c[0], 0), max(c[1], 0), min(c[2], W), min(c[3], H)}
					p += fmt.Sprintf(" -> [%s, %s, %s, %s]", num(c[0]), num(c[1]), num(c[2]), num(c[3]))
				}
			}
			parts = append(parts, p)
		}
		boxText := strings.Join(parts, "; ")
		if boxText == "" {
			boxText = "(none)"
		}
		if s.second() {
			boxText = "(none: id 209's annotations belong to the first entry)"
		}
		reasons := s.defect.reasons
		what := s.defect.what
		if s.defect.note != "" {
			what += "; " + s.defect.note
		}
		if s.defect == defDuplicateID && !s.second() {
			reasons, what = "", "clean: the first entry with id 209"
		}
		for _, r := range strings.Fields(reasons) {
			totals[r]++
		}
		totals["samples"]++
		if valid == 0 {
			totals["no_box"]++ // validate.Counts.Empty, which the empty threshold uses
		}
		switch {
		case strings.Contains(reasons, "missing_file"):
			totals["missing"]++
		case strings.Trim(strings.NewReplacer("empty", "", "crowd_skipped", "").Replace(reasons), " ") != "":
			totals["invalid"]++
		default:
			totals["kept"]++
		}
		fmt.Fprintf(&b, "| %d | %d | %s | %s | %s | %d | %s | %s |\n", n, s.id, fileNameCell(s), fileDesc, boxText, valid, reasons, what)
	}
	n := totals["samples"]
	fmt.Fprintf(&b, `
## Totals

%d samples (%d images entries and 1 unknown_image placeholder): %d invalid, %d missing, %d kept
when skip_empty is false (clean, or with only empty or crowd_skipped). Samples per reason: `,
		n, n-1, totals["invalid"], totals["missing"], totals["kept"])
	var per []string
	for _, r := range []string{"missing_file", "path_escape", "bad_schema", "decode_error", "invalid_bbox", "bbox_out_of_bounds",
		"unknown_class", "unknown_image", "duplicate_image", "image_size_mismatch", "empty", "crowd_skipped"} {
		per = append(per, fmt.Sprintf("%s %d", r, totals[r]))
	}
	b.WriteString(strings.Join(per, ", "))
	fmt.Fprintf(&b, `.

Configured like configs/demo.jsonc (invalid max_ratio 0.5, missing 0.25, empty 0.2 warn) a
build passes: invalid %d/%d = %.2f, missing %d/%d = %.2f, empty (samples without a valid
box, validate.Counts.Empty) %d/%d = %.2f.
`, totals["invalid"], n, float64(totals["invalid"])/float64(n), totals["missing"], n, float64(totals["missing"])/float64(n),
		totals["no_box"], n, float64(totals["no_box"])/float64(n))
	return b.String()
}

func fileNameCell(s imageSpec) string {
	if !s.listed() {
		return "-"
	}
	return "`" + s.fileName() + "`"
}
