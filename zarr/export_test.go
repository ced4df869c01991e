package zarr

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"warehouse-etl/internal/progress"
	"warehouse-etl/outputroot"
	"warehouse-etl/shard"
	"warehouse-etl/verify"
	"warehouse-etl/warehouse"
)

// errInjected is the disk error faultFS returns.
var errInjected = fmt.Errorf("injected: %w", syscall.ENOSPC)

// faultFS is OSFS failing its failAt-th call (counting from 1, every
// method and every File.Write and Close), and recording which call that
// was.
type faultFS struct {
	OSFS
	failAt int64
	calls  atomic.Int64
	failed atomic.Value // string: the operation that failed
}

func (f *faultFS) fail(op, path string) error {
	if f.calls.Add(1) == f.failAt {
		f.failed.Store(op + " " + path)
		return fmt.Errorf("%s %s: %w", op, path, errInjected)
	}
	return nil
}

func (f *faultFS) MkdirAll(p string) error {
	if err := f.fail("mkdir", p); err != nil {
		return err
	}
	return f.OSFS.MkdirAll(p)
}

func (f *faultFS) MkdirTemp(dir, pattern string) (string, error) {
	if err := f.fail("mkdirtemp", dir); err != nil {
		return "", err
	}
	return f.OSFS.MkdirTemp(dir, pattern)
}

func (f *faultFS) Create(p string) (File, error) {
	if err := f.fail("create", p); err != nil {
		return nil, err
	}
	file, err := f.OSFS.Create(p)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f, path: p}, nil
}

func (f *faultFS) Rename(a, b string) error {
	if err := f.fail("rename", a); err != nil {
		return err
	}
	return f.OSFS.Rename(a, b)
}

func (f *faultFS) RemoveAll(p string) error {
	if err := f.fail("removeall", p); err != nil {
		return err
	}
	return f.OSFS.RemoveAll(p)
}

// SyncTree and SyncDir only count: what is tested is what a failure
// leaves, and hundreds of runs of real syncs would take minutes.
func (f *faultFS) SyncTree(p string) error { return f.fail("synctree", p) }

func (f *faultFS) SyncDir(p string) error { return f.fail("syncdir", p) }

type faultFile struct {
	File
	fs   *faultFS
	path string
}

// Write fails after writing half of p, as a full disk does.
func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.fs.fail("write", f.path); err != nil {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, err
	}
	return f.File.Write(p)
}

func (f *faultFile) Close() error {
	if err := f.fs.fail("close", f.path); err != nil {
		f.File.Close()
		return err
	}
	return f.File.Close()
}

