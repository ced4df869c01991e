package viewer

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	_ "image/jpeg" // source images of rejected samples
	"image/png"
	"io"
	"math"
	"path"
	"strings"
	"unicode/utf8"

	"warehouse-etl/analytics/records"
	"warehouse-etl/sources"
	"warehouse-etl/sources/capture"
	"warehouse-etl/sources/coco"
	"warehouse-etl/sources/yolo"
	"warehouse-etl/validate"
	"warehouse-etl/viewer/render"
)

// ThumbSize bounds a tile's picture, in pixels on each side.
const ThumbSize = 192

// FullSize bounds a rejected sample's picture on its page.
const FullSize = 1024

// maxSourcePixels bounds a source image the viewer decodes (checked from
// its header before decoding): a rejected sample may be rejected for its
// size, and the viewer must not be the thing that runs out of memory.
const maxSourcePixels = 64 << 20

// errNoImage says a sample has no picture to show (its source image is
// missing, not a file the viewer decodes, or the dataset root is unknown).
var errNoImage = errors.New("no image for this sample")

// sourceImageExts are the source files a rejected sample's picture is
// decoded from; episode sources keep frames inside container files.
var sourceImageExts = []string{".png", ".jpg", ".jpeg"}

// hasSourceImage says whether a rejected sample's image can be looked for.
func (v *Viewer) hasSourceImage(imagePath string) bool {
	if v.data == nil || imagePath == "" {
		return false
	}
	ext := strings.ToLower(path.Ext(imagePath))
	for _, e := range sourceImageExts {
		if ext == e {
			return true
		}
	}
	return false
}

// thumbSize is the size of a kept sample's thumbnail.
func (v *Viewer) thumbSize() (int, int) {
	return render.Fit(v.m.Transform.TargetWidth, v.m.Transform.TargetHeight, ThumbSize)
}

// samplePNG renders sample seq as PNG bytes: a kept sample from its shard
// tensor at the target size (full) or thumbnail size, with its boxes; a
// rejected one from its source image when it can be decoded, scaled to fit
// the thumbnail or, full, FullSize pixels.
func (v *Viewer) samplePNG(seq int, full bool) ([]byte, error) {
	ix, err := v.sampleIndex()
	if err != nil {
		return nil, err
	}
	if seq < 0 || seq >= ix.len() {
		return nil, errNoImage
	}
	var img image.Image
	if i := int(ix.index[seq]); i >= 0 {
		s, err := v.r.Sample(i)
		if err != nil {
			return nil, err
		}
		w, h := v.m.Transform.TargetWidth, v.m.Transform.TargetHeight
		if !full {
			w, h = v.thumbSize()
		}
		img = render.SampleScaled(v.m, s, w, h)
	} else {
		rec, err := ix.record(v.samples, seq)
		if err != nil {
			return nil, err
		}
		limit := ThumbSize
		if full {
			limit = FullSize
		}
		if img, err = v.sourceImage(ix, seq, rec, limit); err != nil {
			return nil, err
		}
	}
	var b bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&b, img); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// sourceImage decodes a rejected sample's source image under the dataset
// root (an episode sample's frame through its source, episodeFrame) and
// draws its label's boxes on it (refusedBoxes), scaled to fit limit. The
// os.Root refuses a path that leaves the root, through ".." or a symbolic
// link.
func (v *Viewer) sourceImage(ix *sampleIndex, seq int, rec *records.SampleLine, limit int) (image.Image, error) {
	var src image.Image
	var err error
	switch {
	case episodeKinds[v.m.Source.Kind]:
		src, err = v.episodeFrame(seq, ix)
	case v.hasSourceImage(rec.ImagePath):
		src, err = v.decodeSource(rec.ImagePath)
	default:
		err = errNoImage
	}
	if err != nil {
		return nil, err
	}
	w, h := src.Bounds().Dx(), src.Bounds().Dy()
	boxes := v.refusedBoxes(seq, rec, w, h)
	x0, y0, cw, ch := labelCanvas(boxes, w, h)
	tw, th := render.Fit(cw, ch, limit)
	sx, sy := float64(tw)/float64(cw), float64(th)/float64(ch)
	canvas := image.NewRGBA(image.Rect(0, 0, tw, th))
	draw.Draw(canvas, canvas.Bounds(), image.NewUniform(color.RGBA{48, 48, 48, 255}), image.Point{}, draw.Src)
	ix0, iy0 := int(math.Round(-x0*sx)), int(math.Round(-y0*sy))
	ix1, iy1 := int(math.Round((float64(w)-x0)*sx)), int(math.Round((float64(h)-y0)*sy))
	scaled := render.Scale(src, ix1-ix0, iy1-iy0)
	draw.Draw(canvas, image.Rect(ix0, iy0, ix1, iy1), scaled, image.Point{}, draw.Src)
	if cw != w || ch != h {
		render.DashedRect(canvas, ix0, iy0, ix1-1, iy1-1, render.LetterboxColor)
	}
	var drawn []render.Box
	for _, b := range boxes {
		n := [4]float32{float32((b.px[0] - x0) / float64(cw)), float32((b.px[1] - y0) / float64(ch)), float32((b.px[2] - x0) / float64(cw)), float32((b.px[3] - y0) / float64(ch))}
		drawn = append(drawn, render.Box{Box: n, Name: b.name, Color: b.color})
	}
	render.Draw(canvas, drawn)
	return canvas, nil
}

