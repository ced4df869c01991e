package coco

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"warehouse-etl/internal/testfiles"
	"warehouse-etl/sources"
)

// The shared test helpers (internal/testfiles).
var (
	writeTree = testfiles.WriteTree
	encoded   = testfiles.Image
)

// dataset writes an annotations file (doc) and images into a temp dir
// and returns the annotations path and the image root.
func dataset(t testing.TB, doc string, images map[string][]byte) (ann, root string) {
	t.Helper()
	dir := t.TempDir()
	ann = filepath.Join(dir, "annotations", "instances.json")
	root = filepath.Join(dir, "images")
	if err := os.MkdirAll(root, 0o755); err != nil {
		t.Fatal(err)
	}
	writeTree(t, dir, map[string][]byte{"annotations/instances.json": []byte(doc)})
	writeTree(t, root, images)
	return ann, root
}

func newSourceT(t testing.TB, ann, root string) *Source {
	t.Helper()
	src, err := New(ann, root, Options{})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return src
}

func scanAll(t testing.TB, src *Source) []*sources.Sample {
	t.Helper()
	var out []*sources.Sample
	if err := src.Scan(context.Background(), func(s *sources.Sample) error {
		out = append(out, s)
		return nil
	}); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return out
}

// line is one sample as the table tests compare it:
// "frame image WxH [reasons] valid=N boxes".
func line(s *sources.Sample) string {
	var boxes []string
	for _, b := range s.Boxes {
		boxes = append(boxes, fmt.Sprintf("%g,%g,%g,%g:%d/%s", b.X0, b.Y0, b.X1, b.Y1, b.Class.ID, b.Class.Name))
	}
	return fmt.Sprintf("%d %s %dx%d %v valid=%d %s", s.Frame, s.ImagePath, s.Width, s.Height, s.Reasons, s.ValidBoxes, strings.Join(boxes, " "))
}

func lines(samples []*sources.Sample) []string {
	out := make([]string, len(samples))
	for i, s := range samples {
		out[i] = line(s)
	}
	return out
}

// cats is a categories array for the tests: ids 1 (person) and 3 (car).
const cats = `[{"id": 3, "name": "car", "supercategory": "vehicle"}, {"id": 1, "name": "person"}]`

// doc assembles a document from images and annotations array texts.
func doc(images, annotations string) string {
	return fmt.Sprintf(`{"info": {"description": "test"}, "images": %s, "annotations": %s, "categories": %s}`, images, annotations, cats)
}