// TestWriteFaults fails every file system call of an export in turn, once
// into an empty directory and once over an existing store, and checks that
// the target is then exactly what it was (absent, or the old store) and
// nothing else is left beside it. Only two failures come after the new
// store is in place: removing the replaced store (a warning: it stays
// hidden beside the target), and syncing the directory after the rename
// (an error, with the new store complete at the target).
func TestWriteFaults(t *testing.T) {
	fx := writeFixture(t, tinySpec())
	reference := filepath.Join(t.TempDir(), "ref.zarr")
	noSync := &faultFS{failAt: -1} // never fails, never fsyncs
	if _, err := Write(context.Background(), fx.dir, fx.m, reference, Options{ZstdLevel: 1, FS: noSync}); err != nil {
		t.Fatal(err)
	}
	newStore := treeDigest(t, reference)
	oldFx := writeFixture(t, fixtureSpec{dtype: shard.F32, width: 1, height: 1, maxBoxes: 1, shardSizes: []int{1}})

	for _, replacing := range []bool{false, true} {
		// setup gives a fresh parent directory holding the old store or
		// nothing, and what the old store holds.
		setup := func() (parent string, oldStore map[string][32]byte) {
			parent = t.TempDir()
			if replacing {
				target := filepath.Join(parent, "store.zarr")
				if _, err := Write(context.Background(), oldFx.dir, oldFx.m, target, Options{FS: noSync}); err != nil {
					t.Fatal(err)
				}
				oldStore = treeDigest(t, target)
			}
			return parent, oldStore
		}
		counter := &faultFS{failAt: -1}
		parent, _ := setup()
		if _, err := Write(context.Background(), fx.dir, fx.m, filepath.Join(parent, "store.zarr"), Options{ZstdLevel: 1, Workers: 2, FS: counter}); err != nil {
			t.Fatal(err)
		}
		calls := counter.calls.Load()
		// Fail each of the first calls (parent, temporary directory), each
		// of the last 30 (root document, directory syncs, renames) and
		// every sixth in between (the shard files, which all take the same
		// error path): a file system call costs much here.
		kinds := map[string]int{}
		for failAt := int64(1); failAt <= calls; failAt++ {
			if failAt > 5 && failAt <= calls-30 && failAt%6 != 1 {
				continue
			}
			parent, oldStore := setup()
			target := filepath.Join(parent, "store.zarr")
			fsys := &faultFS{failAt: failAt}
			_, err := Write(context.Background(), fx.dir, fx.m, target, Options{ZstdLevel: 1, Workers: 2, FS: fsys})
			failed, _ := fsys.failed.Load().(string)
			if failed == "" {
				t.Fatalf("replacing=%v: call %d of %d was never made (err %v)", replacing, failAt, calls, err)
			}
			kinds[strings.Fields(failed)[0]]++
			leftover := listing(t, parent)
			switch {
			case strings.HasPrefix(failed, "removeall "+filepath.Join(parent, ".store.zarr.old-")):
				if err != nil || !mapsEqual(treeDigest(t, target), newStore) || len(leftover) != 2 {
					t.Fatalf("%s: err %v, beside %v", failed, err, leftover)
				}
			case errors.Is(err, errInjected) && strings.HasPrefix(failed, "syncdir "+parent) && exists(filepath.Join(target, "images")) && mapsEqual(treeDigest(t, target), newStore):
				// The rename happened; only its sync failed, and said so.
				if !slices.Equal(leftover, []string{"store.zarr"}) {
					t.Fatalf("%s: beside the store: %v", failed, leftover)
				}
			case !errors.Is(err, errInjected):
				t.Fatalf("%s: error %v does not report the injected failure", failed, err)
			case replacing:
				if got := treeDigest(t, target); !mapsEqual(got, oldStore) {
					t.Fatalf("%s: the old store changed", failed)
				}
				if !slices.Equal(leftover, []string{"store.zarr"}) {
					t.Fatalf("%s: beside the store: %v", failed, leftover)
				}
			default:
				if len(leftover) != 0 {
					t.Fatalf("%s: left %v", failed, leftover)
				}
			}
		}
		want := []string{"close", "create", "mkdir", "mkdirtemp", "rename", "syncdir", "synctree", "write"}
		if replacing {
			want = append(want, "removeall")
		}
		for _, k := range want {
			if kinds[k] == 0 {
				t.Errorf("replacing=%v: no %s call was failed (failed: %v)", replacing, k, kinds)
			}
		}
		t.Logf("replacing=%v: failed %v of %d calls", replacing, kinds, calls)
	}
}

func listing(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestWriteRefusesTargets: a target that is not a Zarr store, or that holds
// the warehouse, is never replaced.
func TestWriteRefusesTargets(t *testing.T) {
	fx := writeFixture(t, tinySpec())
	notAStore := t.TempDir()
	os.WriteFile(filepath.Join(notAStore, "notes.txt"), []byte("keep me"), 0o644)
	arrayNode := t.TempDir()
	os.WriteFile(filepath.Join(arrayNode, "zarr.json"), []byte(`{"zarr_format": 3, "node_type": "array"}`), 0o644)
	v2 := t.TempDir()
	os.WriteFile(filepath.Join(v2, "zarr.json"), []byte(`{"zarr_format": 2, "node_type": "group"}`), 0o644)
	file := filepath.Join(t.TempDir(), "file.zarr")
	os.WriteFile(file, []byte("x"), 0o644)
	for _, tc := range []struct {
		name, target, want string
	}{
		{"directory", notAStore, notAStore + " exists and is not a Zarr v3 store (no zarr.json of a group): refusing to replace it"},
		{"array node", arrayNode, arrayNode + " exists and is not a Zarr v3 store (no zarr.json of a group): refusing to replace it"},
		{"zarr v2", v2, v2 + " exists and is not a Zarr v3 store (no zarr.json of a group): refusing to replace it"},
		{"file", file, file + " exists and is not a directory: refusing to replace it"},
		{"the warehouse", fx.dir, "target " + fx.dir + " would contain the warehouse " + fx.dir},
		{"its root", fx.root, "target " + fx.root + " would contain the warehouse " + fx.dir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := treeDigest(t, filepath.Dir(tc.target))
			_, err := Write(context.Background(), fx.dir, fx.m, tc.target, Options{})
			if err == nil || err.Error() != "zarr: "+tc.want {
				t.Fatalf("error %v\nwant zarr: %s", err, tc.want)
			}
			if !mapsEqual(treeDigest(t, filepath.Dir(tc.target)), before) {
				t.Fatal("a refused export changed files")
			}
		})
	}
}