// labelCanvas is the canvas of a rejected sample's picture, in source
// pixels: its top-left corner (x0, y0) and size. It holds the w x h image
// and every box, up to half the image size around it: a box out of bounds
// is drawn where the label put it.
func labelCanvas(boxes []refusedBox, w, h int) (x0, y0 float64, cw, ch int) {
	x1, y1 := float64(w), float64(h)
	for _, b := range boxes {
		x0, y0 = math.Min(x0, b.px[0]), math.Min(y0, b.px[1])
		x1, y1 = math.Max(x1, b.px[2]), math.Max(y1, b.px[3])
	}
	x0, y0 = math.Max(x0, -float64(w)/2), math.Max(y0, -float64(h)/2)
	x1, y1 = math.Min(x1, 1.5*float64(w)), math.Min(y1, 1.5*float64(h))
	return x0, y0, int(math.Ceil(x1 - x0)), int(math.Ceil(y1 - y0))
}

// rejectedSize is the size a rejected sample's picture is shown at: its
// canvas (labelCanvas, from the label and the source size samples.jsonl
// records) fitted to limit, a small one enlarged by a whole factor towards
// enlarge (the browser scales it, pixelated). 0, 0 when the source size is
// unknown.
func (v *Viewer) rejectedSize(seq int, rec *records.SampleLine, limit, enlarge int) (int, int) {
	w, h := int(rec.Width), int(rec.Height)
	if w <= 0 || h <= 0 {
		return 0, 0
	}
	_, _, cw, ch := labelCanvas(v.refusedBoxes(seq, rec, w, h), w, h)
	tw, th := render.Fit(cw, ch, limit)
	k := max(1, enlarge/max(tw, th))
	return k * tw, k * th
}

// decodeSource decodes an image file under the dataset root, its size
// checked from the header first.
func (v *Viewer) decodeSource(rel string) (image.Image, error) {
	f, err := v.data.Open(rel)
	if err != nil {
		v.log.Debug("source image not readable", "path", rel, "err", err)
		return nil, errNoImage
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return nil, errNoImage
	}
	return decodeBounded(f)
}

// decodeBounded decodes a PNG or JPEG after its header says it has at most
// maxSourcePixels pixels.
func decodeBounded(f io.ReadSeeker) (image.Image, error) {
	cfg, _, err := image.DecodeConfig(f)
	if err != nil || cfg.Width <= 0 || cfg.Height <= 0 || int64(cfg.Width)*int64(cfg.Height) > maxSourcePixels {
		return nil, errNoImage
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	img, _, err := image.Decode(f)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errNoImage, err)
	}
	return img, nil
}

// refusedBox is one box of a rejected sample's label, in source pixels:
// drawn in its class colour when the build used it, else in RefusedColor
// with its reasons in its name.
type refusedBox struct {
	px    [4]float64
	name  string
	color color.RGBA
}

// labelRow is one box or line of a rejected sample's label for its page:
// where it is in the label, its class, its box and the build's verdict.
type labelRow struct {
	Where, Class, Box, Verdict string
	Refused                    bool
}

// maxLabelBytes bounds a label file the viewer parses.
const maxLabelBytes = 4 << 20

// refusedBoxes are the boxes the label of a rejected sample wrote, checked
// as the build checked them against a w x h image (labelRows): the used
// ones first, so that a refused box drawn over a used one (the same box
// listed twice, once with a bad class) stays visible.
func (v *Viewer) refusedBoxes(seq int, rec *records.SampleLine, w, h int) []refusedBox {
	var used, refused []refusedBox
	for _, r := range v.labelRows(seq, rec, w, h) {
		switch {
		case r.box == nil:
		case r.row.Refused:
			refused = append(refused, *r.box)
		default:
			used = append(used, *r.box)
		}
	}
	return append(used, refused...)
}

// checkedLabel is one entry of a rejected sample's label: its row on the
// page and, when it has a finite box, the box to draw.
type checkedLabel struct {
	row labelRow
	box *refusedBox
}

