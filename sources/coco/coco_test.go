package coco

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"warehouse-etl/sources"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// TestReasons scans small documents and compares every sample:
// "frame image WxH [reasons] valid=N boxes" (boxes as x0,y0,x1,y1:id/name).
func TestReasons(t *testing.T) {
	png96 := encoded(t, "png", 96, 64)
	jpg80 := encoded(t, "jpeg", 80, 120)
	one := `[{"id": 1, "file_name": "a.png", "width": 96, "height": 64}]`
	files := map[string][]byte{"a.png": png96}
	ann := func(bbox string, extra string) string {
		return `[{"id": 1, "image_id": 1, "category_id": 1, "bbox": ` + bbox + extra + `}]`
	}
	tests := []struct {
		name        string
		images      string
		annotations string
		files       map[string][]byte
		want        []string
	}{
		{
			name:        "clean boxes, both classes, file order within the image",
			images:      `[{"id": 1, "file_name": "a.png", "width": 96, "height": 64, "license": 3}]`,
			annotations: `[{"image_id": 1, "category_id": 3, "bbox": [10.5, 2, 20.25, 30], "area": 10, "segmentation": [[1, 2, 3, 4, 5, 6]], "iscrowd": 0, "id": 7}, {"image_id": 1, "category_id": 1, "bbox": [0, 0, 96, 64], "iscrowd": false}]`,
			files:       files,
			want:        []string{"1 a.png 96x64 [] valid=2 10.5,2,30.75,32:3/car 0,0,96,64:1/person"},
		},
		{
			name:   "jpeg, width and height absent: not checked",
			images: `[{"id": 4, "file_name": "sub/b.jpg"}]`, annotations: `[{"image_id": 4, "category_id": 1, "bbox": [1, 1, 2, 2]}]`,
			files: map[string][]byte{"sub/b.jpg": jpg80},
			want:  []string{"4 sub/b.jpg 80x120 [] valid=1 1,1,3,3:1/person"},
		},
		{
			name: "zero width", images: one, annotations: ann(`[10, 10, 0, 5]`, ""), files: files,
			want: []string{"1 a.png 96x64 [invalid_bbox] valid=0 "},
		},
		{
			name: "negative height", images: one, annotations: ann(`[10, 10, 5, -5]`, ""), files: files,
			want: []string{"1 a.png 96x64 [invalid_bbox] valid=0 "},
		},
		{
			name: "a value beyond float64 is infinite", images: one, annotations: ann(`[1e400, 10, 5, 5]`, ""), files: files,
			want: []string{"1 a.png 96x64 [invalid_bbox] valid=0 "},
		},
		{
			name: "x + w overflows", images: one, annotations: ann(`[1e308, 10, 1e308, 5]`, ""), files: files,
			want: []string{"1 a.png 96x64 [invalid_bbox] valid=0 "},
		},
		{
			name: "no bbox", images: one, annotations: `[{"image_id": 1, "category_id": 1}]`, files: files,
			want: []string{"1 a.png 96x64 [invalid_bbox] valid=0 "},
		},
		{
			name: "bbox null", images: one, annotations: ann(`null`, ""), files: files,
			want: []string{"1 a.png 96x64 [invalid_bbox] valid=0 "},
		},
		{
			name: "bbox of three numbers", images: one, annotations: ann(`[1, 2, 3]`, ""), files: files,
			want: []string{"1 a.png 96x64 [bad_schema] valid=0 "},
		},
		{
			name: "bbox of five numbers", images: one, annotations: ann(`[1, 2, 3, 4, 5]`, ""), files: files,
			want: []string{"1 a.png 96x64 [bad_schema] valid=0 "},
		},
		{
			name: "bbox with a string", images: one, annotations: ann(`[1, "2", 3, 4]`, ""), files: files,
			want: []string{"1 a.png 96x64 [bad_schema] valid=0 "},
		},
		{
			name: "bbox an object", images: one, annotations: ann(`{"x": 1}`, ""), files: files,
			want: []string{"1 a.png 96x64 [bad_schema] valid=0 "},
		},
		{
			name: "far outside", images: one, annotations: ann(`[90, 10, 30, 5]`, ""), files: files,
			want: []string{"1 a.png 96x64 [bbox_out_of_bounds] valid=0 "},
		},
		{
			name: "outside by less than the tolerance: clamped", images: one, annotations: ann(`[-0.4, 10, 96.7, 54.4]`, ""), files: files,
			want: []string{"1 a.png 96x64 [] valid=1 0,10,96,64:1/person"},
		},
		{
			name: "outside by just more than the tolerance", images: one, annotations: ann(`[-0.6, 10, 20, 20]`, ""), files: files,
			want: []string{"1 a.png 96x64 [bbox_out_of_bounds] valid=0 "},
		},
		{
			name: "unknown category", images: one,
			annotations: `[{"image_id": 1, "category_id": 2, "bbox": [1, 1, 5, 5]}, {"image_id": 1, "category_id": 3, "bbox": [1, 1, 5, 5]}]`, files: files,
			want: []string{"1 a.png 96x64 [unknown_class] valid=1 1,1,6,6:3/car"},
		},
		{
			name: "unknown category and a bad box: both", images: one,
			annotations: `[{"image_id": 1, "category_id": 2, "bbox": [1, 1, 0, 5]}]`, files: files,
			want: []string{"1 a.png 96x64 [invalid_bbox unknown_class] valid=0 "},
		},
		{
			name: "no category_id", images: one, annotations: `[{"image_id": 1, "bbox": [1, 1, 5, 5]}]`, files: files,
			want: []string{"1 a.png 96x64 [bad_schema] valid=0 "},
		},
		{
			name: "category_id a string", images: one, annotations: `[{"image_id": 1, "category_id": "1", "bbox": [1, 1, 5, 5]}]`, files: files,
			want: []string{"1 a.png 96x64 [bad_schema] valid=0 "},
		},
		{
			name: "category_id not an integer", images: one, annotations: `[{"image_id": 1, "category_id": 1.5, "bbox": [1, 1, 5, 5]}]`, files: files,
			want: []string{"1 a.png 96x64 [bad_schema] valid=0 "},
		},
		{
			name: "crowd next to a box", images: one,
			annotations: `[{"image_id": 1, "category_id": 1, "bbox": [1, 1, 5, 5]}, {"image_id": 1, "category_id": 1, "iscrowd": 1, "bbox": [0, 0, 500, 500], "segmentation": {"counts": [1, 2, 3], "size": [64, 96]}}]`,
			files:       files,
			want:        []string{"1 a.png 96x64 [crowd_skipped] valid=1 1,1,6,6:1/person"},
		},
		{
			name: "crowd only: empty; its category and box are not checked", images: one,
			annotations: `[{"image_id": 1, "category_id": 99, "iscrowd": true, "segmentation": {"counts": "abc", "size": [64, 96]}}]`,
			files:       files,
			want:        []string{"1 a.png 96x64 [empty crowd_skipped] valid=0 "},
		},
		{
			name: "iscrowd 2", images: one, annotations: ann(`[1, 1, 5, 5]`, `, "iscrowd": 2`), files: files,
			want: []string{"1 a.png 96x64 [bad_schema] valid=0 "},
		},
		{
			name: "no annotations", images: one, annotations: `[]`, files: files,
			want: []string{"1 a.png 96x64 [empty] valid=0 "},
		},
		{
			name: "missing file: boxes checked without the image", images: one,
			annotations: `[{"image_id": 1, "category_id": 1, "bbox": [500, 1, 5, 5]}, {"image_id": 1, "category_id": 1, "bbox": [1, 1, 0, 5]}]`,
			want:        []string{"1 a.png 0x0 [missing_file invalid_bbox] valid=1 "},
		},
		{
			name: "a directory is not a file", images: one, annotations: ann(`[1, 1, 5, 5]`, ""),
			files: map[string][]byte{"a.png/x": png96},
			want:  []string{"1 a.png 0x0 [missing_file] valid=1 "},
		},
		{
			name: "undecodable", images: one, annotations: ann(`[1, 1, 5, 5]`, ""),
			files: map[string][]byte{"a.png": []byte("not an image at all")},
			want:  []string{"1 a.png 0x0 [decode_error] valid=1 "},
		},
		{
			name:   "escaping and absolute file names",
			images: `[{"id": 1, "file_name": "../a.png"}, {"id": 2, "file_name": "/etc/passwd"}, {"id": 3, "file_name": "x/../../a.png"}]`, annotations: `[]`,
			want: []string{"1  0x0 [path_escape empty] valid=0 ", "2  0x0 [path_escape empty] valid=0 ", "3  0x0 [path_escape empty] valid=0 "},
		},
		{
			name:   "file names cleaned",
			images: `[{"id": 1, "file_name": "./sub//b.jpg"}, {"id": 2, "file_name": "sub/x/../b.jpg"}]`, annotations: `[]`,
			files: map[string][]byte{"sub/b.jpg": jpg80},
			want:  []string{"1 sub/b.jpg 80x120 [empty] valid=0 ", "2 sub/b.jpg 80x120 [duplicate_image empty] valid=0 "},
		},
		{
			name:   "file_name empty, absent, a number",
			images: `[{"id": 1, "file_name": ""}, {"id": 2}, {"id": 3, "file_name": 5}, {"id": 4, "file_name": null}]`, annotations: `[]`,
			want: []string{"1  0x0 [missing_image empty] valid=0 ", "2  0x0 [bad_schema empty] valid=0 ", "3  0x0 [bad_schema empty] valid=0 ", "4  0x0 [bad_schema empty] valid=0 "},
		},
		{
			name:        "size mismatch",
			images:      `[{"id": 1, "file_name": "a.png", "width": 97, "height": 64}, {"id": 2, "file_name": "a.png", "width": 96, "height": 63}]`,
			annotations: `[{"image_id": 1, "category_id": 1, "bbox": [1, 1, 5, 5]}]`, files: files,
			want: []string{"1 a.png 96x64 [image_size_mismatch] valid=1 1,1,6,6:1/person", "2 a.png 96x64 [duplicate_image image_size_mismatch empty] valid=0 "},
		},
		{
			name:        "width and height of the wrong type",
			images:      `[{"id": 1, "file_name": "a.png", "width": "96", "height": 64}, {"id": 2, "file_name": "b.jpg", "width": 0, "height": 120}, {"id": 3, "file_name": "c.png", "width": 96.0}]`,
			annotations: `[]`, files: map[string][]byte{"a.png": png96, "b.jpg": jpg80, "c.png": png96},
			want: []string{"1 a.png 96x64 [bad_schema empty] valid=0 ", "2 b.jpg 80x120 [bad_schema empty] valid=0 ", "3 c.png 96x64 [bad_schema empty] valid=0 "},
		},
		{
			name:        "duplicate id: the later entry gets no annotations",
			images:      `[{"id": 1, "file_name": "a.png"}, {"id": 1, "file_name": "b.jpg"}]`,
			annotations: `[{"image_id": 1, "category_id": 1, "bbox": [1, 1, 5, 5]}]`,
			files:       map[string][]byte{"a.png": png96, "b.jpg": jpg80},
			want:        []string{"1 a.png 96x64 [] valid=1 1,1,6,6:1/person", "1 b.jpg 80x120 [duplicate_image] valid=0 "},
		},
		{
			name:        "duplicate file: the later entry in file order, whatever its id",
			images:      `[{"id": 9, "file_name": "a.png"}, {"id": 2, "file_name": "a.png"}]`,
			annotations: `[{"image_id": 2, "category_id": 1, "bbox": [1, 1, 5, 5]}, {"image_id": 9, "category_id": 3, "bbox": [2, 2, 5, 5]}]`,
			files:       files,
			want:        []string{"2 a.png 96x64 [duplicate_image] valid=1 1,1,6,6:1/person", "9 a.png 96x64 [] valid=1 2,2,7,7:3/car"},
		},
		{
			name:        "images by id, annotations in any order",
			images:      `[{"id": 30, "file_name": "a.png"}, {"id": 10, "file_name": "b.jpg"}, {"id": 20, "file_name": "c.png"}]`,
			annotations: `[{"image_id": 20, "category_id": 1, "bbox": [1, 1, 1, 1]}, {"image_id": 10, "category_id": 1, "bbox": [2, 2, 2, 2]}, {"image_id": 20, "category_id": 3, "bbox": [3, 3, 3, 3]}, {"image_id": 30, "category_id": 1, "bbox": [4, 4, 4, 4]}, {"image_id": 20, "category_id": 1, "bbox": [5, 5, 5, 5]}]`,
			files:       map[string][]byte{"a.png": png96, "b.jpg": jpg80, "c.png": png96},
			want: []string{
				"10 b.jpg 80x120 [] valid=1 2,2,4,4:1/person",
				"20 c.png 96x64 [] valid=3 1,1,2,2:1/person 3,3,6,6:3/car 5,5,10,10:1/person",
				"30 a.png 96x64 [] valid=1 4,4,8,8:1/person",
			},
		},
		{
			name:        "unknown image ids: placeholders after the images, by id",
			images:      one,
			annotations: `[{"image_id": 77, "category_id": 1, "bbox": [1, 1, 5, 5]}, {"image_id": 5, "category_id": 2, "bbox": [1, 1, 0, 5]}, {"image_id": 77, "category_id": 1, "iscrowd": 1}, {"image_id": 1, "category_id": 1, "bbox": [1, 1, 5, 5]}]`,
			files:       files,
			want: []string{
				"1 a.png 96x64 [] valid=1 1,1,6,6:1/person",
				"5  0x0 [invalid_bbox unknown_class unknown_image] valid=0 ",
				"77  0x0 [unknown_image crowd_skipped] valid=1 ",
			},
		},
		{
			name:        "annotations without a usable image_id: one placeholder, last",
			images:      one,
			annotations: `[{"image_id": "1", "category_id": 1, "bbox": [1, 1, 5, 5]}, 7, {"category_id": 1}, {"image_id": -1}, {"image_id": 1.0}, [1], null, {"image_id": 9, "bbox": [1, 1, 1, 1], "category_id": 1}]`,
			files:       files,
			want: []string{
				"1 a.png 96x64 [empty] valid=0 ",
				"9  0x0 [unknown_image] valid=1 ",
				"0  0x0 [bad_schema] valid=0 ",
			},
		},
		{
			name:        "images entries without a usable id: after the others, in file order",
			images:      `[{"id": "1", "file_name": "a.png"}, 5, {"id": 3, "file_name": "b.jpg"}, {"id": -2, "file_name": "c.png"}, null, {"file_name": "b.jpg"}]`,
			annotations: `[{"image_id": 3, "category_id": 1, "bbox": [1, 1, 5, 5]}]`,
			files:       map[string][]byte{"a.png": png96, "b.jpg": jpg80},
			want: []string{
				"3 b.jpg 80x120 [] valid=1 1,1,6,6:1/person",
				"0 a.png 96x64 [bad_schema] valid=0 ",
				"0  0x0 [bad_schema] valid=0 ",
				"0 c.png 0x0 [missing_file bad_schema] valid=0 ",
				"0  0x0 [bad_schema] valid=0 ",
				"0 b.jpg 80x120 [bad_schema duplicate_image] valid=0 ",
			},
		},
		{
			name:        "the largest ids",
			images:      `[{"id": 18446744073709551615, "file_name": "a.png"}, {"id": 18446744073709551616, "file_name": "a.png"}]`,
			annotations: `[{"image_id": 18446744073709551615, "category_id": 1, "bbox": [1, 1, 5, 5]}]`,
			files:       files,
			want: []string{
				"18446744073709551615 a.png 96x64 [] valid=1 1,1,6,6:1/person",
				"0 a.png 96x64 [bad_schema duplicate_image] valid=0 ",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			annPath, root := dataset(t, doc(tc.images, tc.annotations), tc.files)
			src := newSourceT(t, annPath, root)
			samples := scanAll(t, src)
			if got := lines(samples); !slices.Equal(got, tc.want) {
				t.Errorf("scan:\n got %q\nwant %q", got, tc.want)
			}
			for i, s := range samples {
				if s.Seq != int64(i) || s.Source != "instances.json" || s.SourceIndex != 0 || s.LabelPath != "instances.json" {
					t.Errorf("sample %d: seq %d source %q index %d label %q", i, s.Seq, s.Source, s.SourceIndex, s.LabelPath)
				}
				if s.Width > 0 && s.ValidBoxes != len(s.Boxes) {
					t.Errorf("sample %d: %d valid boxes, %d boxes", i, s.ValidBoxes, len(s.Boxes))
				}
				if !slices.Equal(s.Reasons, validate.Normalize(s.Reasons)) {
					t.Errorf("sample %d: reasons %v not normalized", i, s.Reasons)
				}
			}
		})
	}
}

