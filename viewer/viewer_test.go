package viewer

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"warehouse-etl/analytics/records"
	"warehouse-etl/config"
	"warehouse-etl/pipeline"
	"warehouse-etl/sources"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// buildConfig builds configs/<name>.jsonc with absolute paths and an
// output root in a temp dir, through the pipeline, and returns the version
// directory.
func buildConfig(t testing.TB, name string) string {
	t.Helper()
	raw, err := os.ReadFile("../configs/" + name + ".jsonc")
	if err != nil {
		t.Fatal(err)
	}
	testdata, _ := filepath.Abs("../testdata")
	text := strings.ReplaceAll(string(raw), `"../testdata/`, `"`+testdata+`/`)
	text = strings.ReplaceAll(text, `"../out/`, `"`+t.TempDir()+`/`)
	p := filepath.Join(t.TempDir(), name+".jsonc")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	res, err := pipeline.Build(context.Background(), pipeline.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return res.Dir
}

// allLines decodes samples.jsonl independently of the index.
func allLines(t testing.TB, dir string) []*records.SampleLine {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(dir, "samples.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var out []*records.SampleLine
	for _, line := range bytes.SplitAfter(raw, []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		s, err := records.DecodeSampleLine(line)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// Every filter (run, reason, class, status, and each pair of them) selects
// exactly the samples.jsonl lines it names, in scan order.
func TestViewerFiltersMatchSamples(t *testing.T) {
	for _, demo := range []string{"demo", "coco"} {
		t.Run(demo, func(t *testing.T) {
			dir := buildConfig(t, demo)
			v, err := Open(dir, Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			ix, err := v.sampleIndex()
			if err != nil {
				t.Fatal(err)
			}
			lines := allLines(t, dir)
			var filters []Filter
			for _, status := range []string{"", "kept", "rejected"} {
				filters = append(filters, Filter{Status: status})
				for r := range v.m.Summary.Runs {
					filters = append(filters, Filter{Run: r + 1, Status: status})
				}
				for _, c := range v.m.Classes {
					filters = append(filters, Filter{Class: c.Index + 1, Status: status}, Filter{Class: c.Index + 1, Run: 1, Status: status})
				}
				for code := range v.m.Summary.Total.ByReason {
					filters = append(filters, Filter{Reason: string(code), Status: status}, Filter{Reason: string(code), Run: 1})
				}
			}
			for _, f := range filters {
				var want []int32
				for _, s := range lines {
					switch {
					case f.Run > 0 && s.SourceIndex != int64(f.Run-1):
					case f.Status == "kept" && !s.Kept, f.Status == "rejected" && s.Kept:
					case f.Reason != "" && !slices.Contains(s.Reasons, f.Reason):
					case f.Class > 0 && !slices.Contains(s.ClassIndex, int64(f.Class-1)):
					default:
						want = append(want, int32(s.Seq))
					}
				}
				if got := ix.match(f); !slices.Equal(got, want) {
					t.Errorf("filter %+v: %v, samples.jsonl %v", f, got, want)
				}
			}
		})
	}
}

// The grid pages through matches PageSize at a time and clamps a page past
// the end to the last.
func TestViewerGridPages(t *testing.T) {
	dir := buildConfig(t, "demo")
	v, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	g, err := v.gridBody(Filter{}, 99, serverLinks{})
	if err != nil {
		t.Fatal(err)
	}
	if g.Matches != int(v.m.InputSamples) || g.Page != g.Pages-1 || len(g.Tiles) != g.Last-g.First+1 {
		t.Errorf("page 99 of %d samples: %+v", v.m.InputSamples, g)
	}
}

// genSource is n synthetic samples in runs of 1000 (perRun when set), made
// on the fly: every 10th is empty, every 13th has a box out of bounds
// (rejected), the others one box of one of 7 classes, all showing one tiny
// PNG.
type genSource struct {
	n      int
	perRun int
	png    []byte
}

func (g *genSource) runLen() int {
	if g.perRun > 0 {
		return g.perRun
	}
	return 1000
}

func (g *genSource) Kind() string { return "gen" }
func (g *genSource) Scan(ctx context.Context, fn func(*sources.Sample) error) error {
	for i := range g.n {
		s := sources.Sample{
			Seq: int64(i), Source: fmt.Sprintf("run_%03d", i/g.runLen()), SourceIndex: int32(i / g.runLen()), Frame: uint64(i % g.runLen()),
			ImagePath: fmt.Sprintf("frames/%07d.png", i), LabelPath: fmt.Sprintf("labels/%07d.json", i), Width: 10, Height: 10,
		}
		switch {
		case i%13 == 0:
			s.Reasons = []validate.Reason{validate.ReasonBBoxOutOfBounds}
		case i%10 == 0:
			s.Reasons = []validate.Reason{validate.ReasonEmpty}
		default:
			s.Boxes = []sources.Box{{X0: 1, Y0: 2, X1: 6, Y1: 8, Class: sources.ClassKey{Name: fmt.Sprintf("c%d", i%7)}}}
			s.ValidBoxes = 1
		}
		if err := fn(&s); err != nil {
			return err
		}
	}
	return nil
}
func (g *genSource) Fingerprint(ctx context.Context, fn func(warehouse.FileEntry) error) error {
	for i := range g.n {
		if err := fn(warehouse.FileEntry{Path: fmt.Sprintf("frames/%07d.png", i), Size: int64(len(g.png)), MtimeNs: 1}); err != nil {
			return err
		}
	}
	return nil
}
func (g *genSource) ReadImage(*sources.Sample) (sources.Image, error) {
	return sources.Image{Encoded: g.png}, nil
}
func (g *genSource) Extras() []sources.ExtraSpec { return nil }
func (g *genSource) Entries() []warehouse.SourceEntry {
	var out []warehouse.SourceEntry
	for r := range (g.n + g.runLen() - 1) / g.runLen() {
		out = append(out, warehouse.SourceEntry{Index: r, Name: fmt.Sprintf("run_%03d", r)})
	}
	return out
}

// buildGen builds a version of src (size x size targets, maxBoxes boxes,
// no thresholds) and returns its directory.
func buildGen(tb testing.TB, src *genSource, size, maxBoxes int) string {
	tb.Helper()
	cfg := config.Defaults()
	cfg.Source.Root = "gen"
	cfg.TargetSize = [2]int{size, size}
	cfg.MaxBoxes = maxBoxes
	cfg.ShardTargetMB = 4
	cfg.Thresholds = validate.Thresholds{}
	cfg.OutputRoot = filepath.Join(tb.TempDir(), "out")
	res, err := pipeline.Build(context.Background(), pipeline.Options{Config: &cfg, Source: src, Workers: 2})
	if err != nil {
		tb.Fatal(err)
	}
	return res.Dir
}

func tinyPNG(t testing.TB) []byte {
	img := image.NewNRGBA(image.Rect(0, 0, 10, 10))
	for i := range 100 {
		img.Set(i%10, i/10, color.NRGBA{uint8(i * 2), 100, 200, 255})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// BenchmarkViewer100k builds a 100,000-sample warehouse (100 runs, 7
// classes, about 15% rejected) and times what a person waits for: opening
// the version, the overview page, the first grid page (which builds the
// samples.jsonl index), a grid page deep in a filter, a sample page and a
// thumbnail. Run it once:
//
//	go test ./viewer -run '^$' -bench Viewer100k -benchtime 1x
func BenchmarkViewer100k(b *testing.B) {
	const n = 100_000
	t0 := time.Now()
	dir := buildGen(b, &genSource{n: n, png: tinyPNG(b)}, 16, 2)
	b.Logf("built %d samples in %s", n, time.Since(t0).Round(time.Millisecond))
	b.ResetTimer()
	for range b.N {
		t0 := time.Now()
		v, err := Open(dir, Options{})
		if err != nil {
			b.Fatal(err)
		}
		open := time.Since(t0)
		h := v.Handler()
		get := func(url string) time.Duration {
			t0 := time.Now()
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, url, nil))
			if rec.Code != http.StatusOK {
				b.Fatalf("GET %s: %d %s", url, rec.Code, rec.Body.String())
			}
			return time.Since(t0)
		}
		// The overview while the index builds in the background (Handler
		// starts it), then the first grid page waits for the rest of it.
		overview := get("/")
		firstGrid := get("/samples")
		indexed := time.Since(t0)
		deepGrid := get("/samples?reason=bbox_out_of_bounds&status=rejected&page=150")
		classGrid := get("/samples?class=3&run=57&page=1")
		sample := get("/sample/98765")
		thumb := get("/img/thumb/98766.png")
		v.Close()
		b.ReportMetric(open.Seconds()*1e3, "ms-open")
		b.ReportMetric(overview.Seconds()*1e3, "ms-overview")
		b.ReportMetric((open+overview).Seconds()*1e3, "ms-open+overview")
		b.ReportMetric(firstGrid.Seconds()*1e3, "ms-first-grid")
		b.ReportMetric(indexed.Seconds()*1e3, "ms-open-to-first-grid")
		b.ReportMetric(deepGrid.Seconds()*1e3, "ms-deep-grid")
		b.ReportMetric(classGrid.Seconds()*1e3, "ms-class-grid")
		b.ReportMetric(sample.Seconds()*1e3, "ms-sample")
		b.ReportMetric(thumb.Seconds()*1e3, "ms-thumb")
	}
}

// A version of 10,000 runs opens its overview fast: the chart and the run
// table show RunsPerPage runs a page, each page says which runs it shows
// and links to its neighbours, the last page ends with the last run, a page
// that does not exist or any other parameter is refused, and the grid's
// run filter lists at most maxRunOptions runs (and the one filtered on).
func TestViewerOverviewPagesRuns(t *testing.T) {
	const runs = 10_000
	v, err := Open(buildGen(t, &genSource{n: runs, perRun: 1, png: tinyPNG(t)}, 8, 1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	h := v.Handler()
	get := func(url string, code int) (string, time.Duration) {
		t.Helper()
		t0 := time.Now()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, url, nil))
		if rec.Code != code {
			t.Fatalf("GET %s: %d, want %d: %s", url, rec.Code, code, rec.Body.String())
		}
		return rec.Body.String(), time.Since(t0)
	}
	rows := regexp.MustCompile(`<tr data-run="(run_\d+)">`)
	bars := regexp.MustCompile(`<g transform="translate\(0,\d+\)"><title>`)
	page, took := get("/", http.StatusOK)
	if took > time.Second {
		t.Errorf("the overview of %d runs took %s", runs, took)
	}
	first := rows.FindAllStringSubmatch(page, -1)
	if len(first) != RunsPerPage || first[0][1] != "run_000" || first[RunsPerPage-1][1] != "run_099" || len(bars.FindAllString(page, -1)) != RunsPerPage {
		t.Errorf("page 1: %d rows (%v ... ), %d bars; want runs 0..99", len(first), first[:min(1, len(first))], len(bars.FindAllString(page, -1)))
	}
	if !strings.Contains(page, "runs 1–100 of 10000") || !strings.Contains(page, `href="/?runs=1" rel="next"`) || strings.Contains(page, `rel="prev"`) {
		t.Errorf("page 1 does not say which runs it shows or does not link to the next page")
	}
	last, _ := get("/?runs=99", http.StatusOK)
	got := rows.FindAllStringSubmatch(last, -1)
	if len(got) != RunsPerPage || got[0][1] != "run_9900" || got[len(got)-1][1] != "run_9999" {
		t.Errorf("page 100: %d rows, want runs 9900..9999", len(got))
	}
	if !strings.Contains(last, `href="/?runs=98" rel="prev"`) || strings.Contains(last, `rel="next"`) {
		t.Errorf("page 100 does not link back, or links past the end")
	}
	for _, q := range []string{"/?runs=100", "/?runs=-1", "/?runs=1&runs=2", "/?runs=01x", "/?page=1", "/?runs=1&x=2"} {
		get(q, http.StatusBadRequest)
	}
	grid, _ := get("/samples?run=9999", http.StatusOK)
	opts := strings.Count(grid, "<option value=")
	if opts != 1+maxRunOptions+1+countClassAndStatus(grid) || !strings.Contains(grid, `<option value="9999" selected>run_9999</option>`) {
		t.Errorf("the grid lists %d options; want %d runs, the selected one and the other filters'", opts, maxRunOptions)
	}
}

// countClassAndStatus counts the options of the grid's filters other than
// the run filter.
func countClassAndStatus(grid string) int {
	n := 0
	for _, name := range []string{"reason", "class", "status"} {
		i := strings.Index(grid, `<select name="`+name+`">`)
		if i < 0 {
			continue
		}
		j := strings.Index(grid[i:], "</select>")
		n += strings.Count(grid[i:i+j], "<option value=")
	}
	return n
}

// The source settings rebuilt from a version's recipe are the settings the
// build's config gave, for every kind whose rejected samples the viewer
// asks its source about.
func TestViewerRecipeSettings(t *testing.T) {
	for _, demo := range []string{"coco", "yolo", "kdb", "wshard", "roverd"} {
		t.Run(demo, func(t *testing.T) {
			dir := buildConfig(t, demo)
			m, err := warehouse.ReadManifest(dir)
			if err != nil {
				t.Fatal(err)
			}
			got, err := recipeSettings(m)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Load(filepath.Join("../configs", demo+".jsonc"))
			if err != nil {
				t.Fatal(err)
			}
			want := cfg.Source.Settings
			if demo == "coco" {
				// buildConfig made the annotations path absolute.
				abs, _ := filepath.Abs("../testdata/coco/annotations/instances_demo.json")
				reflect.ValueOf(want).Elem().FieldByName("Annotations").SetString(abs)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("from the recipe %+v, the config %+v", got, want)
			}
		})
	}
}

// A relative path of the config (COCO's annotations) is found from the
// dataset root the viewer uses, as the config had it beside its root.
func TestViewerConfigPath(t *testing.T) {
	for _, tt := range []struct{ written, actual, p, want string }{
		{"/data/coco/images", "/data/coco/images", "/data/coco/ann.json", "/data/coco/ann.json"},
		{"../testdata/coco/images", "/w/testdata/coco/images", "../testdata/coco/annotations/i.json", "/w/testdata/coco/annotations/i.json"},
		{"images", "/srv/coco/images", "annotations/i.json", "/srv/coco/annotations/i.json"},
		{"./images/", "/srv/coco/images", "i.json", "/srv/coco/i.json"},
		{"images", "/srv/coco/images", "../../../i.json", "/i.json"},
		{"/abs/images", "/moved/images", "ann.json", ""}, // relative to what: unknown
		{"../images", "/srv/images", "../../x/ann.json", "/x/ann.json"},
		{"../images", "/srv/images", "ann.json", ""}, // beside a config in /srv/<unknown>
	} {
		if got := configPath(tt.written, tt.actual, tt.p); got != tt.want {
			t.Errorf("configPath(%q, %q, %q) = %q, want %q", tt.written, tt.actual, tt.p, got, tt.want)
		}
	}
}
