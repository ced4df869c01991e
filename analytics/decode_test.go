package analytics

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"warehouse-etl/analytics/records"
)

const (
	keptLine    = `{"seq":0,"source":"run_2","source_index":0,"frame":7,"unix_time_ns":1700000002000000000,"sim_time":0.5,"label_path":"run_2/labels/frame_00007.json","image_path":"run_2/images/frame_00007.jpg","width":200,"height":150,"kept":true,"reasons":["boxes_truncated"],"index":0,"shard":"shard-00000","shard_index":0,"box_count":2,"class_index":[1,0],"letterbox":{"scale_x":1.92,"scale_y":1.92,"resized_width":384,"resized_height":288,"pad_x":0,"pad_y":48}}`
	skippedLine = `{"seq":1,"source":"run_2","source_index":0,"frame":8,"unix_time_ns":0,"sim_time":0,"label_path":"run_2/labels/frame_00008.json","image_path":"","width":0,"height":0,"kept":false,"reasons":["missing_image"],"index":-1,"shard_index":-1,"box_count":0}`
)

func TestDecodeSampleLine(t *testing.T) {
	got, err := records.DecodeSampleLine([]byte(keptLine))
	if err != nil {
		t.Fatal(err)
	}
	want := &records.SampleLine{
		Seq: 0, Source: "run_2", SourceIndex: 0, Frame: 7, UnixTimeNs: 1700000002000000000, SimTime: 0.5,
		LabelPath: "run_2/labels/frame_00007.json", ImagePath: "run_2/images/frame_00007.jpg", Width: 200, Height: 150,
		Kept: true, Reasons: []string{"boxes_truncated"}, Index: 0, Shard: "shard-00000", ShardIndex: 0, BoxCount: 2,
		ClassIndex: []int64{1, 0},
		Letterbox:  &records.Letterbox{ScaleX: 1.92, ScaleY: 1.92, ResizedWidth: 384, ResizedHeight: 288, PadX: 0, PadY: 48},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("kept line decoded as\n%+v\nwant\n%+v", got, want)
	}
	got, err = records.DecodeSampleLine([]byte(skippedLine))
	if err != nil {
		t.Fatal(err)
	}
	if got.Kept || got.Index != -1 || got.ShardIndex != -1 || got.Shard != "" || got.Letterbox != nil || len(got.ClassIndex) != 0 {
		t.Fatalf("skipped line decoded as %+v", got)
	}
	// A line written before reasons became [] for clean samples: null.
	got, err = records.DecodeSampleLine([]byte(strings.Replace(skippedLine, `["missing_image"]`, `null`, 1)))
	if err != nil || got.Reasons == nil || len(got.Reasons) != 0 {
		t.Fatalf("null reasons: %+v, %v", got, err)
	}
}

