package capture

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"warehouse-etl/internal/fuzzmem"
	"warehouse-etl/validate"
)

// FuzzParseLabel checks that parseLabel never panics and that what it
// returns is consistent, and compares frame_id and unix_time with
// encoding/json and strconv decoding the same fields.
func FuzzParseLabel(f *testing.F) {
	fuzzmem.AddFiles(f, "../../testdata/capture/run_*/labels/frame_0000[0-3].json")
	f.Add([]byte(`{"frame_id": 3, "unix_time": 1700000000.123, "image": "images/a.png", "polyp_labels": [{"bbox_px": [1, 2, 3, 4], "bbox_norm": null}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var l label
		fuzzmem.Check(t, labelAllocBound, func() { l = parseLabel(data, keys) })
		if l.rank == rankUnparseable && !l.badSchema {
			t.Fatal("unparseable label without bad_schema")
		}
		if len(l.boxes) > l.entries || l.entries > maxLabelEntries {
			t.Fatalf("%d boxes of %d entries", len(l.boxes), l.entries)
		}
		if !l.hasList && l.entries != 0 {
			t.Fatalf("%d entries without a list", l.entries)
		}
		if !l.badSchema && len(l.boxes) != l.entries {
			t.Fatalf("clean label dropped entries: %d boxes of %d", len(l.boxes), l.entries)
		}
		if l.imageNamed != (l.image != "") || (l.imageWrongType && l.imageNamed) {
			t.Fatalf("image %q named %v wrong type %v", l.image, l.imageNamed, l.imageWrongType)
		}
		// Every box check accepts whatever was parsed.
		for _, b := range l.boxes {
			for _, v := range []*[4]float64{b.px, b.norm} {
				if v != nil {
					validate.CheckPx(*v, 64, 48)
					validate.NormToPx(*v, 64, 48)
				}
			}
		}

		var obj map[string]json.RawMessage
		if json.Unmarshal(data, &obj) != nil || obj == nil {
			if l.rank != rankUnparseable {
				t.Fatalf("encoding/json rejects the label but it has rank %d", l.rank)
			}
			return
		}
		if l.rank == rankUnparseable {
			t.Fatal("encoding/json reads an object but the label is unparseable")
		}
		var frame uint64
		frameOK := obj["frame_id"] != nil && string(obj["frame_id"]) != "null" && json.Unmarshal(obj["frame_id"], &frame) == nil
		if frameOK != (l.rank == rankFramed) || (frameOK && frame != l.frame) {
			t.Fatalf("frame_id %s: encoding/json %d %v, parseLabel %d rank %d", obj["frame_id"], frame, frameOK, l.frame, l.rank)
		}
		if raw, ok := obj["unix_time"]; ok && l.unixTimeNs != 0 {
			sec, err := strconv.ParseFloat(string(raw), 64)
			if err != nil {
				t.Fatalf("unix_time %s read as %d ns but is not a number", raw, l.unixTimeNs)
			}
			// float64 keeps about 16 digits: compare to that precision.
			if diff := math.Abs(float64(l.unixTimeNs) - sec*1e9); diff > 1+math.Abs(sec*1e9)*1e-15 {
				t.Fatalf("unix_time %s: %d ns, float says %v", raw, l.unixTimeNs, sec*1e9)
			}
		}
	})
}
