package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"warehouse-etl/warehouse"
)

// Episode windows end to end on the WShard demo (configs/wshard.jsonc):
// the build writes episodes.bin and extra_stats, the same bytes for any
// worker or partition count; the Go reader's windows match the demo's
// formulas (testdata/wshard/README.md) at skipped steps and episode ends;
// the statistics match exact arithmetic here and numpy in Python; a
// version from before windows still reads and refuses windows clearly;
// examples/train_policy.py trains on it. Python's windows are checked
// against Go's (python/tests/test_windows.py).

// windowsOffsets is the window the tests gather around every sample.
var windowsOffsets = []int{-4, -3, -2, -1, 0, 1, 2, 3, 4, 5}

// windowsFixtureJSON is what python/tests/test_windows.py reads
// (WAREHOUSE_ETL_WINDOWS): the warehouses and Go's windows.
type windowsFixtureJSON struct {
	Root    string        `json:"root"`    // output root of the demo build (latest)
	Dir     string        `json:"dir"`     // its version directory
	Old     string        `json:"old"`     // the same version as a build from before windows wrote it
	Offsets []int         `json:"offsets"` // windowsOffsets
	Extra   string        `json:"extra"`   // the extra of the windows below
	Sample  [][]int       `json:"sample"`  // [sample][offset] the sample Go's Neighbour reads
	Valid   [][]bool      `json:"valid"`   // [sample][offset] its validity
	Values  [][][]float32 `json:"values"`  // [sample][offset][channel] Go's Window values
}

