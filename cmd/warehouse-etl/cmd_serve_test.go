package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"warehouse-etl/analytics/records"
	"warehouse-etl/validate"
	"warehouse-etl/viewer/render"
	"warehouse-etl/warehouse"
)

// The viewer tests build the demo warehouses with the CLI, start serve on
// 127.0.0.1 (port 0) in-process, and look at the pages with Debian's
// headless Chromium: --dump-dom for what the page says, --screenshot for
// what it shows. Without chromium they are skipped, except under CI=true
// (.ci/run installs the chromium package), where that fails.

// viewerDemos are the demo configs the viewer is checked on: capture,
// COCO, YOLO and the three episode sources.
var viewerDemos = []string{"demo", "coco", "yolo", "kdb", "wshard", "roverd"}

// buildDemo builds configs/<name>.jsonc with its paths made absolute and its
// output root under outRoot, through the CLI, and returns the version
// directory.
func buildDemo(t *testing.T, name, outRoot string, replace ...string) string {
	t.Helper()
	dir, _ := mustBuild(t, demoConfig(t, name, outRoot, replace...), nil)
	return dir
}

// demoConfig writes configs/<name>.jsonc with its paths made absolute and
// its output root under outRoot (and each replace pair applied) to a temp
// dir and returns its path.
func demoConfig(t *testing.T, name, outRoot string, replace ...string) string {
	t.Helper()
	raw, err := os.ReadFile("../../configs/" + name + ".jsonc")
	if err != nil {
		t.Fatal(err)
	}
	testdata, err := filepath.Abs("../../testdata")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(raw), `"../testdata/`, strconv.Quote(testdata + "/")[:len(testdata)+2])
	text = strings.ReplaceAll(text, `"../out/`, strconv.Quote(outRoot + "/")[:len(outRoot)+2])
	for i := 0; i+1 < len(replace); i += 2 {
		if !strings.Contains(text, replace[i]) {
			t.Fatalf("configs/%s.jsonc no longer contains %s", name, replace[i])
		}
		text = strings.ReplaceAll(text, replace[i], replace[i+1])
	}
	cfg := filepath.Join(t.TempDir(), name+".jsonc")
	if err := os.WriteFile(cfg, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// startServe runs serve in-process on a free loopback port until the test
// ends and returns its base URL.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	base, _ := startStoppableServe(t, args...)
	return base
}

// startStoppableServe is startServe with a function that stops the server
// (and checks it stopped cleanly) before the test ends.
func startStoppableServe(t *testing.T, args ...string) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	var stderr bytes.Buffer
	var opts serveOptions
	fs := newFlagSet(io.Discard, "serve", serveSynopsis)
	opts.addFlags(fs)
	if err := parseFlags(fs, append([]string{"--addr", "127.0.0.1:0", "--quiet"}, args...)); err != nil {
		t.Fatal(err)
	}
	opts.ready = func(a string) { ready <- a }
	go func() { done <- runServe(ctx, opts, streams{stdout: io.Discard, stderr: &stderr}) }()
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("serve exited: %v\n%s", err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return "http://" + addr, stop
}

// serveDemo builds a demo under out and serves it: its version directory,
// manifest and base URL.
func serveDemo(t *testing.T, demo, out string) (string, *warehouse.Manifest, string) {
	t.Helper()
	dir := buildDemo(t, demo, out)
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, m, startServe(t, "--tensor-warehouse", dir)
}

// chromium returns the browser's path, skipping the test without one
// (failing it under CI=true).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("CI=true and no chromium on PATH: .ci/run installs Debian's chromium package")
	}
	t.Skip("no chromium on PATH (apt-get install chromium)")
	return ""
}

