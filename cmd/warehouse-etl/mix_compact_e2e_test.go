package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"warehouse-etl/warehouse"
)

// TestMixCompactWithPlain: a compact_images u8 warehouse and a plain one
// of the same tensors mix (the layouts differ only in storage), the
// mixture's batches are those of two plain parts byte for byte, and
// load --mix takes them.
func TestMixCompactWithPlain(t *testing.T) {
	plainDir, _ := compactDemo(t, false, nil)
	compactDir, _ := compactDemo(t, true, nil)
	open := func(dir string) *warehouse.Reader {
		r, err := warehouse.Open(dir, warehouse.OpenOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { r.Close() })
		return r
	}
	mix := func(dirs ...string) [][]byte {
		parts := []warehouse.BatchSource{open(dirs[0]), open(dirs[1])}
		m, err := warehouse.NewMixture(parts, []float64{1, 2}, 0)
		if err != nil {
			t.Fatalf("mixture of %v: %v", dirs, err)
		}
		it, err := m.Batches(t.Context(), warehouse.BatchOptions{BatchSize: 5, Seed: 3, Shuffle: warehouse.ShuffleGlobal})
		if err != nil {
			t.Fatal(err)
		}
		defer it.Close()
		var out [][]byte
		for {
			b, err := it.Next()
			if err != nil {
				break
			}
			out = append(out, slices.Clone(b.Images), slices.Clone(b.Boxes), slices.Clone(b.Mask))
		}
		return out
	}
	got, want := mix(plainDir, compactDir), mix(plainDir, plainDir)
	if len(got) == 0 || len(got) != len(want) {
		t.Fatalf("%d arrays, plain mixture %d", len(got), len(want))
	}
	for k := range got {
		if !bytes.Equal(got[k], want[k]) {
			t.Fatalf("array %d of the plain+compact mixture differs from the plain+plain one", k)
		}
	}
	// load --mix, with and without read-ahead (forwarded to the parts): the same batches.
	var idx [2][]byte
	for k, ahead := range []string{"0", "3"} {
		out := filepath.Join(t.TempDir(), "ix")
		if _, res := loadJSON(t, nil, "--mix", plainDir+"=1", "--mix", compactDir+"=1", "--batch", "4", "--read-ahead", ahead, "--indices", out); res.code != exitOK {
			t.Fatalf("load --mix plain --mix compact --read-ahead %s: exit %d\n%s", ahead, res.code, res.stderr)
		}
		var err error
		if idx[k], err = os.ReadFile(out); err != nil || len(idx[k]) == 0 {
			t.Fatalf("indices: %v (%d bytes)", err, len(idx[k]))
		}
	}
	if !bytes.Equal(idx[0], idx[1]) {
		t.Fatal("load --mix --read-ahead 3 read other batches than without")
	}
}
