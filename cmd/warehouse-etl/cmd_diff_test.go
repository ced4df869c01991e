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

	"warehouse-etl/analytics"
	"warehouse-etl/warehouse"
)

func TestDiffCommand(t *testing.T) {
	cfgB, _ := writeConfig(t, demoRoot(t), nil)
	dirB, _ := mustBuild(t, cfgB, nil)
	cfgA, outA := writeConfig(t, demoRoot(t), map[string]any{"skip_empty": true})
	dirA, _ := mustBuild(t, cfgA, nil)
	ma, _ := warehouse.ReadManifest(dirA)
	mb, _ := warehouse.ReadManifest(dirB)
	// skip_empty drops the samples with the empty reason: the kept share
	// moves by that many samples out of all of them.
	keptDrift := float64(mb.Summary.Total.Kept-ma.Summary.Total.Kept) / float64(mb.Summary.Total.Total)
	if keptDrift <= 0 {
		t.Fatalf("skip_empty kept %d of %d samples, without it %d", ma.Summary.Total.Kept, ma.Summary.Total.Total, mb.Summary.Total.Kept)
	}
	noLimits := []string{"--max-ratio-change", "off", "--max-class-share-change", "off", "--max-box-size-ks", "off", "--max-image-stat-change", "off"}

	t.Run("against itself", func(t *testing.T) {
		res := runCLI(t, context.Background(), nil, "diff", "--tensor-warehouse", outA, "--against", dirA)
		if res.code != 0 {
			t.Fatalf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
		for _, want := range []string{
			fmt.Sprintf("A  %.16s  %s\nB  %.16s  %s\n", ma.Version, dirA, ma.Version, dirA),
			"config changes (version recipe and thresholds; B -> A)\n  none\n",
			"no drift limit exceeded",
		} {
			if !strings.Contains(res.stdout, want) {
				t.Errorf("stdout lacks %q:\n%s", want, res.stdout)
			}
		}
	})

	t.Run("limit exceeded", func(t *testing.T) {
		args := append([]string{"diff", "--tensor-warehouse", dirA, "--against", dirB}, noLimits...)
		args = append(args, "--max-ratio-change", fmt.Sprint(keptDrift/2))
		res := runCLI(t, context.Background(), nil, args...)
		if res.code != exitDrift {
			t.Fatalf("exit %d, want %d\n%s%s", res.code, exitDrift, res.stdout, res.stderr)
		}
		keptLine := regexp.MustCompile(fmt.Sprintf(`(?m)^\s+kept\s+%d\s+%d\s+-%d\s+%.4f\s+%.4f\s+EXCEEDED\s*$`,
			ma.Summary.Total.Kept, mb.Summary.Total.Kept, mb.Summary.Total.Kept-ma.Summary.Total.Kept, keptDrift, keptDrift/2))
		if !keptLine.MatchString(res.stdout) {
			t.Errorf("no kept row with the drift and EXCEEDED:\n%s", res.stdout)
		}
		if !strings.Contains(res.stdout, `  skip_empty: "false" -> "true"`) {
			t.Errorf("config change not shown:\n%s", res.stdout)
		}
		if !strings.Contains(res.stderr, fmt.Sprintf("samples/kept drift %.4g > limit %.4g", keptDrift, keptDrift/2)) {
			t.Errorf("stderr does not name the exceeded metric:\n%s", res.stderr)
		}
	})

	t.Run("limits off", func(t *testing.T) {
		res := runCLI(t, context.Background(), nil, append([]string{"diff", "--tensor-warehouse", dirA, "--against", dirB}, noLimits...)...)
		if res.code != 0 || !strings.Contains(res.stdout, "no drift limit exceeded") {
			t.Fatalf("exit %d\n%s%s", res.code, res.stdout, res.stderr)
		}
	})

	t.Run("json and parquet", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "diff.parquet")
		res := runCLI(t, context.Background(), nil, "diff", "--tensor-warehouse", dirA, "--against", dirB, "--json",
			"--max-ratio-change", "0", "--parquet", out)
		if res.code != exitDrift {
			t.Fatalf("exit %d\n%s", res.code, res.stderr)
		}
		var d analytics.Diff
		if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
			t.Fatalf("stdout is not JSON: %v\n%s", err, res.stdout)
		}
		if d.A.Version != ma.Version || d.B.Version != mb.Version || d.Exceeded == 0 || len(d.ConfigChanges) != 1 || *d.Limits.RatioChange != 0 {
			t.Fatalf("JSON %+v", d)
		}
		if st, err := os.Stat(out); err != nil || st.Size() == 0 {
			t.Fatalf("diff.parquet: %v", err)
		}
	})

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no against", []string{"diff", "--tensor-warehouse", dirA}, exitUsage, "--tensor-warehouse and --against are required"},
		{"bad limit", []string{"diff", "--tensor-warehouse", dirA, "--against", dirB, "--max-ratio-change", "-1"}, exitUsage,
			`invalid value "-1" for flag -max-ratio-change: want a number >= 0 or off`},
		{"not a warehouse", []string{"diff", "--tensor-warehouse", dirA, "--against", t.TempDir()}, exitFailure, "neither a warehouse version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := runCLI(t, context.Background(), nil, tc.args...)
			if res.code != tc.code || !strings.Contains(res.stderr, tc.want) {
				t.Fatalf("exit %d, want %d; stderr lacks %q:\n%s", res.code, tc.code, tc.want, res.stderr)
			}
		})
	}
}
