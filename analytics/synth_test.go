package analytics

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"warehouse-etl/shard"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// synthLayout is the smallest real shard layout: the export never reads
// images, so 1x1 keeps a million-sample warehouse at about 100 MB.
var synthLayout = shard.Layout{DType: shard.F16, Width: 1, Height: 1, Channels: 3, MaxBoxes: 4}

// synthWarehouse writes a version directory of n input samples in 10 runs
// as a build would: samples.jsonl, shards, build_report.json, and returns
// the manifest (not written: Export takes it as an argument). Every 10th
// sample is skipped as invalid_bbox; kept sample k has k%4 boxes of class
// k%3.
func synthWarehouse(tb testing.TB, dir string, n, samplesPerShard int) *warehouse.Manifest {
	tb.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "shards"), 0o755); err != nil {
		tb.Fatal(err)
	}
	version := sha256.Sum256([]byte(fmt.Sprint("synthetic", n)))
	m := &warehouse.Manifest{
		FormatVersion: warehouse.FormatVersion,
		Version:       hex.EncodeToString(version[:]),
		CodeVersion:   "warehouse-etl/1",
		DefaultDType:  "F16",
		CreatedAtMs:   1700000000000,
		Classes:       []warehouse.Class{{Index: 0, Name: "polyp"}, {Index: 1, Name: "instrument"}, {Index: 2, Name: "object"}},
		InputSamples:  int64(n),
		Files:         warehouse.Files{Samples: warehouse.SamplesName, Fingerprint: "fingerprint.jsonl", BuildReport: warehouse.BuildReportName},
	}
	const runs = 10
	perRun := (n + runs - 1) / runs
	for r := range runs {
		m.Sources = append(m.Sources, warehouse.SourceEntry{Index: r, Name: fmt.Sprintf("run_%d", r)})
		m.Summary.Runs = append(m.Summary.Runs, validate.RunSummary{Name: fmt.Sprintf("run_%d", r), Index: r})
	}

	f, err := os.Create(filepath.Join(dir, warehouse.SamplesName))
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var (
		sw      *shard.Writer
		sf      *os.File
		inShard int
		kept    int64
		line    []byte
	)
	closeShard := func() {
		res, err := sw.Close()
		if err != nil {
			tb.Fatal(err)
		}
		if err := sf.Close(); err != nil {
			tb.Fatal(err)
		}
		k := len(m.Shards)
		m.Shards = append(m.Shards, warehouse.Shard{
			ID: fmt.Sprintf("shard-%05d", k), RelativePath: fmt.Sprintf("shards/shard-%05d.twh", k), ShardVersion: 1,
			FirstSample: kept - int64(res.Samples), Samples: int64(res.Samples), Width: 1, Height: 1, Channels: 3,
			MaxBoxes: synthLayout.MaxBoxes, DType: "F16", Endianness: "Little", Bytes: res.Bytes, ChecksumSHA256: hex.EncodeToString(res.SHA256[:]),
		})
		sw, inShard = nil, 0
	}
	keptTotal := int64(n - (n+9)/10)
	image := make([]byte, synthLayout.ImageBytes())
	for seq := range n {
		run := seq / perRun
		c := &m.Summary.Runs[run].Counts
		isKept := seq%10 != 0
		line = line[:0]
		line = fmt.Appendf(line, `{"seq":%d,"source":"run_%d","source_index":%d,"frame":%d,"unix_time_ns":%d,"sim_time":%s,`,
			seq, run, run, seq-run*perRun, 1700000000000000000+int64(seq)*50000000, strconv.FormatFloat(float64(seq)*0.05, 'g', -1, 64))
		line = fmt.Appendf(line, `"label_path":"run_%d/labels/frame_%08d.json","image_path":"run_%d/images/frame_%08d.png","width":640,"height":480,`,
			run, seq, run, seq)
		if !isKept {
			line = append(line, `"kept":false,"reasons":["invalid_bbox"],"index":-1,"shard_index":-1,"box_count":0}`...)
			c.Add(true, []validate.Reason{validate.ReasonInvalidBBox}, false)
			m.Summary.Total.Add(true, []validate.Reason{validate.ReasonInvalidBBox}, false)
		} else {
			if sw == nil {
				declared := min(int64(samplesPerShard), keptTotal-kept)
				if sf, err = os.Create(filepath.Join(dir, "shards", fmt.Sprintf("shard-%05d.twh", len(m.Shards)))); err != nil {
					tb.Fatal(err)
				}
				if sw, err = shard.NewWriter(sf, synthLayout, int(declared)); err != nil {
					tb.Fatal(err)
				}
			}
			nb := int(kept % 4)
			boxes := make([][4]float32, nb)
			classes := make([]int32, nb)
			for j := range boxes {
				x := float32(j) * 0.2
				boxes[j] = [4]float32{x, 0.25, x + 0.125 + float32(kept%7)*0.0625, 0.75}
				classes[j] = int32(kept % 3)
			}
			err := sw.Append(shard.Sample{Image: image, Boxes: boxes, ClassIndex: classes,
				Meta: shard.Meta{SourceIndex: uint32(run), FrameID: uint64(seq - run*perRun), InputSeq: uint64(seq), SrcWidth: 640, SrcHeight: 480,
					ResizedWidth: 1, ResizedHeight: 1, ScaleX: 1.0 / 640, ScaleY: 1.0 / 480}})
			if err != nil {
				tb.Fatal(err)
			}
			classJSON, _ := json.Marshal(classes)
			line = fmt.Appendf(line, `"kept":true,"reasons":[],"index":%d,"shard":"shard-%05d","shard_index":%d,"box_count":%d,"class_index":%s,`,
				kept, len(m.Shards), inShard, nb, classJSON)
			line = append(line, `"letterbox":{"scale_x":0.0015625,"scale_y":0.0020833333333333333,"resized_width":1,"resized_height":1,"pad_x":0,"pad_y":0}}`...)
			c.Add(nb > 0, nil, true)
			m.Summary.Total.Add(nb > 0, nil, true)
			kept++
			inShard++
			if inShard == samplesPerShard || kept == keptTotal {
				closeShard()
			}
		}
		line = append(line, '\n')
		if _, err := w.Write(line); err != nil {
			tb.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	m.Samples = kept
	m.SamplesPerShard = samplesPerShard
	report := fmt.Sprintf(`{"version":%q,"code_version":"warehouse-etl/1","host":"synth","goos":"linux","goarch":"amd64","workers":2,`+
		`"started_at_ms":1699999999000,"input_samples":%d,"samples":%d,"skipped":%d,"skipped_by_reason":{},"shards":%d,"bytes_written":0,`+
		`"samples_per_second":1000,"mb_per_second":1,"phases_seconds":{"scan":1,"validate":0.25,"read":2,"decode":1.5,"resize":1,"normalize":0.5,"write":4,"publish":0.5,"total":5.75}}`,
		m.Version, n, kept, int64(n)-kept, len(m.Shards))
	if err := os.WriteFile(filepath.Join(dir, warehouse.BuildReportName), []byte(report), 0o644); err != nil {
		tb.Fatal(err)
	}
	return m
}