// labelRows reads a rejected sample's label through its source package,
// checked as the build checked it against a w x h image: a capture label
// (capture.LabelBoxes), a COCO image's annotations (coco.ImageLabel, from
// the background pass), a YOLO label file's lines (yolo.LabelLines). Other
// sources' samples have no label (nil).
func (v *Viewer) labelRows(seq int, rec *records.SampleLine, w, h int) []checkedLabel {
	var out []checkedLabel
	add := func(where string, class sources.ClassKey, px *[4]float64, reasons []validate.Reason, note string) {
		row := labelRow{Where: where, Class: v.classOf(class), Refused: len(reasons) > 0}
		ci := v.classIndex(class)
		if ci >= 0 {
			row.Class = render.ClassName(v.m, int32(ci))
		}
		var words []string
		for _, r := range reasons {
			words = append(words, string(r)+": "+describeReason(string(r)))
		}
		row.Verdict = strings.Join(words, "; ")
		if !row.Refused {
			row.Verdict = "used"
		}
		if note != "" {
			row.Verdict += " (" + note + ")"
		}
		c := checkedLabel{row: row}
		if px != nil && finite(px[:]) {
			b := *px
			// A box written backwards is drawn over the span it names.
			if b[0] > b[2] {
				b[0], b[2] = b[2], b[0]
			}
			if b[1] > b[3] {
				b[1], b[3] = b[3], b[1]
			}
			c.row.Box = fmt.Sprintf("%.1f %.1f %.1f %.1f", px[0], px[1], px[2], px[3])
			rb := refusedBox{px: b, name: row.Class, color: render.RefusedColor}
			if row.Refused {
				for _, r := range reasons {
					rb.name += " " + string(r)
				}
				if strings.HasPrefix(where, "line ") {
					rb.name = "L" + where[len("line "):] + " " + rb.name
				}
			} else if ci >= 0 {
				rb.color = render.ClassColor(ci)
			}
			c.box = &rb
		}
		out = append(out, c)
	}
	switch v.m.Source.Kind {
	case capture.Kind:
		if rec.LabelPath == "" || v.data == nil {
			return nil
		}
		data, err := readSmall(v.data, rec.LabelPath, maxLabelBytes)
		if err != nil {
			return nil
		}
		for i, b := range capture.LabelBoxes(data, v.m.Source.LabelKeys, w, h) {
			var reasons []validate.Reason
			if b.Reason != "" {
				reasons = []validate.Reason{b.Reason}
			}
			add(fmt.Sprintf("box %d", i+1), b.Class, b.Written, reasons, "")
		}
	case coco.Kind:
		ds := v.labelSource()
		if ds == nil {
			return nil
		}
		for i, b := range ds.coco[int32(seq)] {
			var px *[4]float64
			if b.HasBox {
				px = &b.Corners
			}
			add(fmt.Sprintf("annotation %d", i+1), b.Class, px, b.Reasons, "")
		}
	case yolo.Kind:
		ds := v.labelSource()
		if ds == nil || rec.LabelPath == "" || v.data == nil {
			return nil
		}
		data, err := readSmall(v.data, rec.LabelPath, maxLabelBytes)
		if err != nil {
			return nil
		}
		for _, l := range ds.src.(*yolo.Source).LabelLines(data, w, h) {
			var px *[4]float64
			if l.HasBox {
				px = &[4]float64{l.Norm[0] * float64(w), l.Norm[1] * float64(h), l.Norm[2] * float64(w), l.Norm[3] * float64(h)}
			}
			note := ""
			if l.Duplicate {
				note = "a duplicate of an earlier line, dropped"
			}
			class := sources.ClassKey{ID: l.Class, HasID: true}
			if !l.HasBox {
				class = sources.ClassKey{Name: "?"}
			}
			add(fmt.Sprintf("line %d", l.Line), class, px, l.Reasons, note)
			out[len(out)-1].row.Where += ": " + truncate(l.Text, 80)
		}
	}
	return out
}

// truncate shortens s to at most n bytes (on a rune boundary), marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

func finite(v []float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) || math.Abs(x) > 1e7 {
			return false
		}
	}
	return true
}

// classIndex is the manifest's index of a label's class key, -1 if none:
// the key's name as the build names it (pipeline's className: the name,
// else class_<id>, else "object") or its numeric id.
func (v *Viewer) classIndex(k sources.ClassKey) int {
	name := v.classOf(k)
	for _, c := range v.m.Classes {
		if c.Name == name || (k.HasID && c.ID != nil && *c.ID == k.ID) {
			return c.Index
		}
	}
	return -1
}

// classOf names a label's class key as the build does.
func (v *Viewer) classOf(k sources.ClassKey) string {
	switch {
	case k.Name != "":
		return k.Name
	case k.HasID:
		return fmt.Sprintf("class_%d", k.ID)
	}
	return "object"
}