// TestKeyOrder: the top-level keys in any order give the same samples,
// classes and entries.
func TestKeyOrder(t *testing.T) {
	parts := map[string]string{
		"info":        `"info": {"description": "d", "version": 2.5, "year": 2017}`,
		"licenses":    `"licenses": [{"id": 1, "name": "x", "url": "y"}]`,
		"images":      `"images": [{"id": 2, "file_name": "a.png", "width": 96, "height": 64}, {"id": 1, "file_name": "b.png"}]`,
		"annotations": `"annotations": [{"image_id": 2, "category_id": 3, "bbox": [1, 2, 3, 4], "segmentation": [[1, 2, 3, 4, 5, 6]]}, {"image_id": 8, "category_id": 1, "bbox": [1, 2, 3, 4]}]`,
		"categories":  `"categories": ` + cats,
		"extra":       `"type": "instances", "x-tool": {"nested": [[{"a": [1, 2]}]], "s": "t", "big": 1e999}, "huge": [1e999, -1e999, {"a": 1e999}]`,
	}
	orders := [][]string{
		{"info", "licenses", "images", "annotations", "categories"},
		{"annotations", "images", "categories"},
		{"categories", "extra", "annotations", "licenses", "info", "images"},
		{"extra", "images", "info", "categories", "annotations"},
	}
	var first []string
	var firstClasses []sources.ClassKey
	for _, order := range orders {
		var kv []string
		for _, k := range order {
			kv = append(kv, parts[k])
		}
		annPath, root := dataset(t, "{"+strings.Join(kv, ",\n")+"}", map[string][]byte{"a.png": encoded(t, "png", 96, 64)})
		src := newSourceT(t, annPath, root)
		got := lines(scanAll(t, src))
		want := []string{"1 b.png 0x0 [missing_file empty] valid=0 ", "2 a.png 96x64 [] valid=1 1,2,4,6:3/car", "8  0x0 [unknown_image] valid=1 "}
		if !slices.Equal(got, want) {
			t.Errorf("order %v:\n got %q\nwant %q", order, got, want)
		}
		attrs := src.Entries()[0].Attributes
		if d, v := attrs["description"], attrs["version"]; slices.Contains(order, "info") && (d != "d" || v != "2.5") {
			t.Errorf("order %v: description %q version %q", order, d, v)
		}
		if first == nil {
			first, firstClasses = got, src.Classes()
		} else if !slices.Equal(got, first) || !slices.Equal(src.Classes(), firstClasses) {
			t.Errorf("order %v differs from %v", order, orders[0])
		}
	}
}

