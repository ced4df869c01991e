package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"warehouse-etl/analytics/records"
	"warehouse-etl/config"
	"warehouse-etl/sources"
	"warehouse-etl/validate"
	"warehouse-etl/viewer/render"
)

// The tests of rejected samples' pictures work out where a refused box
// must be from the dataset's own files, read here without the source
// packages (the COCO JSON with encoding/json, a YOLO label by splitting its
// lines), and look for the refused colour there in the picture the server
// returns (or, for YOLO, in Chromium's screenshot of the grid). A rejected
// episode frame must be the frame its source reads for that sample.

// fetchPNG gets a picture from the server.
func fetchPNG(t *testing.T, url string) *image.RGBA {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	img, err := png.Decode(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	rgba := image.NewRGBA(img.Bounds())
	draw.Draw(rgba, rgba.Bounds(), img, img.Bounds().Min, draw.Src)
	return rgba
}

// labelCanvas is where a rejected sample's picture puts a w x h source
// image and the boxes of its label (docs/viewer.md): the image grown to
// hold every box, by at most half its size on each side; at full size a
// picture under 1024 pixels is not scaled, so a source pixel is a picture
// pixel shifted by (x0, y0).
func labelCanvas(boxes [][4]float64, w, h int) (x0, y0 float64) {
	x0, y0 = 0, 0
	for _, b := range boxes {
		x0, y0 = math.Min(x0, math.Min(b[0], b[2])), math.Min(y0, math.Min(b[1], b[3]))
	}
	return math.Max(x0, -float64(w)/2), math.Max(y0, -float64(h)/2)
}

// checkRefusedBox checks the refused colour at the middle of each edge of
// box b (source pixels) that lies inside the picture and clear of the
// strip of its name (13 rows above its top, or inside it at the top of the
// picture): within a pixel of where the edge must be. It returns how many
// points it checked.
func checkRefusedBox(t *testing.T, what string, img *image.RGBA, b [4]float64, x0, y0 float64) int {
	t.Helper()
	W, H := img.Rect.Dx(), img.Rect.Dy()
	bx0, by0, bx1, by1 := b[0]-x0, b[1]-y0, b[2]-x0, b[3]-y0
	top := int(math.Floor(by0)) - 13
	if top < 0 {
		top = int(math.Floor(by0)) + 2
	}
	clearOfName := func(y int) bool { return y < top || y >= top+13 }
	midX, midY := int((bx0+bx1)/2), int((by0+by1)/2)
	midX, midY = min(max(midX, 0), W-1), min(max(midY, 0), H-1)
	type probe struct {
		x, y   int
		dx, dy int // the direction a pixel of rounding may shift the edge
		inside bool
	}
	probes := []probe{
		{int(math.Floor(bx0)), midY, 1, 0, bx0 >= 0},
		{int(math.Ceil(bx1)) - 1, midY, 1, 0, bx1 <= float64(W)},
		{midX, int(math.Ceil(by1)) - 1, 0, 1, by1 <= float64(H)},
		{midX, int(math.Floor(by0)), 0, 1, by0 >= 0},
	}
	checked := 0
	for _, p := range probes {
		if !p.inside || !clearOfName(p.y) || bx1-bx0 < 6 || by1-by0 < 6 {
			continue
		}
		checked++
		found := false
		for k := -1; k <= 1; k++ {
			if q := image.Pt(p.x+k*p.dx, p.y+k*p.dy); q.In(img.Rect) && near(img.RGBAAt(q.X, q.Y), render.RefusedColor, 3) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: refused box %v: no refused colour at (%d, %d) of the %dx%d picture (got %v)", what, b, p.x, p.y, W, H, img.RGBAAt(p.x, p.y))
		}
	}
	return checked
}

// checkRefusedPicture checks every refused box in the full picture of
// rejected sample rec, whose label has boxes (refused among them), with
// checkRefusedBox, and returns how many points it checked.
func checkRefusedPicture(t *testing.T, base string, rec records.SampleLine, boxes, refused [][4]float64) int {
	t.Helper()
	img := fetchPNG(t, fmt.Sprintf("%s/img/full/%d.png", base, rec.Seq))
	x0, y0 := labelCanvas(boxes, int(rec.Width), int(rec.Height))
	n := 0
	for _, b := range refused {
		n += checkRefusedBox(t, fmt.Sprintf("sample %d (%v)", rec.Seq, rec.Reasons), img, b, x0, y0)
	}
	return n
}

// cocoFile is what the test reads of a COCO instances file.
type cocoFile struct {
	Images []struct {
		ID       uint64 `json:"id"`
		FileName string `json:"file_name"`
	} `json:"images"`
	Annotations []struct {
		ImageID    json.RawMessage `json:"image_id"`
		CategoryID json.RawMessage `json:"category_id"`
		BBox       json.RawMessage `json:"bbox"`
		IsCrowd    json.RawMessage `json:"iscrowd"`
	} `json:"annotations"`
	Categories []struct {
		ID int64 `json:"id"`
	} `json:"categories"`
}

// outOfBounds is validate's rule for a box in pixels, restated.
func outOfBounds(b [4]float64, w, h int) bool {
	tol := validate.BoundsTolerancePx
	return b[0] < -tol || b[1] < -tol || b[2] > float64(w)+tol || b[3] > float64(h)+tol
}

// A rejected COCO image's picture outlines each annotation the build refused
// (a category not in categories, a box outside the image) in the refused
// colour where its bbox puts it, and its page lists each annotation with
// its verdict.
func TestServeRefusedCOCOBoxes(t *testing.T) {
	dir, m, base := serveDemo(t, "coco", t.TempDir())
	var doc cocoFile
	raw, err := os.ReadFile("../../testdata/coco/annotations/instances_demo.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	cats := map[int64]bool{}
	for _, c := range doc.Categories {
		cats[c.ID] = true
	}
	checked, samples := 0, 0
	for _, rec := range readSamples(t, dir) {
		if rec.Kept || rec.Width == 0 || !slices.ContainsFunc(rec.Reasons, func(r string) bool {
			return r == string(validate.ReasonUnknownClass) || r == string(validate.ReasonBBoxOutOfBounds)
		}) {
			continue
		}
		w, h := int(rec.Width), int(rec.Height)
		var boxes, refused [][4]float64
		for _, a := range doc.Annotations {
			// Only annotations of the right types: the others are
			// bad_schema, without a box to draw.
			var image uint64
			var cat int64
			var bbox []float64
			if json.Unmarshal(a.ImageID, &image) != nil || image != rec.Frame || json.Unmarshal(a.CategoryID, &cat) != nil ||
				json.Unmarshal(a.BBox, &bbox) != nil || len(bbox) != 4 || !(bbox[2] > 0) || !(bbox[3] > 0) ||
				(a.IsCrowd != nil && string(a.IsCrowd) != "0" && string(a.IsCrowd) != "false") {
				continue
			}
			b := [4]float64{bbox[0], bbox[1], bbox[0] + bbox[2], bbox[1] + bbox[3]}
			boxes = append(boxes, b)
			if !cats[cat] || outOfBounds(b, w, h) {
				refused = append(refused, b)
			}
		}
		if len(refused) == 0 {
			t.Errorf("sample %d (%v): no refused annotation found in the JSON", rec.Seq, rec.Reasons)
			continue
		}
		n := checkRefusedPicture(t, base, rec, boxes, refused)
		if n > 0 {
			samples++
		}
		checked += n
		page := httpGet(t, fmt.Sprintf("%s/sample/%d", base, rec.Seq))
		if got := strings.Count(page, `<tr class="refused"><td class="words"><code>annotation `); got < len(refused) {
			t.Errorf("sample %d: the page lists %d refused annotations, the JSON has %d", rec.Seq, got, len(refused))
		}
		for _, r := range rec.Reasons {
			if (r == string(validate.ReasonUnknownClass) || r == string(validate.ReasonBBoxOutOfBounds)) && !strings.Contains(page, `<td class="words">`+r+": ") {
				t.Errorf("sample %d: the label table does not say %s in words", rec.Seq, r)
			}
		}
	}
	if samples < 2 || checked < 4 {
		t.Errorf("checked %d points on %d samples of the %s demo; want refused boxes of at least 2 samples", checked, samples, m.Source.Kind)
	}
}

// yoloLine is a label line read by the test: class cx cy w h.
type yoloLine struct {
	n     int
	text  string
	class int64
	px    [4]float64
	box   bool
}

// readYOLOLabel splits a label file into lines and reads the 5-field ones.
func readYOLOLabel(t *testing.T, path string, w, h int) []yoloLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []yoloLine
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		l := yoloLine{n: n, text: strings.TrimSpace(sc.Text())}
		if l.text == "" {
			continue
		}
		fs := strings.Fields(l.text)
		var v [5]float64
		ok := len(fs) == 5
		for i := 0; ok && i < 5; i++ {
			v[i], err = strconv.ParseFloat(fs[i], 64)
			ok = err == nil
		}
		if ok && v[3] > 0 && v[4] > 0 {
			l.class, l.box = int64(v[0]), true
			l.px = [4]float64{(v[1] - v[3]/2) * float64(w), (v[2] - v[4]/2) * float64(h), (v[1] + v[3]/2) * float64(w), (v[2] + v[4]/2) * float64(h)}
		}
		out = append(out, l)
	}
	return out
}

