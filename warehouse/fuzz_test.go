package warehouse_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"warehouse-etl/internal/fuzzmem"
	"warehouse-etl/validate"
	"warehouse-etl/verify"
	. "warehouse-etl/warehouse"
	"warehouse-etl/warehouse/warehousetest"
)

// fuzzOpenBound is the most one FuzzOpen input may make the reader
// allocate: the parsed manifest and the one-sample batch are bounded by
// the bytes given, never by the sizes they claim (a shard's size must
// match its manifest entry before anything is read).
func fuzzOpenBound(manifest, shardBytes []byte) uint64 {
	return 4*fuzzmem.MiB + 32*uint64(len(manifest)+len(shardBytes))
}

// FuzzOpen feeds an arbitrary manifest and shard pair (the shard is the
// file shards/shard-00000.twh, where the seed manifests put it) to the
// reader behind Open (NewMemReader, newReader: thresholds, layout, shard entries and
// sizes), then every Sample, ReadSampleInto and ReadRunInto, which open the
// shard through shard.Parse and CheckShardHeader and check each sample's
// CRC-32C. Nothing may panic; whatever the reader accepts must have the
// sizes the layout promises. It runs from memory (NewMemReader): the directory,
// locking and mapping parts of Open are the only ones left out, and
// TestOpenMatchesFuzzPath checks that Open on the seeds written to disk
// agrees. The seeds in testdata/fuzz/FuzzOpen are a valid one-shard
// warehouse of each dtype and a few broken variants.
func FuzzOpen(f *testing.F) {
	manifest, shardBytes := fuzzOpenFixture(f)
	f.Add(manifest, shardBytes)
	f.Add(manifest, shardBytes[:len(shardBytes)/2])
	f.Fuzz(func(t *testing.T, manifest, shardBytes []byte) {
		fuzzmem.Check(t, fuzzOpenBound(manifest, shardBytes), func() { fuzzOpen(t, manifest, shardBytes) })
	})
}

// fuzzOpenFixture is a valid one-shard warehouse's manifest and shard.
func fuzzOpenFixture(t testing.TB) (manifest, shardBytes []byte) {
	fx := warehousetest.Write(t, warehousetest.Spec{DType: 1, Width: 2, Height: 2, MaxBoxes: 2, ShardSizes: []int{2}})
	manifest, err := os.ReadFile(filepath.Join(fx.Dir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	shardBytes, err = os.ReadFile(fx.ShardPath(0))
	if err != nil {
		t.Fatal(err)
	}
	return manifest, shardBytes
}

// fuzzOpen is one FuzzOpen execution; it returns the reader's outcome for
// TestOpenMatchesFuzzPath.
func fuzzOpen(t *testing.T, manifest, shardBytes []byte) (samples int, err error) {
	m, err := ParseManifest(manifest)
	if err != nil {
		return 0, err
	}
	files := fstest.MapFS{"shards/shard-00000.twh": {Data: shardBytes}}
	opts := OpenOptions{IgnoreThresholds: true, VerifyChecksums: len(manifest)%2 == 0}
	r, err := NewMemReader("fuzz", m, opts, files)
	if err != nil {
		var te *validate.ThresholdError
		if errors.As(err, &te) {
			t.Fatalf("thresholds were to be ignored: %v", err)
		}
		return 0, err
	}
	defer r.Close()
	l := r.Layout()
	var batch *Batch // allocated once a sample proves the layout fits in the shard
	for i := range r.Len() {
		s, err := r.Sample(i)
		if err != nil {
			continue
		}
		samples++
		if int64(len(s.Image())) != l.ImageBytes() || len(s.Extras()) != l.ExtraF32 || s.BoxCount() > l.MaxBoxes {
			t.Fatalf("sample %d: image %d bytes, %d extras, %d boxes for layout %+v", i, len(s.Image()), len(s.Extras()), s.BoxCount(), l)
		}
		_, _, _, _ = s.Boxes(), s.Mask(), s.ClassIndex(), s.Meta()
		if batch == nil {
			batch = NewBatch(l, 1)
		}
		if err := r.ReadSampleInto(i, batch.Slot(0)); err != nil {
			t.Fatalf("ReadSampleInto after Sample succeeded: %v", err)
		}
		if err := r.ReadRunInto(i, 1, batch, 0); err != nil {
			t.Fatalf("ReadRunInto after Sample succeeded: %v", err)
		}
	}
	_, _ = r.Sample(r.Len())
	return samples, nil
}

// TestOpenMatchesFuzzPath writes each FuzzOpen seed to a directory and
// checks that Open, from disk, accepts exactly the seeds the in-memory
// fuzz path accepts, with the same samples readable, and that verify.Check
// reports findings rather than failing: the seam leaves nothing out that
// decides what a reader accepts.
func TestOpenMatchesFuzzPath(t *testing.T) {
	manifest, shardBytes := fuzzOpenFixture(t)
	seeds := [][2][]byte{{manifest, shardBytes}, {manifest, shardBytes[:len(shardBytes)/2]}}
	corpus, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzOpen", "*"))
	for _, p := range corpus {
		vals := fuzzmem.ReadCorpusFile(t, p)
		if len(vals) == 2 {
			seeds = append(seeds, [2][]byte{vals[0], vals[1]})
		}
	}
	if len(seeds) < 5 {
		t.Fatalf("only %d seeds", len(seeds))
	}
	for i, s := range seeds {
		memSamples, memErr := fuzzOpen(t, s[0], s[1])
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "shards"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ManifestName), s[0], 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "shards", "shard-00000.twh"), s[1], 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := verify.Check(context.Background(), dir, verify.Options{Full: true, Workers: 1}); err != nil {
			t.Fatalf("seed %d: Verify failed instead of reporting findings: %v", i, err)
		}
		r, err := Open(dir, OpenOptions{IgnoreThresholds: true, VerifyChecksums: len(s[0])%2 == 0})
		if (err == nil) != (memErr == nil) {
			t.Fatalf("seed %d: Open error %v, fuzz path error %v", i, err, memErr)
		}
		if err != nil {
			continue
		}
		diskSamples := 0
		for j := range r.Len() {
			if _, err := r.Sample(j); err == nil {
				diskSamples++
			}
		}
		r.Close()
		if diskSamples != memSamples {
			t.Fatalf("seed %d: %d samples readable from disk, %d in memory", i, diskSamples, memSamples)
		}
	}
}
