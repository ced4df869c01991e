package viewer

import (
	"fmt"
	"math"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"warehouse-etl/analytics/records"
	"warehouse-etl/validate"
	"warehouse-etl/viewer/render"
	"warehouse-etl/warehouse"
)

// links makes the URLs of the pages: the live server's routes or the
// static report's file names.
type links interface {
	Overview() string
	Grid(f Filter, page int) string
	Sample(seq int) string
	Image(seq int, full bool) string
	Diff() string
	Static(name string) string
	// Runs is page `page` of the overview's run table.
	Runs(page int) string
}

// serverLinks are the routes of Handler.
type serverLinks struct{}

func (serverLinks) Overview() string { return "/" }
func (serverLinks) Grid(f Filter, page int) string {
	q := url.Values{}
	if f.Run > 0 {
		q.Set("run", strconv.Itoa(f.Run-1))
	}
	if f.Reason != "" {
		q.Set("reason", f.Reason)
	}
	if f.Class > 0 {
		q.Set("class", strconv.Itoa(f.Class-1))
	}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	if page > 0 {
		q.Set("page", strconv.Itoa(page))
	}
	if len(q) == 0 {
		return "/samples"
	}
	return "/samples?" + q.Encode()
}
func (serverLinks) Sample(seq int) string { return fmt.Sprintf("/sample/%d", seq) }
func (serverLinks) Image(seq int, full bool) string {
	if full {
		return fmt.Sprintf("/img/full/%d.png", seq)
	}
	return fmt.Sprintf("/img/thumb/%d.png", seq)
}
func (serverLinks) Runs(page int) string {
	if page == 0 {
		return "/"
	}
	return fmt.Sprintf("/?runs=%d", page)
}
func (serverLinks) Diff() string              { return "/diff" }
func (serverLinks) Static(name string) string { return "/static/" + name }

// page is what every template receives.
type page struct {
	Title   string
	L       links
	Version string // 16 hex digits
	HasDiff bool
	Static  bool // a static report: no live filters
	Body    any
}

// thresholdRow is one threshold category with how close it came.
type thresholdRow struct {
	Name     string
	Limit    string
	Count    int64
	Total    int64
	Ratio    float64
	Used     float64 // share of the nearest limit used; 1 = at the limit
	HasLimit bool
	Exceeded string // "", or the finding's action ("fail", "warn")
}

type runRow struct {
	Index  int
	Name   string
	Counts validate.Counts
}

type reasonRow struct {
	Code, Class, Words string
	Count              int64
}

type phaseRow struct {
	Name    string
	Seconds float64
	Clock   string
}

type chartBar struct {
	Name            string
	Run             int
	Y               int
	Kept, Skipped   int64
	KeptW, SkippedW float64
	Label           string
}

// overview is the body of the overview page.
type overview struct {
	Dir, Version, CodeVersion, Created, SourceKind, DatasetRoot string
	DatasetUsed                                                 string
	Transform, DType                                            string
	Recipe                                                      []string
	Total                                                       validate.Counts
	Thresholds                                                  []thresholdRow
	Runs                                                        []runRow
	Reasons                                                     []reasonRow
	Phases                                                      []phaseRow
	Report                                                      *records.BuildReport
	Chart                                                       []chartBar
	ChartHeight                                                 int
	RunCount                                                    int // every run of the version
	RunPage, RunPages                                           int // the page of the run table shown, from 0, and how many
	FirstRun, LastRun                                           int // the runs shown, from 1
	PrevRuns, NextRuns                                          string
	Classes                                                     []warehouse.Class
	Shards                                                      int
	Bytes                                                       int64
	Extras                                                      []warehouse.Extra
}

// RunsPerPage is how many runs the overview's chart and run table show at
// a time: a version of 10,000 runs has 100 pages of them.
const RunsPerPage = 100