// A rejected YOLO sample's picture draws every line of its label file, the
// refused ones (a class not in names, a box outside the image) in the
// refused colour where the line puts them, in the PNG and in Chromium's
// screenshot of the grid; its page lists every line by number with the
// reason it was refused, a line that does not parse included.
func TestServeRefusedYOLOLines(t *testing.T) {
	dir, m, base := serveDemo(t, "yolo", t.TempDir())
	nc := int64(len(m.Classes))
	checked, samples, unparsed := 0, 0, 0
	var shotSeq int64 = -1
	var shotBoxes, shotRefused [][4]float64
	var shotW, shotH int
	for _, rec := range readSamples(t, dir) {
		if rec.Kept || rec.Width == 0 || rec.LabelPath == "" {
			continue
		}
		w, h := int(rec.Width), int(rec.Height)
		lines := readYOLOLabel(t, filepath.Join("../../testdata/yolo", rec.LabelPath), w, h)
		page := httpGet(t, fmt.Sprintf("%s/sample/%d", base, rec.Seq))
		var boxes, refused [][4]float64
		for _, l := range lines {
			row := fmt.Sprintf(`<code>line %d: %s</code>`, l.n, html.EscapeString(l.text))
			if !strings.Contains(page, row) {
				t.Errorf("sample %d: the page does not list %s", rec.Seq, row)
			}
			if !l.box {
				unparsed++
				if !strings.Contains(page, `<tr class="refused"><td class="words">`+row) {
					t.Errorf("sample %d: line %d (%q) does not parse as a box and is not marked refused", rec.Seq, l.n, l.text)
				}
				continue
			}
			boxes = append(boxes, l.px)
			if l.class < 0 || l.class >= nc || outOfBounds(l.px, w, h) {
				refused = append(refused, l.px)
				if !strings.Contains(page, `<tr class="refused"><td class="words">`+row) {
					t.Errorf("sample %d: line %d is not marked refused", rec.Seq, l.n)
				}
			}
		}
		if len(refused) == 0 {
			continue
		}
		n := checkRefusedPicture(t, base, rec, boxes, refused)
		if n > 0 {
			samples++
			if shotSeq < 0 && slices.Contains(rec.Reasons, string(validate.ReasonBBoxOutOfBounds)) {
				shotSeq, shotBoxes, shotRefused, shotW, shotH = rec.Seq, boxes, refused, w, h
			}
		}
		checked += n
	}
	if samples < 2 || checked < 4 || unparsed == 0 {
		t.Errorf("checked %d points on %d samples, %d unparsable lines; want refused lines of at least 2 samples and one line that does not parse", checked, samples, unparsed)
	}
	if shotSeq < 0 {
		t.Fatal("no rejected sample with a box out of bounds to look at in the browser")
	}
	// In the browser: the grid of bbox_out_of_bounds shows that sample
	// first; its thumbnail is the picture fitted to 192 pixels.
	chromium(t)
	shot := screenshot(t, base+"/samples?reason=bbox_out_of_bounds&status=rejected", 1300, 700)
	corners := frameCorners(shot)
	if len(corners) == 0 {
		savePNG(t, shot, "yolo-rejected-grid.png")
		t.Fatal("no picture in the screenshot of the grid")
	}
	full := fetchPNG(t, fmt.Sprintf("%s/img/full/%d.png", base, shotSeq))
	tw, th := render.Fit(full.Rect.Dx(), full.Rect.Dy(), 192)
	if tw != full.Rect.Dx() || th != full.Rect.Dy() {
		t.Skipf("sample %d's picture is scaled in its thumbnail: the screenshot check needs one that is not", shotSeq)
	}
	// A picture smaller than the thumbnail is enlarged by a whole factor
	// k: each of its pixels is read back from the centre of its square.
	o := corners[0].Add(image.Pt(2, 2))
	k := max(1, 192/max(tw, th))
	tile := image.NewRGBA(image.Rect(0, 0, tw, th))
	for y := range th {
		for x := range tw {
			tile.SetRGBA(x, y, shot.RGBAAt(o.X+k*x+k/2, o.Y+k*y+k/2))
		}
	}
	x0, y0 := labelCanvas(shotBoxes, shotW, shotH)
	n := 0
	for _, b := range shotRefused {
		n += checkRefusedBox(t, fmt.Sprintf("screenshot, sample %d", shotSeq), tile, b, x0, y0)
	}
	if n == 0 || t.Failed() {
		savePNG(t, shot, "yolo-rejected-grid.png")
		t.Errorf("checked %d points in the screenshot", n)
	}
}

