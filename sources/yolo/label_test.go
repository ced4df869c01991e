package yolo

import (
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"warehouse-etl/validate"
)

func TestLabelPath(t *testing.T) {
	tests := []struct{ image, want string }{
		{"images/train/a.jpg", "labels/train/a.txt"},
		{"images/a.png", "labels/a.txt"},                                          // top-level images/ counts
		{"data/images/train/x/y.jpeg", "data/labels/train/x/y.txt"},               // nested below images/
		{"images/train/images/a.jpg", "images/train/labels/a.txt"},                // the last images/ only
		{"images/images/a.jpg", "images/labels/a.txt"},                            // twice in a row
		{"train/a.jpg", "train/a.txt"},                                            // no images/: beside the image
		{"myimages/train/a.jpg", "myimages/train/a.txt"},                          // a component, not a substring
		{"images_v2/a.jpg", "images_v2/a.txt"},                                    // likewise
		{"Images/a.jpg", "Images/a.txt"},                                          // case matters, as in Ultralytics
		{"images/train/a.b.c.JPG", "labels/train/a.b.c.txt"},                      // only the last extension
		{"images/v1.2/a.jpg", "labels/v1.2/a.txt"},                                // a dot in a folder name
		{"images/train/images", "labels/train/images.txt"},                        // no extension at all
		{"a.jpg", "a.txt"},                                                        // at the root
		{"images/train/labels/a.jpg", "labels/train/labels/a.txt"},                // labels/ already there
		{"x/images/y/images/z/images/f.webp", "x/images/y/images/z/labels/f.txt"}, // three times
	}
	for _, tt := range tests {
		if got := labelPath(tt.image); got != tt.want {
			t.Errorf("labelPath(%q) = %q, want %q", tt.image, got, tt.want)
		}
	}
}