func TestClasses(t *testing.T) {
	d := `{"images": [], "annotations": [], "categories": [
		{"id": 7, "name": "bicycle"}, {"id": 1, "name": "person"}, {"id": 90, "name": "toothbrush"},
		{"id": -4, "name": ""}, {"id": 3, "name": "car", "supercategory": "vehicle", "keypoints": ["a"]}]}`
	annPath, root := dataset(t, d, nil)
	src := newSourceT(t, annPath, root)
	want := []sources.ClassKey{
		{ID: -4, HasID: true, Name: ""},
		{ID: 1, HasID: true, Name: "person"},
		{ID: 3, HasID: true, Name: "car"},
		{ID: 7, HasID: true, Name: "bicycle"},
		{ID: 90, HasID: true, Name: "toothbrush"},
	}
	if got := src.Classes(); !reflect.DeepEqual(got, want) {
		t.Errorf("Classes before Scan:\n got %v\nwant %v", got, want)
	}
	src.Classes()[0].Name = "changed"
	if got := src.Classes(); got[0].Name != "" {
		t.Errorf("Classes returns the source's own table: %v", got)
	}
	if got := scanAll(t, src); len(got) != 0 {
		t.Errorf("%d samples, want none", len(got))
	}
}

// TestBadDocuments: files that are not COCO instances documents stop New
// with an error naming the file and the problem.
func TestBadDocuments(t *testing.T) {
	const arrays = `"images": [], "annotations": [], "categories": []`
	tests := []struct {
		doc  string
		want string // after "coco: <path>: "
	}{
		{``, `empty file, want a JSON object`},
		{`  `, `empty file, want a JSON object`},
		{`[]`, `the document is an array, want a JSON object`},
		{`"instances"`, `the document is a string, want a JSON object`},
		{`null`, `the document is null, want a JSON object`},
		{`12`, `the document is a number, want a JSON object`},
		{`1e700`, `the document is a number, want a JSON object`},
		{`{}`, `no "images" array: not a COCO instances file`},
		{`{"images": [], "categories": []}`, `no "annotations" array: not a COCO instances file`},
		{`{"images": [], "annotations": []}`, `no "categories" array: not a COCO instances file`},
		{`{"images": {}, "annotations": [], "categories": []}`, `"images" is an object, want an array`},
		{`{"images": [], "annotations": null, "categories": []}`, `"annotations" is null, want an array`},
		{`{"images": [], "annotations": [], "categories": "person"}`, `"categories" is a string, want an array`},
		{`{"images": [], "annotations": [], "categories": 3}`, `"categories" is a number, want an array`},
		{`{"images": [], "annotations": [], "categories": -1e999}`, `"categories" is a number, want an array`},
		{`{"images": [], "annotations": [], "categories": true}`, `"categories" is a boolean, want an array`},
		{`{` + arrays + `, "images": []}`, `"images" is listed twice`},
		{`{` + arrays + `}{}`, `data after the top-level object (byte 52)`},
		{`{` + arrays + `} x`, `malformed JSON near byte 52: invalid character 'x' looking for beginning of value`},
		{`{"images": [{"id": 1,}], "annotations": [], "categories": []}`, `malformed JSON near byte 12: invalid character '}' looking for beginning of object key string`},
		{`{"images": [{"id": 1}`, `malformed JSON near byte 21: unexpected EOF`},
		{`{"images": [`, `malformed JSON near byte 12: unexpected EOF`},
		{`{"images"`, `malformed JSON near byte 9: unexpected EOF`},
		{`{"images": [] "annotations": []}`, `malformed JSON near byte 14: invalid character '"' after object key:value pair`},
		{`{"images": [], "annotations": [], "categories": [5]}`, `categories[0] is not an object`},
		{`{"images": [], "annotations": [], "categories": [{"name": "a"}]}`, `categories[0]: id is missing or not an integer`},
		{`{"images": [], "annotations": [], "categories": [{"id": "1", "name": "a"}]}`, `categories[0]: id is missing or not an integer`},
		{`{"images": [], "annotations": [], "categories": [{"id": 1}]}`, `categories[0] (id 1): name is missing or not a string`},
		{`{"images": [], "annotations": [], "categories": [{"id": 1, "name": 1}]}`, `categories[0] (id 1): name is missing or not a string`},
		{`{"images": [], "annotations": [], "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}, {"id": 1, "name": "c"}]}`, `category id 1 is listed twice (categories[0] and categories[2])`},
	}
	for _, tc := range tests {
		annPath, root := dataset(t, tc.doc, nil)
		_, err := New(annPath, root, Options{})
		want := "coco: " + annPath + ": " + tc.want
		if err == nil || err.Error() != want {
			t.Errorf("%s:\n got %v\nwant %s", tc.doc, err, want)
		}
	}
}

