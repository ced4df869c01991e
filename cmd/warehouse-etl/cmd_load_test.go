package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"warehouse-etl/warehouse"
)

func loadJSON(t *testing.T, env map[string]string, args ...string) (loadReport, cliResult) {
	t.Helper()
	res := runCLI(t, context.Background(), env, append([]string{"load", "--json", "--quiet"}, args...)...)
	var rep loadReport
	if res.code == exitOK {
		if err := json.Unmarshal([]byte(res.stdout), &rep); err != nil {
			t.Fatalf("load --json: %v\n%s", err, res.stdout)
		}
	}
	return rep, res
}

func TestLoadCommand(t *testing.T) {
	dir, outRoot := smallDemo(t, nil) // 19 samples
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	perSample := int64(3*96*64*2 + 16*4*2 + 16*2) // image, boxes, mask in f16
	tests := []struct {
		name                      string
		args                      []string
		batches, samples, repeats int64
	}{
		{"one rank, drop", []string{"--batch", "4"}, 4, 16, 0},
		{"one rank, pad, two epochs", []string{"--batch", "4", "--remainder", "pad", "--epochs", "2"}, 10, 40, 2},
		{"rank 1 of 2, shard shuffle", []string{"--batch", "3", "--world", "2", "--rank", "1", "--shuffle", "shard"}, 3, 9, 0},
		{"rank 1 of 2, pad", []string{"--batch", "3", "--world", "2", "--rank", "1", "--remainder", "pad"}, 4, 12, 3},
		{"sequential, max batches", []string{"--batch", "2", "--shuffle", "none", "--max-batches", "3", "--verify-checksums"}, 3, 6, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, res := loadJSON(t, nil, append([]string{"--tensor-warehouse", outRoot}, tt.args...)...)
			if res.code != exitOK {
				t.Fatalf("exit %d\n%s", res.code, res.stderr)
			}
			if int64(rep.Batches) != tt.batches || rep.Samples != tt.samples || rep.Repeats != tt.repeats || rep.Bytes != tt.samples*perSample {
				t.Fatalf("batches %d samples %d repeats %d bytes %d; want %d %d %d %d", rep.Batches, rep.Samples, rep.Repeats, rep.Bytes,
					tt.batches, tt.samples, tt.repeats, tt.samples*perSample)
			}
			if rep.Dir != dir || rep.Live || rep.Shards == nil || rep.Shards.ShardsTotal != len(m.Shards) || rep.Shards.ShardsOpened == 0 {
				t.Fatalf("report %+v", rep)
			}
			if rep.Memory.PeakRSS <= 0 || rep.Memory.PeakAnon <= 0 {
				t.Fatalf("no memory figures from /proc/self/status: %+v", rep.Memory)
			}
		})
	}

	// The human report names throughput and shard load percentiles.
	res := runCLI(t, context.Background(), nil, "load", "--tensor-warehouse", dir, "--batch", "4", "--quiet")
	for _, want := range []string{"load warehouse " + dir, "4 batches, 16 samples", "samples/s", "GB/s", "shard load p50", "peak RSS"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, res.stdout)
		}
	}
	// Logs name every shard load with its open and first-touch times.
	res = runCLI(t, context.Background(), nil, "load", "--tensor-warehouse", dir, "--batch", "19", "--log-format", "json")
	if n := strings.Count(res.stderr, `"msg":"shard loaded"`); n != len(m.Shards) || !strings.Contains(res.stderr, `"first_touch_ms":`) {
		t.Fatalf("%d shard load lines for %d shards:\n%s", n, len(m.Shards), res.stderr)
	}
}