func TestParseLabel(t *testing.T) {
	R := func(rs ...validate.Reason) []validate.Reason { return rs }
	B := func(class int64, x0, y0, x1, y1 float64) labelBox {
		return labelBox{class: class, norm: [4]float64{x0, y0, x1, y1}}
	}
	tests := []struct {
		name    string
		text    string
		kpt     [2]int
		lines   int
		boxes   []labelBox
		reasons []validate.Reason
		dups    int
	}{
		{name: "empty", text: ""},
		{name: "blank lines", text: "\n  \n\t\r\n"},
		{name: "one box", text: "1 0.5 0.25 0.5 0.25\n", lines: 1, boxes: []labelBox{B(1, 0.25, 0.125, 0.75, 0.375)}},
		{name: "no final newline", text: "0 0.5 0.5 1 1", lines: 1, boxes: []labelBox{B(0, 0, 0, 1, 1)}},
		{name: "crlf and tabs", text: "0\t0.5 0.5  1 1\r\n2 0.5 0.5 0.5 0.5\r\n", lines: 2,
			boxes: []labelBox{B(0, 0, 0, 1, 1), B(2, 0.25, 0.25, 0.75, 0.75)}},
		{name: "cr only", text: "0 0.5 0.5 1 1\r1 0.5 0.5 1 1", lines: 2, boxes: []labelBox{B(0, 0, 0, 1, 1), B(1, 0, 0, 1, 1)}},
		{name: "unicode space", text: "0\u00a00.5\u30000.5 1 1", lines: 1, boxes: []labelBox{B(0, 0, 0, 1, 1)}},
		{name: "exponent and sign", text: "+2 5e-1 .5 1E0 +1.0", lines: 1, boxes: []labelBox{B(2, 0, 0, 1, 1)}},
		{name: "float class", text: "1.0 0.5 0.5 1 1\n2e0 0.5 0.5 1 1", lines: 2, boxes: []labelBox{B(1, 0, 0, 1, 1), B(2, 0, 0, 1, 1)}},
		{name: "fractional class", text: "1.5 0.5 0.5 1 1", lines: 1, reasons: R(validate.ReasonBadSchema)},
		{name: "word class", text: "cat 0.5 0.5 1 1", lines: 1, reasons: R(validate.ReasonBadSchema)},
		{name: "nan class", text: "nan 0.5 0.5 1 1", lines: 1, reasons: R(validate.ReasonBadSchema)},
		{name: "four fields", text: "1 0.5 0.5 0.25", lines: 1, reasons: R(validate.ReasonBadSchema)},
		{name: "six fields", text: "1 0.5 0.5 0.25 0.25 0.1", lines: 1, reasons: R(validate.ReasonBadSchema)},
		{name: "eight fields", text: "1 0.1 0.1 0.2 0.1 0.2 0.2 0.3", lines: 1, reasons: R(validate.ReasonBadSchema)},
		{name: "one field", text: "1", lines: 1, reasons: R(validate.ReasonBadSchema)},
		{name: "word value", text: "1 0.5 half 0.25 0.25", lines: 1, reasons: R(validate.ReasonBadSchema)},
		{name: "hex value", text: "1 0x1p-1 0.5 0.25 0.25", lines: 1, reasons: R(validate.ReasonBadSchema)},
		{name: "underscore", text: "1 0.5 0.5 0.2_5 0.25", lines: 1, reasons: R(validate.ReasonBadSchema)},
		{name: "comma decimal", text: "1 0,5 0.5 0.25 0.25", lines: 1, reasons: R(validate.ReasonBadSchema)},
		{name: "comment", text: "# boxes\n0 0.5 0.5 1 1", lines: 2, boxes: []labelBox{B(0, 0, 0, 1, 1)}, reasons: R(validate.ReasonBadSchema)},
		{name: "class 3 of 3", text: "3 0.5 0.5 0.5 0.5", lines: 1, reasons: R(validate.ReasonUnknownClass)},
		{name: "negative class", text: "-1 0.5 0.5 0.5 0.5", lines: 1, reasons: R(validate.ReasonUnknownClass)},
		{name: "huge class", text: "99999999999999999999 0.5 0.5 0.5 0.5\n-1e300 0.5 0.5 0.5 0.5", lines: 2, reasons: R(validate.ReasonUnknownClass)},
		{name: "zero width", text: "0 0.5 0.5 0 0.25", lines: 1, reasons: R(validate.ReasonInvalidBBox)},
		{name: "negative height", text: "0 0.5 0.5 0.25 -0.25", lines: 1, reasons: R(validate.ReasonInvalidBBox)},
		{name: "nan", text: "0 nan 0.5 0.25 0.25", lines: 1, reasons: R(validate.ReasonInvalidBBox)},
		{name: "inf size", text: "0 0.5 0.5 inf 0.25", lines: 1, reasons: R(validate.ReasonInvalidBBox)},
		{name: "overflow", text: "0 1e400 0.5 0.25 0.25", lines: 1, reasons: R(validate.ReasonInvalidBBox)},
		{name: "tiny width", text: "0 0.5 0.5 1e-300 0.25", lines: 1, reasons: R(validate.ReasonInvalidBBox)},
		{name: "unknown class and bad box", text: "5 0.5 0.5 0 0", lines: 1, reasons: R(validate.ReasonUnknownClass, validate.ReasonInvalidBBox)},
		// Bounds are the image's business, not the parser's.
		{name: "outside", text: "0 1.5 0.5 0.25 0.5", lines: 1, boxes: []labelBox{B(0, 1.375, 0.25, 1.625, 0.75)}},
		{name: "triangle", text: "2 0.25 0.5 0.75 0.25 0.5 1", lines: 1, boxes: []labelBox{B(2, 0.25, 0.25, 0.75, 1)}},
		{name: "polygon and box", text: "2 0.5 0 1 0.5 0.5 1 0 0.5\n1 0.5 0.5 0.5 0.5", lines: 2,
			boxes: []labelBox{B(2, 0, 0, 1, 1), B(1, 0.25, 0.25, 0.75, 0.75)}},
		{name: "flat polygon", text: "0 0.1 0.5 0.2 0.5 0.3 0.5", lines: 1, reasons: R(validate.ReasonInvalidBBox)},
		{name: "polygon with nan", text: "0 0.1 0.5 nan 0.6 0.3 0.7", lines: 1, reasons: R(validate.ReasonInvalidBBox)},
		{name: "polygon out of range", text: "0 -0.5 0.5 0.2 0.6 0.3 1.5", lines: 1, boxes: []labelBox{B(0, -0.5, 0.5, 0.3, 1.5)}},
		{name: "duplicate", text: "0 0.5 0.5 1 1\n1 0.5 0.5 1 1\n0 0.5 0.5 1 1\n0 .5 0.50 1.0 1\n", lines: 4,
			boxes: []labelBox{B(0, 0, 0, 1, 1), B(1, 0, 0, 1, 1)}, dups: 2},
		{name: "duplicate polygon box", text: "0 0 0 1 0 1 1 0 1\n0 0.5 0.5 1 1", lines: 2, boxes: []labelBox{B(0, 0, 0, 1, 1)}, dups: 1},
		{name: "bad lines are not duplicates", text: "0 0.5 0.5 0 1\n0 0.5 0.5 0 1", lines: 2, reasons: R(validate.ReasonInvalidBBox)},
		{name: "everything", text: "x\n7 0.5 0.5 0.5 0.5\n0 0.5 0.5 0 1\n1 0.5 0.5 0.5 0.5\n", lines: 4,
			boxes: []labelBox{B(1, 0.25, 0.25, 0.75, 0.75)}, reasons: R(validate.ReasonBadSchema, validate.ReasonUnknownClass, validate.ReasonInvalidBBox)},
		// Pose: kpt_shape [2, 3] makes 11 fields a line.
		{name: "pose", kpt: [2]int{2, 3}, text: "0 0.5 0.5 0.5 0.5 0.1 0.2 2 0 0 0", lines: 1, boxes: []labelBox{B(0, 0.25, 0.25, 0.75, 0.75)}},
		{name: "pose box only", kpt: [2]int{2, 3}, text: "0 0.5 0.5 0.5 0.5", lines: 1, reasons: R(validate.ReasonBadSchema)},
		{name: "pose bad keypoint", kpt: [2]int{2, 3}, text: "0 0.5 0.5 0.5 0.5 0.1 0.2 v 0 0 0", lines: 1, reasons: R(validate.ReasonBadSchema)},
		{name: "pose duplicates differ in keypoints", kpt: [2]int{1, 2}, text: "0 0.5 0.5 0.5 0.5 0.1 0.2\n0 0.5 0.5 0.5 0.5 0.1 0.3\n0 0.5 0.5 0.5 0.5 0.1 0.2",
			lines: 3, boxes: []labelBox{B(0, 0.25, 0.25, 0.75, 0.75), B(0, 0.25, 0.25, 0.75, 0.75)}, dups: 1},
	}
	for _, tt := range tests {
		p := newParser(3, tt.kpt[0], tt.kpt[1])
		l := p.parse(tt.text)
		if l.lines != tt.lines || !slices.Equal(l.boxes, tt.boxes) || !slices.Equal(l.reasons, tt.reasons) || l.duplicates != tt.dups {
			t.Errorf("%s:\n got lines %d boxes %v reasons %v dups %d\nwant lines %d boxes %v reasons %v dups %d",
				tt.name, l.lines, l.boxes, l.reasons, l.duplicates, tt.lines, tt.boxes, tt.reasons, tt.dups)
		}
	}
}

