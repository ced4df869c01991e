package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"warehouse-etl/warehouse"
)

// smallDemo builds the demo dataset at a small target size (fast) and
// returns the version directory and its output root.
func smallDemo(t *testing.T, overrides map[string]any) (dir, outRoot string) {
	t.Helper()
	o := map[string]any{"target_size": []int{96, 64}, "shard_target_mb": 0.1}
	for k, v := range overrides {
		o[k] = v
	}
	cfgPath, outRoot := writeConfig(t, demoRoot(t), o)
	dir, _ = mustBuild(t, cfgPath, nil)
	return dir, outRoot
}

func TestVerifyCommand(t *testing.T) {
	dir, outRoot := smallDemo(t, nil)
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Shards) < 3 {
		t.Fatalf("want several shards, got %d", len(m.Shards))
	}

	// A clean version: exit 0, and the next command to run.
	res := runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", outRoot, "--quiet")
	if res.code != exitOK || !strings.Contains(res.stdout, "ok: "+dir+" (quick") ||
		!strings.Contains(res.stdout, "next: warehouse-etl verify --tensor-warehouse "+dir+" --full") {
		t.Fatalf("quick verify: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	res = runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", dir, "--full", "--quiet")
	if res.code != exitOK || !strings.Contains(res.stdout, "next: warehouse-etl load --tensor-warehouse "+dir) {
		t.Fatalf("full verify: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	// Flip one image byte of shard 1: only --full sees it; exit 7.
	shard1 := filepath.Join(dir, m.Shards[1].RelativePath)
	raw, err := os.ReadFile(shard1)
	if err != nil {
		t.Fatal(err)
	}
	raw[100] ^= 0x01
	if err := os.WriteFile(shard1, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", dir, "--quiet"); res.code != exitOK {
		t.Fatalf("quick verify reads no data, yet exit %d:\n%s", res.code, res.stdout)
	}
	res = runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", dir, "--full", "--quiet")
	row := regexp.MustCompile(`(?m)^checksum\s+shards/shard-00001\.twh\s+-\s+sha256 [0-9a-f]{64}, the manifest says ` + m.Shards[1].ChecksumSHA256 + `$`)
	if res.code != exitFindings || !row.MatchString(res.stdout) || !strings.Contains(res.stdout, "1 finding(s) in "+dir) ||
		!strings.Contains(res.stdout, "next: WAREHOUSE_CLEAR=1 warehouse-etl build --config CONFIG") ||
		!strings.Contains(res.stderr, "warehouse-etl verify: "+dir+": 1 verification finding(s), the first: checksum shards/shard-00001.twh") {
		t.Fatalf("flipped byte: exit %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}

	// Remove shard 2: quick verify finds it; --json for machines.
	if err := os.Remove(filepath.Join(dir, m.Shards[2].RelativePath)); err != nil {
		t.Fatal(err)
	}
	res = runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", dir, "--json", "--quiet")
	var out struct {
		Dir      string              `json:"dir"`
		Full     bool                `json:"full"`
		Count    int                 `json:"count"`
		Findings []warehouse.Finding `json:"findings"`
		Next     string              `json:"next"`
	}
	if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
		t.Fatalf("--json output: %v\n%s", err, res.stdout)
	}
	want := warehouse.Finding{Kind: warehouse.FindingShardMissing, Shard: "shards/shard-00002.twh", Sample: -1,
		Detail: filepath.Join(dir, "shards/shard-00002.twh") + ": missing: the manifest lists shard shard-00002"}
	if res.code != exitFindings || out.Count != 1 || out.Findings[0] != want || out.Dir != dir || out.Full {
		t.Fatalf("missing shard: exit %d, %+v", res.code, out)
	}
}

func TestVerifyUsageAndNotAWarehouse(t *testing.T) {
	empty := t.TempDir()
	tests := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"verify"}, exitUsage, "--tensor-warehouse is required"},
		{[]string{"verify", "--tensor-warehouse", empty}, exitFailure,
			fmt.Sprintf("warehouse-etl verify: %s: neither a warehouse version (no manifest.json) nor a root with a \"latest\" pointer", empty)},
		{[]string{"verify", "-h"}, exitOK, "--full also re-hashes every shard"},
	}
	for _, tt := range tests {
		res := runCLI(t, context.Background(), nil, tt.args...)
		if res.code != tt.code || !strings.Contains(res.stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d containing %q", tt.args, res.code, res.stderr, tt.code, tt.want)
		}
	}
}
