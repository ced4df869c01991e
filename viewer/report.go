package viewer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"warehouse-etl/validate"
)

// ReportOptions configure WriteReport.
type ReportOptions struct {
	// PerReason is how many samples of each reason code the report shows
	// (default 20).
	PerReason int
	// Kept is how many kept samples it shows, spread evenly over the
	// version (default 48).
	Kept int
}

// ReportResult says what WriteReport wrote.
type ReportResult struct {
	Dir     string
	Pages   int
	Images  int
	Samples int // samples with a page of their own
}

// reportLinks are the file names of a static report. Sample pages exist
// for the samples the report shows (pages); a link to any other sample
// goes to its picture or nowhere. Images asked for are recorded and
// written after the pages.
type reportLinks struct {
	pages  map[int]bool
	images map[[2]int]bool // {seq, full}
}

func (reportLinks) Overview() string { return "index.html" }
func (reportLinks) Grid(f Filter, page int) string {
	switch {
	case f.Reason != "" && safeCode.MatchString(f.Reason):
		return "reason-" + f.Reason + ".html"
	case f.Reason == "" && f.Run == 0 && f.Class == 0 && f.Status == "kept":
		return "kept.html"
	case f.Reason == "" && f.Run == 0 && f.Class == 0:
		return "rejected.html"
	}
	return "" // no page: per-run and per-class pages are the live viewer's
}
func (l reportLinks) Sample(seq int) string {
	if l.pages[seq] {
		return fmt.Sprintf("sample-%d.html", seq)
	}
	return ""
}
func (l reportLinks) Image(seq int, full bool) string {
	k := 0
	if full {
		k = 1
	}
	l.images[[2]int{seq, k}] = true
	if full {
		return fmt.Sprintf("img/full-%d.png", seq)
	}
	return fmt.Sprintf("img/thumb-%d.png", seq)
}
func (reportLinks) Runs(page int) string {
	if page == 0 {
		return "index.html"
	}
	return fmt.Sprintf("runs-%d.html", page)
}
func (reportLinks) Diff() string              { return "diff.html" }
func (reportLinks) Static(name string) string { return name }

// safeCode is a reason code usable in a file name.
var safeCode = regexp.MustCompile(`^[a-z0-9_]{1,64}$`)

// WriteReport writes the overview, the samples of each reason (up to
// PerReason each), the rejected ones together, an even sample of kept
// ones, a page for each of them and, with Against, the drift page, as
// static HTML with its PNGs under dir (created; files of the same names
// are replaced, nothing else is touched). dir may not be inside the
// version directory: a report never writes into a warehouse.
func (v *Viewer) WriteReport(ctx context.Context, dir string, opts ReportOptions) (*ReportResult, error) {
	if opts.PerReason <= 0 {
		opts.PerReason = 20
	}
	if opts.Kept <= 0 {
		opts.Kept = 48
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if rel, err := filepath.Rel(v.dir, abs); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("--out %s is inside the version directory %s: a report never writes into a warehouse", dir, v.dir)
	}
	ix, err := v.sampleIndex()
	if err != nil {
		return nil, err
	}
	l := reportLinks{pages: map[int]bool{}, images: map[[2]int]bool{}}
	type gridFile struct {
		name, heading string
		seqs          []int32
	}
	var grids []gridFile
	var rejected []int32
	for _, code := range sortedReasonCodes(v.m.Summary.Total.ByReason) {
		if !safeCode.MatchString(code) {
			continue
		}
		seqs := ix.match(Filter{Reason: code})
		seqs = seqs[:min(len(seqs), opts.PerReason)]
		grids = append(grids, gridFile{"reason-" + code + ".html", fmt.Sprintf("%s: %s (%d of %d shown)", code, describeReason(code), len(seqs), v.m.Summary.Total.ByReason[validate.Reason(code)]), seqs})
		for _, s := range seqs {
			if ix.index[s] < 0 {
				rejected = append(rejected, s)
			}
		}
	}
	slices.Sort(rejected)
	rejected = slices.Compact(rejected)
	grids = append(grids, gridFile{"rejected.html", fmt.Sprintf("Rejected samples: up to %d per reason (%d of %d)", opts.PerReason, len(rejected), v.m.Summary.Total.Skipped), rejected})
	kept := ix.match(Filter{Status: "kept"})
	var spread []int32
	for i := range min(opts.Kept, len(kept)) {
		spread = append(spread, kept[i*len(kept)/min(opts.Kept, len(kept))])
	}
	grids = append(grids, gridFile{"kept.html", fmt.Sprintf("Kept samples: %d of %d, evenly spread", len(spread), len(kept)), spread})
	for _, g := range grids {
		for _, s := range g.seqs {
			l.pages[int(s)] = true
		}
	}

	if err := os.MkdirAll(filepath.Join(abs, "img"), 0o755); err != nil {
		return nil, err
	}
	res := &ReportResult{Dir: abs, Samples: len(l.pages)}
	write := func(name string, b []byte) error {
		res.Pages++
		return os.WriteFile(filepath.Join(abs, name), b, 0o644)
	}
	page := func(name, tmpl, title string, body any) error {
		b, err := v.render(tmpl, title, l, true, body)
		if err != nil {
			return err
		}
		return write(name, b)
	}
	// The overview, one file per page of its run table.
	for n := 0; ; n++ {
		o := v.overviewBody(n, l)
		if err := page(l.Runs(n), "overview", "overview", o); err != nil {
			return nil, err
		}
		if o.NextRuns == "" {
			break
		}
	}
	for _, g := range grids {
		body := &grid{Heading: g.heading, Matches: len(g.seqs), First: 1, Last: len(g.seqs), Pages: 1}
		for _, s := range g.seqs {
			t, err := v.tileOf(ix, int(s))
			if err != nil {
				return nil, err
			}
			body.Tiles = append(body.Tiles, t)
		}
		if err := page(g.name, "grid", g.heading, body); err != nil {
			return nil, err
		}
	}
	for seq := range l.pages {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s, err := v.sampleBody(seq)
		if err != nil {
			return nil, err
		}
		if err := page(fmt.Sprintf("sample-%d.html", seq), "sample", fmt.Sprintf("sample %d", seq), s); err != nil {
			return nil, err
		}
	}
	if v.against != "" {
		d, err := v.diffBody(ctx)
		if err != nil {
			return nil, err
		}
		if err := page("diff.html", "diff", "drift", d); err != nil {
			return nil, err
		}
	}
	css, err := fs.ReadFile(staticFS, "static/style.css")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(abs, "style.css"), css, 0o644); err != nil {
		return nil, err
	}
	for k := range l.images {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := v.samplePNG(k[0], k[1] == 1)
		if errors.Is(err, errNoImage) {
			continue
		} else if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("img/thumb-%d.png", k[0])
		if k[1] == 1 {
			name = fmt.Sprintf("img/full-%d.png", k[0])
		}
		if err := os.WriteFile(filepath.Join(abs, name), b, 0o644); err != nil {
			return nil, err
		}
		res.Images++
	}
	return res, nil
}
