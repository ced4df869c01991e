package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"warehouse-etl/outputroot"
)

// runBin runs the CLI binary as its own process.
func runBin(bin string, args ...string) cliResult {
	cmd := exec.Command(bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	_ = cmd.Run() // the exit code says it
	return cliResult{cmd.ProcessState.ExitCode(), out.String(), errb.String()}
}

// runAtOnce runs each argument list as a process, all at once.
func runAtOnce(bin string, argss ...[]string) []cliResult {
	res := make([]cliResult, len(argss))
	var wg sync.WaitGroup
	for i, args := range argss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i] = runBin(bin, args...)
		}()
	}
	wg.Wait()
	return res
}

// checkRoot checks an output root after concurrent operations: latest
// names a version that verifies clean, every version directory has a
// manifest, and nothing temporary is left.
func checkRoot(t *testing.T, root string) (versions []string) {
	t.Helper()
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		switch {
		case strings.Contains(e.Name(), ".tmp-"):
			t.Errorf("left behind: %s", e.Name())
		case e.IsDir() && strings.HasPrefix(e.Name(), "v"):
			if !exists(filepath.Join(root, e.Name(), "manifest.json")) {
				t.Errorf("%s: a version directory without a manifest", e.Name())
			}
			versions = append(versions, e.Name())
		}
	}
	if res := runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", root); res.code != 0 {
		t.Errorf("verify latest: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	return versions
}

