package main

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"warehouse-etl/warehouse"
)

// --version, -version and -v are the version command.
func TestVersionFlag(t *testing.T) {
	want := runCLI(t, context.Background(), nil, "version")
	if want.code != exitOK || !strings.HasPrefix(want.stdout, "warehouse-etl/") {
		t.Fatalf("version: exit %d\n%s%s", want.code, want.stdout, want.stderr)
	}
	for _, flag := range []string{"--version", "-version", "-v"} {
		got := runCLI(t, context.Background(), nil, flag)
		if got != want {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want version's %q", flag, got.code, got.stdout, got.stderr, want.stdout)
		}
	}
}

// help <command> prints that command's usage, as <command> -h does, not
// the general one; help of an unknown command is a usage error.
func TestHelpCommand(t *testing.T) {
	for _, args := range [][]string{{"build"}, {"gc"}, {"inspect"}, {"export", "zarr"}, {"export"}} {
		want := runCLI(t, context.Background(), nil, append(args, "-h")...)
		got := runCLI(t, context.Background(), nil, append([]string{"help"}, args...)...)
		if got != want || got.code != exitOK {
			t.Errorf("help %s: exit %d\n%s\nwant (%s -h, exit %d):\n%s", strings.Join(args, " "), got.code, got.stderr, strings.Join(args, " "), want.code, want.stderr)
		}
		if !strings.HasPrefix(got.stderr, "usage: warehouse-etl "+strings.Join(args, " ")) || strings.Contains(got.stderr, "\ncommands:\n") {
			t.Errorf("help %s is not the command's usage:\n%s", strings.Join(args, " "), got.stderr)
		}
	}
	general := runCLI(t, context.Background(), nil, "help")
	if general.code != exitOK || !strings.Contains(general.stderr, "\ncommands:\n") {
		t.Errorf("help: exit %d\n%s", general.code, general.stderr)
	}
	res := runCLI(t, context.Background(), nil, "help", "nosuch")
	if res.code != exitUsage || !strings.Contains(res.stderr, `unknown command "nosuch"`) {
		t.Errorf("help nosuch: exit %d\n%s", res.code, res.stderr)
	}
}

// gc without --keep says --keep is required; --keep 0 says why 0 is
// refused.
func TestGCKeepRequired(t *testing.T) {
	root := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"gc", "--output-root", root, "--dry-run"}, "warehouse-etl gc: --keep is required\n"},
		{[]string{"gc", "--dry-run"}, "warehouse-etl gc: --output-root is required\n"},
		{[]string{"gc", "--output-root", root, "--keep", "0"}, "warehouse-etl gc: --keep 0: keep at least 1 version\n"},
		{[]string{"gc", "--output-root", root, "--keep", "x"}, `invalid value "x" for flag -keep: not a whole number`},
	} {
		res := runCLI(t, context.Background(), nil, c.args...)
		if res.code != exitUsage || !strings.Contains(res.stderr, c.want) {
			t.Errorf("%v: exit %d, want %d and %q:\n%s", c.args, res.code, exitUsage, c.want, res.stderr)
		}
	}
	if res := runCLI(t, context.Background(), nil, "gc", "--output-root", root, "--keep", "1", "--dry-run"); res.code != exitOK {
		t.Errorf("gc --keep 1: exit %d\n%s", res.code, res.stderr)
	}
}

// inspect --sample past the last sample is a usage error (exit 2) naming
// the range.
func TestInspectSampleOutOfRange(t *testing.T) {
	dir, _ := smallDemo(t, nil)
	m, err := warehouse.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := int(m.Samples)
	res := runCLI(t, context.Background(), nil, "inspect", "--tensor-warehouse", dir, "--sample", "99")
	want := "warehouse-etl inspect: --sample 99: " + dir + " has " + strconv.Itoa(n) + " samples (0 to " + strconv.Itoa(n-1) + ")\n"
	if res.code != exitUsage || res.stderr != want {
		t.Fatalf("exit %d, stderr %q; want %d, %q", res.code, res.stderr, exitUsage, want)
	}
	if res := runCLI(t, context.Background(), nil, "inspect", "--tensor-warehouse", dir, "--sample", strconv.Itoa(n-1), "--quiet"); res.code != exitOK {
		t.Fatalf("the last sample: exit %d\n%s", res.code, res.stderr)
	}
}

