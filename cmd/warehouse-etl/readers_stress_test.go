package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"warehouse-etl/internal/testfiles"
	"warehouse-etl/warehouse"
)

// greyDataset writes (or rewrites) a capture run of n 24x24 images of one
// grey level, each with one box: after a u8 stretch build every image byte
// of the warehouse is that level, so a batch says which build it came from.
func greyDataset(t *testing.T, root string, n int, level byte) {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, 24, 24))
	for i := range img.Pix {
		img.Pix[i] = level
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for i := range n {
		files[fmt.Sprintf("run_1/images/frame_%05d.png", i)] = buf.Bytes()
		files[fmt.Sprintf("run_1/labels/frame_%05d.json", i)] = fmt.Appendf(nil,
			`{"frame_id": %d, "image": "images/frame_%05d.png", "polyp_labels": [{"bbox_px": [2, 2, 20, 20]}]}`, i, i)
	}
	testfiles.WriteTree(t, root, files)
}

// greyConfig is a config for the grey dataset at data: u8 16x16 stretch,
// shards of 2 KiB (a few samples each), no thresholds; extra overrides.
func greyConfig(t *testing.T, data string, extra map[string]any) (cfgPath, outRoot string) {
	t.Helper()
	cfg := map[string]any{
		"dtype": "u8", "target_size": []int{16, 16}, "resize_mode": "stretch", "max_boxes": 2,
		"shard_target_mb": 0.002, // 2 KiB: a few samples per shard, opened lazily
		"thresholds":      map[string]any{},
	}
	maps.Copy(cfg, extra)
	return writeConfig(t, data, cfg)
}

// readerTally is what the readers of one language saw.
type readerTally struct {
	Opens    int64 `json:"opens"`
	Batches  int64 `json:"batches"`
	Mixed    int64 `json:"mixed"`     // batches whose bytes are not all the level of the version opened
	Failed   int64 `json:"failed"`    // reads (a batch, a sample) that failed on an open version
	OpenFail int64 `json:"open_fail"` // opens that failed
	Errors   []string
}

// pythonStressReader opens the output root in a loop until the stop file
// exists; each open learns its build from the manifest's first shard
// sha256 (levels maps it to the grey level) and checks every batch, and one
// zero-copy sample per batch, against it.
const pythonStressReader = `
import json, os, sys
import numpy as np
import warehouse_etl
root, stop, levels = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
t = {"opens": 0, "batches": 0, "mixed": 0, "failed": 0, "open_fail": 0, "Errors": []}
epoch = 0
while not os.path.exists(stop):
    try:
        wh = warehouse_etl.open(root)
    except Exception as e:
        t["open_fail"] += 1; t["Errors"].append("open: %s" % e); continue
    t["opens"] += 1
    level = levels[wh.manifest["shards"][0]["checksum_sha256"]]
    try:
        for idx in wh.batches(3, seed=epoch, epoch=epoch, shuffle="global"):
            b = wh.read_batch(idx)
            t["batches"] += 1
            if not np.all(b["images"] == level) or not np.all(wh[int(idx[0])]["image"] == level):
                t["mixed"] += 1
    except Exception as e:
        t["failed"] += 1; t["Errors"].append("read: %s" % e)
    wh.close()
    epoch += 1
print(json.dumps(t))
`

