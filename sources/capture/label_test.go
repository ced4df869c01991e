package capture

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"warehouse-etl/sources"
)

var keys = []string{"polyp_labels", "labels"}

func box(v ...float64) *[4]float64 { return (*[4]float64)(v) }

func TestParseLabel(t *testing.T) {
	// base is a clean label; each case replaces or adds fields.
	const base = `"frame_id": 7, "sim_time": 1.5, "unix_time": 1700000000.25, "image": "images/f.png", "image_present": true, "camera_active": false`
	clean := label{rank: rankFramed, frame: 7, simTime: 1.5, unixTimeNs: 1700000000250000000,
		image: "images/f.png", imageNamed: true, imagePresent: true, hasList: true}
	with := func(f func(*label)) label {
		l := clean
		f(&l)
		return l
	}
	tests := []struct {
		name string
		json string
		want label
	}{
		{"clean, empty list", `{` + base + `, "polyp_labels": []}`, clean},
		{
			"clean, one box with class",
			`{` + base + `, "polyp_labels": [{"bbox_px": [1, 2, 3, 4], "bbox_norm": null, "center_world": [0, 1, 2], "class_id": 3, "class_name": "polyp", "extra": {"a": [1]}}]}`,
			with(func(l *label) {
				l.entries = 1
				l.boxes = []labelBox{{px: box(1, 2, 3, 4), class: sources.ClassKey{ID: 3, HasID: true, Name: "polyp"}}}
			}),
		},
		{
			"second key, both boxes, class spelled class",
			`{` + base + `, "labels": [{"bbox_px": [1, 2, 3, 4], "bbox_norm": [0.1, 0.2, 0.3, 0.4], "class": "tool"}, {"bbox_norm": [0, 0, 1, 1], "class": -2}]}`,
			with(func(l *label) {
				l.entries = 2
				l.boxes = []labelBox{
					{px: box(1, 2, 3, 4), norm: box(0.1, 0.2, 0.3, 0.4), class: sources.ClassKey{Name: "tool"}},
					{norm: box(0, 0, 1, 1), class: sources.ClassKey{ID: -2, HasID: true}},
				}
			}),
		},
		{
			"first configured key wins even when empty",
			`{` + base + `, "labels": [{"bbox_px": [1, 2, 3, 4]}], "polyp_labels": []}`,
			clean,
		},
		{
			"class agrees with class_id and class_name",
			`{` + base + `, "labels": [{"class_id": 4, "class": 4}, {"class_name": "a", "class": "a"}]}`,
			with(func(l *label) {
				l.entries = 2
				l.boxes = []labelBox{{class: sources.ClassKey{ID: 4, HasID: true}}, {class: sources.ClassKey{Name: "a"}}}
			}),
		},
		{
			"nulls are absent, unknown fields ignored",
			`{"frame_id": 0, "sim_time": null, "unix_time": null, "image": "x.png", "image_present": null, "camera_active": null, "weather": "rain", "polyp_labels": [{"bbox_px": null, "bbox_norm": null, "center_world": null, "class": null}]}`,
			label{rank: rankFramed, image: "x.png", imageNamed: true, imagePresent: true, hasList: true, entries: 1, boxes: []labelBox{{}}},
		},
		{
			"image_present false, no image",
			`{"frame_id": 18446744073709551615, "image_present": false, "labels": []}`,
			label{rank: rankFramed, frame: math.MaxUint64, hasList: true},
		},
		{"empty image string", `{"frame_id": 1, "image": "", "labels": []}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true}},
		{"box values beyond float64 become Inf", `{` + base + `, "labels": [{"bbox_px": [-1e400, 0, 1e400, 1]}]}`,
			with(func(l *label) { l.entries = 1; l.boxes = []labelBox{{px: box(math.Inf(-1), 0, math.Inf(1), 1)}} })},

		// bad_schema: the sample keeps everything else that could be read.
		{"not JSON", `{"frame_id": 1,`, label{rank: rankUnparseable, imagePresent: true, badSchema: true}},
		{"empty file", ``, label{rank: rankUnparseable, imagePresent: true, badSchema: true}},
		{"JSON null", `null`, label{rank: rankUnparseable, imagePresent: true, badSchema: true}},
		{"JSON array", `[{"frame_id": 1}]`, label{rank: rankUnparseable, imagePresent: true, badSchema: true}},
		{"trailing garbage", `{"frame_id": 1, "labels": []} x`, label{rank: rankUnparseable, imagePresent: true, badSchema: true}},
		{"no frame_id", `{"image": "a.png", "labels": []}`, label{rank: rankUnframed, image: "a.png", imageNamed: true, imagePresent: true, hasList: true, badSchema: true}},
		{"frame_id string", `{"frame_id": "7", "labels": []}`, label{rank: rankUnframed, imagePresent: true, hasList: true, badSchema: true}},
		{"frame_id negative", `{"frame_id": -1, "labels": []}`, label{rank: rankUnframed, imagePresent: true, hasList: true, badSchema: true}},
		{"frame_id fraction", `{"frame_id": 1.5, "labels": []}`, label{rank: rankUnframed, imagePresent: true, hasList: true, badSchema: true}},
		{"frame_id exponent", `{"frame_id": 1e3, "labels": []}`, label{rank: rankUnframed, imagePresent: true, hasList: true, badSchema: true}},
		{"frame_id beyond u64", `{"frame_id": 18446744073709551616, "labels": []}`, label{rank: rankUnframed, imagePresent: true, hasList: true, badSchema: true}},
		{"frame_id null", `{"frame_id": null, "labels": []}`, label{rank: rankUnframed, imagePresent: true, hasList: true, badSchema: true}},
		{"sim_time string", `{"frame_id": 1, "sim_time": "0.5", "labels": []}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, badSchema: true}},
		{"sim_time beyond float64", `{"frame_id": 1, "sim_time": 1e999, "labels": []}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, badSchema: true}},
		{"unix_time bool", `{"frame_id": 1, "unix_time": true, "labels": []}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, badSchema: true}},
		{"unix_time beyond int64 ns", `{"frame_id": 1, "unix_time": 9300000000, "labels": []}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, badSchema: true}},
		{"image number", `{"frame_id": 1, "image": 5, "labels": []}`, label{rank: rankFramed, frame: 1, imagePresent: true, imageWrongType: true, hasList: true, badSchema: true}},
		{"image_present string", `{"frame_id": 1, "image_present": "false", "labels": []}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, badSchema: true}},
		{"camera_active number", `{"frame_id": 1, "camera_active": 1, "labels": []}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, badSchema: true}},
		{"no label list", `{"frame_id": 1, "annotations": []}`, label{rank: rankFramed, frame: 1, imagePresent: true, badSchema: true}},
		{"label list null", `{"frame_id": 1, "polyp_labels": null}`, label{rank: rankFramed, frame: 1, imagePresent: true, badSchema: true}},
		{"label list object", `{"frame_id": 1, "polyp_labels": {"bbox_px": [1, 2, 3, 4]}}`, label{rank: rankFramed, frame: 1, imagePresent: true, badSchema: true}},
		{
			"entry not an object: the others are kept",
			`{"frame_id": 1, "labels": [[1, 2, 3, 4], null, 5, {"bbox_px": [1, 2, 3, 4]}]}`,
			label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, entries: 4, badSchema: true, boxes: []labelBox{{px: box(1, 2, 3, 4)}}},
		},
		{"bbox_px three numbers", `{"frame_id": 1, "labels": [{"bbox_px": [1, 2, 3]}]}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, entries: 1, badSchema: true}},
		{"bbox_px five numbers", `{"frame_id": 1, "labels": [{"bbox_px": [1, 2, 3, 4, 5]}]}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, entries: 1, badSchema: true}},
		{"bbox_px string element", `{"frame_id": 1, "labels": [{"bbox_px": [1, "2", 3, 4]}]}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, entries: 1, badSchema: true}},
		{"bbox_px null element", `{"frame_id": 1, "labels": [{"bbox_px": [1, null, 3, 4]}]}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, entries: 1, badSchema: true}},
		{"bbox_norm object", `{"frame_id": 1, "labels": [{"bbox_norm": {"x0": 0}}]}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, entries: 1, badSchema: true}},
		{"center_world two numbers", `{"frame_id": 1, "labels": [{"bbox_px": [1, 2, 3, 4], "center_world": [1, 2]}]}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, entries: 1, badSchema: true}},
		{"class_id fraction", `{"frame_id": 1, "labels": [{"class_id": 1.5}]}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, entries: 1, badSchema: true}},
		{"class_id string", `{"frame_id": 1, "labels": [{"class_id": "1"}]}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, entries: 1, badSchema: true}},
		{"class_name number", `{"frame_id": 1, "labels": [{"class_name": 5}]}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, entries: 1, badSchema: true}},
		{"class bool", `{"frame_id": 1, "labels": [{"class": true}]}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, entries: 1, badSchema: true}},
		{"class disagrees with class_id", `{"frame_id": 1, "labels": [{"class_id": 1, "class": 2}]}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, entries: 1, badSchema: true}},
		{"class disagrees with class_name", `{"frame_id": 1, "labels": [{"class_name": "a", "class": "b"}]}`, label{rank: rankFramed, frame: 1, imagePresent: true, hasList: true, entries: 1, badSchema: true}},
	}
	for _, tt := range tests {
		got := parseLabel([]byte(tt.json), keys)
		if got.badSchema != (got.schemaDetail != "") {
			t.Errorf("%s: badSchema %v with detail %q", tt.name, got.badSchema, got.schemaDetail)
		}
		got.schemaDetail = "" // TestParseLabelDetail checks the words
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tt.name, got, tt.want)
		}
	}
}

