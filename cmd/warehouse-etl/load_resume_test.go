package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"warehouse-etl/warehouse"
)

// TestLoadStartPositionAndMix: load --start-position hands out the resumed
// plan of each rank of a new world size (reading.md, "Resuming"), --mix
// reads a mixture whose rows come from both warehouses by quota, and the
// flags that do not go together are refused as usage errors.
func TestLoadStartPositionAndMix(t *testing.T) {
	dir, _ := smallDemo(t, nil) // 19 samples
	other, _ := smallDemo(t, map[string]any{"shard_target_mb": 0.05})
	r, err := warehouse.Open(dir, warehouse.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	order := warehouse.EpochOrder(r.Len(), r.ShardStarts(), warehouse.ShuffleShards, 6, 2)
	r.Close()
	// Two ranks took 2 batches of 3 (position 12); three ranks of 2 take the rest.
	seen := map[int]int{}
	for rank := range 3 {
		out := filepath.Join(t.TempDir(), "ix")
		rep, res := loadJSON(t, nil, "--tensor-warehouse", dir, "--shuffle", "shard", "--seed", "6", "--first-epoch", "2",
			"--world", "3", "--rank", fmt.Sprint(rank), "--batch", "2", "--start-position", "12", "--indices", out)
		if res.code != exitOK {
			t.Fatalf("exit %d\n%s", res.code, res.stderr)
		}
		if rep.StartPosition != 12 || rep.Batches != 1 {
			t.Fatalf("rank %d: start %d, %d batches; want 12, 1 (7 left, 6 per round)", rank, rep.StartPosition, rep.Batches)
		}
		got := readIndices(t, out)
		want := order[12+2*rank : 14+2*rank]
		if len(got) != 1 || !slices.Equal(got[0].Indices, want) {
			t.Fatalf("rank %d: %v, want %v", rank, got, want)
		}
		for _, i := range got[0].Indices {
			seen[i]++
		}
	}
	if len(seen) != 6 {
		t.Fatalf("%d distinct samples, want 6", len(seen))
	}

	out := filepath.Join(t.TempDir(), "ix")
	rep, res := loadJSON(t, nil, "--mix", dir+"=1", "--mix", other+"=3", "--batch", "4", "--remainder", "pad", "--indices", out)
	if res.code != exitOK {
		t.Fatalf("--mix: exit %d\n%s", res.code, res.stderr)
	}
	if !slices.Equal(rep.MixQuotas, []int{10, 28}) || rep.Samples != 40 || rep.Repeats != 2 || !strings.HasPrefix(rep.Dir, "mixture ") {
		t.Fatalf("--mix report %+v", rep)
	}
	from := [2]int{}
	for _, b := range readIndices(t, out) {
		for _, i := range b.Indices[:len(b.Indices)-b.Repeats] {
			from[i/19]++
		}
	}
	if from != [2]int{10, 28} {
		t.Fatalf("rows per warehouse %v, want the quotas", from)
	}

	f32, _ := smallDemo(t, map[string]any{"dtype": "f32"})
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--mix", dir + "=1", "--tensor-warehouse", dir}, "--mix names the warehouses"},
		{[]string{"--tensor-warehouse", dir, "--epoch-samples", "10"}, "--epoch-samples is a mixture's epoch length"},
		{[]string{"--tensor-warehouse", dir, "--start-position", "-1"}, "--start-position -1: must be >= 0"},
		{[]string{"--mix", dir + "=1", "--mix", f32 + "=1"}, "mixture: warehouse 1 has layout"},
		{[]string{"--mix", dir + "=x"}, "weight"},
	} {
		_, res := loadJSON(t, nil, tc.args...)
		if res.code != exitUsage || !strings.Contains(res.stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, res.code, res.stderr, exitUsage, tc.want)
		}
	}
}