// TestParseLabelReuse checks that a parser carries nothing from one file to
// the next, across the switch of the duplicate check to its map.
func TestParseLabelReuse(t *testing.T) {
	p := newParser(1, 0, 0)
	var many strings.Builder
	for i := range 2 * dedupScan {
		many.WriteString("0 0.5 0.5 0.5 ")
		many.WriteString(strconv.FormatFloat(float64(i+1)/1000, 'f', -1, 64))
		many.WriteString("\n")
	}
	many.WriteString("0 0.5 0.5 0.5 0.001\n0 0.5 0.5 0.5 0.064\n") // two duplicates, found through the map
	for round := range 3 {
		l := p.parse(many.String())
		if len(l.boxes) != 2*dedupScan || l.duplicates != 2 {
			t.Fatalf("round %d: %d boxes %d duplicates", round, len(l.boxes), l.duplicates)
		}
		l = p.parse("0 0.5 0.5 0.5 0.001\n")
		if len(l.boxes) != 1 || l.duplicates != 0 {
			t.Fatalf("round %d: a fresh file sees %d boxes %d duplicates", round, len(l.boxes), l.duplicates)
		}
	}
}

func TestParseClass(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"0", 0, true}, {"+7", 7, true}, {"-3", -3, true}, {"007", 7, true},
		{"1.0", 1, true}, {"1e2", 100, true}, {"-0.0", 0, true},
		{"99999999999999999999", math.MaxInt64, true}, {"-99999999999999999999", math.MinInt64, true},
		{"1e300", math.MaxInt64, true},
		{"1.5", 0, false}, {"inf", 0, false}, {"nan", 0, false}, {"0x1", 0, false}, {"", 0, false}, {"one", 0, false},
	}
	for _, tt := range tests {
		got, ok := parseClass(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("parseClass(%q) = %d, %v; want %d, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestSplitFields(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"   ", nil},
		{"a", []string{"a"}},
		{" a  b\tc\v\fd ", []string{"a", "b", "c", "d"}},
		{"a\u2003b\u0085c", []string{"a", "b", "c"}},
		{"é ü", []string{"é", "ü"}},
		{"a\xffb c", []string{"a\xffb", "c"}}, // invalid UTF-8 is not space
	}
	for _, tt := range tests {
		if got := splitFields(tt.in, nil); !slices.Equal(got, tt.want) {
			t.Errorf("splitFields(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got, want := splitFields(tt.in, nil), strings.Fields(tt.in); !slices.Equal(got, want) {
			t.Errorf("splitFields(%q) = %q, strings.Fields %q", tt.in, got, want)
		}
	}
}

// LabelLines gives each non-blank line its number (a lone "\r" ends a line
// too), its text, its box when it parsed and the reasons Scan would have
// for it, bounds included; a duplicate is marked, not refused.
func TestLabelLines(t *testing.T) {
	root := t.TempDir()
	writeTree(t, root, map[string][]byte{"data.yaml": []byte("path: .\ntrain: images/train\n" + names3), "images/train/a.png": encoded(t, "png", 64, 32)})
	src := newSource(t, root, Options{})
	text := "0 0.5 0.5 0.5 0.5\n\n1 0.5 0.5 0.25\r3 0.5 0.5 0.5 0.5\n0 1.5 0.5 0.25 0.5\n0 0.5 0.5 0.5 0.5\n2 0.5 0.5 0 0.5\n"
	type want struct {
		line    int
		box     bool
		norm    [4]float64
		reasons []validate.Reason
		dup     bool
	}
	wants := []want{
		{1, true, [4]float64{0.25, 0.25, 0.75, 0.75}, nil, false},
		{3, false, [4]float64{}, []validate.Reason{validate.ReasonBadSchema}, false},
		{4, true, [4]float64{0.25, 0.25, 0.75, 0.75}, []validate.Reason{validate.ReasonUnknownClass}, false},
		{5, true, [4]float64{1.375, 0.25, 1.625, 0.75}, []validate.Reason{validate.ReasonBBoxOutOfBounds}, false},
		{6, true, [4]float64{0.25, 0.25, 0.75, 0.75}, nil, true},
		{7, false, [4]float64{}, []validate.Reason{validate.ReasonInvalidBBox}, false},
	}
	got := src.LabelLines([]byte(text), 64, 32)
	if len(got) != len(wants) {
		t.Fatalf("%d lines, want %d: %+v", len(got), len(wants), got)
	}
	var all []validate.Reason
	for i, w := range wants {
		g := got[i]
		if g.Line != w.line || g.HasBox != w.box || (w.box && g.Norm != w.norm) || !slices.Equal(g.Reasons, w.reasons) || g.Duplicate != w.dup {
			t.Errorf("line %d: %+v, want %+v", w.line, g, w)
		}
		all = append(all, g.Reasons...)
	}
	if got[0].Text != "0 0.5 0.5 0.5 0.5" || got[1].Text != "1 0.5 0.5 0.25" {
		t.Errorf("texts %q, %q", got[0].Text, got[1].Text)
	}
	// The lines' reasons are the sample's, as Scan finds them.
	writeTree(t, root, map[string][]byte{"labels/train/a.txt": []byte(text)})
	smp := scanAll(t, newSource(t, root, Options{}))[0]
	if want := validate.Normalize(all); !slices.Equal(smp.Reasons, want) {
		t.Errorf("Scan says %v, the lines %v", smp.Reasons, want)
	}
}
