package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"warehouse-etl/warehouse"
)

// localRef are the href and src attributes of a report page.
var localRef = regexp.MustCompile(`(?:href|src)="([^"#?]*)"`)

// report writes a static site: the overview, a page per reason, the
// rejected and kept pages, a page per sample shown, their pictures; every
// link and picture of every page is a file of the report; the overview's
// totals in Chromium (file://) are the manifest's; the warehouse is not
// written, and --out inside the version directory is refused.
func TestReportWritesStaticSite(t *testing.T) {
	out := t.TempDir()
	dir := buildDemo(t, "demo", out)
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	before := treeState(t, out)
	site := filepath.Join(t.TempDir(), "report")
	res := runCLI(t, context.Background(), nil, "report", "--tensor-warehouse", dir, "--out", site, "--per-reason", "2", "--kept", "5", "--quiet")
	if res.code != 0 {
		t.Fatalf("report exit %d\n%s", res.code, res.stderr)
	}
	if got := strings.TrimSpace(res.stdout); got != filepath.Join(site, "index.html") {
		t.Errorf("report printed %q, want its index page", got)
	}
	want := []string{"index.html", "rejected.html", "kept.html", "style.css"}
	for r := range m.Summary.Total.ByReason {
		want = append(want, "reason-"+string(r)+".html")
	}
	for _, f := range want {
		if _, err := os.Stat(filepath.Join(site, f)); err != nil {
			t.Errorf("report has no %s: %v", f, err)
		}
	}
	pages, _ := filepath.Glob(filepath.Join(site, "*.html"))
	samplePages, _ := filepath.Glob(filepath.Join(site, "sample-*.html"))
	if len(samplePages) == 0 {
		t.Error("report has no sample pages")
	}
	pngs, _ := filepath.Glob(filepath.Join(site, "img", "*.png"))
	if len(pngs) == 0 {
		t.Error("report has no pictures")
	}
	for _, p := range pages {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, ref := range localRef.FindAllStringSubmatch(string(raw), -1) {
			target := ref[1]
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "/") || strings.Contains(target, "..") {
				t.Errorf("%s: link %q does not stay in the report", filepath.Base(p), target)
				continue
			}
			if _, err := os.Stat(filepath.Join(site, target)); err != nil {
				t.Errorf("%s: link %q: %v", filepath.Base(p), target, err)
			}
		}
	}
	after := treeState(t, out)
	for p, st := range after {
		if before[p] != st && !strings.HasSuffix(p, ".readers") && p != "." && p != "demo" {
			t.Errorf("report changed or created %s", p)
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			t.Errorf("report removed %s", p)
		}
	}
	inside := runCLI(t, context.Background(), nil, "report", "--tensor-warehouse", dir, "--out", filepath.Join(dir, "report"), "--quiet")
	if inside.code == 0 || !strings.Contains(inside.stderr, "inside the version directory") {
		t.Errorf("report --out inside the version: exit %d, %s", inside.code, inside.stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "report")); err == nil {
		t.Errorf("report created a directory inside the version")
	}

	chromium(t)
	dom := dumpDOM(t, "file://"+filepath.Join(site, "index.html"))
	tot := m.Summary.Total
	for k, want := range map[string]int64{"total": tot.Total, "kept": tot.Kept, "skipped": tot.Skipped, "invalid": tot.Invalid} {
		if got := cell(t, dom, "data-k", k); got != want {
			t.Errorf("report totals %s: page %d, manifest %d", k, got, want)
		}
	}
	grid := dumpDOM(t, "file://"+filepath.Join(site, "rejected.html"))
	if n := len(tileSeqs(grid)); n == 0 {
		t.Errorf("the report's rejected page shows no tile")
	}
}