func TestNewErrors(t *testing.T) {
	annPath, root := dataset(t, doc(`[]`, `[]`), nil)
	if _, err := New(filepath.Join(root, "nope.json"), root, Options{}); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing annotations: %v", err)
	}
	if _, err := New(root, root, Options{}); err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("annotations a directory: %v", err)
	}
	if _, err := New(annPath, filepath.Join(root, "nope"), Options{}); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing image root: %v", err)
	}
	if _, err := New(annPath, annPath, Options{}); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Errorf("image root a file: %v", err)
	}
	if _, err := New(annPath, root, Options{MaxImageBytes: -1}); err == nil {
		t.Error("negative MaxImageBytes accepted")
	}
}

// TestElementLimit: one entry larger than the limit stops New without
// being read whole.
func TestElementLimit(t *testing.T) {
	const limit = 1 << 20
	big := func(n int) string {
		return `{"image_id": 1, "segmentation": [[` + strings.Repeat("1.25,", n/5) + `1]]}`
	}
	for _, where := range []string{"annotations", "images", "info", "other"} {
		var d string
		b := big(limit + 2*readChunk)
		switch where {
		case "annotations":
			d = `{"images": [], "categories": [], "annotations": [{"image_id": 1}, ` + b + `]}`
		case "images":
			d = `{"images": [` + b + `], "categories": [], "annotations": []}`
		case "info":
			d = `{"info": ` + b + `, "images": [], "categories": [], "annotations": []}`
		case "other":
			d = `{"x": {"y": [[` + b + `]]}, "images": [], "categories": [], "annotations": []}`
		}
		_, err := parseLimited(strings.NewReader(d), limit)
		if err == nil || !strings.Contains(err.Error(), "is larger than 1 MiB") {
			t.Errorf("%s: %v", where, err)
		}
		// Just under the limit, and many of them, are fine.
		d = strings.Replace(d, b, big(limit-2*readChunk), 1)
		halves := big(limit/2) + `, ` + big(limit/2)
		d = strings.Replace(d, `"annotations": []`, `"annotations": [`+halves+`]`, 1)
		d = strings.Replace(d, `"annotations": [{`, `"annotations": [`+halves+`, {`, 1)
		doc, err := parseLimited(strings.NewReader(d), limit)
		if err != nil {
			t.Errorf("%s under the limit: %v", where, err)
		} else if n := doc.anns.n; n < 2 {
			t.Errorf("%s under the limit: %d annotations", where, n)
		}
	}
	// The real limit, through New.
	annPath, root := dataset(t, `{"images": [], "categories": [], "annotations": [`+big(maxElementBytes+2*readChunk)+`]}`, nil)
	if _, err := New(annPath, root, Options{}); err == nil || err.Error() != "coco: "+annPath+": the value at byte 49 is larger than 64 MiB" {
		t.Errorf("New: %v", err)
	}
}

