package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// resumeCase is a job of World ranks that took Steps batches each and
// was resumed at Start with World2 ranks (docs/format/reading.md,
// "Resuming"), of one warehouse or a mixture, as the CLI's load reads it:
// Before[r] is rank r's first Steps batches (load --max-batches), After[r]
// rank r's batches from Start (load --start-position). python/tests/
// test_resume.py checks that its loader plans the same and that the two
// runs together read every position once.
type resumeCase struct {
	Batch        int         `json:"batch"`
	Seed         uint64      `json:"seed"`
	Epoch        int         `json:"epoch"`
	World        int         `json:"world"`
	Steps        int         `json:"steps"`
	World2       int         `json:"world2"`
	Batch2       int         `json:"batch2"`
	Start        int         `json:"start"`
	Shuffle      string      `json:"shuffle"`
	Remainder    string      `json:"remainder"`
	Dir          string      `json:"dir,omitempty"`
	Mix          []mixPart   `json:"mix,omitempty"`
	EpochSamples int         `json:"epoch_samples"`
	Before       [][]rowPlan `json:"before"`
	After        [][]rowPlan `json:"after"`
}

// rowPlan is one batch: its sample (or mixture) indices and repeats.
type rowPlan struct {
	Indices []int `json:"indices"`
	Repeats int   `json:"repeats"`
}

// resumeCases runs load for a table of (W, k, W', B', shuffle, remainder)
// on the warehouse dir and on a mixture of it with a second build of the
// same layout (other shards), including more ranks than batches left.
func resumeCases(t *testing.T, dir string) []resumeCase {
	cfg, _ := writeConfig(t, demoRoot(t), map[string]any{"dtype": "f16", "target_size": []int{96, 64}, "shard_target_mb": 0.04})
	res := runCLI(t, t.Context(), nil, "build", "--config", cfg, "--quiet")
	if res.code != 0 {
		t.Fatalf("build: exit %d\n%s", res.code, res.stderr)
	}
	other := strings.TrimSpace(res.stdout)
	mix := []mixPart{{dir, 1}, {other, 2.5}}
	cases := []resumeCase{
		{Batch: 2, World: 2, Steps: 2, World2: 1, Shuffle: "global", Remainder: "drop", Seed: 3, Epoch: 1},
		{Batch: 3, World: 2, Steps: 1, World2: 3, Shuffle: "shard", Remainder: "pad", Seed: 1 << 63, Epoch: 4},
		{Batch: 2, World: 1, Steps: 3, World2: 4, Shuffle: "none", Remainder: "pad"},
		{Batch: 2, World: 3, Steps: 1, World2: 2, Shuffle: "global", Remainder: "drop", Seed: 77},
		{Batch: 2, World: 2, Steps: 2, World2: 8, Shuffle: "global", Remainder: "drop", Seed: 5}, // 11 left, 16 per round: none
		{Batch: 2, World: 2, Steps: 2, World2: 8, Shuffle: "global", Remainder: "pad", Seed: 5},  // one each, 5 repeats
		{Batch: 2, World: 4, Steps: 2, World2: 2, Shuffle: "shard", Remainder: "pad", Seed: 9, Epoch: 2},
		{Batch: 4, World: 2, Steps: 1, World2: 3, Batch2: 3, Shuffle: "global", Remainder: "pad", Seed: 11}, // another batch size
		{Batch: 3, World: 2, Steps: 2, World2: 2, Shuffle: "global", Remainder: "drop", Seed: 2, Mix: mix},
		{Batch: 4, World: 3, Steps: 2, World2: 5, Shuffle: "shard", Remainder: "pad", Seed: 8, Epoch: 3, Mix: mix, EpochSamples: 50},
		{Batch: 2, World: 2, Steps: 3, World2: 1, Shuffle: "none", Remainder: "drop", Seed: 4, Epoch: 6, Mix: mix, EpochSamples: 23},
	}
	for c := range cases {
		tc := &cases[c]
		if tc.Batch2 == 0 {
			tc.Batch2 = tc.Batch
		}
		tc.Start = tc.Steps * tc.World * tc.Batch
		base := []string{"--seed", fmt.Sprint(tc.Seed), "--first-epoch", fmt.Sprint(tc.Epoch), "--shuffle", tc.Shuffle, "--remainder", tc.Remainder}
		if tc.Mix != nil {
			for _, p := range tc.Mix {
				base = append(base, "--mix", fmt.Sprintf("%s=%g", p.Path, p.Weight))
			}
			if tc.EpochSamples != 0 {
				base = append(base, "--epoch-samples", fmt.Sprint(tc.EpochSamples))
			}
		} else {
			tc.Dir = dir
			base = append(base, "--tensor-warehouse", dir)
		}
		load := func(world, rank int, extra ...string) []rowPlan {
			out := filepath.Join(t.TempDir(), "indices")
			args := append([]string{"load", "--quiet", "--world", fmt.Sprint(world), "--rank", fmt.Sprint(rank), "--indices", out}, base...)
			res := runCLI(t, t.Context(), nil, append(args, extra...)...)
			if res.code != 0 {
				t.Fatalf("%v: exit %d\n%s", args, res.code, res.stderr)
			}
			return readIndices(t, out)
		}
		for r := range tc.World {
			tc.Before = append(tc.Before, load(tc.World, r, "--batch", fmt.Sprint(tc.Batch), "--max-batches", fmt.Sprint(tc.Steps)))
		}
		for r := range tc.World2 {
			tc.After = append(tc.After, load(tc.World2, r, "--batch", fmt.Sprint(tc.Batch2), "--start-position", fmt.Sprint(tc.Start)))
		}
	}
	return cases
}

// readIndices parses load --indices: "epoch batch i... rREPEATS" per line.
func readIndices(t *testing.T, path string) []rowPlan {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	plans := []rowPlan{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 3 || !strings.HasPrefix(fields[len(fields)-1], "r") {
			t.Fatalf("%s: line %q", path, sc.Text())
		}
		var p rowPlan
		for _, s := range fields[2 : len(fields)-1] {
			i, err := strconv.Atoi(s)
			if err != nil {
				t.Fatal(err)
			}
			p.Indices = append(p.Indices, i)
		}
		if p.Repeats, err = strconv.Atoi(fields[len(fields)-1][1:]); err != nil {
			t.Fatal(err)
		}
		plans = append(plans, p)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return plans
}