// Every command but version takes --quiet and --log-format (issue 27: the
// logOptions of flags.go), and on inspect, diff and gc, which had none,
// they do what they say: --quiet logs nothing at info, json logs JSON
// lines, another format is a usage error.
func TestLogFlagsOnEveryCommand(t *testing.T) {
	var names [][]string
	for _, c := range commands {
		switch c.name {
		case "version":
			continue
		case "export":
			for _, f := range exportFormats {
				names = append(names, []string{"export", f.name})
			}
			continue
		}
		names = append(names, []string{c.name})
	}
	for _, name := range names {
		res := runCLI(t, context.Background(), nil, append(name, "-h")...)
		if !strings.Contains(res.stderr, "\n  -log-format string\n") || !strings.Contains(res.stderr, "\n  -quiet\n") {
			t.Errorf("%s -h lists no -log-format and -quiet:\n%s", strings.Join(name, " "), res.stderr)
		}
	}

	dir, outRoot := smallDemo(t, nil)
	for _, args := range [][]string{
		{"inspect", "--tensor-warehouse", dir, "--sample", "0"},
		{"diff", "--tensor-warehouse", dir, "--against", dir},
		{"gc", "--output-root", outRoot, "--keep", "1", "--dry-run"},
	} {
		quiet := runCLI(t, context.Background(), nil, append(args, "--quiet")...)
		if quiet.code != exitOK || quiet.stderr != "" {
			t.Errorf("%s --quiet: exit %d, stderr:\n%s", args[0], quiet.code, quiet.stderr)
		}
		js := runCLI(t, context.Background(), nil, append(args, "--log-format", "json")...)
		lines := strings.Split(strings.TrimSpace(js.stderr), "\n")
		if js.code != exitOK || js.stderr == "" {
			t.Errorf("%s --log-format json: exit %d, stderr %q", args[0], js.code, js.stderr)
		}
		for _, l := range lines {
			var rec map[string]any
			if err := json.Unmarshal([]byte(l), &rec); err != nil || rec["level"] != "INFO" {
				t.Errorf("%s --log-format json: line %q: %v", args[0], l, err)
			}
		}
		bad := runCLI(t, context.Background(), nil, append(args, "--log-format", "xml")...)
		if bad.code != exitUsage || !strings.Contains(bad.stderr, `--log-format "xml": want text or json`) {
			t.Errorf("%s --log-format xml: exit %d\n%s", args[0], bad.code, bad.stderr)
		}
	}
}

// verify --full and export zarr show their progress as build does: a bar
// on a terminal (ending at all bytes done), a progress log line
// otherwise (at least the one at the end), nothing with --quiet.
func TestProgressOnVerifyAndExport(t *testing.T) {
	dir, _ := smallDemo(t, nil)
	store := filepath.Join(t.TempDir(), "s.zarr")
	for _, c := range []struct {
		what string
		args []string
	}{
		{"verify --full", []string{"verify", "--tensor-warehouse", dir, "--full"}},
		{"export zarr", []string{"export", "zarr", "--tensor-warehouse", dir, "--out", store}},
	} {
		// On a terminal: the bar, drawn last with every byte done.
		var out, errw bytes.Buffer
		e := &environment{streams: streams{stdout: &out, stderr: &errw, stderrIsTTY: true}, getenv: func(string) string { return "" }}
		if code := run(context.Background(), e, c.args); code != exitOK {
			t.Fatalf("%s on a terminal: exit %d\n%s", c.what, code, errw.String())
		}
		draws := strings.Split(strings.TrimSuffix(errw.String(), "\n"), "\r")
		last := draws[len(draws)-1]
		bar := regexp.MustCompile(`^` + regexp.QuoteMeta(c.what) + ` \[#{30}\] ([0-9.]+)/([0-9.]+) MB  [0-9.]+ MB/s $`)
		if m := bar.FindStringSubmatch(last); m == nil || m[1] != m[2] || m[1] == "0.0" {
			t.Errorf("%s on a terminal: last draw %q of stderr:\n%q", c.what, last, errw.String())
		}
		if strings.Contains(errw.String(), "level=INFO") {
			t.Errorf("%s on a terminal also logged at info:\n%s", c.what, errw.String())
		}
		// Not a terminal: progress log lines, the last with every byte done.
		res := runCLI(t, context.Background(), nil, append(c.args, "--log-format", "json")...)
		var lastProgress map[string]any
		for _, l := range strings.Split(strings.TrimSpace(res.stderr), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(l), &rec); err == nil && rec["msg"] == "progress" {
				lastProgress = rec
			}
		}
		if res.code != exitOK || lastProgress == nil || lastProgress["what"] != c.what ||
			lastProgress["bytes_done"] != lastProgress["bytes_total"] || lastProgress["bytes_done"] == 0.0 {
			t.Errorf("%s: exit %d, last progress line %v:\n%s", c.what, res.code, lastProgress, res.stderr)
		}
		if res := runCLI(t, context.Background(), nil, append(c.args, "--quiet")...); res.code != exitOK || res.stderr != "" {
			t.Errorf("%s --quiet: exit %d, stderr:\n%s", c.what, res.code, res.stderr)
		}
	}
}