// TestConcurrentOperationsAgree runs, 20 rounds each, two gc at once, gc
// with a build, gc with a commit and two commits, each as its own
// process: every one ends with exit 0 or a documented code (5: the other
// holds the version's lock) and the output root in the right state
// (issue 23 item 3).
func TestConcurrentOperationsAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("80 rounds of processes")
	}
	bin := mustBinary(t)
	data := t.TempDir()
	greyDataset(t, data, 6, 120)
	const rounds = 20
	config := func(root string, size int) string {
		cfg, _ := greyConfig(t, data, map[string]any{"target_size": []int{size, size}, "output_root": root})
		return cfg
	}

	t.Run("two gc", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "out")
		cfgs := []string{config(root, 8), config(root, 10), config(root, 12)}
		for round := range rounds {
			var names []string
			for _, c := range cfgs {
				dir, _ := mustBuild(t, c, nil, "--quiet") // up to date, or rebuilt after the last round's gc
				names = append(names, filepath.Base(dir))
			}
			latest, err := os.Readlink(filepath.Join(root, "latest"))
			if err != nil {
				t.Fatal(err)
			}
			gc := []string{"gc", "--output-root", root, "--keep", "1", "--json"}
			res := runAtOnce(bin, gc, gc)
			removed := map[string]int{}
			for i, r := range res {
				if r.code != 0 {
					t.Fatalf("round %d gc %d: exit %d\n%s", round, i, r.code, r.stderr)
				}
				var rep outputroot.GCReport
				if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
					t.Fatalf("round %d gc %d: %v\n%s", round, i, err, r.stdout)
				}
				for _, x := range rep.Removed {
					removed[filepath.Base(x.Path)]++
				}
			}
			// The two agree: each version but latest's removed once, by
			// one of them.
			for _, n := range names {
				if want := map[bool]int{true: 0, false: 1}[n == latest]; removed[n] != want {
					t.Fatalf("round %d: removed %v, want every version but latest (%s) once", round, removed, latest)
				}
			}
			if got := checkRoot(t, root); len(got) != 1 || got[0] != latest {
				t.Fatalf("round %d: versions %v, want [%s]", round, got, latest)
			}
			for _, n := range names {
				if n == latest {
					continue
				}
				for _, f := range []string{"." + n + ".lock", "." + n + ".readers"} {
					if exists(filepath.Join(root, f)) {
						t.Errorf("round %d: %s left after its version was collected", round, f)
					}
				}
			}
		}
	})

	t.Run("gc and build", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "out")
		mustBuild(t, config(root, 8), nil, "--quiet")
		for round := range rounds {
			cfg := config(root, 10+round)
			res := runAtOnce(bin, []string{"gc", "--output-root", root, "--keep", "1", "--json"}, []string{"build", "--config", cfg, "--quiet"})
			for i, r := range res {
				if r.code != 0 {
					t.Fatalf("round %d op %d: exit %d\n%s", round, i, r.code, r.stderr)
				}
			}
			dir := strings.TrimSpace(res[1].stdout)
			if target, err := os.Readlink(filepath.Join(root, "latest")); err != nil || target != filepath.Base(dir) {
				t.Fatalf("round %d: latest -> %q (%v), want %s", round, target, err, filepath.Base(dir))
			}
			// The build pins published versions while it looks for samples to
			// reuse (their readers locks): gc keeps those it finds pinned, and
			// says so. Any other version past the old latest and the new one
			// is one gc should have removed.
			var rep outputroot.GCReport
			if err := json.Unmarshal([]byte(res[0].stdout), &rep); err != nil {
				t.Fatalf("round %d gc: %v\n%s", round, err, res[0].stdout)
			}
			inUse := map[string]bool{}
			for _, k := range rep.Kept {
				if strings.HasPrefix(k.Why, "open by a reader") {
					inUse[k.Name] = true
				}
			}
			got := checkRoot(t, root)
			pinned := 0
			for _, v := range got {
				if inUse[v] {
					pinned++
				}
			}
			if len(got) > 2+pinned {
				t.Fatalf("round %d: %d versions after gc --keep 1 (%d kept as open by a reader): %v", round, len(got), pinned, got)
			}
		}
	})

	t.Run("gc and commit", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "out")
		for round := range rounds {
			cfg := config(root, 8+round)
			for _, p := range []string{"0/2", "1/2"} {
				if r := runBin(bin, "build", "--config", cfg, "--partition", p, "--quiet"); r.code != 0 {
					t.Fatalf("round %d partition %s: exit %d\n%s", round, p, r.code, r.stderr)
				}
			}
			res := runAtOnce(bin, []string{"gc", "--output-root", root, "--keep", "1"}, []string{"commit", "--config", cfg, "--wait", "1m"})
			for i, r := range res {
				if r.code != 0 {
					t.Fatalf("round %d op %d: exit %d\n%s", round, i, r.code, r.stderr)
				}
			}
			dir := strings.TrimSpace(res[1].stdout)
			if exists(filepath.Join(root, "."+filepath.Base(dir)+outputroot.StagingSuffix)) {
				t.Errorf("round %d: the staging directory of the committed version is left", round)
			}
			checkRoot(t, root)
		}
	})

	t.Run("two commits", func(t *testing.T) {
		root := filepath.Join(t.TempDir(), "out")
		for round := range rounds {
			cfg := config(root, 8+round)
			if r := runBin(bin, "build", "--config", cfg, "--partition", "0/1", "--quiet"); r.code != 0 {
				t.Fatalf("round %d partition: exit %d\n%s", round, r.code, r.stderr)
			}
			commit := []string{"commit", "--config", cfg}
			res := runAtOnce(bin, commit, commit)
			ok := 0
			for i, r := range res {
				switch r.code {
				case 0:
					ok++
				case exitLocked:
					if !strings.Contains(r.stderr, outputroot.ErrLocked.Error()) {
						t.Errorf("round %d commit %d: exit 5 without saying why:\n%s", round, i, r.stderr)
					}
				default:
					t.Fatalf("round %d commit %d: exit %d\n%s", round, i, r.code, r.stderr)
				}
			}
			if ok == 0 {
				t.Fatalf("round %d: neither commit published: %v", round, res)
			}
			if got := checkRoot(t, root); len(got) != round+1 {
				t.Fatalf("round %d: versions %v", round, got)
			}
		}
	})
}
