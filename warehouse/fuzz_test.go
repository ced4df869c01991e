package warehouse

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"warehouse-etl/internal/fuzzmem"
	"warehouse-etl/shard"
	"warehouse-etl/validate"
)

// memFiles is a version's shard files in memory, for FuzzOpen: the same
// checks as dirFiles (checkShardInfo, shard.Parse, the sha256) on bytes
// instead of a directory and a mapping.
type memFiles struct{ fsys fstest.MapFS }

func (m memFiles) stat(path string, e *Shard) error {
	fi, err := fs.Stat(m.fsys, e.RelativePath)
	return checkShardInfo(path, e, fi, err)
}

func (m memFiles) checkSHA256(path string, e *Shard) error {
	sum := sha256.Sum256(m.fsys[e.RelativePath].Data)
	if got := hex.EncodeToString(sum[:]); got != e.ChecksumSHA256 {
		return errors.New(path + ": sha256 " + got + ", the manifest says " + e.ChecksumSHA256)
	}
	return nil
}

func (m memFiles) open(path string, e *Shard) (shardFile, *shard.Reader, error) {
	b := m.fsys[e.RelativePath].Data
	sr, err := shard.Parse(b)
	if err != nil {
		return nil, nil, errors.Join(errors.New(path), err)
	}
	return nopCloser{bytes.NewReader(b)}, sr, nil
}

type nopCloser struct{ *bytes.Reader }

func (nopCloser) Close() error { return nil }

// fuzzOpenBound is the most one FuzzOpen input may make the reader
// allocate: the parsed manifest and the one-sample batch are bounded by
// the bytes given, never by the sizes they claim (a shard's size must
// match its manifest entry before anything is read).
func fuzzOpenBound(manifest, shardBytes []byte) uint64 {
	return 4*fuzzmem.MiB + 32*uint64(len(manifest)+len(shardBytes))
}

// FuzzOpen feeds an arbitrary manifest and shard pair (the shard is the
// file shards/shard-00000.twh, where the seed manifests put it) to the
// reader behind Open (newReader: thresholds, layout, shard entries and
// sizes), then every Sample, ReadSampleInto and ReadRunInto, which open the
// shard through shard.Parse and checkShardHeader and check each sample's
// CRC-32C. Nothing may panic; whatever the reader accepts must have the
// sizes the layout promises. It runs from memory (memFiles): the directory,
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
	fx := writeFixture(t, fixtureSpec{dtype: 1, width: 2, height: 2, maxBoxes: 2, shardSizes: []int{2}})
	manifest, err := os.ReadFile(filepath.Join(fx.dir, ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	shardBytes, err = os.ReadFile(fx.shardPath(0))
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
	files := memFiles{fstest.MapFS{"shards/shard-00000.twh": {Data: shardBytes}}}
	opts := OpenOptions{IgnoreThresholds: true, VerifyChecksums: len(manifest)%2 == 0}
	r, err := newReader("fuzz", m, opts, slog.New(slog.DiscardHandler), files)
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
			batch = newBatch(l, 1)
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
// fuzz path accepts, with the same samples readable, and that Verify
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
		if _, err := Verify(context.Background(), dir, VerifyOptions{Full: true, Workers: 1}); err != nil {
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