// browse runs headless Chromium on url with extra flags and returns its
// stdout.
func browse(t *testing.T, url string, flags ...string) []byte {
	t.Helper()
	bin := chromium(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args := append([]string{"--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars",
		"--force-device-scale-factor=1", "--no-first-run", "--user-data-dir=" + t.TempDir()}, flags...)
	cmd := exec.CommandContext(ctx, bin, append(args, url)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", url, err, errb.String())
	}
	return out.Bytes()
}

// dumpDOM is the page's DOM after Chromium loaded it.
func dumpDOM(t *testing.T, url string) string {
	t.Helper()
	return string(browse(t, url, "--dump-dom"))
}

// screenshot is what Chromium shows of url in a w x h window.
func screenshot(t *testing.T, url string, w, h int) *image.RGBA {
	t.Helper()
	p := filepath.Join(t.TempDir(), "shot.png")
	browse(t, url, "--screenshot="+p, fmt.Sprintf("--window-size=%d,%d", w, h))
	img := decodePNG(t, p)
	rgba := image.NewRGBA(img.Bounds())
	draw.Draw(rgba, rgba.Bounds(), img, img.Bounds().Min, draw.Src)
	return rgba
}

// cell reads the number in the first element with the attribute attr="val".
func cell(t *testing.T, dom, attr, val string) int64 {
	t.Helper()
	re := regexp.MustCompile(regexp.QuoteMeta(attr+`="`+val+`"`) + `[^>]*>(?:<a [^>]*>)?\s*(-?[0-9]+)`)
	m := re.FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no %s=%q with a number in the page", attr, val)
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// The overview's numbers are the manifest's, for every demo.
func TestServeOverviewInBrowser(t *testing.T) {
	chromium(t)
	out := t.TempDir()
	for _, demo := range viewerDemos {
		t.Run(demo, func(t *testing.T) {
			_, m, base := serveDemo(t, demo, out)
			dom := dumpDOM(t, base+"/")
			if !strings.Contains(dom, `<code id="version">`+m.Version+`</code>`) {
				t.Errorf("the overview does not show version %s", m.Version)
			}
			tot := m.Summary.Total
			for k, want := range map[string]int64{"total": tot.Total, "kept": tot.Kept, "skipped": tot.Skipped, "non_empty": tot.NonEmpty,
				"empty": tot.Empty, "invalid": tot.Invalid, "missing_image": tot.MissingImage, "missing_file": tot.MissingFile} {
				if got := cell(t, dom, "data-k", k); got != want {
					t.Errorf("totals %s: page %d, manifest %d", k, got, want)
				}
			}
			for r, want := range tot.ByReason {
				if got := cell(t, dom, "data-reason", string(r)); got != want {
					t.Errorf("reason %s: page %d, manifest %d", r, got, want)
				}
			}
			for _, run := range m.Summary.Runs {
				row := regexp.MustCompile(`(?s)data-run="` + regexp.QuoteMeta(run.Name) + `">.*?</tr>`).FindString(dom)
				nums := regexp.MustCompile(`<td>(\d+)</td>`).FindAllStringSubmatch(row, -1)
				c := run.Counts
				want := []int64{c.Total, c.Kept, c.Skipped, c.Empty, c.Invalid, c.Missing()}
				if len(nums) < len(want) {
					t.Fatalf("run %s: row %q", run.Name, row)
				}
				for i, w := range want {
					if got, _ := strconv.ParseInt(nums[i][1], 10, 64); got != w {
						t.Errorf("run %s column %d: page %d, manifest %d", run.Name, i, got, w)
					}
				}
			}
			for name, want := range map[string]int64{"invalid": tot.Invalid, "missing": tot.Missing(), "empty": tot.Empty} {
				row := regexp.MustCompile(`(?s)data-threshold="` + name + `">.*?</tr>`).FindString(dom)
				if got := cell(t, row, "data-k", "count"); got != want {
					t.Errorf("threshold %s: page count %d, manifest %d", name, got, want)
				}
			}
		})
	}
}

// matchCount is the number of matches the grid says it has.
func matchCount(t *testing.T, dom string) int {
	t.Helper()
	m := regexp.MustCompile(`data-matches="(\d+)"`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatal("the grid page has no match count")
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// seqsWith lists, in order, the samples.jsonl lines a predicate selects.
func seqsWith(recs []records.SampleLine, keep func(records.SampleLine) bool) []int {
	var out []int
	for _, r := range recs {
		if keep(r) {
			out = append(out, int(r.Seq))
		}
	}
	return out
}

var tileSeq = regexp.MustCompile(`<figure class="tile [a-z]+" data-seq="(\d+)">`)

func tileSeqs(dom string) []int {
	var out []int
	for _, m := range tileSeq.FindAllStringSubmatch(dom, -1) {
		n, _ := strconv.Atoi(m[1])
		out = append(out, n)
	}
	return out
}

// The grid shows exactly the samples of a reason (the most common one of
// each demo in the browser, every other reason and the kept/rejected
// filters over HTTP), in scan order, with the right count.
func TestServeGridReasonFilterInBrowser(t *testing.T) {
	chromium(t)
	out := t.TempDir()
	for _, demo := range viewerDemos {
		t.Run(demo, func(t *testing.T) {
			dir, m, base := serveDemo(t, demo, out)
			recs := readSamples(t, dir)
			var top string
			for r, n := range m.Summary.Total.ByReason {
				if top == "" || n > m.Summary.Total.ByReason[validate.Reason(top)] || (n == m.Summary.Total.ByReason[validate.Reason(top)] && string(r) < top) {
					top = string(r)
				}
			}
			check := func(query string, dom string, want []int) {
				t.Helper()
				if got := matchCount(t, dom); got != len(want) {
					t.Errorf("%s: page says %d matches, samples.jsonl has %d", query, got, len(want))
				}
				if got, w := tileSeqs(dom), want[:min(len(want), 48)]; !slices.Equal(got, w) {
					t.Errorf("%s: tiles %v, samples.jsonl %v", query, got, w)
				}
			}
			if top != "" {
				want := seqsWith(recs, func(r records.SampleLine) bool { return slices.Contains(reasonStrings(r), top) })
				check("reason="+top, dumpDOM(t, base+"/samples?reason="+top), want)
			}
			for r := range m.Summary.Total.ByReason {
				want := seqsWith(recs, func(rec records.SampleLine) bool { return slices.Contains(reasonStrings(rec), string(r)) })
				check("reason="+string(r), httpGet(t, base+"/samples?reason="+string(r)), want)
			}
			check("status=kept", httpGet(t, base+"/samples?status=kept"), seqsWith(recs, func(r records.SampleLine) bool { return r.Kept }))
			check("status=rejected", httpGet(t, base+"/samples?status=rejected"), seqsWith(recs, func(r records.SampleLine) bool { return !r.Kept }))
		})
	}
}

func httpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %s\n%s", url, resp.Status, b)
	}
	return string(b)
}

// thumbFrame is the colour of the border around every picture (style.css).
var thumbFrame = color.RGBA{0x01, 0x35, 0x79, 255}

func near(a, b color.RGBA, tol int) bool {
	d := func(x, y uint8) int { return max(int(x)-int(y), int(y)-int(x)) }
	return d(a.R, b.R) <= tol && d(a.G, b.G) <= tol && d(a.B, b.B) <= tol
}

// frameCorners are the top-left corners of the pictures' borders in a
// screenshot, in reading order (the order of the tiles in the page).
func frameCorners(img *image.RGBA) []image.Point {
	is := func(x, y int) bool {
		return image.Pt(x, y).In(img.Rect) && near(img.RGBAAt(x, y), thumbFrame, 2)
	}
	var out []image.Point
	for y := img.Rect.Min.Y; y < img.Rect.Max.Y; y++ {
		for x := img.Rect.Min.X; x < img.Rect.Max.X; x++ {
			if is(x, y) && !is(x-1, y) && !is(x, y-1) && is(x+1, y) && is(x, y+1) && is(x+5, y) && is(x, y+5) {
				out = append(out, image.Pt(x, y))
			}
		}
	}
	return out
}

// A tile's boxes are drawn where the labels put them: the screenshot of the
// grid, at each edge of a kept sample's box (its shard box scaled to the
// thumbnail; for the capture demo also checked against the label file's
// bbox_px through the letterbox samples.jsonl records), has the box's
// class colour.
func TestServeTileBoxesInScreenshot(t *testing.T) {
	chromium(t)
	out := t.TempDir()
	for _, demo := range []string{"demo", "coco", "yolo"} {
		t.Run(demo, func(t *testing.T) {
			dir := buildDemo(t, demo, out)
			r, err := warehouse.Open(dir, warehouse.OpenOptions{IgnoreThresholds: true})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			m := r.Manifest()
			recs := readSamples(t, dir)
			W, H := m.Transform.TargetWidth, m.Transform.TargetHeight
			scale := min(1, 192/float64(max(W, H)))
			tw, th := int(float64(W)*scale+0.5), int(float64(H)*scale+0.5)
			kept := seqsWith(recs, func(r records.SampleLine) bool { return r.Kept })
			// The first box among the first 12 kept tiles whose edges no
			// other box or name label covers (the check points).
			pick, pos := -1, -1
			var box [4]float32
			var class int32
			var points []image.Point
			for k, seq := range kept[:min(12, len(kept))] {
				s, err := r.Sample(int(recs[seq].Index))
				if err != nil {
					t.Fatal(err)
				}
				boxes := s.Boxes()
				for j, b := range boxes {
					if p := edgePoints(b, boxes, j, tw, th, m, s.ClassIndex()); len(p) >= 6 {
						pick, pos, box, class, points = seq, k, b, s.ClassIndex()[j], p
						break
					}
				}
				if pick >= 0 {
					break
				}
			}
			if pick < 0 {
				t.Fatalf("no box among the first 12 kept samples has edges free to check")
			}
			if demo == "demo" {
				checkLabelBox(t, recs[pick], box, W, H)
			}
			shot := screenshot(t, startServe(t, "--tensor-warehouse", dir)+"/samples?status=kept", 1300, 1100)
			corners := frameCorners(shot)
			if len(corners) <= pos {
				t.Fatalf("found %d pictures in the screenshot, want at least %d", len(corners), pos+1)
			}
			o := corners[pos].Add(image.Pt(2, 2)) // inside the 2-pixel border
			want := render.ClassColor(int(class))
			for _, p := range points {
				if got := shot.RGBAAt(o.X+p.X, o.Y+p.Y); !near(got, want, 3) {
					t.Errorf("sample %d (tile %d) box %v: thumbnail pixel %v is %v, want the class colour %v", pick, pos, box, p, got, want)
				}
			}
			if t.Failed() {
				savePNG(t, shot, demo+"-grid.png")
			}
		})
	}
}

// boxRect is the pixel rectangle a normalized box covers in a w x h
// picture, computed from the box alone (first and last column and row).
func boxRect(b [4]float32, w, h int) image.Rectangle {
	x0, y0 := int(float64(b[0])*float64(w)), int(float64(b[1])*float64(h))
	x1, y1 := int(ceil(float64(b[2])*float64(w)))-1, int(ceil(float64(b[3])*float64(h)))-1
	return image.Rect(max(x0, 0), max(y0, 0), min(x1, w-1)+1, min(y1, h-1)+1)
}

// edgePoints are two pixels of each edge's middle (the outline is 2
// pixels wide, inside the box) of box j, less those another box or any
// name label (7 pixels a letter, 13 high, above the box or inside it when
// there is no room) may cover.
func edgePoints(b [4]float32, boxes [][4]float32, j, w, h int, m *warehouse.Manifest, classes []int32) []image.Point {
	r := boxRect(b, w, h)
	if r.Dx() < 6 || r.Dy() < 6 {
		return nil
	}
	x0, y0, x1, y1 := r.Min.X, r.Min.Y, r.Max.X-1, r.Max.Y-1
	xm, ym := (x0+x1)/2, (y0+y1)/2
	cand := []image.Point{{x0, ym}, {x0 + 1, ym}, {x1, ym}, {x1 - 1, ym}, {xm, y0}, {xm, y0 + 1}, {xm, y1}, {xm, y1 - 1}}
	var covers []image.Rectangle
	for k, o := range boxes {
		or := boxRect(o, w, h)
		if k != j {
			covers = append(covers, or.Inset(-1))
		}
		top := or.Min.Y - 13
		if top < 0 {
			top = or.Min.Y + 2
		}
		name := len(render.ClassName(m, classes[k]))
		covers = append(covers, image.Rect(or.Min.X, top, or.Min.X+7*name+3, top+13))
	}
	var out []image.Point
	for _, p := range cand {
		free := true
		for _, c := range covers {
			if p.In(c) {
				free = false
			}
		}
		if free {
			out = append(out, p)
		}
	}
	return out
}

func ceil(x float64) float64 {
	i := float64(int(x))
	if i < x {
		return i + 1
	}
	return i
}

// checkLabelBox compares a stored box with the label file's first box,
// mapped through the letterbox samples.jsonl records.
func checkLabelBox(t *testing.T, rec records.SampleLine, box [4]float32, w, h int) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("../../testdata/capture", filepath.FromSlash(rec.LabelPath)))
	if err != nil {
		t.Fatal(err)
	}
	var label struct {
		Polyp []struct {
			Px   *[4]float64 `json:"bbox_px"`
			Norm *[4]float64 `json:"bbox_norm"`
		} `json:"polyp_labels"`
		Labels []struct {
			Px   *[4]float64 `json:"bbox_px"`
			Norm *[4]float64 `json:"bbox_norm"`
		} `json:"labels"`
	}
	if err := json.Unmarshal(raw, &label); err != nil {
		t.Fatal(err)
	}
	entries := append(label.Polyp, label.Labels...)
	if len(entries) == 0 {
		t.Fatalf("%s: no boxes", rec.LabelPath)
	}
	// The stored box is one of the label's, mapped through the letterbox.
	for _, e := range entries {
		if labelBoxIs(e.Px, e.Norm, rec, box, w, h) {
			return
		}
	}
	t.Errorf("%s: stored box %v is none of the label's boxes through the letterbox %+v", rec.LabelPath, box, *rec.Letterbox)
}