// overviewBody is computed from the manifest and the build report alone,
// with page runPage of the runs (clamped to the last page).
func (v *Viewer) overviewBody(runPage int, l links) *overview {
	m := v.m
	t := m.Transform
	o := &overview{
		Dir: v.dir, Version: m.Version, CodeVersion: m.CodeVersion,
		Created: time.UnixMilli(m.CreatedAtMs).UTC().Format(time.RFC3339), SourceKind: m.Source.Kind,
		DatasetRoot: m.DatasetRoot, DatasetUsed: v.dataPath, DType: m.DefaultDType,
		Total: m.Summary.Total, Report: v.report, Classes: m.Classes, Shards: len(m.Shards), Extras: m.Extras,
	}
	norm := "none (pixel/255)"
	if len(t.Mean) == 3 && len(t.Std) == 3 {
		norm = fmt.Sprintf("(pixel/255 - %v) / %v", t.Mean, t.Std)
	}
	o.Transform = fmt.Sprintf("%dx%d %s, pad %d, normalize %s, %s, max_boxes %d, skip_empty %v",
		t.TargetWidth, t.TargetHeight, t.ResizeMode, t.PadValue, norm, m.DefaultDType, t.MaxBoxes, t.SkipEmpty)
	for _, s := range m.Shards {
		o.Bytes += s.Bytes
	}
	o.Recipe = strings.Split(strings.TrimRight(m.VersionRecipe, "\n"), "\n")
	o.Thresholds = thresholdRows(m.Thresholds, m.Summary.Total)
	o.RunCount = len(m.Summary.Runs)
	o.RunPages = max(1, (o.RunCount+RunsPerPage-1)/RunsPerPage)
	o.RunPage = min(max(runPage, 0), o.RunPages-1)
	lo, hi := o.RunPage*RunsPerPage, min(o.RunCount, (o.RunPage+1)*RunsPerPage)
	o.FirstRun, o.LastRun = lo+1, hi
	if o.RunPage > 0 {
		o.PrevRuns = l.Runs(o.RunPage - 1)
	}
	if o.RunPage+1 < o.RunPages {
		o.NextRuns = l.Runs(o.RunPage + 1)
	}
	runs := m.Summary.Runs[lo:hi]
	for _, r := range runs {
		o.Runs = append(o.Runs, runRow{Index: r.Index, Name: r.Name, Counts: r.Counts})
	}
	for code, n := range m.Summary.Total.ByReason {
		o.Reasons = append(o.Reasons, reasonRow{Code: string(code), Class: string(code.Class()), Words: describeReason(string(code)), Count: n})
	}
	sort.Slice(o.Reasons, func(i, j int) bool {
		if o.Reasons[i].Count != o.Reasons[j].Count {
			return o.Reasons[i].Count > o.Reasons[j].Count
		}
		return o.Reasons[i].Code < o.Reasons[j].Code
	})
	if r := v.report; r != nil {
		p := r.Phases
		o.Phases = []phaseRow{
			{"scan", p.Scan, "wall"}, {"validate", p.Validate, "wall"}, {"read", p.Read, "summed over workers"},
			{"decode", p.Decode, "summed over workers"}, {"resize", p.Resize, "summed over workers"},
			{"normalize", p.Normalize, "summed over workers"}, {"write", p.Write, "wall"},
			{"publish", p.Publish, "wall"}, {"total", p.Total, "wall"},
		}
	}
	var most int64 = 1
	for _, r := range m.Summary.Runs {
		most = max(most, r.Counts.Total)
	}
	const barWidth = 600.0
	for i, r := range runs {
		c := r.Counts
		o.Chart = append(o.Chart, chartBar{
			Name: r.Name, Run: r.Index, Y: i * 18, Kept: c.Kept, Skipped: c.Skipped,
			KeptW:    barWidth * float64(c.Kept) / float64(most),
			SkippedW: barWidth * float64(c.Skipped) / float64(most),
			Label:    fmt.Sprintf("%s: %d kept, %d skipped", r.Name, c.Kept, c.Skipped),
		})
	}
	o.ChartHeight = len(o.Chart)*18 + 4
	return o
}