// TestWriteChecksShards: shards that disagree with the manifest are an
// error naming the shard, and no store appears.
func TestWriteChecksShards(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(fx *fixture)
		want   string
	}{
		{"sample count", func(fx *fixture) { fx.m.Shards[1].Samples = 5 }, "shards/shard-00001.twh: header says 4 samples, the manifest says 5"},
		{"layout", func(fx *fixture) { fx.m.Transform.MaxBoxes = 2 }, "shards/shard-00000.twh: header layout"},
		{"missing", func(fx *fixture) { os.Remove(filepath.Join(fx.dir, "shards", "shard-00002.twh")) }, "shards/shard-00002.twh: no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := writeFixture(t, smallSpec(shard.F16))
			tc.change(fx)
			target := filepath.Join(t.TempDir(), "s.zarr")
			_, err := Write(context.Background(), fx.dir, fx.m, target, Options{Workers: 1})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
			if entries := listing(t, filepath.Dir(target)); len(entries) != 0 {
				t.Fatalf("left %v", entries)
			}
		})
	}
}

// TestExportRefusesFindings: a version failing verification is refused
// with its findings and nothing is written.
func TestExportRefusesFindings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		full   bool
		break_ func(fx *fixture)
		kind   verify.FindingKind
	}{
		{"flipped image byte (full)", true, func(fx *fixture) { flipByte(t, fx, 0, 100) }, verify.FindingChecksum},
		{"truncated shard", false, func(fx *fixture) {
			os.Truncate(filepath.Join(fx.dir, "shards", "shard-00001.twh"), 50)
		}, verify.FindingShardSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fx := writeFixture(t, smallSpec(shard.F16))
			tc.break_(fx)
			target := filepath.Join(t.TempDir(), "s.zarr")
			_, err := Export(context.Background(), fx.root, target, ExportOptions{VerifyFull: tc.full})
			var findings *verify.FindingsError
			if !errors.As(err, &findings) || len(findings.Findings) == 0 || findings.Findings[0].Kind != tc.kind {
				t.Fatalf("error %v, want findings of kind %s", err, tc.kind)
			}
			if exists(target) {
				t.Fatal("a refused export wrote the store")
			}
		})
	}
}

