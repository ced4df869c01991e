package pipeline

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"testing"

	"warehouse-etl/internal/testfiles"
	"warehouse-etl/sources"
	"warehouse-etl/validate"
	"warehouse-etl/warehouse"
)

// Live samples are the warehouse's samples, byte for byte, matched by
// input_seq; the one whose full decode fails is served empty and counted.
func TestLiveMatchesTheBuiltWarehouse(t *testing.T) {
	for _, dtype := range []string{"f16", "f32"} {
		t.Run(dtype, func(t *testing.T) {
			src := newMemSource(t, 7, 3)
			src.extras = []sources.ExtraSpec{{Name: "reward", Shape: []int{2}, SourceDType: "f32"}}
			for i := range src.samples {
				src.samples[i].Extras = []float32{float32(i), -float32(i) / 4}
				if i == 5 {
					src.samples[i].Boxes = append(src.samples[i].Boxes, sources.Box{X0: 0, Y0: 0, X1: 3, Y1: 3, Class: sources.ClassKey{Name: "b"}})
				}
			}
			cfg := testConfig(t, 2)
			cfg.DType = dtype
			res, err := Build(context.Background(), Options{Config: cfg, Source: src})
			if err != nil {
				t.Fatal(err)
			}
			r, err := warehouse.Open(res.Dir, warehouse.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			live, err := OpenLive(context.Background(), LiveOptions{Options: Options{Config: cfg, Source: src}})
			if err != nil {
				t.Fatal(err)
			}
			defer live.Close()

			if live.Len() != 7 || r.Len() != 6 {
				t.Fatalf("live %d samples, warehouse %d; want 7 and 6 (one late decode failure)", live.Len(), r.Len())
			}
			if live.Layout() != r.Layout() {
				t.Fatalf("live layout %+v, warehouse %+v", live.Layout(), r.Layout())
			}
			var starts []int
			for i := 0; i < 7; i += r.Manifest().SamplesPerShard {
				starts = append(starts, i)
			}
			if !slices.Equal(live.ShardStarts(), starts) {
				t.Fatalf("live shard starts %v, want %v", live.ShardStarts(), starts)
			}
			if got, want := live.Classes(), r.Manifest().Classes; len(got) != len(want) || got[0].Name != want[0].Name || got[1].Name != want[1].Name {
				t.Fatalf("live classes %+v, warehouse %+v", got, want)
			}
			liveBatch, err := warehouse.NewBatchIterator(context.Background(), live, warehouse.BatchOptions{BatchSize: 7})
			if err != nil {
				t.Fatal(err)
			}
			defer liveBatch.Close()
			lb, err := liveBatch.Next()
			if err != nil {
				t.Fatal(err)
			}
			whBatch, err := r.Batches(context.Background(), warehouse.BatchOptions{BatchSize: 6})
			if err != nil {
				t.Fatal(err)
			}
			defer whBatch.Close()
			wb, err := whBatch.Next()
			if err != nil {
				t.Fatal(err)
			}
			bySeq := map[uint64]int{}
			for j := range lb.Len() {
				bySeq[lb.Meta[j].InputSeq] = j
			}
			for j := range wb.Len() {
				seq := wb.Meta[j].InputSeq
				lj, ok := bySeq[seq]
				if !ok {
					t.Fatalf("warehouse sample with input_seq %d has no live twin", seq)
				}
				ws, ls := wb.Slot(j), lb.Slot(lj)
				if !bytes.Equal(ws.Image, ls.Image) || !bytes.Equal(ws.Boxes, ls.Boxes) || !bytes.Equal(ws.Mask, ls.Mask) {
					t.Fatalf("input_seq %d: image, boxes or mask differ", seq)
				}
				if !slices.Equal(ws.ClassIndex, ls.ClassIndex) || *ws.BoxCount != *ls.BoxCount || *ws.Meta != *ls.Meta || !slices.Equal(ws.Extras, ls.Extras) {
					t.Fatalf("input_seq %d: classes %v/%v count %d/%d meta %+v/%+v extras %v/%v", seq,
						ws.ClassIndex, ls.ClassIndex, *ws.BoxCount, *ls.BoxCount, *ws.Meta, *ls.Meta, ws.Extras, ls.Extras)
				}
				delete(bySeq, seq)
			}
			if len(bySeq) != 1 || live.Failed() != 1 {
				t.Fatalf("live samples without a warehouse twin: %v, failed %d; want only input_seq 3", bySeq, live.Failed())
			}
			broken := lb.Slot(bySeq[3])
			if *broken.BoxCount != 0 || slices.ContainsFunc(broken.Image, func(b byte) bool { return b != 0 }) || broken.Meta.InputSeq != 3 {
				t.Fatalf("the failed sample is not served empty: count %d meta %+v", *broken.BoxCount, *broken.Meta)
			}
			if _, err := liveBatch.Next(); err != io.EOF {
				t.Fatalf("second live batch: %v", err)
			}
		})
	}
}

func TestLiveRefusesThresholdsUnlessIgnored(t *testing.T) {
	src := newMemSource(t, 4)
	src.samples[1].Reasons = []validate.Reason{validate.ReasonInvalidBBox}
	cfg := testConfig(t, 2)
	zero := int64(0)
	cfg.Thresholds = validate.Thresholds{Invalid: validate.Limit{MaxCount: &zero}}
	_, err := OpenLive(context.Background(), LiveOptions{Options: Options{Config: cfg, Source: src}})
	var te *validate.ThresholdError
	if !errors.As(err, &te) || err.Error() != "validation failed: threshold invalid.max_count exceeded: 1 (1 of 4 samples) > limit 0 (action fail)" {
		t.Fatalf("OpenLive: %v", err)
	}
	live, err := OpenLive(context.Background(), LiveOptions{Options: Options{Config: cfg, Source: src}, IgnoreThresholds: true})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if live.Len() != 3 {
		t.Fatalf("live serves %d samples, want the 3 valid ones", live.Len())
	}
	var slot warehouse.SampleSlot
	if err := live.ReadSampleInto(3, slot); err == nil || err.Error() != "live: sample 3 out of range [0, 3)" {
		t.Fatalf("out of range: %v", err)
	}
}

func TestVersionDirIsWhereBuildPublishes(t *testing.T) {
	cfg := testConfig(t, 2)
	cfg.Source.Root = t.TempDir() // a capture root with one run of one frame
	testfiles.WriteTree(t, cfg.Source.Root, map[string][]byte{
		"run_1/images/f0.png":  testfiles.Image(t, "png", 16, 12),
		"run_1/labels/f0.json": []byte(`{"frame_id": 0, "image": "images/f0.png", "labels": [{"bbox_px": [1, 1, 8, 8], "class": "a"}]}`),
	})
	dir, err := VersionDir(cfg)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Build(context.Background(), Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if dir != res.Dir || filepath.Dir(dir) != cfg.OutputRoot {
		t.Fatalf("VersionDir %s, build published %s", dir, res.Dir)
	}
}

// A source that yields no samples is a configuration error naming what
// the kind expects where, and what the root holds instead: never a
// version of 0 samples that latest would move to.
func TestEmptySourceIsAConfigError(t *testing.T) {
	yoloRoot := t.TempDir()
	testfiles.WriteTree(t, yoloRoot, map[string][]byte{
		"data.yaml":          []byte("names: [a]\n"),
		"images/train/a.png": testfiles.Image(t, "png", 8, 8),
		"labels/train/a.txt": []byte("0 0.5 0.5 0.2 0.2\n"),
	})
	tests := []struct {
		name, root, want string
	}{
		{"empty folder", t.TempDir(), "; the folder is empty; check source.root and source.kind"},
		{"a YOLO dataset", yoloRoot, "; it holds data.yaml, images/, labels/ (a yolo dataset? set source.kind to yolo); check source.root and source.kind"},
	}
	for _, tt := range tests {
		cfg := testConfig(t, 2)
		cfg.Source.Root = tt.root
		_, err := Build(context.Background(), Options{Config: cfg})
		var ce *ConfigError
		want := "source capture at " + tt.root + " yielded no samples: a capture root holds run folders, each with labels/*.json naming images in the run folder" + tt.want
		if !errors.As(err, &ce) || err.Error() != want {
			t.Errorf("%s: %v\nwant %s", tt.name, err, want)
		}
		if entries, _ := filepath.Glob(filepath.Join(cfg.OutputRoot, "v*")); len(entries) != 0 {
			t.Errorf("%s: published %v", tt.name, entries)
		}
	}
}