func TestEpisodeWindowsEndToEnd(t *testing.T) {
	over := pinnedWShardOverrides(t)
	cfgPath, outRoot := writeConfig(t, wshardDemoRoot(t), over)
	dir, _ := mustBuild(t, cfgPath, nil, "--workers", "1")
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Files.Episodes != "episodes.bin" || len(m.ExtraStats) != len(m.Extras) {
		t.Fatalf("files.episodes %q, %d extra_stats for %d extras", m.Files.Episodes, len(m.ExtraStats), len(m.Extras))
	}
	if !strings.Contains(m.VersionRecipe, "episodes=\"episodes.bin/1,extra_stats/1\"\n") {
		t.Fatalf("the recipe has no episodes key:\n%s", m.VersionRecipe)
	}
	if sum, ok := m.Files.Checksums["episodes.bin"]; !ok || sum.Bytes != 24+8*((4*34+7)/8)+8*34+4*12*34 {
		t.Fatalf("files.checksums[episodes.bin] = %+v, want 34 samples of 12 extras", sum)
	}
	episodesBytes, err := os.ReadFile(filepath.Join(dir, "episodes.bin"))
	if err != nil {
		t.Fatal(err)
	}

	if res := runCLI(t, context.Background(), nil, "inspect", "--tensor-warehouse", dir); res.code != 0 ||
		!strings.Contains(res.stdout, "extra stats action/ctrl over 34 samples: mean [3.997 3.947] std [2.519 2.519] min [1 0.95] max [10.3 10.25] q01 [1.033 0.983] q99 [10.23 10.18]\n") {
		t.Fatalf("inspect: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}

	// Same bytes with 3 workers, and from two partitions and a commit.
	cfg3, _ := writeConfig(t, wshardDemoRoot(t), over)
	dir3, _ := mustBuild(t, cfg3, nil, "--workers", "3")
	cfgP, _ := writeConfig(t, wshardDemoRoot(t), over)
	for _, p := range []string{"1/2", "0/2"} {
		if res := runCLI(t, context.Background(), nil, "build", "--config", cfgP, "--partition", p, "--workers", "2"); res.code != 0 {
			t.Fatalf("partition %s: exit %d\n%s", p, res.code, res.stderr)
		}
	}
	res := runCLI(t, context.Background(), nil, "commit", "--config", cfgP)
	if res.code != 0 {
		t.Fatalf("commit: exit %d\n%s", res.code, res.stderr)
	}
	dirP := strings.TrimSpace(res.stdout)
	for _, other := range []string{dir3, dirP} {
		b, err := os.ReadFile(filepath.Join(other, "episodes.bin"))
		if err != nil || !bytes.Equal(b, episodesBytes) {
			t.Fatalf("%s: episodes.bin differs (%v)", other, err)
		}
		o, err := warehouse.ReadManifest(other)
		if err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(m.ExtraStats)
		c, _ := json.Marshal(o.ExtraStats)
		if !bytes.Equal(a, c) || o.Version != m.Version || !bytes.Equal(manifestSansTime(windowsRead(t, filepath.Join(dir, "manifest.json"))), manifestSansTime(windowsRead(t, filepath.Join(other, "manifest.json")))) {
			t.Fatalf("%s: extra_stats or version differ:\n%s\n%s", other, a, c)
		}
	}

	// Windows through the Go reader against the demo's formulas.
	r, err := warehouse.Open(dir, warehouse.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ep, err := r.Episodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	recs := readSamples(t, dir)
	kept := map[string][]int{} // episode name -> kept steps, ascending
	for _, rec := range recs {
		if rec.Kept {
			kept[rec.Source] = append(kept[rec.Source], int(rec.Frame))
		}
	}
	byName := map[string]wshardEpisode{}
	for _, e := range wshardEpisodes {
		byName[e.name] = e
	}
	ctrl := m.Extras[1]
	if ctrl.Name != "action/ctrl" {
		t.Fatalf("extras[1] is %s", ctrl.Name)
	}
	fx := windowsFixtureJSON{Root: outRoot, Dir: dir, Offsets: windowsOffsets, Extra: ctrl.Name}
	masked := 0
	for _, rec := range recs {
		if !rec.Kept {
			continue
		}
		i, e, steps := int(rec.Index), byName[rec.Source], kept[rec.Source]
		dst, valid := make([]float32, len(windowsOffsets)*2), make([]bool, len(windowsOffsets))
		if err := ep.Window(i, ctrl, windowsOffsets, dst, valid); err != nil {
			t.Fatal(err)
		}
		var samples []int
		var values [][]float32
		for k, d := range windowsOffsets {
			step := int(rec.Frame) + d
			wantValid := slices.Contains(steps, step)
			src := step // the kept frame a masked step repeats
			if !wantValid {
				if d > 0 {
					src = steps[0]
					for _, s := range steps {
						if s <= step {
							src = s
						}
					}
				} else {
					src = steps[len(steps)-1]
					for _, s := range slices.Backward(steps) {
						if s >= step {
							src = s
						}
					}
				}
				masked++
			}
			want := []float32{wsCtrl(e.e, src, 0), wsCtrl(e.e, src, 1)}
			if valid[k] != wantValid || !slices.Equal(dst[2*k:2*k+2], want) {
				t.Fatalf("%s#%d offset %d: %v valid %v, want %v (step %d) valid %v", rec.Source, rec.Frame, d, dst[2*k:2*k+2], valid[k], want, src, wantValid)
			}
			j, _ := ep.Neighbour(i, d)
			samples = append(samples, j)
			values = append(values, slices.Clone(dst[2*k:2*k+2]))
		}
		fx.Sample, fx.Valid, fx.Values = append(fx.Sample, samples), append(fx.Valid, valid), append(fx.Values, values)
	}
	if masked == 0 {
		t.Fatal("no window position was masked: the demo's gap and episode ends are not exercised")
	}

	// extra_stats against exact arithmetic over the values the reader gives.
	for xi, x := range m.Extras {
		st := m.ExtraStats[xi]
		dim := 1
		for _, d := range x.Shape {
			dim *= d
		}
		for c := range dim {
			var col []float64
			for i := range r.Len() {
				s, err := r.Sample(i)
				if err != nil {
					t.Fatal(err)
				}
				col = append(col, float64(s.Extras()[x.Offset+c]))
			}
			sum, n := new(big.Rat), big.NewRat(int64(len(col)), 1)
			for _, v := range col {
				sum.Add(sum, new(big.Rat).SetFloat64(v))
			}
			mean := new(big.Rat).Quo(sum, n)
			ss := new(big.Rat)
			for _, v := range col {
				d := new(big.Rat).Sub(new(big.Rat).SetFloat64(v), mean)
				ss.Add(ss, d.Mul(d, d))
			}
			wantMean, _ := mean.Float64()
			variance, _ := ss.Quo(ss, n).Float64()
			if st.Count != int64(r.Len()) || st.Mean[c] != wantMean || st.Std[c] != math.Sqrt(variance) ||
				st.Min[c] != slices.Min(col) || st.Max[c] != slices.Max(col) {
				t.Fatalf("%s[%d]: count %d mean %v std %v min %v max %v; want %d %v %v %v %v", x.Name, c, st.Count, st.Mean[c], st.Std[c], st.Min[c], st.Max[c],
					r.Len(), wantMean, math.Sqrt(variance), slices.Min(col), slices.Max(col))
			}
		}
	}

	// A version as a build from before windows wrote it: no episodes key
	// in its recipe (so another version id), no episodes.bin, no
	// extra_stats, no files.episodes, sealed. It reads, verifies, and
	// refuses windows naming the fix.
	om, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	om.VersionRecipe = strings.Replace(om.VersionRecipe, "episodes=\"episodes.bin/1,extra_stats/1\"\n", "", 1)
	id := warehouse.ID(sha256.Sum256([]byte(om.VersionRecipe)))
	om.Version = id.String()
	old := filepath.Join(t.TempDir(), id.DirName())
	if err := os.CopyFS(old, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	om.ExtraStats, om.Files.Episodes = nil, ""
	om.Files.Checksums = maps.Clone(om.Files.Checksums)
	delete(om.Files.Checksums, "episodes.bin")
	if err := os.Remove(filepath.Join(old, "episodes.bin")); err != nil {
		t.Fatal(err)
	}
	oraw, err := om.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(oraw, []byte("extra_stats")) || bytes.Contains(oraw, []byte("episodes.bin")) {
		t.Fatal("the old manifest still names the new fields")
	}
	if err := os.WriteFile(filepath.Join(old, "manifest.json.sha256"), warehouse.ManifestDigest(oraw), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "manifest.json"), oraw, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", old, "--full"); res.code != 0 {
		t.Fatalf("verify of the old version: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	ro, err := warehouse.Open(old, warehouse.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if _, err := ro.Episodes(context.Background()); !errors.Is(err, warehouse.ErrNoEpisodes) || !strings.Contains(err.Error(), "WAREHOUSE_CLEAR=1") {
		t.Fatalf("windows over the old version: %v", err)
	}
	fx.Old = old

	// A flipped byte in episodes.bin: verify names it, the reader refuses.
	bad := filepath.Join(t.TempDir(), filepath.Base(dir))
	if err := os.CopyFS(bad, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	flipped := slices.Clone(episodesBytes)
	flipped[len(flipped)-1] ^= 1
	if err := os.WriteFile(filepath.Join(bad, "episodes.bin"), flipped, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", bad); res.code == 0 || !strings.Contains(res.stdout+res.stderr, "episodes.bin") {
		t.Fatalf("verify of a flipped episodes.bin: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	rb, err := warehouse.Open(bad, warehouse.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rb.Close()
	if _, err := rb.Episodes(context.Background()); !errors.Is(err, warehouse.ErrEpisodes) {
		t.Fatalf("windows over a flipped episodes.bin: %v", err)
	}

	// Python: the same windows, the statistics against numpy, the loader,
	// the old version's refusal; then the example trains.
	requirePython(t, "numpy", "torch")
	data := t.TempDir()
	writeJSON(t, filepath.Join(data, "windows.json"), fx)
	env := append(os.Environ(), "PYTHONPATH="+mustAbs(t, "../../python"), "WAREHOUSE_ETL_WINDOWS="+filepath.Join(data, "windows.json"))
	cmd := exec.Command(debianPython, "-m", "unittest", "-v", "tests.test_windows")
	cmd.Dir, cmd.Env = mustAbs(t, "../../python"), env
	start := time.Now()
	out, err := cmd.CombinedOutput()
	t.Logf("python -m unittest tests.test_windows (%.1fs):\n%s", time.Since(start).Seconds(), out)
	if err != nil || bytes.Contains(out, []byte("skipped")) {
		t.Fatalf("python window tests failed or skipped: %v", err)
	}

	example := func(path string, steps int) (string, int) {
		cmd := exec.Command(debianPython, mustAbs(t, "../../examples/train_policy.py"), "--tensor-warehouse", path, "--steps", strconv.Itoa(steps))
		cmd.Env = env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		_ = cmd.Run() // the exit code says it
		return stdout.String() + stderr.String(), cmd.ProcessState.ExitCode()
	}
	text, code := example(outRoot, 40)
	var losses []float64
	for _, mm := range regexp.MustCompile(`(?m)^step \d+ epoch \d+ loss ([0-9.]+) valid (\d+)/(\d+) `).FindAllStringSubmatch(text, -1) {
		v, _ := strconv.ParseFloat(mm[1], 64)
		losses = append(losses, v)
		if mm[2] == mm[3] {
			t.Logf("a batch with every action step valid: %s", mm[0])
		}
	}
	if code != 0 || len(losses) != 40 || !(losses[len(losses)-1] < losses[0]/4) {
		t.Fatalf("train_policy.py: exit %d, losses %v\n%s", code, losses, text)
	}
	if text, code := example(old, 1); code != 2 || !strings.Contains(text, "no episode index") {
		t.Fatalf("train_policy.py on a version from before windows: exit %d, want 2 naming the episode index\n%s", code, text)
	}
}

func windowsRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestEpisodeWindowsKDBAndRoverd: the other episode sources' demos get an
// episode index too, and every window of every extra reads, for each
// offset, the extras the shards hold for the sample samples.jsonl places
// at that step of that episode (or the nearest kept one, masked).
func TestEpisodeWindowsKDBAndRoverd(t *testing.T) {
	for name, config := range map[string]func(*testing.T) (string, string){"kdb": pinnedKDBConfig, "roverd": roverdConfig} {
		t.Run(name, func(t *testing.T) {
			cfgPath, _ := config(t)
			dir, _ := mustBuild(t, cfgPath, nil)
			r, err := warehouse.Open(dir, warehouse.OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ep, err := r.Episodes(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			// (source index, frame) -> sample index, from samples.jsonl.
			type key struct {
				src  int64
				step int64
			}
			at := map[key]int{}
			steps := map[int64][]int64{}
			for _, rec := range readSamples(t, dir) {
				if rec.Kept {
					at[key{rec.SourceIndex, int64(rec.Frame)}] = int(rec.Index)
					steps[rec.SourceIndex] = append(steps[rec.SourceIndex], int64(rec.Frame))
				}
			}
			if len(at) != r.Len() || r.Len() == 0 {
				t.Fatalf("%d kept lines, %d samples", len(at), r.Len())
			}
			masked := 0
			for ki := range at {
				i := at[ki]
				for _, x := range r.Manifest().Extras {
					dim := 1
					for _, d := range x.Shape {
						dim *= d
					}
					offsets := []int{-2, -1, 0, 1, 2}
					dst, valid := make([]float32, len(offsets)*dim), make([]bool, len(offsets))
					if err := ep.Window(i, x, offsets, dst, valid); err != nil {
						t.Fatal(err)
					}
					for k, d := range offsets {
						target := ki.step + int64(d)
						j, ok := at[key{ki.src, target}]
						if !ok {
							masked++
							ss := steps[ki.src]
							j = -1
							for _, s := range ss {
								if d > 0 && s <= target || d < 0 && s >= target && j < 0 {
									j = at[key{ki.src, s}]
								}
							}
						}
						s, err := r.Sample(j)
						if err != nil {
							t.Fatal(err)
						}
						want := s.Extras()[x.Offset : x.Offset+dim]
						if valid[k] != ok || !slices.Equal(dst[k*dim:(k+1)*dim], want) {
							t.Fatalf("sample %d (source %d step %d) %s offset %d: %v valid %v, want %v (sample %d) valid %v",
								i, ki.src, ki.step, x.Name, d, dst[k*dim:(k+1)*dim], valid[k], want, j, ok)
						}
					}
				}
			}
			if masked == 0 {
				t.Fatal("no masked position: episode ends not exercised")
			}
		})
	}
}