func TestEntries(t *testing.T) {
	d := `{"info": {"description": "demo set", "version": "1.0", "year": 2017},
		"images": [{"id": 1, "file_name": "a.png"}, {"id": 2, "file_name": "b.png"}],
		"annotations": [{"image_id": 1, "category_id": 1, "bbox": [1, 1, 2, 2]}, {"image_id": 1, "category_id": 1, "iscrowd": 1},
			{"image_id": 2, "category_id": 1, "iscrowd": 1}, {"image_id": 5, "category_id": 1, "bbox": [1, 1, 2, 2]}, {"image_id": "x"}],
		"categories": ` + cats + `}`
	annPath, root := dataset(t, d, nil)
	src := newSourceT(t, annPath, root)
	if got := src.Entries(); got != nil {
		t.Errorf("Entries before Scan: %v", got)
	}
	scanAll(t, src)
	want := []warehouse.SourceEntry{{Index: 0, Name: "instances.json", Attributes: map[string]string{
		"file": "instances.json", "images": "2", "annotations": "5", "categories": "2", "crowd_annotations": "2",
		"unknown_image_ids": "1", "annotations_without_image": "1", "description": "demo set", "version": "1.0",
	}}}
	if got := src.Entries(); !reflect.DeepEqual(got, want) {
		t.Errorf("Entries:\n got %v\nwant %v", got, want)
	}
	if src.Kind() != "coco" || src.Extras() != nil {
		t.Errorf("Kind %q Extras %v", src.Kind(), src.Extras())
	}
}

