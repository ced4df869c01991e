package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// legacyWarehouses are the versions in testdata/legacy, built by
// warehouse-etl/3 before shard versions named features (their shards carry
// shard_version 1), with the config that built them (testdata/legacy/README.md).
var legacyWarehouses = []struct {
	name, rel, dtype string
	version          shard.Version // the shard_version a build writes now
}{
	{"legacy-f16", "etl3-f16/v479317a0303ab2f5", "f16", shard.Version3},
	{"legacy-u8", "etl3-u8/v4b86d7ed432eb1da", "u8", shard.Version4},
}

// copyLegacy copies testdata/legacy/<rel> into a temp output root with a
// latest pointer and returns the root and the version directory.
func copyLegacy(t *testing.T, rel string) (root, dir string) {
	t.Helper()
	dir = copyVersion(t, mustAbs(t, filepath.Join("../../testdata/legacy", filepath.FromSlash(rel))))
	root = filepath.Dir(dir)
	if err := os.Symlink(filepath.Base(dir), filepath.Join(root, "latest")); err != nil {
		t.Fatal(err)
	}
	return root, dir
}

// TestLegacyWarehouse: the checked-in warehouses of warehouse-etl/3 pass
// verify --full, and a build of the same config with today's code writes
// the same shards but for the shard_version field (1 then, 3 or 4 now): the
// one deliberate change of warehouse-etl/4.
func TestLegacyWarehouse(t *testing.T) {
	for _, lw := range legacyWarehouses {
		t.Run(lw.name, func(t *testing.T) {
			root, dir := copyLegacy(t, lw.rel)
			res := runCLI(t, context.Background(), nil, "verify", "--tensor-warehouse", root, "--full", "--quiet")
			if res.code != exitOK {
				t.Fatalf("verify --full of %s: exit %d\n%s%s", dir, res.code, res.stdout, res.stderr)
			}
			old, err := warehouse.ReadManifest(dir)
			if err != nil {
				t.Fatal(err)
			}

			cfgPath, _ := writeConfig(t, mustAbs(t, "../../testdata/yolo"), map[string]any{
				"source":          map[string]any{"kind": "yolo", "root": mustAbs(t, "../../testdata/yolo"), "split": "train"},
				"target_size":     []int{16, 12},
				"resize_mode":     "letterbox",
				"pad_value":       114,
				"dtype":           lw.dtype,
				"max_boxes":       4,
				"shard_target_mb": 0.01,
				"thresholds": map[string]any{
					"invalid": map[string]any{"max_ratio": 0.5, "action": "fail"},
					"missing": map[string]any{"max_ratio": 0.25, "action": "fail"},
					"empty":   map[string]any{"max_ratio": 0.3, "action": "warn"},
				},
			})
			now, _ := mustBuild(t, cfgPath, nil, "--quiet")
			m, err := warehouse.ReadManifest(now)
			if err != nil {
				t.Fatal(err)
			}
			if m.CodeVersion != "warehouse-etl/4" || m.DefaultShardVersion != uint32(lw.version) || len(m.Shards) != len(old.Shards) {
				t.Fatalf("rebuild: code_version %s, default_shard_version %d, %d shards; want warehouse-etl/4, %d, %d",
					m.CodeVersion, m.DefaultShardVersion, len(m.Shards), lw.version, len(old.Shards))
			}
			for k, e := range m.Shards {
				if e.ShardVersion != uint32(lw.version) {
					t.Errorf("%s: manifest shard_version %d, want %d", e.ID, e.ShardVersion, lw.version)
				}
				was, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(old.Shards[k].RelativePath)))
				if err != nil {
					t.Fatal(err)
				}
				is, err := os.ReadFile(filepath.Join(now, filepath.FromSlash(e.RelativePath)))
				if err != nil {
					t.Fatal(err)
				}
				if len(is) != len(was) {
					t.Fatalf("%s: %d bytes, warehouse-etl/3 wrote %d", e.ID, len(is), len(was))
				}
				for i := range is {
					switch {
					case i == 4 && (was[i] != 1 || is[i] != byte(lw.version)):
						t.Errorf("%s: shard_version byte %d, warehouse-etl/3 wrote %d; want %d and 1", e.ID, is[i], was[i], lw.version)
					case i != 4 && is[i] != was[i]:
						t.Fatalf("%s: byte %d is %#x, warehouse-etl/3 wrote %#x: only the shard_version may differ", e.ID, i, is[i], was[i])
					}
				}
			}
		})
	}
}

// legacyFixtures are the checked-in warehouses of warehouse-etl/3 with the
// Go reader's view of them, for the Python tests (python/tests/test_legacy.py).
func legacyFixtures(t *testing.T, data string) []refFixture {
	t.Helper()
	var out []refFixture
	for _, lw := range legacyWarehouses {
		root, dir := copyLegacy(t, lw.rel)
		f := refFixture{Name: lw.name, Root: root, Dir: dir, Ref: filepath.Join(data, "ref", lw.name)}
		f.Samples, f.DType = dumpReference(t, dir, f.Ref)
		out = append(out, f)
	}
	return out
}
