package warehouse

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpen feeds an arbitrary manifest and shard pair (the manifest names
// shards/shard-00000.twh) to Open, every Sample, ReadSampleInto and Verify.
// Nothing may panic; whatever Open and Sample accept must have the sizes the
// layout promises. The seeds in testdata/fuzz/FuzzOpen are a valid one-shard
// warehouse of each dtype and a few broken variants.
func FuzzOpen(f *testing.F) {
	fx := writeFixture(f, fixtureSpec{dtype: 1, width: 2, height: 2, maxBoxes: 2, shardSizes: []int{2}})
	manifest, err := os.ReadFile(filepath.Join(fx.dir, ManifestName))
	if err != nil {
		f.Fatal(err)
	}
	shardBytes, err := os.ReadFile(fx.shardPath(0))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(manifest, shardBytes)
	f.Add(manifest, shardBytes[:len(shardBytes)/2])
	// One directory per worker process, rewritten by every input: the fuzz
	// function runs serially within a process, and a fresh TempDir per
	// input would dominate the time of each execution.
	dir := f.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "shards"), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, manifest, shardBytes []byte) {
		if err := os.WriteFile(filepath.Join(dir, ManifestName), manifest, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "shards", "shard-00000.twh"), shardBytes, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Verify(context.Background(), dir, VerifyOptions{Full: true, Workers: 1}); err != nil {
			t.Fatalf("Verify of a readable directory failed instead of reporting findings: %v", err)
		}
		r, err := Open(dir, OpenOptions{IgnoreThresholds: true, VerifyChecksums: len(manifest)%2 == 0})
		if err != nil {
			var te *ThresholdError
			if errors.As(err, &te) {
				t.Fatalf("thresholds were to be ignored: %v", err)
			}
			return
		}
		defer r.Close()
		l := r.Layout()
		var batch *Batch // allocated once a sample proves the layout fits in a real file
		for i := range r.Len() {
			s, err := r.Sample(i)
			if err != nil {
				continue
			}
			if int64(len(s.Image())) != l.ImageBytes() || len(s.Extras()) != l.ExtraF32 || s.BoxCount() > l.MaxBoxes {
				t.Fatalf("sample %d: image %d bytes, %d extras, %d boxes for layout %+v", i, len(s.Image()), len(s.Extras()), s.BoxCount(), l)
			}
			_, _, _, _ = s.Boxes(), s.Mask(), s.ClassIndex(), s.Meta()
			if batch == nil {
				batch = newBatch(l, 1)
			}
			if err := r.ReadSampleInto(i, batch.Slot(0)); err != nil {
				t.Fatalf("ReadSampleInto after Sample succeeded: %v", err)
			}
		}
		_, _ = r.Sample(r.Len())
	})
}