func TestReadImage(t *testing.T) {
	png96 := encoded(t, "png", 96, 64)
	annPath, root := dataset(t, doc(`[{"id": 1, "file_name": "sub/a.png"}]`, `[]`), map[string][]byte{"sub/a.png": png96})
	src := newSourceT(t, annPath, root)
	samples := scanAll(t, src)
	img, err := src.ReadImage(samples[0])
	if err != nil || string(img.Encoded) != string(png96) || img.Pixels != nil {
		t.Fatalf("ReadImage: %d bytes, %v", len(img.Encoded), err)
	}
	for _, p := range []string{"", "../x.png", "/etc/passwd"} {
		if _, err := src.ReadImage(&sources.Sample{ImagePath: p}); err == nil {
			t.Errorf("ReadImage(%q) succeeded", p)
		}
	}
	if _, err := src.ReadImage(&sources.Sample{ImagePath: "gone.png"}); err == nil || !strings.Contains(err.Error(), "gone.png") {
		t.Errorf("ReadImage of a missing file: %v", err)
	}
	small, err := New(annPath, root, Options{MaxImageBytes: 10})
	if err != nil {
		t.Fatal(err)
	}
	if got := lines(scanAll(t, small)); !slices.Equal(got, []string{"1 sub/a.png 0x0 [decode_error empty] valid=0 "}) {
		t.Errorf("scan with a 10-byte limit: %q", got)
	}
	if _, err := small.ReadImage(samples[0]); err == nil || !strings.Contains(err.Error(), "larger than 10 bytes") {
		t.Errorf("ReadImage over the limit: %v", err)
	}
}

