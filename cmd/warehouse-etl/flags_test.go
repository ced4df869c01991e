package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestRequireFlags checks the one required-flags helper's verdicts and
// messages (the ones the commands printed before it existed).
func TestRequireFlags(t *testing.T) {
	a, b := flagValue{"tensor-warehouse", "x"}, flagValue{"out", "y"}
	noA, noB := flagValue{"tensor-warehouse", ""}, flagValue{"out", ""}
	tests := []struct {
		name  string
		err   error
		want  string // "" for nil
		oneOf bool
	}{
		{"one given", requireFlags(a), "", false},
		{"one missing", requireFlags(noA), "--tensor-warehouse is required", false},
		{"both given", requireFlags(a, b), "", false},
		{"second missing", requireFlags(a, noB), "--tensor-warehouse and --out are required", false},
		{"both missing", requireFlags(noA, noB), "--tensor-warehouse and --out are required", false},
		{"three missing", requireFlags(noA, noB, flagValue{"config", ""}), "--tensor-warehouse, --out and --config are required", false},
		{"one of, first given", requireOneFlag(a, noB), "", true},
		{"one of, second given", requireOneFlag(noA, b), "", true},
		{"one of, none given", requireOneFlag(noA, noB), "--tensor-warehouse or --out is required", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want == "" {
				if tt.err != nil {
					t.Fatalf("got %v, want nil", tt.err)
				}
				return
			}
			if tt.err == nil || tt.err.Error() != tt.want {
				t.Fatalf("got %v, want %q", tt.err, tt.want)
			}
			if code := exitCode(context.Background(), tt.err); code != exitUsage {
				t.Errorf("exit code %d, want %d", code, exitUsage)
			}
		})
	}
}

// TestRunFunctionsCheckRequiredFlags runs each command's run function
// directly with empty options: each stops at its required flags, with the
// usage error and nothing written (the flag step prints the usage).
func TestRunFunctionsCheckRequiredFlags(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(streams) error
		want string
	}{
		{"build", func(s streams) error { return runBuild(ctx, buildOptions{}, s) }, "--config is required"},
		{"commit", func(s streams) error { return runCommit(ctx, commitOptions{}, s) }, "--config is required"},
		{"verify", func(s streams) error { return runVerify(ctx, verifyOptions{}, s) }, "--tensor-warehouse is required"},
		{"inspect", func(s streams) error { return runInspect(ctx, inspectOptions{}, s) }, "--tensor-warehouse is required"},
		{"load", func(s streams) error {
			return runLoad(ctx, loadOptions{Shuffle: "global", Remainder: "drop", Epochs: 1}, s)
		}, "--tensor-warehouse or --config is required"},
		{"diff", func(s streams) error { return runDiff(ctx, diffOptions{Path: "a"}, s) }, "--tensor-warehouse and --against are required"},
		{"gc", func(s streams) error { return runGC(ctx, gcOptions{Keep: 1}, s) }, "--output-root is required"},
		{"export parquet", func(s streams) error { return runExportParquet(ctx, exportParquetOptions{}, s) }, "--tensor-warehouse is required"},
		{"export zarr", func(s streams) error { return runExportZarr(ctx, exportZarrOptions{Out: "x"}, s) }, "--tensor-warehouse and --out are required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errw bytes.Buffer
			err := tt.run(streams{stdout: &out, stderr: &errw})
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			if code := exitCode(ctx, err); code != exitUsage {
				t.Errorf("exit code %d, want %d", code, exitUsage)
			}
			if out.Len()+errw.Len() > 0 {
				t.Errorf("wrote stdout %q, stderr %q", out.String(), errw.String())
			}
		})
	}
}

// TestFlagStepFillsOptions checks that the flag step fills a command's
// options from its flags and, for a command that reads the environment,
// from getenv, and that a missing required flag prints the usage.
func TestFlagStepFillsOptions(t *testing.T) {
	env := map[string]string{"WAREHOUSE_CLEAR": "yes", "WAREHOUSE_MAX_INVALID": "3"}
	var errw bytes.Buffer
	e := &environment{streams: streams{stdout: &bytes.Buffer{}, stderr: &errw}, getenv: func(k string) string { return env[k] }}
	var got buildOptions
	step := flagStep("build", buildSynopsis, func(_ context.Context, opts buildOptions, _ streams) error {
		got = opts
		return nil
	})
	if err := step(context.Background(), e, []string{"--config", "c.jsonc", "--workers", "3", "--lock-wait", "1m", "--quiet"}); err != nil {
		t.Fatal(err)
	}
	if got.Config != "c.jsonc" || got.Workers != 3 || got.LockWait.Minutes() != 1 || !got.Log.Quiet || got.Log.Format != "text" {
		t.Errorf("flags: got %+v", got)
	}
	if !got.Clear || got.Getenv == nil || got.Getenv("WAREHOUSE_MAX_INVALID") != "3" {
		t.Errorf("environment: Clear %v, Getenv %v", got.Clear, got.Getenv != nil)
	}

	errw.Reset()
	err := flagStep("verify", verifySynopsis, runVerify)(context.Background(), e, nil)
	if err == nil || err.Error() != "--tensor-warehouse is required" {
		t.Fatalf("verify without flags: %v", err)
	}
	if !strings.HasPrefix(errw.String(), "usage: warehouse-etl verify --tensor-warehouse PATH") {
		t.Errorf("verify without flags printed %q, want its usage", errw.String())
	}
}
