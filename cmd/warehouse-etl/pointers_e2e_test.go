package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"warehouse-etl/warehouse"
)

// Two configs in one output root keep their versions apart: each has its
// pointer latest-<name>; latest stays with the config that owns it (a
// trainer reading the root keeps reading that config's versions); gc
// --keep N keeps N versions of each config and every pointer's target.
func TestConfigsShareAnOutputRoot(t *testing.T) {
	shared := filepath.Join(t.TempDir(), "out")
	cfgA, _ := writeConfig(t, demoRoot(t), map[string]any{"name": "big", "output_root": shared})
	cfgB, _ := writeConfig(t, demoRoot(t), map[string]any{"name": "small", "output_root": shared, "target_size": []int{320, 320}})
	link := func(name string) string {
		t.Helper()
		target, err := os.Readlink(filepath.Join(shared, name))
		if err != nil {
			t.Fatal(err)
		}
		return target
	}
	resolve := func(p string) string {
		t.Helper()
		dir, err := warehouse.ResolveDir(p)
		if err != nil {
			t.Fatal(err)
		}
		return filepath.Base(dir)
	}

	dirA, _ := mustBuild(t, cfgA, nil)
	vA := filepath.Base(dirA)
	if link("latest") != vA || link("latest-big") != vA {
		t.Fatalf("first config: latest -> %s, latest-big -> %s, want %s", link("latest"), link("latest-big"), vA)
	}
	dirB, res := mustBuild(t, cfgB, nil)
	vB := filepath.Base(dirB)
	if vB == vA || link("latest") != vA || link("latest-small") != vB || link("latest-big") != vA {
		t.Fatalf("second config: latest -> %s, latest-big -> %s, latest-small -> %s (A %s, B %s)",
			link("latest"), link("latest-big"), link("latest-small"), vA, vB)
	}
	if !strings.Contains(res.stderr, "latest names another config's version") || !strings.Contains(res.stderr, filepath.Join(shared, "latest-small")) {
		t.Errorf("the second build does not say where its version is:\n%s", res.stderr)
	}
	// Readers: the root is the first config's; a pointer names its config's.
	if resolve(shared) != vA || resolve(filepath.Join(shared, "latest-small")) != vB || resolve(filepath.Join(shared, "latest")) != vA {
		t.Fatal("readers resolve the pointers wrongly")
	}
	// A rerun of B (up to date) leaves latest alone too.
	if _, res := mustBuild(t, cfgB, nil); !strings.Contains(res.stderr, "up to date") || link("latest") != vA {
		t.Fatalf("rerun of B: latest -> %s\n%s", link("latest"), res.stderr)
	}

	// A new version of the first config moves latest and latest-big.
	cfgA2, _ := writeConfig(t, demoRoot(t), map[string]any{"name": "big", "output_root": shared, "target_size": []int{400, 400}})
	dirA2, _ := mustBuild(t, cfgA2, nil)
	vA2 := filepath.Base(dirA2)
	if link("latest") != vA2 || link("latest-big") != vA2 || link("latest-small") != vB {
		t.Fatalf("new version of the first config: latest -> %s, latest-big -> %s, latest-small -> %s", link("latest"), link("latest-big"), link("latest-small"))
	}

	// gc --keep 1: the newest of each config stays; big's older version goes.
	g := runCLI(t, context.Background(), nil, "gc", "--output-root", shared, "--keep", "1")
	if g.code != 0 {
		t.Fatalf("gc: exit %d\n%s%s", g.code, g.stdout, g.stderr)
	}
	got := versionDirs(t, shared)
	var versions []string
	for _, n := range got {
		if strings.HasPrefix(n, "v") {
			versions = append(versions, n)
		}
	}
	if len(versions) != 2 || !contains(versions, vA2) || !contains(versions, vB) {
		t.Fatalf("after gc --keep 1: %v (want %s and %s)\n%s", versions, vA2, vB, g.stdout)
	}
	if _, err := os.Stat(filepath.Join(shared, "."+vA+".config")); !os.IsNotExist(err) {
		t.Errorf("gc left the owner record of %s (%v)", vA, err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