// TestDeterministic: two sources over the same inputs give the same
// samples, and a second Scan of one source the same again.
func TestDeterministic(t *testing.T) {
	var imgs, anns []string
	files := map[string][]byte{}
	png := encoded(t, "png", 96, 64)
	for i := range 50 {
		id := (i * 37) % 50
		imgs = append(imgs, `{"id": `+itoa(id)+`, "file_name": "f`+itoa(i%45)+`.png"}`)
		files["f"+itoa(i)+".png"] = png
		for k := range 3 {
			anns = append(anns, `{"image_id": `+itoa((id*7+k)%53)+`, "category_id": `+itoa(1+2*(k%2))+`, "bbox": [`+itoa(k)+`, 1, 5, 5]}`)
		}
	}
	annPath, root := dataset(t, doc("["+strings.Join(imgs, ",")+"]", "["+strings.Join(anns, ",")+"]"), files)
	a := newSourceT(t, annPath, root)
	b := newSourceT(t, annPath, root)
	first := scanAll(t, a)
	for _, again := range [][]*sources.Sample{scanAll(t, a), scanAll(t, b)} {
		if !reflect.DeepEqual(first, again) {
			t.Fatal("scans differ")
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestScanStops(t *testing.T) {
	annPath, root := dataset(t, doc(`[{"id": 1, "file_name": "a"}, {"id": 2, "file_name": "b"}]`, `[]`), nil)
	src := newSourceT(t, annPath, root)
	stop := errors.New("stop")
	n := 0
	err := src.Scan(context.Background(), func(*sources.Sample) error { n++; return stop })
	if err != stop || n != 1 {
		t.Errorf("Scan: %v after %d samples", err, n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := src.Scan(ctx, func(*sources.Sample) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("Scan with a cancelled context: %v", err)
	}
}

// ImageLabel lists an image's annotations in file order, crowd ones left
// out, each with the reasons Scan has for it; together they are the
// sample's (but empty, which belongs to the image).
func TestImageLabel(t *testing.T) {
	annotations := `[{"image_id": 1, "category_id": 1, "bbox": [10, 10, 20, 20]},
		{"image_id": 1, "category_id": 9, "bbox": [0, 0, 5, 5]},
		{"image_id": 1, "category_id": 3, "bbox": [90, 10, 20, 20]},
		{"image_id": 1, "category_id": "x", "bbox": [1, 1, 2, 2]},
		{"image_id": 1, "category_id": 1, "bbox": [1, 1, 0, 2]},
		{"image_id": 1, "category_id": 1, "bbox": [1, 1, 2, 2], "iscrowd": 1},
		{"image_id": 2, "category_id": 1, "bbox": [1, 1, 2, 2]}]`
	ann, root := dataset(t, doc(`[{"id": 1, "file_name": "a.png"}, {"id": 2, "file_name": "a.png"}]`, annotations), map[string][]byte{"a.png": encoded(t, "png", 96, 64)})
	src := newSourceT(t, ann, root)
	person, car := sources.ClassKey{ID: 1, HasID: true, Name: "person"}, sources.ClassKey{ID: 3, HasID: true, Name: "car"}
	want := []LabelBox{
		{Corners: [4]float64{10, 10, 30, 30}, HasBox: true, Class: person},
		{Corners: [4]float64{0, 0, 5, 5}, HasBox: true, Class: sources.ClassKey{ID: 9, HasID: true}, Reasons: []validate.Reason{validate.ReasonUnknownClass}},
		{Corners: [4]float64{90, 10, 110, 30}, HasBox: true, Class: car, Reasons: []validate.Reason{validate.ReasonBBoxOutOfBounds}},
		{Corners: [4]float64{1, 1, 3, 3}, HasBox: true, Reasons: []validate.Reason{validate.ReasonBadSchema}},
		{Corners: [4]float64{1, 1, 1, 3}, HasBox: true, Class: person, Reasons: []validate.Reason{validate.ReasonInvalidBBox}},
	}
	got := src.ImageLabel(1, 96, 64)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ImageLabel(1):\n got %+v\nwant %+v", got, want)
	}
	var all []validate.Reason
	for _, b := range got {
		all = append(all, b.Reasons...)
	}
	smp := scanAll(t, src)[0]
	scan := slices.DeleteFunc(slices.Clone(smp.Reasons), func(r validate.Reason) bool { return r == validate.ReasonCrowdSkipped })
	if want := validate.Normalize(all); !slices.Equal(scan, want) {
		t.Errorf("Scan says %v, the annotations %v", smp.Reasons, want)
	}
}