// TestReadersNeverMix runs Go and Python readers of an output root in a
// loop while 20 forced rebuilds (WAREHOUSE_CLEAR=1) swap the version's
// content between two builds and gc runs after each: every batch must hold
// only the build its reader opened (0 mixed) and no read of an open
// version may fail (issue 23 item 1). At the end, with every reader
// closed, gc leaves no replaced version behind.
func TestReadersNeverMix(t *testing.T) {
	requirePython(t, "numpy")
	readPythonSources(t, "../../python")
	data := t.TempDir()
	const n = 30
	levels := [2]byte{40, 220}
	greyDataset(t, data, n, levels[0])
	cfg, outRoot := greyConfig(t, data, nil)
	clear := map[string]string{"WAREHOUSE_CLEAR": "1"}
	// Learn each build's first shard digest: the readers' way to know what
	// they opened.
	bySHA := map[string]byte{}
	for round := range 2 {
		greyDataset(t, data, n, levels[round])
		dir, _ := mustBuild(t, cfg, clear)
		m, err := warehouse.ReadManifest(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(m.Shards) < 4 {
			t.Fatalf("%d shards: want several, opened lazily", len(m.Shards))
		}
		bySHA[m.Shards[0].ChecksumSHA256] = levels[round]
	}
	if len(bySHA) != 2 {
		t.Fatal("the two builds have the same first shard")
	}
	stop := filepath.Join(t.TempDir(), "stop")

	var goTally readerTally
	var mu sync.Mutex
	var wg sync.WaitGroup
	var stopped atomic.Bool
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for epoch := g; !stopped.Load(); epoch++ {
				opens, batches, mixed, failed, openFail, msg := goReaderRound(outRoot, bySHA, epoch)
				mu.Lock()
				goTally.Opens += opens
				goTally.Batches += batches
				goTally.Mixed += mixed
				goTally.Failed += failed
				goTally.OpenFail += openFail
				if msg != "" && len(goTally.Errors) < 5 {
					goTally.Errors = append(goTally.Errors, msg)
				}
				mu.Unlock()
			}
		}()
	}
	var pyOut [2]bytes.Buffer
	var pys []*exec.Cmd
	for i := range 2 {
		lv, _ := json.Marshal(bySHA)
		cmd := exec.Command(debianPython, "-c", pythonStressReader, outRoot, stop, string(lv))
		cmd.Env = append(os.Environ(), "PYTHONPATH="+mustAbs(t, "../../python"))
		cmd.Stdout, cmd.Stderr = &pyOut[i], &pyOut[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pys = append(pys, cmd)
	}

	for round := range 20 {
		greyDataset(t, data, n, levels[round%2])
		if res := runCLI(t, context.Background(), clear, "build", "--config", cfg); res.code != 0 {
			t.Errorf("rebuild %d: exit %d\n%s", round, res.code, res.stderr)
		}
		if res := runCLI(t, context.Background(), nil, "gc", "--output-root", outRoot, "--keep", "1"); res.code != 0 {
			t.Errorf("gc %d: exit %d\n%s", round, res.code, res.stderr)
		}
	}
	stopped.Store(true)
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	var tallies = map[string]readerTally{"go": goTally}
	for i, cmd := range pys {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("python reader %d: %v\n%s", i, err, pyOut[i].String())
		}
		out := pyOut[i].String()
		var pt readerTally
		if err := json.Unmarshal([]byte(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:]), &pt); err != nil {
			t.Fatalf("python reader %d: %v\n%s", i, err, out)
		}
		tallies[fmt.Sprintf("python %d", i)] = pt
	}
	for who, tl := range tallies {
		t.Logf("%s readers: %d opens, %d batches, %d mixed, %d failed reads, %d failed opens", who, tl.Opens, tl.Batches, tl.Mixed, tl.Failed, tl.OpenFail)
		if tl.Opens == 0 || tl.Batches == 0 {
			t.Errorf("%s readers read nothing", who)
		}
		if tl.Mixed != 0 || tl.Failed != 0 || tl.OpenFail != 0 {
			t.Errorf("%s readers: %d mixed batches, %d failed reads, %d failed opens: %q", who, tl.Mixed, tl.Failed, tl.OpenFail, tl.Errors)
		}
	}
	// Every reader is closed: gc removes the replaced versions they kept.
	if res := runCLI(t, context.Background(), nil, "gc", "--output-root", outRoot, "--keep", "1"); res.code != 0 {
		t.Fatalf("final gc: exit %d\n%s", res.code, res.stderr)
	}
	ents, err := os.ReadDir(outRoot)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("left after the last gc: %s", e.Name())
		}
	}
}

// goReaderRound opens root once, learns its build from the first shard's
// digest and reads one shuffled epoch in batches of 3, checking each batch
// and one zero-copy sample of it against the build's grey level.
func goReaderRound(root string, bySHA map[string]byte, epoch int) (opens, batches, mixed, failed, openFail int64, msg string) {
	r, err := warehouse.Open(root, warehouse.OpenOptions{})
	if err != nil {
		return 0, 0, 0, 0, 1, "open: " + err.Error()
	}
	defer r.Close()
	level := bySHA[r.Manifest().Shards[0].ChecksumSHA256]
	it, err := r.Batches(context.Background(), warehouse.BatchOptions{BatchSize: 3, Seed: uint64(epoch), Epoch: epoch,
		WorldSize: 1, Shuffle: warehouse.ShuffleGlobal})
	if err != nil {
		return 1, 0, 0, 1, 0, "batches: " + err.Error()
	}
	defer it.Close()
	for {
		b, err := it.Next()
		if errors.Is(err, io.EOF) {
			return 1, batches, mixed, 0, 0, ""
		}
		if err != nil {
			return 1, batches, mixed, 1, 0, "read: " + err.Error()
		}
		batches++
		s, err := r.Sample(b.Indices[0])
		if err != nil {
			return 1, batches, mixed, 1, 0, "sample: " + err.Error()
		}
		if !allBytes(b.Images, level) || !allBytes(s.Image(), level) {
			mixed++
		}
	}
}

func allBytes(b []byte, v byte) bool {
	for _, c := range b {
		if c != v {
			return false
		}
	}
	return true
}
