package yolo

import (
	"math"
	"slices"
	"strings"
	"testing"

	"warehouse-etl/internal/fuzzmem"
	"warehouse-etl/sources"
	"warehouse-etl/validate"
)

// fuzzClasses is the class table FuzzLabel parses against.
var fuzzClasses = []sources.ClassKey{cat, dog, bird}

// FuzzLabel parses one label file's bytes and resolves its boxes against a
// 64 x 48 image, as Scan does, checking that nothing panics and that what
// comes out is consistent: line and field counts agree with strings.Fields,
// every box is finite, ordered, of a listed class and (resolved) inside the
// image, a file without reasons keeps every line, and a reused parser gives
// the same result.
func FuzzLabel(f *testing.F) {
	fuzzmem.AddFiles(f, "../../testdata/yolo/labels/train/frame_[1-5].txt")
	f.Add([]byte("0 0.5 0.5 0.25 0.25\n2 0.1 0.1 0.2 0.1 0.2 0.2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		p := newParser(len(fuzzClasses), 0, 0)
		text := string(data)
		var l label
		fuzzmem.Check(t, labelAllocBound, func() { l = p.parse(text) })

		lines := 0
		for _, line := range strings.FieldsFunc(text, func(r rune) bool { return r == '\n' || r == '\r' }) {
			fields := strings.Fields(line)
			if len(fields) > 0 {
				lines++
			}
			if got := splitFields(line, nil); !slices.Equal(got, fields) {
				t.Fatalf("fields of %q: %q, strings.Fields %q", line, got, fields)
			}
		}
		if l.lines != lines {
			t.Fatalf("%d lines, strings.Fields finds %d", l.lines, lines)
		}
		if len(l.boxes)+l.duplicates > l.lines {
			t.Fatalf("%d boxes + %d duplicates of %d lines", len(l.boxes), l.duplicates, l.lines)
		}
		if len(l.reasons) == 0 && len(l.boxes)+l.duplicates != l.lines {
			t.Fatalf("no reasons, but %d boxes + %d duplicates of %d lines", len(l.boxes), l.duplicates, l.lines)
		}
		for i, r := range l.reasons {
			if !slices.Contains([]validate.Reason{validate.ReasonBadSchema, validate.ReasonUnknownClass, validate.ReasonInvalidBBox}, r) ||
				slices.Contains(l.reasons[:i], r) {
				t.Fatalf("reasons %v", l.reasons)
			}
		}
		for _, b := range l.boxes {
			if b.class < 0 || b.class >= int64(len(fuzzClasses)) || validate.CheckOrder(b.norm) != "" {
				t.Fatalf("box %+v", b)
			}
		}
		for i, a := range l.boxes {
			for _, b := range l.boxes[:i] {
				if a == b {
					t.Fatalf("duplicate box %+v kept", a)
				}
			}
		}

		px, valid, rs := resolve(l.boxes, fuzzClasses, 64, 48, true)
		if valid != len(px) || valid+len(rs) != len(l.boxes) {
			t.Fatalf("%d boxes resolve to %d valid and %d reasons", len(l.boxes), valid, len(rs))
		}
		for _, b := range px {
			if !(0 <= b.X0 && b.X0 < b.X1 && b.X1 <= 64 && 0 <= b.Y0 && b.Y0 < b.Y1 && b.Y1 <= 48) || math.IsNaN(b.X0) {
				t.Fatalf("resolved box %+v outside 64x48", b)
			}
		}
		for _, r := range rs {
			// invalid_bbox: a box so thin that scaling to 48 px makes
			// its edges one value.
			if r := r.reason; r != validate.ReasonBBoxOutOfBounds && r != validate.ReasonInvalidBBox {
				t.Fatalf("resolving gives %s", r)
			}
		}
		// Without the image size: [0,1] without tolerance.
		unsized, valid2, rs2 := resolve(l.boxes, fuzzClasses, 0, 0, false)
		if unsized != nil || valid2+len(rs2) != len(l.boxes) {
			t.Fatalf("unsized: %v, %d valid, %d reasons of %d boxes", unsized, valid2, len(rs2), len(l.boxes))
		}

		// A reused parser, after another file, gives the same result.
		p.parse("0 0.5 0.5 1 1\n0 0.5 0.5 1 1\n")
		again := p.parse(text)
		if again.lines != l.lines || !slices.Equal(again.boxes, l.boxes) || !slices.Equal(again.reasons, l.reasons) || again.duplicates != l.duplicates {
			t.Fatalf("reused parser: %+v, fresh %+v", again, l)
		}

		// The same text as a pose dataset's label never panics either.
		newParser(len(fuzzClasses), 1, 2).parse(text)
	})
}

// FuzzDataYAML parses data.yaml bytes, checking that nothing panics and
// that an accepted document gives a usable class table and split entries.
func FuzzDataYAML(f *testing.F) {
	fuzzmem.AddFiles(f, "../../testdata/yolo/data.yaml")
	f.Add([]byte("path: .\ntrain: images/train\nval: images/val\nnames: [a, b]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := fuzzmem.Call(t, dataYAMLAllocBound, func() (*dataYAML, error) { return parseDataYAML(data) })
		if err != nil {
			if d != nil {
				t.Fatal("a result with an error")
			}
			if err.Error() == "" {
				t.Fatal("an empty error")
			}
			return
		}
		if len(d.names) == 0 || len(d.names) > maxClasses {
			t.Fatalf("%d names", len(d.names))
		}
		for i, n := range d.names {
			if strings.TrimSpace(n) == "" {
				t.Fatalf("names[%d] is blank", i)
			}
		}
		for k, entries := range d.splits {
			if !slices.Contains([]string{"train", "val", "validation", "test"}, k) || len(entries) == 0 {
				t.Fatalf("split %q: %q", k, entries)
			}
			for _, e := range entries {
				if e == "" {
					t.Fatalf("split %q has an empty entry", k)
				}
			}
		}
		if (d.kptK == 0) != (d.kptD == 0) || d.kptK < 0 || d.kptK > maxKeypoints || (d.kptD != 0 && d.kptD != 2 && d.kptD != 3) {
			t.Fatalf("kpt_shape %d, %d", d.kptK, d.kptD)
		}
		// Parsing is a function of the bytes.
		d2, err := parseDataYAML(data)
		if err != nil || d2.path != d.path || !slices.Equal(d2.names, d.names) {
			t.Fatalf("second parse differs: %+v %v", d2, err)
		}
	})
}