func TestDecodeSampleLineErrors(t *testing.T) {
	for _, tc := range []struct {
		name, line, want string
	}{
		{"not json", `seq=1`, "invalid character 's' looking for beginning of value"},
		{"cut", keptLine[:40], "unexpected end of JSON input"},
		{"trailing", keptLine + ` {}`, "invalid character '{' after top-level value"},
		{"wrong type", strings.Replace(keptLine, `"seq":0`, `"seq":"0"`, 1), "json: cannot unmarshal string into Go struct field SampleLine.seq of type int64"},
		{"negative seq", strings.Replace(keptLine, `"seq":0`, `"seq":-4`, 1), "seq -4"},
		{"huge frame", strings.Replace(keptLine, `"frame":7`, `"frame":18446744073709551615`, 1), "frame 18446744073709551615 does not fit int64"},
		{"negative source", strings.Replace(keptLine, `"source_index":0`, `"source_index":-1`, 1), "source_index -1"},
		{"negative width", strings.Replace(keptLine, `"width":200`, `"width":-200`, 1), "size -200x150"},
		{"box count", strings.Replace(keptLine, `"box_count":2`, `"box_count":3`, 1), "box_count 3 but 2 class indices"},
		{"negative class", strings.Replace(keptLine, `[1,0]`, `[1,-1]`, 1), "class_index -1"},
		{"empty reason", strings.Replace(keptLine, `["boxes_truncated"]`, `[""]`, 1), "an empty reason code"},
		{"kept without shard", strings.Replace(keptLine, `"shard":"shard-00000",`, ``, 1), "kept sample without index, shard, shard_index or letterbox"},
		{"kept without letterbox", keptLine[:strings.Index(keptLine, `,"letterbox"`)] + `}`, "kept sample without index, shard, shard_index or letterbox"},
		{"skipped with index", strings.Replace(skippedLine, `"index":-1`, `"index":3`, 1), "skipped sample with a shard position, boxes or letterbox"},
		{"skipped with boxes", strings.Replace(skippedLine, `"box_count":0}`, `"box_count":1,"class_index":[0]}`, 1), "skipped sample with a shard position, boxes or letterbox"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := records.DecodeSampleLine([]byte(tc.line))
			if err == nil || err.Error() != tc.want {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	long := make([]byte, records.MaxSampleLineBytes+1)
	if _, err := records.DecodeSampleLine(long); err == nil || err.Error() != "line is 1048577 bytes, more than 1048576" {
		t.Fatalf("oversized line: %v", err)
	}
}

// The reader's checks that need the neighbouring lines, each with the
// exact error: what the export reports for a damaged samples.jsonl.
func TestSampleReaderErrors(t *testing.T) {
	second := strings.Replace(keptLine, `"seq":0`, `"seq":1`, 1)
	second = strings.Replace(second, `"index":0`, `"index":1`, 1)
	for _, tc := range []struct {
		name, input, want string
		lines             int // lines read before the error
	}{
		{"clean", keptLine + "\n" + second + "\n", "", 2},
		{"empty file", "", "", 0},
		{"seq gap", keptLine + "\n" + strings.Replace(second, `"seq":1`, `"seq":2`, 1) + "\n",
			"analytics: input corrupt: samples.jsonl line 2: seq 2, want 1", 1},
		{"kept index gap", keptLine + "\n" + strings.Replace(second, `"index":1`, `"index":5`, 1) + "\n",
			"analytics: input corrupt: samples.jsonl line 2: kept sample has index 5, want 1", 1},
		{"truncated", keptLine + "\n" + second[:30], "analytics: input corrupt: samples.jsonl line 2: no final newline (truncated file?)", 1},
		{"bad line", keptLine + "\n{\n", "analytics: input corrupt: samples.jsonl line 2: unexpected end of JSON input", 1},
		{"too long", strings.Repeat(" ", records.MaxSampleLineBytes+10) + "\n", "analytics: input corrupt: samples.jsonl line 1: longer than 1048576 bytes", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sr := newSampleReader("samples.jsonl", strings.NewReader(tc.input))
			var err error
			n := 0
			for {
				if _, err = sr.next(); err != nil {
					break
				}
				n++
			}
			if tc.want == "" {
				if !errors.Is(err, io.EOF) {
					t.Fatalf("error %v, want EOF", err)
				}
			} else if !errors.Is(err, ErrCorrupt) || err.Error() != tc.want {
				t.Fatalf("error %v, want %q wrapping ErrCorrupt", err, tc.want)
			}
			if n != tc.lines {
				t.Fatalf("%d lines before the error, want %d", n, tc.lines)
			}
		})
	}
}

const validReport = `{"version":"ab","code_version":"warehouse-etl/1","host":"h","goos":"linux","goarch":"amd64","workers":2,"started_at_ms":5,` +
	`"input_samples":3,"samples":2,"skipped":1,"skipped_by_reason":{},"shards":1,"bytes_written":10,"samples_per_second":2.5,"mb_per_second":0.5,` +
	`"phases_seconds":{"scan":0.1,"validate":0.05,"read":0.2,"decode":0.15,"resize":0.1,"normalize":0.05,"write":0.4,"publish":0.5,"total":1.55}}`

func TestDecodeBuildReport(t *testing.T) {
	r, err := records.DecodeBuildReport([]byte(validReport))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var secs []float64
	var clocks []string
	for _, p := range reportPhases(r, false) {
		names, secs, clocks = append(names, p.name), append(secs, p.seconds), append(clocks, p.clock)
	}
	if strings.Join(names, ",") != "scan,validate,read,decode,resize,normalize,write,publish,total" ||
		!reflect.DeepEqual(secs, []float64{0.1, 0.05, 0.2, 0.15, 0.1, 0.05, 0.4, 0.5, 1.55}) ||
		strings.Join(clocks, ",") != "wall,wall,worker_sum,worker_sum,worker_sum,worker_sum,wall,wall,wall" {
		t.Fatalf("phases %v %v %v", names, secs, clocks)
	}
	if n := len(reportPhases(r, true)); n != 7 {
		t.Fatalf("before publish: %d phases, want 7 (no publish, no total)", n)
	}
	for _, tc := range []struct{ name, raw, want string }{
		{"not json", `[]`, "json: cannot unmarshal array into Go value of type records.BuildReport"},
		{"trailing", validReport + `x`, "trailing data after the JSON object"},
		{"negative count", strings.Replace(validReport, `"shards":1`, `"shards":-1`, 1), "shards is -1"},
		{"negative phase", strings.Replace(validReport, `"scan":0.1`, `"scan":-0.1`, 1), "a rate or phase time is -0.1"},
		{"oversized", validReport + strings.Repeat(" ", records.MaxReportBytes), fmt.Sprintf("%d bytes, more than 1048576", len(validReport)+1<<20)},
	} {
		if _, err := records.DecodeBuildReport([]byte(tc.raw)); err == nil || err.Error() != tc.want {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestParseRecipe(t *testing.T) {
	got, err := records.ParseRecipe("dtype=\"f16\"\nsource.label_keys=\"polyp_labels,labels\"\ntarget_size=\"384x384\"\nweird=\"a\\\"b\\nc\"\n")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"dtype": "f16", "source.label_keys": "polyp_labels,labels", "target_size": "384x384", "weird": "a\"b\nc"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v", got)
	}
	if got, err := records.ParseRecipe(""); err != nil || len(got) != 0 {
		t.Fatalf("empty recipe: %v %v", got, err)
	}
	for _, tc := range []struct{ raw, want string }{
		{"a=\"1\"", "no final newline"},
		{"a\"1\"\n", "line 1: no key=value"},
		{"=\"1\"\n", "line 1: no key=value"},
		{"a=1\n", "line 1 (a): value is not a quoted string"},
		{"a=`1`\n", "line 1 (a): value is not a quoted string"},
		{"a=\"1\nb=\"2\"\n", "line 1 (a): value is not a quoted string"},
		{"a=\"1\"\na=\"2\"\n", "line 2: key a repeated"},
	} {
		if _, err := records.ParseRecipe(tc.raw); err == nil || err.Error() != tc.want {
			t.Errorf("%q: error %v, want %q", tc.raw, err, tc.want)
		}
	}
}

// Histogram quantiles and the KS distance against values worked out by
// hand. Bins are 1/1024 wide; a quantile is its bin's midpoint.
func TestHistogramAndKS(t *testing.T) {
	hist := func(vs ...float64) *histogram {
		var h histogram
		for _, v := range vs {
			h.add(v)
		}
		return &h
	}
	mid := func(bin int) float64 { return (float64(bin) + 0.5) / 1024 }
	for _, tc := range []struct {
		name          string
		h             *histogram
		p10, p50, p90 float64
		mean          float64
	}{
		{"empty", hist(), 0, 0, 0, 0},
		{"one value", hist(0.25), mid(256), mid(256), mid(256), 0.25},
		// Ten values 0.05, 0.15, ... 0.95: the 10% quantile is the first
		// (rank ceil(1) = 1), the median the 5th, the 90% the 9th.
		{"ten", hist(0.05, 0.15, 0.25, 0.35, 0.45, 0.55, 0.65, 0.75, 0.85, 0.95),
			mid(51), mid(460), mid(870), 0.5},
		// Out of range values are clamped into the end bins.
		{"clamped", hist(-1, 2), mid(0), mid(0), mid(1023), 0.5},
	} {
		d := tc.h.distribution()
		if d != (Distribution{Mean: tc.mean, P10: tc.p10, P50: tc.p50, P90: tc.p90}) {
			t.Errorf("%s: %+v, want mean %v p10 %v p50 %v p90 %v", tc.name, d, tc.mean, tc.p10, tc.p50, tc.p90)
		}
	}
	for _, tc := range []struct {
		name   string
		a, b   *histogram
		ks     float64
		exists bool
	}{
		{"both empty", hist(), hist(), 0, false},
		{"one empty", hist(0.5), hist(), 1, true},
		{"identical", hist(0.1, 0.2, 0.3), hist(0.3, 0.2, 0.1), 0, true},
		{"disjoint", hist(0.1, 0.2), hist(0.8, 0.9), 1, true},
		// a = {0.1, 0.5}, b = {0.5, 0.9}: after 0.1 CDF_a = 1/2, CDF_b = 0.
		{"half", hist(0.1, 0.5), hist(0.5, 0.9), 0.5, true},
		// a = {0.1, 0.2, 0.3, 0.4}, b = {0.35}: after 0.3 CDF_a = 3/4, CDF_b = 0.
		{"three quarters", hist(0.1, 0.2, 0.3, 0.4), hist(0.35), 0.75, true},
	} {
		ks, ok := ksDistance(tc.a, tc.b)
		if ok != tc.exists || ks != tc.ks {
			t.Errorf("%s: KS %v (defined %v), want %v (%v)", tc.name, ks, ok, tc.ks, tc.exists)
		}
		if back, _ := ksDistance(tc.b, tc.a); back != ks {
			t.Errorf("%s: KS not symmetric: %v vs %v", tc.name, ks, back)
		}
	}
}
