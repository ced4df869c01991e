package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// One plan through the CLI: partition 0 of 3 scans the demo runs and
// stores the plan, partitions 1 and 2 read it (they log "plan read", not
// "scan done"), and the commit publishes the single-machine bytes. Sources
// changed after the plan: the next partition exits 1 naming the partition
// that wrote it.
func TestPartitionsReadOnePlan(t *testing.T) {
	root := filepath.Join(t.TempDir(), "capture")
	if err := os.CopyFS(root, os.DirFS(demoRoot(t))); err != nil {
		t.Fatal(err)
	}
	cfgSingle, _ := writeConfig(t, root, nil)
	single, _ := mustBuild(t, cfgSingle, nil)
	cfgPath, _ := writeConfig(t, root, nil)
	for i := range 3 {
		res := runCLI(t, context.Background(), nil, "build", "--config", cfgPath, "--partition", fmt.Sprintf("%d/3", i))
		if res.code != 0 {
			t.Fatalf("partition %d/3: exit %d\n%s", i, res.code, res.stderr)
		}
		scanned, read := strings.Contains(res.stderr, "scan done"), strings.Contains(res.stderr, "plan read")
		if (i == 0) != scanned || (i > 0) != read {
			t.Errorf("partition %d/3: scanned %v, read the plan %v, want one scan in partition 0:\n%s", i, scanned, read, res.stderr)
		}
	}
	res := runCLI(t, context.Background(), nil, "commit", "--config", cfgPath)
	if res.code != 0 || strings.Contains(res.stderr, "scan done") || !strings.Contains(res.stderr, "plan read") {
		t.Fatalf("commit: exit %d (want 0, reading the plan)\n%s", res.code, res.stderr)
	}
	sameAsSingle(t, "3 partitions, one plan", single, strings.TrimSpace(res.stdout))

	cfgChanged, _ := writeConfig(t, root, nil)
	if res := runCLI(t, context.Background(), nil, "build", "--config", cfgChanged, "--partition", "0/2"); res.code != 0 {
		t.Fatalf("partition 0/2: exit %d\n%s", res.code, res.stderr)
	}
	labels, err := filepath.Glob(filepath.Join(root, "run_2", "labels", "*.json"))
	if err != nil || len(labels) == 0 {
		t.Fatalf("no labels in %s: %v", root, err)
	}
	f, err := os.OpenFile(labels[0], os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("\n")
	f.Close()
	res = runCLI(t, context.Background(), nil, "build", "--config", cfgChanged, "--partition", "1/2")
	if res.code != 1 || !strings.Contains(res.stderr, "the sources changed since partition 0/2") {
		t.Fatalf("partition 1/2 after a label changed: exit %d, want 1 naming partition 0/2\n%s", res.code, res.stderr)
	}
}