func flipByte(t *testing.T, fx *fixture, k int, off int64) {
	t.Helper()
	path := filepath.Join(fx.dir, filepath.FromSlash(fx.m.Shards[k].RelativePath))
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	raw[off] ^= 0xff
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestExportLocksAndLeftovers: the version's build lock and the target's
// lock are honoured, and what a crashed export left beside the target is
// removed, but nothing that belongs to another target.
func TestExportLocksAndLeftovers(t *testing.T) {
	fx := writeFixture(t, tinySpec())
	parent := t.TempDir()
	target := filepath.Join(parent, "s.zarr")

	build, err := outputroot.LockVersion(fx.root, filepath.Base(fx.dir))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Export(context.Background(), fx.root, target, ExportOptions{}); !errors.Is(err, outputroot.ErrLocked) {
		t.Fatalf("with the build lock held: %v", err)
	}
	build.Release()

	unlock, err := lockTarget(target)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Export(context.Background(), fx.root, target, ExportOptions{}); !errors.Is(err, ErrTargetLocked) {
		t.Fatalf("with the target lock held: %v", err)
	}
	unlock()

	for _, d := range []string{".s.zarr.tmp-123", ".s.zarr.old-456", ".s.zarr.tmp-b.tmp-789", "s.zarr.tmp-1"} {
		os.MkdirAll(filepath.Join(parent, d, "images"), 0o755)
	}
	res, err := Export(context.Background(), fx.root, target, ExportOptions{VerifyFull: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.Store != target || res.Samples != 3 {
		t.Fatalf("result %+v", res)
	}
	if got, want := listing(t, parent), []string{".s.zarr.lock", ".s.zarr.tmp-b.tmp-789", "s.zarr", "s.zarr.tmp-1"}; !slices.Equal(got, want) {
		t.Fatalf("beside the store: %v, want %v", got, want)
	}
	if !mapsEqual(treeDigest(t, target), treeDigest(t, goldenDir)) {
		t.Fatal("Export wrote something else than Write's golden store")
	}
}

// TestWriteOptionErrors covers the options Write refuses.
func TestWriteOptionErrors(t *testing.T) {
	fx := writeFixture(t, tinySpec())
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{ZstdLevel: -1}, "zarr: zstd level -1: want 0 (uncompressed) to 22"},
		{Options{ZstdLevel: 23}, "zarr: zstd level 23: want 0 (uncompressed) to 22"},
		{Options{ShardSamples: -2}, "zarr: -2 samples per shard: want 0 (as the warehouse) to 1048576"},
	} {
		_, err := Write(context.Background(), fx.dir, fx.m, filepath.Join(t.TempDir(), "s.zarr"), tc.opts)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%+v: error %v, want %s", tc.opts, err, tc.want)
		}
	}
	bad := *fx.m
	bad.Extras = []warehouse.Extra{{Name: "a\x00b", Shape: []int{1}, SourceDType: "f32"}}
	bad.Transform.MaxBoxes = fx.m.Transform.MaxBoxes
	if _, err := columns(&bad, shard.Layout{DType: shard.F16, Width: 1, Height: 1, Channels: 3, MaxBoxes: 1, ExtraF32: 1}); err == nil || err.Error() != `extra "a\x00b" cannot be an array name` {
		t.Errorf("control character in an extra's name: %v", err)
	}
}

// TestWriteCancelled: a cancelled context stops the export and leaves
// nothing.
func TestWriteCancelled(t *testing.T) {
	fx := writeFixture(t, smallSpec(shard.F32))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	target := filepath.Join(t.TempDir(), "s.zarr")
	if _, err := Write(ctx, fx.dir, fx.m, target, Options{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("error %v", err)
	}
	if entries := listing(t, filepath.Dir(target)); len(entries) != 0 {
		t.Fatalf("left %v", entries)
	}
}

// Export reports through Options.Progress the bytes the verification
// before it reads and the array bytes it writes: planned and done agree
// when it returns, and the write part is the store's shard files less
// their indexes (uncompressed, the chunks hold exactly the array bytes).
func TestExportReportsProgress(t *testing.T) {
	fx := writeFixture(t, smallSpec(shard.F16))
	var verified progress.Bytes
	if _, err := verify.Run(context.Background(), fx.dir, verify.Options{Full: true, Progress: &verified}); err != nil {
		t.Fatal(err)
	}
	_, verifiedBytes := verified.Load()
	var p progress.Bytes
	store := filepath.Join(t.TempDir(), "s.zarr")
	res, err := Export(context.Background(), fx.root, store, ExportOptions{VerifyFull: true, Options: Options{Progress: &p}})
	if err != nil {
		t.Fatal(err)
	}
	var written int64 // the shard files' bytes, less their indexes
	files := 0
	err = filepath.WalkDir(store, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() == "zarr.json" {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		written += fi.Size() - int64(IndexSize(res.ShardSamples))
		files++
		return nil
	})
	if err != nil || files != res.ShardFiles {
		t.Fatalf("walk: %v; %d shard files, the result says %d", err, files, res.ShardFiles)
	}
	total, done := p.Load()
	if want := verifiedBytes + written; verifiedBytes == 0 || written <= 0 || total != want || done != want {
		t.Fatalf("progress %d of %d bytes, want %d (verified %d + written %d)", done, total, want, verifiedBytes, written)
	}
}