// thresholdRows says, per category, the limit, the count and how much of
// the nearest limit it used.
func thresholdRows(th validate.Thresholds, tot validate.Counts) []thresholdRow {
	findings := th.Evaluate(tot)
	var rows []thresholdRow
	for _, c := range []struct {
		name  string
		limit validate.Limit
		count int64
	}{{"invalid", th.Invalid, tot.Invalid}, {"missing", th.Missing, tot.Missing()}, {"empty", th.Empty, tot.Empty}} {
		row := thresholdRow{Name: c.name, Limit: c.limit.Describe(), Count: c.count, Total: tot.Total}
		if tot.Total > 0 {
			row.Ratio = float64(c.count) / float64(tot.Total)
		}
		if l := c.limit.MaxCount; l != nil {
			row.HasLimit = true
			row.Used = math.Max(row.Used, float64(c.count)/math.Max(float64(*l), 1e-12))
		}
		if l := c.limit.MaxRatio; l != nil {
			row.HasLimit = true
			row.Used = math.Max(row.Used, row.Ratio/math.Max(*l, 1e-12))
		}
		for _, f := range findings {
			if strings.HasPrefix(f.Threshold, c.name+".") {
				row.Exceeded = string(f.Action)
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// tile is one sample of the grid.
type tile struct {
	Seq, Index    int
	Kept          bool
	Run           string
	Frame         uint64
	Reasons       []string
	Classes       []string
	HasImage      bool
	Width, Height int // thumbnail size when known, else 0
	Caption       string
}

// option is one choice of a filter's select.
type option struct {
	Value, Label string
	Selected     bool
}

// grid is the body of the sample grid.
type grid struct {
	Filter           Filter
	Runs             []option
	Reasons          []option
	Classes          []option
	Statuses         []option
	Matches          int
	Page, Pages      int
	First, Last      int
	Tiles            []tile
	MoreRuns         int // runs the run filter does not list
	PrevURL, NextURL string
	Heading          string
}

// maxRunOptions bounds the runs the grid's run filter lists.
const maxRunOptions = 500

// PageSize is how many tiles a grid page shows.
const PageSize = 48

// gridBody lists page `page` of the samples f selects.
func (v *Viewer) gridBody(f Filter, pageNo int, l links) (*grid, error) {
	ix, err := v.sampleIndex()
	if err != nil {
		return nil, err
	}
	seqs := ix.match(f)
	g := &grid{Filter: f, Matches: len(seqs), Pages: max(1, (len(seqs)+PageSize-1)/PageSize)}
	g.Page = min(max(pageNo, 0), g.Pages-1)
	lo, hi := g.Page*PageSize, min(len(seqs), (g.Page+1)*PageSize)
	g.First, g.Last = lo+1, hi
	if g.Page > 0 {
		g.PrevURL = l.Grid(f, g.Page-1)
	}
	if g.Page+1 < g.Pages {
		g.NextURL = l.Grid(f, g.Page+1)
	}
	for _, seq := range seqs[lo:hi] {
		t, err := v.tileOf(ix, int(seq))
		if err != nil {
			return nil, err
		}
		g.Tiles = append(g.Tiles, t)
	}
	g.Runs = []option{{"", "any run", f.Run == 0}}
	for i, r := range v.m.Summary.Runs {
		// A page of 10,000 options is slow to load and useless to scroll:
		// past maxRunOptions only the run filtered on is listed (the
		// overview's run table links to every run's samples).
		if i >= maxRunOptions && f.Run != r.Index+1 {
			continue
		}
		g.Runs = append(g.Runs, option{strconv.Itoa(r.Index), r.Name, f.Run == r.Index+1})
	}
	g.MoreRuns = max(0, len(v.m.Summary.Runs)-maxRunOptions)
	g.Reasons = []option{{"", "any reason", f.Reason == ""}}
	for _, code := range sortedReasonCodes(v.m.Summary.Total.ByReason) {
		g.Reasons = append(g.Reasons, option{code, fmt.Sprintf("%s (%d)", code, v.m.Summary.Total.ByReason[validate.Reason(code)]), f.Reason == code})
	}
	g.Classes = []option{{"", "any class", f.Class == 0}}
	for _, c := range v.m.Classes {
		g.Classes = append(g.Classes, option{strconv.Itoa(c.Index), c.Name, f.Class == c.Index+1})
	}
	g.Statuses = []option{{"", "kept and rejected", f.Status == ""}, {"kept", "kept", f.Status == "kept"}, {"rejected", "rejected", f.Status == "rejected"}}
	return g, nil
}

func sortedReasonCodes(m map[validate.Reason]int64) []string {
	out := make([]string, 0, len(m))
	for r := range m {
		out = append(out, string(r))
	}
	slices.Sort(out)
	return out
}

// tileOf describes sample seq for the grid.
func (v *Viewer) tileOf(ix *sampleIndex, seq int) (tile, error) {
	rec, err := ix.record(v.samples, seq)
	if err != nil {
		return tile{}, err
	}
	t := tile{Seq: seq, Index: int(rec.Index), Kept: rec.Kept, Run: rec.Source, Frame: rec.Frame, Reasons: rec.Reasons}
	for _, c := range rec.ClassIndex {
		t.Classes = append(t.Classes, render.ClassName(v.m, int32(c)))
	}
	if rec.Kept {
		t.HasImage = true
		t.Width, t.Height = v.thumbSize()
		t.Caption = fmt.Sprintf("kept, sample %d, %d boxes", rec.Index, rec.BoxCount)
	} else {
		t.HasImage = !slices.ContainsFunc(rec.Reasons, func(r string) bool {
			return validate.Reason(r).Class() == validate.ClassMissing || r == string(validate.ReasonDecodeError) || r == string(validate.ReasonPathEscape)
		})
		if episodeKinds[v.m.Source.Kind] {
			t.HasImage = t.HasImage && v.hasEpisodeFrame(seq)
		} else {
			t.HasImage = t.HasImage && v.hasSourceImage(rec.ImagePath)
		}
		if t.HasImage {
			t.Width, t.Height = v.rejectedSize(seq, rec, ThumbSize, ThumbSize)
		}
		var words []string
		for _, r := range rec.Reasons {
			words = append(words, describeReason(r))
		}
		t.Caption = "rejected: " + strings.Join(words, "; ")
		if rec.Error != "" {
			t.Caption += " (" + rec.Error + ")"
		}
	}
	return t, nil
}