// TestParseLabelDetail checks what a bad_schema label says in words, and
// that a label Python's json.dumps wrote with NaN keeps its frame and image.
func TestParseLabelDetail(t *testing.T) {
	keys := []string{"labels"}
	tests := []struct {
		name, json, detail string
		frame              uint64
		image              string
	}{
		{"NaN", `{"frame_id": 5, "image": "images/f5.png", "sim_time": NaN, "labels": []}`, "invalid JSON: NaN at byte 54", 5, "images/f5.png"},
		{"-Infinity in a box", `{"frame_id": 7, "image": "a.png", "labels": [{"bbox_px": [1, 2, -Infinity, 4]}]}`, "invalid JSON: -Infinity at byte 64", 7, "a.png"},
		{"NaN inside a string is not a literal", `{"frame_id": 2, "image": "NaN.png", "x": NaN, "labels": []}`, "invalid JSON: NaN at byte 41", 2, "NaN.png"},
		{"empty file", ``, "0-byte file", 0, ""},
		{"truncated", `{"frame_id": 1, `, "invalid JSON at byte 15: unexpected end of JSON input", 0, ""},
		{"array", `[1, 2]`, "the label is a JSON array, want an object", 0, ""},
		{"null", `null`, "not a JSON object", 0, ""},
		{"no frame_id", `{"labels": []}`, "no frame_id", 0, ""},
		{"frame_id string", `{"frame_id": "3", "labels": []}`, `frame_id is "3", want an integer 0..2^64-1`, 0, ""},
		{"image number", `{"frame_id": 3, "image": 7, "labels": []}`, "image is 7, want a string", 3, ""},
		{"no list", `{"frame_id": 3}`, "no label list (labels)", 3, ""},
		{"list object", `{"frame_id": 3, "labels": {}}`, "labels: not an array", 3, ""},
		{"bbox three numbers", `{"frame_id": 3, "labels": [{"bbox_px": [1, 2, 3, 4]}, {"bbox_px": [1, 2, 3]}]}`, "labels: entry 1: bbox_px is [1, 2, 3], want 4 numbers", 3, ""},
		{"class disagrees", `{"frame_id": 3, "labels": [{"class_id": 1, "class": 2}]}`, "labels: entry 0: class_id, class_name and class disagree or have the wrong type", 3, ""},
	}
	for _, tt := range tests {
		l := parseLabel([]byte(tt.json), keys)
		if !l.badSchema || l.schemaDetail != tt.detail || l.frame != tt.frame || l.image != tt.image {
			t.Errorf("%s: badSchema %v, detail %q, frame %d, image %q; want detail %q, frame %d, image %q",
				tt.name, l.badSchema, l.schemaDetail, l.frame, l.image, tt.detail, tt.frame, tt.image)
		}
	}
}

