package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNothingFollowedOutOfOutputRoot plants, at every name a build or gc
// uses under the output root, a symbolic link to a directory or file
// outside it (a copy of a real version, with a sentinel file), runs the
// operation and checks that nothing outside changed, and that a name
// which must be a directory (or "latest", which must be a link) is refused
// with an error naming it (issue 23 item 2).
func TestNothingFollowedOutOfOutputRoot(t *testing.T) {
	data := t.TempDir()
	greyDataset(t, data, 6, 90)
	cfg, outRoot := greyConfig(t, data, nil)
	dir, _ := mustBuild(t, cfg, nil)
	v := filepath.Base(dir)
	version := t.TempDir()
	crashCopyTree(t, dir, version)
	if err := os.RemoveAll(outRoot); err != nil {
		t.Fatal(err)
	}
	clear := map[string]string{"WAREHOUSE_CLEAR": "1"}
	build := []string{"build", "--config", cfg}
	gc := []string{"gc", "--output-root", outRoot, "--keep", "1"}

	for _, c := range []struct {
		name      string // planted under the output root
		file      bool   // the link points at a file, not a directory
		published bool   // a real version is published first
		env       map[string]string
		args      []string
		code      int
		refused   string // in stderr when code != 0
	}{
		{name: "." + v + ".staging", args: build, code: 1, refused: "is a symbolic link, not a directory: refused"},
		{name: "." + v + ".staging", published: true, env: clear, args: build, code: 1, refused: "is a symbolic link, not a directory: refused"},
		{name: "." + v + ".staging", published: true, args: gc},
		{name: v, args: build, code: 1, refused: "is a symbolic link, not a directory: refused"},
		{name: v, env: clear, args: build, code: 1, refused: "is a symbolic link, not a directory: refused"},
		{name: v, args: gc},
		{name: "." + v + ".tmp-0123456789ab", args: build},
		{name: "." + v + ".tmp-0123456789ab", published: true, args: gc},
		{name: "." + v + ".tmp-old", published: true, env: clear, args: build},
		{name: "." + v + ".tmp-gc", published: true, args: gc},
		{name: "." + v + ".lock", file: true, args: build, code: 1, refused: "too many levels of symbolic links"},
		{name: "." + v + ".readers", file: true, args: build},
		{name: "latest", args: build},
		{name: "latest", published: true, env: clear, args: build},
		{name: ".latest.tmp-" + v, file: true, args: build},
	} {
		t.Run(fmt.Sprintf("%s/%s/%v", c.name, c.args[0], c.env != nil), func(t *testing.T) {
			defer os.RemoveAll(outRoot)
			if c.published {
				mustBuild(t, cfg, nil)
			}
			outside := filepath.Join(t.TempDir(), "outside")
			if c.file {
				if err := os.WriteFile(outside, []byte("sentinel\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			} else {
				crashCopyTree(t, version, outside)
				if err := os.WriteFile(filepath.Join(outside, "sentinel"), []byte("x"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.MkdirAll(outRoot, 0o755); err != nil {
				t.Fatal(err)
			}
			link := filepath.Join(outRoot, c.name)
			os.RemoveAll(link)
			if err := os.Symlink(outside, link); err != nil {
				t.Fatal(err)
			}
			before := treeState(t, filepath.Dir(outside))
			res := runCLI(t, context.Background(), c.env, c.args...)
			if after := treeState(t, filepath.Dir(outside)); fmt.Sprint(after) != fmt.Sprint(before) {
				t.Errorf("outside changed:\nbefore %v\nafter  %v", before, after)
			}
			if res.code != c.code {
				t.Fatalf("exit %d, want %d\n%s", res.code, c.code, res.stderr)
			}
			if c.code != 0 && !strings.Contains(res.stderr, link+": ") && !strings.Contains(res.stderr, link+" ") {
				t.Errorf("the error does not name %s:\n%s", link, res.stderr)
			}
			if c.refused != "" && !strings.Contains(res.stderr, c.refused) {
				t.Errorf("stderr lacks %q:\n%s", c.refused, res.stderr)
			}
		})
	}

	// A "latest" that is not a link is refused, never replaced.
	t.Run("latest/file", func(t *testing.T) {
		defer os.RemoveAll(outRoot)
		if err := os.MkdirAll(outRoot, 0o755); err != nil {
			t.Fatal(err)
		}
		latest := filepath.Join(outRoot, "latest")
		if err := os.WriteFile(latest, []byte("mine\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		res := runCLI(t, context.Background(), nil, build...)
		if res.code != 9 || !strings.Contains(res.stderr, latest+": is a regular file, not a symbolic link: refused") {
			t.Errorf("exit %d, want 9 naming %s:\n%s", res.code, latest, res.stderr)
		}
		if b, _ := os.ReadFile(latest); string(b) != "mine\n" {
			t.Errorf("latest replaced: %q", b)
		}
	})
}
