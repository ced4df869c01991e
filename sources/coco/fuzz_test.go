package coco

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"warehouse-etl/internal/fuzzmem"
	"warehouse-etl/sources"
	"warehouse-etl/validate"
)

// FuzzAnnotations reads arbitrary bytes as an annotations file through
// New's reader seam and scans it against an image root with a PNG, a
// JPEG and an undecodable file. It must never panic; New must refuse
// exactly what is not JSON and accept only a document with the three
// arrays; what it keeps must be bounded by the input; and every sample
// must be consistent (dense seq, normalized reasons, boxes inside the
// image and of a listed class).
func FuzzAnnotations(f *testing.F) {
	fuzzmem.AddFiles(f, "../../testdata/coco/annotations/*.json")
	root := f.TempDir()
	writeTree(f, root, map[string][]byte{
		"a.png":     encoded(f, "png", 96, 64),
		"sub/b.jpg": encoded(f, "jpeg", 80, 120),
		"bad.png":   []byte("\x89PNG\r\n\x1a\nnot really"),
	})
	f.Add([]byte(doc(`[{"id": 1, "file_name": "a.png", "width": 96, "height": 64}, {"id": 2, "file_name": "sub/b.jpg", "width": 80, "height": 120}]`,
		`[{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 2, 30, 40], "area": 1200, "iscrowd": 0, "segmentation": [[1, 2, 31, 2, 31, 42]]},
		  {"id": 2, "image_id": 2, "category_id": 3, "bbox": [-0.4, 0, 80.3, 120], "iscrowd": 1, "segmentation": {"counts": [5, 10, 5], "size": [120, 80]}},
		  {"id": 3, "image_id": 9, "category_id": 2, "bbox": [0, 0, 0, 1]}]`)))
	f.Add([]byte(`{"annotations": [{"image_id": 3}], "categories": [], "images": [{"id": 3, "file_name": "bad.png"}, {"id": 3, "file_name": "../a.png"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		src, err := fuzzmem.Call(t, annotationsAllocBound, func() (*Source, error) { return newSource(bytes.NewReader(data), "fuzz.json", root, Options{}) })
		var top map[string]json.RawMessage
		valid := json.Unmarshal(data, &top) == nil && top != nil
		if err != nil {
			if !strings.HasPrefix(err.Error(), "coco: fuzz.json: ") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if !valid {
			t.Fatalf("New accepted what encoding/json does not read as an object: %v", json.Unmarshal(data, &top))
		}
		var arrays [3][]json.RawMessage
		for i, k := range []string{"images", "annotations", "categories"} {
			if err := json.Unmarshal(top[k], &arrays[i]); err != nil || arrays[i] == nil {
				t.Fatalf("New accepted %s = %.40s", k, top[k])
			}
		}
		d := src.doc
		if len(d.images) != len(arrays[0]) || d.nAnns != len(arrays[1]) || len(d.cats) != len(arrays[2]) {
			t.Fatalf("kept %d images, %d annotations, %d categories of %d, %d, %d",
				len(d.images), d.nAnns, len(d.cats), len(arrays[0]), len(arrays[1]), len(arrays[2]))
		}
		// What is kept is bounded by the input: an annotation with an
		// image_id takes at least {"image_id":0} in the file.
		if d.anns.n*len(`{"image_id":0}`) > len(data) || len(d.unknown) > d.anns.n {
			t.Fatalf("%d annotations, %d unknown ids from %d bytes", d.anns.n, len(d.unknown), len(data))
		}
		classes := map[sources.ClassKey]bool{}
		for i, k := range src.Classes() {
			classes[k] = true
			if i > 0 && src.Classes()[i-1].ID >= k.ID {
				t.Fatalf("classes not ordered by id: %v", src.Classes())
			}
		}
		var n int64
		err = src.Scan(context.Background(), func(s *sources.Sample) error {
			if s.Seq != n {
				t.Fatalf("seq %d, want %d", s.Seq, n)
			}
			n++
			if !slices.Equal(s.Reasons, validate.Normalize(s.Reasons)) {
				t.Fatalf("reasons %v not normalized", s.Reasons)
			}
			if len(s.Boxes) > 0 && s.ValidBoxes != len(s.Boxes) {
				t.Fatalf("%d valid boxes, %d boxes", s.ValidBoxes, len(s.Boxes))
			}
			for _, b := range s.Boxes {
				if !(b.X0 >= 0 && b.X0 < b.X1 && b.X1 <= float64(s.Width) && b.Y0 >= 0 && b.Y0 < b.Y1 && b.Y1 <= float64(s.Height)) ||
					math.IsInf(b.X1-b.X0, 0) {
					t.Fatalf("box %+v in a %dx%d image", b, s.Width, s.Height)
				}
				if !classes[b.Class] {
					t.Fatalf("box class %v not in Classes", b.Class)
				}
			}
			if s.ImagePath != "" && !filepath.IsLocal(s.ImagePath) {
				t.Fatalf("image path %q escapes", s.ImagePath)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("Scan: %v", err)
		}
		want := int64(len(d.images) + len(d.unknown))
		if d.badAnns > 0 {
			want++
		}
		if n != want {
			t.Fatalf("%d samples, want %d", n, want)
		}
	})
}