func labelBoxIs(px, norm *[4]float64, rec records.SampleLine, box [4]float32, w, h int) bool {
	if px == nil {
		n := norm
		px = &[4]float64{n[0] * float64(rec.Width), n[1] * float64(rec.Height), n[2] * float64(rec.Width), n[3] * float64(rec.Height)}
	}
	lb := rec.Letterbox
	want := [4]float64{(px[0]*lb.ScaleX + float64(lb.PadX)) / float64(w), (px[1]*lb.ScaleY + float64(lb.PadY)) / float64(h),
		(px[2]*lb.ScaleX + float64(lb.PadX)) / float64(w), (px[3]*lb.ScaleY + float64(lb.PadY)) / float64(h)}
	for i := range 4 {
		if d := float64(box[i]) - want[i]; d > 1e-3 || d < -1e-3 {
			return false
		}
	}
	return true
}

func savePNG(t *testing.T, img image.Image, name string) {
	p := filepath.Join(os.TempDir(), "viewer-test-"+name)
	f, err := os.Create(p)
	if err != nil {
		return
	}
	defer f.Close()
	png.Encode(f, img)
	t.Logf("screenshot saved to %s", p)
}

// An episode sample's page (kinodb demo) shows its extras' values, one plot
// per extra over the neighbouring frames, and the frames beside it in its
// episode as tiles.
func TestServeEpisodeSamplePage(t *testing.T) {
	dir, m, base := serveDemo(t, "kdb", t.TempDir())
	recs := readSamples(t, dir)
	if len(m.Extras) == 0 {
		t.Fatal("the kinodb demo has no extras")
	}
	// A kept frame with a neighbour on each side in its episode.
	pick := -1
	for i := 1; i+1 < len(recs); i++ {
		if recs[i].Kept && recs[i-1].SourceIndex == recs[i].SourceIndex && recs[i+1].SourceIndex == recs[i].SourceIndex {
			pick = i
			break
		}
	}
	if pick < 0 {
		t.Fatal("no kept frame inside an episode")
	}
	page := httpGet(t, base+"/sample/"+strconv.Itoa(pick))
	if got := strings.Count(page, `class="plot"`); got != len(m.Extras) {
		t.Errorf("%d plots, want one per extra (%d)", got, len(m.Extras))
	}
	for _, e := range m.Extras {
		if !strings.Contains(page, "<th>"+e.Name+" ") {
			t.Errorf("the page does not list extra %s", e.Name)
		}
	}
	var want []int
	for i := max(0, pick-3); i <= min(len(recs)-1, pick+3); i++ {
		if i != pick && recs[i].SourceIndex == recs[pick].SourceIndex {
			want = append(want, i)
		}
	}
	if got := tileSeqs(page); !slices.Equal(got, want) {
		t.Errorf("neighbour tiles %v, want the episode's frames %v", got, want)
	}
}