// demoSource opens the source of a demo config (paths made absolute) as the
// build does.
func demoSource(t *testing.T, name string) sources.Source {
	t.Helper()
	cfg, err := config.Load(demoConfig(t, name, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	src, err := cfg.Source.Settings.Open(cfg.Resolve(cfg.Source.Root), cfg.Resolve, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := src.(interface{ Close() error }); ok {
		t.Cleanup(func() { c.Close() })
	}
	return src
}

// frameImage decodes what a source's ReadImage returned; nil when the
// bytes do not decode.
func frameImage(im sources.Image) image.Image {
	if im.Encoded != nil {
		img, _, err := image.Decode(bytes.NewReader(im.Encoded))
		if err != nil {
			return nil
		}
		return img
	}
	out := image.NewRGBA(image.Rect(0, 0, im.Width, im.Height))
	for y := range im.Height {
		for x := range im.Width {
			p := im.Pixels[y*im.Stride+3*x:]
			out.SetRGBA(x, y, color.RGBA{p[0], p[1], p[2], 255})
		}
	}
	return out
}

// A rejected episode frame whose image is fine (rejected for its extras,
// its timing, its episode) is shown: the picture the server returns is the
// frame the source package reads for that sample, pixel for pixel, and so
// is its tile in Chromium's screenshot of the rejected samples; frames
// without an image (camera missing, undecodable) have none, and their
// tiles say so.
func TestServeRejectedEpisodeFrames(t *testing.T) {
	for _, demo := range []string{"kdb", "wshard", "roverd"} {
		t.Run(demo, func(t *testing.T) {
			dir, _, base := serveDemo(t, demo, t.TempDir())
			recs := readSamples(t, dir)
			want := map[int64]image.Image{}
			src := demoSource(t, demo)
			err := src.Scan(context.Background(), func(s *sources.Sample) error {
				if int(s.Seq) >= len(recs) || recs[s.Seq].Kept || s.Locator == "" || slices.ContainsFunc(s.Reasons, func(r validate.Reason) bool {
					return r.Class() == validate.ClassMissing || r == validate.ReasonDecodeError
				}) {
					return nil
				}
				im, err := src.ReadImage(s)
				if err != nil {
					return nil // a late decode error: the viewer has nothing to show either
				}
				if img := frameImage(im); img != nil {
					want[s.Seq] = img
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(want) == 0 {
				t.Fatalf("the %s demo has no rejected frame with a readable image", demo)
			}
			for seq, frame := range want {
				if recs[seq].Error != "" {
					continue
				}
				got := fetchPNG(t, fmt.Sprintf("%s/img/full/%d.png", base, seq))
				if got.Rect.Size() != frame.Bounds().Size() {
					t.Errorf("sample %d (%v): picture %v, frame %v", seq, recs[seq].Reasons, got.Rect.Size(), frame.Bounds().Size())
					continue
				}
				bad := 0
				for y := range got.Rect.Dy() {
					for x := range got.Rect.Dx() {
						r, g, b, _ := frame.At(frame.Bounds().Min.X+x, frame.Bounds().Min.Y+y).RGBA()
						if !near(got.RGBAAt(x, y), color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 255}, 2) {
							bad++
						}
					}
				}
				if bad > 0 {
					t.Errorf("sample %d (%v): %d pixels differ from the frame its source reads", seq, recs[seq].Reasons, bad)
				}
			}
			grid := httpGet(t, base+"/samples?status=rejected")
			for _, rec := range recs {
				tileRe := fmt.Sprintf(`data-seq="%d">`, rec.Seq)
				i := strings.Index(grid, tileRe)
				if rec.Kept || i < 0 {
					continue
				}
				end := strings.Index(grid[i:], "</figure>")
				hasImg := strings.Contains(grid[i:i+end], "<img")
				if _, ok := want[rec.Seq]; ok && rec.Error == "" && !hasImg {
					t.Errorf("sample %d (%v): its tile shows no picture", rec.Seq, rec.Reasons)
				}
				if _, ok := want[rec.Seq]; !ok && hasImg {
					t.Errorf("sample %d (%v): its tile links a picture the source has not", rec.Seq, rec.Reasons)
				}
			}
			// In the browser: the first rejected tile with a picture
			// shows the frame (the demos' frames fit a thumbnail).
			first := int64(-1)
			for _, seq := range tileSeqs(grid) {
				i := strings.Index(grid, fmt.Sprintf(`data-seq="%d">`, seq))
				if end := strings.Index(grid[i:], "</figure>"); strings.Contains(grid[i:i+end], "<img") {
					first = int64(seq)
					break
				}
			}
			frame, ok := want[first]
			if !ok {
				t.Fatalf("the first rejected tile with a picture is sample %d, not one of the frames read", first)
			}
			chromium(t)
			shot := screenshot(t, base+"/samples?status=rejected", 1300, 1100)
			corners := frameCorners(shot)
			if len(corners) == 0 {
				savePNG(t, shot, demo+"-rejected-grid.png")
				t.Fatal("no picture in the screenshot of the grid")
			}
			// A frame smaller than the thumbnail is shown enlarged by a
			// whole factor k: frame pixel (x, y) is the k x k square at
			// (k x, k y) of the picture; its centre is checked.
			o := corners[0].Add(image.Pt(2, 2))
			fb := frame.Bounds()
			k := max(1, 192/max(fb.Dx(), fb.Dy()))
			bad := 0
			for y := range fb.Dy() {
				for x := range fb.Dx() {
					r, g, b, _ := frame.At(fb.Min.X+x, fb.Min.Y+y).RGBA()
					if !near(shot.RGBAAt(o.X+k*x+k/2, o.Y+k*y+k/2), color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 255}, 3) {
						bad++
					}
				}
			}
			if bad > 0 {
				savePNG(t, shot, demo+"-rejected-grid.png")
				t.Errorf("sample %d: %d of the %d pixels of its tile in the screenshot differ from its frame", first, bad, fb.Dx()*fb.Dy())
			}
		})
	}
}
