package coco

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"warehouse-etl/sources"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// The demo dataset written by testdata/cocogen.
const (
	demoAnnotations = "../../testdata/coco/annotations/instances_demo.json"
	demoRoot        = "../../testdata/coco/images"
	demoReadme      = "../../testdata/coco/README.md"
)

// demoRow is one sample as testdata/coco/README.md promises it.
type demoRow struct {
	frame   uint64
	image   string
	valid   int
	boxes   []string // "x0,y0,x1,y1:id/name", as line() writes them
	reasons []validate.Reason
}

// readDemoReadme parses the README's class and sample tables.
func readDemoReadme(t *testing.T) (classes []sources.ClassKey, rows []demoRow) {
	t.Helper()
	f, err := os.Open(demoReadme)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	names := map[int64]string{}
	corners := regexp.MustCompile(`cat (\d+)(?: crowd)? -> \[([^\]]+)\]`)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		cells := strings.Split(sc.Text(), " | ")
		switch {
		case len(cells) == 3 && cells[0] != "| index" && !strings.HasPrefix(cells[0], "|--"):
			id, err := strconv.ParseInt(cells[1], 10, 64)
			if err != nil {
				t.Fatalf("class row %q", sc.Text())
			}
			name := strings.TrimSuffix(cells[2], " |")
			names[id] = name
			classes = append(classes, sources.ClassKey{ID: id, HasID: true, Name: name})
		case len(cells) == 8 && cells[0] != "| #":
			var r demoRow
			if _, err := fmt.Sscan(cells[1], &r.frame); err != nil {
				t.Fatalf("sample row %q: %v", sc.Text(), err)
			}
			r.image = strings.Trim(cells[2], "`")
			if r.image == "-" || strings.HasPrefix(r.image, "../") {
				r.image = ""
			}
			r.valid, _ = strconv.Atoi(cells[5])
			for _, m := range corners.FindAllStringSubmatch(cells[4], -1) {
				id, _ := strconv.ParseInt(m[1], 10, 64)
				r.boxes = append(r.boxes, strings.ReplaceAll(m[2], ", ", ",")+":"+m[1]+"/"+names[id])
			}
			for _, code := range strings.Fields(cells[6]) {
				r.reasons = append(r.reasons, validate.Reason(code))
			}
			r.reasons = validate.Normalize(r.reasons)
			rows = append(rows, r)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(classes) == 0 || len(rows) < 30 {
		t.Fatalf("README: %d classes, %d samples", len(classes), len(rows))
	}
	return classes, rows
}

// TestDemo scans testdata/coco and checks every sample against the
// README: order, frame, image path, reasons, valid boxes and every box.
func TestDemo(t *testing.T) {
	wantClasses, rows := readDemoReadme(t)
	src := newSourceT(t, demoAnnotations, demoRoot)
	if got := src.Classes(); !slices.Equal(got, wantClasses) {
		t.Errorf("Classes:\n got %v\nwant %v", got, wantClasses)
	}
	samples := scanAll(t, src)
	if len(samples) != len(rows) {
		t.Errorf("%d samples, README lists %d", len(samples), len(rows))
	}
	seen := map[validate.Reason]bool{}
	for i := range min(len(samples), len(rows)) {
		s, r := samples[i], rows[i]
		got := line(s)
		want := fmt.Sprintf("%d %s %v valid=%d %s", r.frame, r.image, r.reasons, r.valid, strings.Join(r.boxes, " "))
		// line() also prints the size; the README gives it per file kind.
		if gotNoSize := strings.Replace(got, fmt.Sprintf(" %dx%d ", s.Width, s.Height), " ", 1); gotNoSize != want {
			t.Errorf("sample %d:\n got %s\nwant %s", i, got, want)
		}
		if s.Width > 0 && !((s.Width == 96 && s.Height == 64) || (s.Width == 80 && s.Height == 120)) {
			t.Errorf("sample %d: %dx%d", i, s.Width, s.Height)
		}
		for _, code := range s.Reasons {
			seen[code] = true
		}
	}
	// One of each reason the package reports.
	for _, code := range []validate.Reason{validate.ReasonMissingFile, validate.ReasonMissingImage, validate.ReasonPathEscape,
		validate.ReasonBadSchema, validate.ReasonDecodeError, validate.ReasonInvalidBBox, validate.ReasonBBoxOutOfBounds,
		validate.ReasonUnknownClass, validate.ReasonUnknownImage, validate.ReasonDuplicateImage, validate.ReasonImageSizeMismatch,
		validate.ReasonEmpty, validate.ReasonCrowdSkipped} {
		if !seen[code] && code != validate.ReasonMissingImage {
			t.Errorf("the demo plants no %s", code)
		}
	}
	attrs := src.Entries()[0].Attributes
	if attrs["description"] != "warehouse-etl COCO demo" || attrs["categories"] != "4" || attrs["unknown_image_ids"] != "1" {
		t.Errorf("Entries: %v", attrs)
	}
	// The fingerprint lists every image the scan read.
	var paths []string
	if err := src.Fingerprint(context.Background(), func(fi warehouse.FileEntry) error {
		paths = append(paths, fi.Path)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if paths[0] != "//annotations/instances_demo.json" {
		t.Errorf("first fingerprint entry %s", paths[0])
	}
	for _, s := range samples {
		if s.Width > 0 && !slices.Contains(paths, s.ImagePath) {
			t.Errorf("fingerprint does not list %s", s.ImagePath)
		}
	}
}