func TestLoadRefusals(t *testing.T) {
	dir, _ := smallDemo(t, nil)
	// Edit the recorded summary past its invalid limit (0.5 of 33).
	path := filepath.Join(dir, warehouse.ManifestName)
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	m["summary"].(map[string]any)["total"].(map[string]any)["invalid"] = 20
	raw, _ = json.MarshalIndent(m, "", "  ")
	if err := warehouse.WriteManifest(dir, raw); err != nil { // resealed: manifest.json.sha256 agrees
		t.Fatal(err)
	}
	res := runCLI(t, context.Background(), nil, "load", "--tensor-warehouse", dir, "--quiet")
	want := "warehouse-etl load: " + dir + ": refusing a warehouse whose validation summary exceeds its thresholds: threshold invalid.max_ratio exceeded: 0.6060606060606061 (20 of 33 samples) > limit 0.5 (action fail)"
	if res.code != exitThreshold || strings.TrimSpace(res.stderr) != want {
		t.Fatalf("exit %d\n%s\nwant %s", res.code, res.stderr, want)
	}
	if _, res := loadJSON(t, nil, "--tensor-warehouse", dir, "--ignore-thresholds", "--batch", "4"); res.code != exitOK {
		t.Fatalf("--ignore-thresholds: exit %d\n%s", res.code, res.stderr)
	}
	res = runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", dir, "--quiet")
	if res.code != exitFindings || !strings.Contains(res.stdout, "threshold  -") || !strings.Contains(res.stdout, "next: warehouse-etl inspect --tensor-warehouse "+dir) {
		t.Fatalf("verify of a warehouse over its thresholds: exit %d\n%s", res.code, res.stdout)
	}

	empty := t.TempDir()
	for _, tt := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"load"}, exitUsage, "--tensor-warehouse or --config is required"},
		{[]string{"load", "--tensor-warehouse", empty, "--allow-live"}, exitUsage, "--allow-live needs --config"},
		{[]string{"load", "--tensor-warehouse", empty}, exitFailure, "no warehouse to load: " + empty + ": neither a warehouse version"},
		{[]string{"load", "--tensor-warehouse", dir, "--shuffle", "random", "--ignore-thresholds"}, exitUsage, `shuffle "random": want none, global or shard`},
		{[]string{"load", "--tensor-warehouse", dir, "--batch", "20", "--ignore-thresholds", "--quiet"}, exitUsage, "19 samples cannot fill one batch of 20 on each of 1 ranks"},
		{[]string{"load", "--tensor-warehouse", dir, "--rank", "2", "--world", "2", "--ignore-thresholds", "--quiet"}, exitUsage, "rank 2 of world size 2"},
	} {
		res := runCLI(t, context.Background(), nil, tt.args...)
		if res.code != tt.code || !strings.Contains(res.stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d containing %q", tt.args, res.code, res.stderr, tt.code, tt.want)
		}
	}
}

// --allow-live decodes from the source when the config's version was
// never built, loudly; once it is built, the same command reads the
// warehouse and says nothing about live decoding.
func TestLoadAllowLive(t *testing.T) {
	cfgPath, outRoot := writeConfig(t, demoRoot(t), map[string]any{"target_size": []int{96, 64}})
	res := runCLI(t, context.Background(), nil, "load", "--config", cfgPath, "--quiet")
	if res.code != exitFailure || !strings.Contains(res.stderr, "or pass --allow-live to decode from the source (development only)") {
		t.Fatalf("without --allow-live: exit %d\n%s", res.code, res.stderr)
	}
	rep, res := loadJSON(t, nil, "--config", cfgPath, "--allow-live", "--batch", "4", "--remainder", "pad")
	if res.code != exitOK {
		t.Fatalf("live: exit %d\n%s", res.code, res.stderr)
	}
	// Pass 1 keeps 20 samples; one of them fails its full decode (the
	// build drops it, 19 remain) and is served empty.
	if !rep.Live || rep.Samples != 20 || rep.LiveFailed != 1 || !strings.Contains(res.stderr, "LIVE DECODING") {
		t.Fatalf("live report %+v\n%s", rep, res.stderr)
	}
	if entries, _ := os.ReadDir(outRoot); len(entries) != 0 {
		t.Fatalf("live decoding wrote into the output root: %v", entries)
	}
	dir, _ := mustBuild(t, cfgPath, nil)
	rep, res = loadJSON(t, nil, "--config", cfgPath, "--allow-live", "--batch", "4")
	if res.code != exitOK || rep.Live || rep.Dir != dir || strings.Contains(res.stderr, "LIVE") {
		t.Fatalf("after the build: exit %d, %+v\n%s", res.code, rep, res.stderr)
	}
}
