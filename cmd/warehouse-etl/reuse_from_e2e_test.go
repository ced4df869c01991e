package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReuseFromMustExist: --reuse-from that names no directory, a file, or
// an s3:// location is a usage error naming it; an existing output root
// (even one with no version yet) is taken.
func TestReuseFromMustExist(t *testing.T) {
	cfg := mustConfig(t)
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "nothing-here")
	for _, p := range []string{missing, file, "s3://bucket/root"} {
		res := runCLI(t, context.Background(), nil, "build", "--config", cfg, "--reuse-from", p)
		if res.code != exitUsage || !strings.Contains(res.stderr, "--reuse-from "+p) {
			t.Fatalf("--reuse-from %s: exit %d, want %d naming it\n%s", p, res.code, exitUsage, res.stderr)
		}
	}
	mustBuild(t, cfg, nil, "--reuse-from", t.TempDir())
}

// TestS3ReuseSkipsMetadataOnlyVersions: on an s3:// root the mirror keeps
// only the metadata of the versions it uploaded; a second build (another
// version) on the same machine skips them with one info line, no warning
// per version.
func TestS3ReuseSkipsMetadataOnlyVersions(t *testing.T) {
	s3Setup(t)
	const url = "s3://" + s3Bucket + "/reuse"
	env := s3CLIEnv(t)
	cfgA, _ := writeConfig(t, demoRoot(t), map[string]any{"output_root": url})
	cfgB, _ := writeConfig(t, demoRoot(t), map[string]any{"output_root": url, "shard_target_mb": 2})
	mustBuild(t, cfgA, env)
	_, res := mustBuild(t, cfgB, env)
	if strings.Contains(res.stderr, "not reusing the samples of a version") || !strings.Contains(res.stderr, "not reusing versions whose shards are not on this machine") {
		t.Fatalf("second build on the s3 root's mirror:\n%s", res.stderr)
	}
}
