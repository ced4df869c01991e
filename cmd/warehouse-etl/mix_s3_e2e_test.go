package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestS3LoadMix: load --mix takes s3:// parts (each downloaded and checked
// like --tensor-warehouse, in both flag spellings) and reads the same
// batches as the local versions they were built from.
func TestS3LoadMix(t *testing.T) {
	s3Setup(t)
	local, _ := mustBuild(t, mustConfig(t), nil)
	const url = "s3://" + s3Bucket + "/mix"
	cfgPath, _ := writeConfig(t, demoRoot(t), map[string]any{"output_root": url})
	mustBuild(t, cfgPath, s3CLIEnv(t))
	indices := func(args ...string) []byte {
		t.Helper()
		out := filepath.Join(t.TempDir(), "ix")
		rep, res := loadJSON(t, s3CLIEnv(t), append(args, "--batch", "4", "--indices", out)...)
		if res.code != exitOK {
			t.Fatalf("load %v: exit %d\n%s", args, res.code, res.stderr)
		}
		if strings.Contains(args[1], "s3://") && !strings.Contains(rep.Dir, url) {
			t.Fatalf("load %v: report dir %q does not name %s", args, rep.Dir, url)
		}
		b, err := os.ReadFile(out)
		if err != nil || len(b) == 0 {
			t.Fatalf("indices: %v (%d bytes)", err, len(b))
		}
		return b
	}
	want := indices("--mix", local+"=1", "--mix", local+"=2")
	got := indices("--mix", url+"=1", "--mix="+url+"/"+filepath.Base(local)+"=2")
	if !bytes.Equal(got, want) {
		t.Fatal("load --mix of s3:// parts read other batches than of the local versions")
	}
}