func TestParseLabelEntryLimit(t *testing.T) {
	build := func(n int) []byte {
		var b strings.Builder
		b.WriteString(`{"frame_id": 1, "labels": [`)
		for i := range n {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{}`)
		}
		b.WriteString(`]}`)
		return []byte(b.String())
	}
	at := parseLabel(build(maxLabelEntries), keys)
	if at.badSchema || at.entries != maxLabelEntries || len(at.boxes) != maxLabelEntries {
		t.Errorf("%d entries: badSchema %v, entries %d, boxes %d; want a clean label", maxLabelEntries, at.badSchema, at.entries, len(at.boxes))
	}
	over := parseLabel(build(maxLabelEntries+1), keys)
	if !over.badSchema || len(over.boxes) != 0 {
		t.Errorf("%d entries: badSchema %v, boxes %d; want bad_schema and no boxes", maxLabelEntries+1, over.badSchema, len(over.boxes))
	}
}

func TestUnixNanos(t *testing.T) {
	tests := []struct {
		lit  string
		want int64
		ok   bool
	}{
		{"0", 0, true},
		{"-0", 0, true},
		{"0.0", 0, true},
		{"1", 1e9, true},
		{"1700000000.123", 1700000000123000000, true},
		{"1700000000.123456789", 1700000000123456789, true},
		// Beyond nanoseconds: rounded half away from zero.
		{"1700000000.1234567894", 1700000000123456789, true},
		{"1700000000.1234567895", 1700000000123456790, true},
		{"-1.0000000005", -1000000001, true},
		{"0.0000000004", 0, true},
		{"0.0000000005", 1, true},
		{"0.00000000000001", 0, true},
		{"1.7e9", 1700000000000000000, true},
		{"1.7E+9", 1700000000000000000, true},
		{"17000000001230e-4", 1700000000123000000, true},
		{"5e-10", 1, true},
		{"5e-11", 0, true},
		{"000001.5", 1500000000, true},
		{"9223372036.854775807", math.MaxInt64, true},
		{"-9223372036.854775807", -math.MaxInt64, true},
		{"9223372036.854775808", 0, false},
		{"9223372036.8547758075", 0, false}, // rounds up past MaxInt64
		{"1e10", 0, false},
		{"1e999999999999", 0, false},
		{"0e999999999999", 0, true},
		{"1e-999999999999", 0, true},
		{"", 0, false},
		{"-", 0, false},
		{"1.", 0, false},
		{".5", 0, false},
		{"1e", 0, false},
		{"1e+", 0, false},
		{"abc", 0, false},
	}
	for _, tt := range tests {
		got, ok := unixNanos(tt.lit)
		if got != tt.want || ok != tt.ok {
			t.Errorf("unixNanos(%q) = %d, %v; want %d, %v", tt.lit, got, ok, tt.want, tt.ok)
		}
	}
}
