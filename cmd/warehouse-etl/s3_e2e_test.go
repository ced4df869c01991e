package main

// Output roots in an object store, end to end through the CLI against a
// real S3-compatible server (versitygw, internal/s3test): no mock.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"warehouse-etl/internal/s3test"
	"warehouse-etl/objstore"
	"warehouse-etl/outputroot"
	"warehouse-etl/warehouse"
)

const s3Bucket = "warehouses"

// s3Setup starts the server and sets the AWS SDK's variables in this
// process (the in-process CLI reads them through the SDK).
func s3Setup(t *testing.T) *s3test.Server {
	t.Helper()
	srv := s3test.Start(t, s3Bucket)
	srv.Setenv(t)
	return srv
}

// s3CLIEnv is the environment of one "machine": its own mirror and cache.
func s3CLIEnv(t *testing.T, extra ...string) map[string]string {
	env := map[string]string{"WAREHOUSE_ETL_S3_WORK": t.TempDir(), "WAREHOUSE_ETL_S3_CACHE": t.TempDir()}
	for i := 0; i+1 < len(extra); i += 2 {
		env[extra[i]] = extra[i+1]
	}
	return env
}

func s3Store(t *testing.T, prefix string) *objstore.Store {
	t.Helper()
	s, err := objstore.Open(context.Background(), objstore.Location{Bucket: s3Bucket, Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// s3Download reads every object under prefix/v back through S3 into a
// new local directory, unchecked (the test compares the bytes).
func s3Download(t *testing.T, prefix, v string) string {
	t.Helper()
	s := s3Store(t, prefix)
	objs, err := s.List(context.Background(), v+"/")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), v)
	for _, o := range objs {
		if _, err := s.Download(context.Background(), o.Name, filepath.Join(dir, strings.TrimPrefix(o.Name, v+"/")), o.Size, ""); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func s3Pointer(t *testing.T, prefix, name string) string {
	t.Helper()
	body, _, err := s3Store(t, prefix).Get(context.Background(), name, 4096)
	if errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// A build to s3:// publishes the local build's bytes (read back through
// S3); a rerun on another machine (a fresh mirror) is up to date; every
// reader reads it; a changed input exits 4; WAREHOUSE_CLEAR=1 rebuilds.
func TestS3BuildEndToEnd(t *testing.T) {
	s3Setup(t)
	root := filepath.Join(t.TempDir(), "capture")
	if err := os.CopyFS(root, os.DirFS(demoRoot(t))); err != nil {
		t.Fatal(err)
	}
	localCfg, _ := writeConfig(t, root, nil)
	local, _ := mustBuild(t, localCfg, nil)
	const url = "s3://" + s3Bucket + "/team/demo"
	cfgPath, _ := writeConfig(t, root, map[string]any{"output_root": url})
	v := filepath.Base(local)

	got, res := mustBuild(t, cfgPath, s3CLIEnv(t))
	if got != url+"/"+v || !strings.Contains(res.stderr, "built: "+url+"/"+v) {
		t.Fatalf("build printed %q, want %s/%s\n%s", got, url, v, res.stderr)
	}
	sameAsSingle(t, "s3 build read back through S3", local, s3Download(t, "team/demo", v))
	if p := s3Pointer(t, "team/demo", "latest"); p != v+"\n" {
		t.Fatalf("latest object %q, want %q", p, v+"\n")
	}
	if p := s3Pointer(t, "team/demo", "latest-config"); p != v+"\n" {
		t.Fatalf("latest-config object %q, want %q", p, v+"\n")
	}

	// Another machine: nothing local, up to date from the store alone.
	if _, res := mustBuild(t, cfgPath, s3CLIEnv(t)); !strings.Contains(res.stderr, "up to date") {
		t.Fatalf("rerun on a fresh mirror:\n%s", res.stderr)
	}
	env := s3CLIEnv(t)
	for _, args := range [][]string{
		{"verify", "--tensor-warehouse", url, "--full"},
		{"verify", "--tensor-warehouse=" + url + "/" + v},
		{"inspect", "--tensor-warehouse", url + "/latest-config"},
		{"load", "--tensor-warehouse", url, "--batch", "4", "--epochs", "1"},
		{"diff", "--tensor-warehouse", url, "--against", local},
		{"export", "parquet", "--tensor-warehouse", url},
		{"load", "--config", cfgPath, "--batch", "4", "--epochs", "1"},
	} {
		res := runCLI(t, context.Background(), env, args...)
		if res.code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, res.code, res.stdout, res.stderr)
		}
		// (load --config names the local copy it reads: it resolves the
		// config's version itself.)
		var said []string
		for _, line := range strings.Split(res.stdout+res.stderr, "\n") {
			if !strings.Contains(line, "downloaded into") {
				said = append(said, line)
			}
		}
		if args[1] != "--config" && strings.Contains(strings.Join(said, "\n"), env["WAREHOUSE_ETL_S3_CACHE"]) {
			t.Errorf("%v names the local copy, not the store:\n%s%s", args, res.stdout, res.stderr)
		}
	}
	if ents, _ := os.ReadDir(env["WAREHOUSE_ETL_S3_CACHE"]); len(ents) != 0 {
		t.Errorf("readers left %d local copies", len(ents))
	}
	if objs, _ := s3Store(t, "team/demo").List(context.Background(), ".leases/"); len(objs) != 0 {
		t.Errorf("readers left leases: %v", objs)
	}

	// A changed input: exit 4 naming it; WAREHOUSE_CLEAR=1 replaces it.
	touched := filepath.Join(root, "run_2", "labels", "frame_00000.json")
	future := time.Now().Add(time.Hour)
	if err := os.Chtimes(touched, future, future); err != nil {
		t.Fatal(err)
	}
	res = runCLI(t, context.Background(), s3CLIEnv(t), "build", "--config", cfgPath)
	if res.code != exitStale || !strings.Contains(res.stderr, "frame_00000.json") {
		t.Fatalf("changed source: exit %d\n%s", res.code, res.stderr)
	}
	before, _, _ := s3Store(t, "team/demo").Get(context.Background(), v+"/manifest.json", 1<<20)
	rebuilt, res := mustBuild(t, cfgPath, s3CLIEnv(t, "WAREHOUSE_CLEAR", "1"))
	if rebuilt != url+"/"+v || !strings.Contains(res.stderr, "rebuilt: ") {
		t.Fatalf("clear: %s\n%s", rebuilt, res.stderr)
	}
	after, _, _ := s3Store(t, "team/demo").Get(context.Background(), v+"/manifest.json", 1<<20)
	if bytes.Equal(before, after) {
		t.Fatal("WAREHOUSE_CLEAR=1 did not replace the manifest object")
	}
	// Only an mtime changed: the same shard bytes, a new fingerprint.
	back := s3Download(t, "team/demo", v)
	lm, _ := warehouse.ReadManifest(local)
	for _, sh := range lm.Shards {
		a, _ := os.ReadFile(filepath.Join(local, sh.RelativePath))
		b, _ := os.ReadFile(filepath.Join(back, sh.RelativePath))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Fatalf("rebuilt: %s differs", sh.RelativePath)
		}
	}
	if res := runCLI(t, context.Background(), s3CLIEnv(t), "verify", "--tensor-warehouse", url, "--full"); res.code != 0 {
		t.Fatalf("verify after clear: exit %d\n%s", res.code, res.stderr)
	}
	if _, res := mustBuild(t, cfgPath, s3CLIEnv(t)); !strings.Contains(res.stderr, "up to date") {
		t.Fatalf("after clear:\n%s", res.stderr)
	}
}

// A flipped byte in a shard object (replaced through S3, or rotted on the
// server's disk without a new ETag) is caught by every reader: exit 7.
func TestS3FlippedByteCaughtByReaders(t *testing.T) {
	srv := s3Setup(t)
	const url = "s3://" + s3Bucket + "/flip"
	cfgPath, _ := writeConfig(t, demoRoot(t), map[string]any{"output_root": url})
	got, _ := mustBuild(t, cfgPath, s3CLIEnv(t))
	v := filepath.Base(got)
	s := s3Store(t, "flip")
	m, err := warehouse.ReadManifest(s3Download(t, "flip", v))
	if err != nil {
		t.Fatal(err)
	}
	readers := [][]string{
		{"verify", "--tensor-warehouse", url},
		{"inspect", "--tensor-warehouse", url},
		{"load", "--tensor-warehouse", url, "--batch", "4", "--epochs", "1"},
		{"export", "parquet", "--tensor-warehouse", url},
		{"diff", "--tensor-warehouse", url, "--against", url},
	}
	check := func(what string) {
		t.Helper()
		for _, args := range readers {
			res := runCLI(t, context.Background(), s3CLIEnv(t), args...)
			if res.code != exitFindings || !strings.Contains(res.stderr, "the manifest records") {
				t.Errorf("%s: %v: exit %d, want %d naming the object\n%s", what, args, res.code, exitFindings, res.stderr)
			}
		}
	}
	// Through S3: the object is replaced by one with a byte flipped.
	key := v + "/" + m.Shards[1].RelativePath
	body, _, err := s.Get(context.Background(), key, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	orig := bytes.Clone(body)
	body[len(body)/2] ^= 0x01
	if _, err := s.Put(context.Background(), key, body, objstore.Cond{}); err != nil {
		t.Fatal(err)
	}
	check("replaced object")
	if _, err := s.Put(context.Background(), key, orig, objstore.Cond{}); err != nil {
		t.Fatal(err)
	}
	if res := runCLI(t, context.Background(), s3CLIEnv(t), "verify", "--tensor-warehouse", url, "--full"); res.code != 0 {
		t.Fatalf("restored: exit %d\n%s", res.code, res.stderr)
	}
	// On the server's disk: the store's metadata (ETag) is unchanged.
	p := filepath.Join(srv.Dir, s3Bucket, "flip", filepath.FromSlash(key))
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte{0}
	if _, err := f.ReadAt(b, 100); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x80
	if _, err := f.WriteAt(b, 100); err != nil {
		t.Fatal(err)
	}
	f.Close()
	check("bit rot on the server")
}

// throttle is a TCP relay to the server that slows the client's uploads
// (a slow network), so a test can kill a build in the middle of one.
func throttle(t *testing.T, target string, chunk int, pause time.Duration) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(c, up); c.Close() }()
				buf := make([]byte, chunk)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if _, werr := up.Write(buf[:n]); werr != nil {
							return
						}
						time.Sleep(pause)
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + l.Addr().String()
}

// kill -9 of a build in the middle of its upload publishes nothing: no
// manifest object, latest unmoved, readers refuse the version; the rerun
// finishes the upload and publishes the local build's bytes.
func TestS3KilledUploadPublishesNothing(t *testing.T) {
	srv := s3Setup(t)
	bin := mustBinary(t)
	local, _ := mustBuild(t, mustConfig(t), nil)
	v := filepath.Base(local)
	const url = "s3://" + s3Bucket + "/killed"
	cfgPath, _ := writeConfig(t, demoRoot(t), map[string]any{"output_root": url})
	work := t.TempDir()
	slow := throttle(t, strings.TrimPrefix(srv.Endpoint, "http://"), 16<<10, 20*time.Millisecond)
	env := append(os.Environ(), "AWS_ENDPOINT_URL="+slow, "WAREHOUSE_ETL_S3_WORK="+work)
	cmd := exec.Command(bin, "build", "--config", cfgPath)
	cmd.Env = env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	shards := filepath.Join(srv.Dir, s3Bucket, "killed", v, "shards")
	deadline := time.Now().Add(60 * time.Second)
	for {
		if ents, _ := os.ReadDir(shards); len(ents) > 0 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatalf("no shard object appeared:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	s := s3Store(t, "killed")
	if _, _, err := s.Get(context.Background(), v+"/manifest.json", 1<<20); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a killed upload left a manifest object (err %v)\n%s", err, out.String())
	}
	if p := s3Pointer(t, "killed", "latest"); p != "" {
		t.Fatalf("latest %q after a killed upload", p)
	}
	for _, ref := range []string{url, url + "/" + v} {
		res := runCLI(t, context.Background(), s3CLIEnv(t), "verify", "--tensor-warehouse", ref)
		if res.code == 0 {
			t.Fatalf("verify %s of a killed upload: exit 0\n%s", ref, res.stdout)
		}
	}
	// gc removes what the killed upload left (its lock's holder is a
	// dead process of this host); readers never saw it.
	res := runCLI(t, context.Background(), s3CLIEnv(t), "gc", "--output-root", url, "--keep", "1")
	if res.code != 0 || !strings.Contains(res.stdout, "an upload that did not finish") {
		t.Fatalf("gc after the killed upload: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if objs, _ := s.List(context.Background(), v+"/"); len(objs) != 0 {
		t.Fatalf("gc left %d objects of the killed upload", len(objs))
	}
	// The rerun on the same machine finds its build complete and uploads it.
	rerun := exec.Command(bin, "build", "--config", cfgPath)
	rerun.Env = append(os.Environ(), "WAREHOUSE_ETL_S3_WORK="+work)
	if b, err := rerun.CombinedOutput(); err != nil {
		t.Fatalf("rerun: %v\n%s", err, b)
	}
	sameAsSingle(t, "after the killed upload's rerun", local, s3Download(t, "killed", v))
	if p := s3Pointer(t, "killed", "latest"); p != v+"\n" {
		t.Fatalf("latest %q after the rerun", p)
	}
}

// Three partitions on three "machines" (separate mirrors, nothing
// shared but the bucket), then commit on a fourth: the single-machine
// bytes. Before the last partition, commit exits 8.
func TestS3PartitionedBuild(t *testing.T) {
	s3Setup(t)
	bin := mustBinary(t)
	local, _ := mustBuild(t, mustConfig(t), nil)
	const url = "s3://" + s3Bucket + "/parts"
	cfgPath, _ := writeConfig(t, demoRoot(t), map[string]any{"output_root": url})
	run := func(args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "WAREHOUSE_ETL_S3_WORK="+t.TempDir())
		b, _ := cmd.CombinedOutput()
		return string(b), cmd.ProcessState.ExitCode()
	}
	if out, code := run("build", "--config", cfgPath, "--partition", "0/3", "--workers", "1"); code != 0 {
		t.Fatalf("partition 0/3: exit %d\n%s", code, out)
	}
	if out, code := run("commit", "--config", cfgPath); code != exitIncomplete || !strings.Contains(out, "partition 2/3") {
		t.Fatalf("early commit: exit %d, want %d\n%s", code, exitIncomplete, out)
	}
	// The other two at once, and a commit waiting for them (it lists the
	// staging uploads again until all are there).
	var wg sync.WaitGroup
	var out string
	var code int
	wg.Add(1)
	go func() { defer wg.Done(); out, code = run("commit", "--config", cfgPath, "--wait", "2m") }()
	for _, p := range []string{"1/3", "2/3"} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if out, code := run("build", "--config", cfgPath, "--partition", p, "--workers", "1"); code != 0 {
				t.Errorf("partition %s: exit %d\n%s", p, code, out)
			}
		}()
	}
	wg.Wait()
	v := filepath.Base(local)
	if code != 0 || !strings.Contains(out, url+"/"+v) {
		t.Fatalf("commit: exit %d\n%s", code, out)
	}
	sameAsSingle(t, "3 partitions through S3", local, s3Download(t, "parts", v))
	if objs, _ := s3Store(t, "parts").List(context.Background(), ".staging/"); len(objs) != 0 {
		t.Errorf("the staging uploads outlived the commit: %d objects", len(objs))
	}
	if res := runCLI(t, context.Background(), s3CLIEnv(t), "verify", "--tensor-warehouse", url, "--full"); res.code != 0 {
		t.Fatalf("verify: exit %d\n%s", res.code, res.stderr)
	}
}

// gc keeps a version a reader holds a lease on, and removes it (manifest
// first) once the lease is gone.
func TestS3GCRespectsLeases(t *testing.T) {
	s3Setup(t)
	const url = "s3://" + s3Bucket + "/gc"
	cfgA, _ := writeConfig(t, demoRoot(t), map[string]any{"output_root": url})
	cfgB, _ := writeConfig(t, demoRoot(t), map[string]any{"output_root": url, "shard_target_mb": 2})
	a, _ := mustBuild(t, cfgA, s3CLIEnv(t))
	b, _ := mustBuild(t, cfgB, s3CLIEnv(t))
	va, vb := filepath.Base(a), filepath.Base(b)
	if va == vb {
		t.Fatal("the two configs made one version")
	}
	s := s3Store(t, "gc")
	lease, err := s.TakeLease(context.Background(), va, "test:1:reader", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	res := runCLI(t, context.Background(), s3CLIEnv(t), "gc", "--output-root", url, "--keep", "1")
	if res.code != 0 || !strings.Contains(res.stdout, "kept "+va) || !strings.Contains(res.stdout, "lease") {
		t.Fatalf("gc with a lease: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if _, _, err := s.Get(context.Background(), va+"/manifest.json", 1<<20); err != nil {
		t.Fatalf("gc removed a leased version: %v", err)
	}
	lease.Release()
	res = runCLI(t, context.Background(), s3CLIEnv(t), "gc", "--output-root", url, "--keep", "1")
	if res.code != 0 || !strings.Contains(res.stdout, "removed "+url+"/"+va) {
		t.Fatalf("gc without the lease: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if objs, _ := s.List(context.Background(), va+"/"); len(objs) != 0 {
		t.Fatalf("gc left %d objects of %s", len(objs), va)
	}
	if res := runCLI(t, context.Background(), s3CLIEnv(t), "verify", "--tensor-warehouse", url+"/"+vb, "--full"); res.code != 0 {
		t.Fatalf("the kept version: exit %d\n%s", res.code, res.stderr)
	}
	// An expired lease does not keep a version (60 s clock skew margin).
	body := fmt.Sprintf(`{"version":%q,"holder":"gone:1:x","expires_unix_ms":%d}`, vb, time.Now().Add(-2*time.Minute).UnixMilli())
	if _, err := s.Put(context.Background(), ".leases/"+vb+"/gone.json", []byte(body), objstore.Cond{}); err != nil {
		t.Fatal(err)
	}
	live, err := s.LiveLeases(context.Background(), time.Now())
	if err != nil || len(live[vb]) != 0 {
		t.Fatalf("an expired lease counts as live: %v %v", live, err)
	}

	// Staging uploads: those of a published version go; an unfinished
	// partitioned build's stay until --keep-days.
	const unfinished = "v0123456789abcdef"
	for _, name := range []string{".staging/" + vb + "/partitions/0-of-1.json", ".staging/" + unfinished + "/shards/shard-00000.json"} {
		if _, err := s.Put(context.Background(), name, []byte("{}"), objstore.Cond{}); err != nil {
			t.Fatal(err)
		}
	}
	res = runCLI(t, context.Background(), s3CLIEnv(t), "gc", "--output-root", url, "--keep", "1")
	if res.code != 0 || !strings.Contains(res.stdout, "removed "+url+"/.staging/"+vb) || !strings.Contains(res.stdout, "kept .staging/"+unfinished) {
		t.Fatalf("gc of staging uploads: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	time.Sleep(1500 * time.Millisecond)
	res = runCLI(t, context.Background(), s3CLIEnv(t), "gc", "--output-root", url, "--keep", "1", "--keep-days", "0.00001")
	if res.code != 0 || !strings.Contains(res.stdout, "removed "+url+"/.staging/"+unfinished) {
		t.Fatalf("gc --keep-days of an unfinished partitioned build: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if objs, _ := s.List(context.Background(), ".staging/"); len(objs) != 0 {
		t.Fatalf("gc left staging uploads: %v", objs)
	}
}

// Two publishers of different versions race for latest: the conditional
// write lets exactly one win; the other exits 9 (published, pointer not
// moved) and latest names the winner's version.
func TestS3ConcurrentPublishersOneWins(t *testing.T) {
	s3Setup(t)
	bin := mustBinary(t)
	const url = "s3://" + s3Bucket + "/race"
	for round := range 3 {
		prefix := fmt.Sprintf("race/r%d", round)
		var cfgs []string
		for i, mb := range []int{2, 3} {
			dir := t.TempDir()
			cfg, _ := writeConfig(t, demoRoot(t), map[string]any{"output_root": "s3://" + s3Bucket + "/" + prefix, "shard_target_mb": mb})
			// The same config name: both may move latest.
			p := filepath.Join(dir, "nightly.jsonc")
			raw, _ := os.ReadFile(cfg)
			if err := os.WriteFile(p, raw, 0o644); err != nil {
				t.Fatal(err)
			}
			cfgs = append(cfgs, p)
			_ = i
		}
		// Both pull before either pushes: each publisher's mirror is
		// pulled, then both push at once (objstore, as the CLI does).
		var mirrors []*objstore.Mirror
		for _, cfg := range cfgs {
			work := t.TempDir()
			m := objstore.NewMirror(s3Store(t, prefix), work, objstore.Holder(), time.Minute)
			if err := m.Pull(context.Background(), false); err != nil {
				t.Fatal(err)
			}
			mirrors = append(mirrors, m)
			// The build on the pulled mirror, as build does between Pull
			// and Push.
			localCfg := strings.Replace(string(must(os.ReadFile(cfg))), "s3://"+s3Bucket+"/"+prefix, work, 1)
			lp := filepath.Join(t.TempDir(), "nightly.jsonc")
			if err := os.WriteFile(lp, []byte(localCfg), 0o644); err != nil {
				t.Fatal(err)
			}
			if b, err := exec.Command(bin, "build", "--config", lp).CombinedOutput(); err != nil {
				t.Fatalf("%v\n%s", err, b)
			}
		}
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i, m := range mirrors {
			wg.Add(1)
			go func() { defer wg.Done(); _, errs[i] = m.Push(context.Background()) }()
		}
		wg.Wait()
		won := -1
		for i, err := range errs {
			switch {
			case err == nil:
				if won >= 0 {
					t.Fatalf("round %d: both publishers moved latest", round)
				}
				won = i
			case !errors.Is(err, objstore.ErrPointerMoved):
				t.Fatalf("round %d: publisher %d: %v", round, i, err)
			}
		}
		if won < 0 {
			t.Fatalf("round %d: neither publisher won: %v", round, errs)
		}
		target, err := os.Readlink(filepath.Join(mirrors[won].Root, "latest"))
		if err != nil {
			t.Fatal(err)
		}
		if p := s3Pointer(t, prefix, "latest"); p != target+"\n" {
			t.Fatalf("round %d: latest %q, the winner published %s", round, p, target)
		}
		// The loser's version is published all the same (exit 9 on disk).
		loser := 1 - won
		other, _ := os.Readlink(filepath.Join(mirrors[loser].Root, "latest"))
		if res := runCLI(t, context.Background(), s3CLIEnv(t), "verify", "--tensor-warehouse", "s3://"+s3Bucket+"/"+prefix+"/"+other); res.code != 0 {
			t.Fatalf("the loser's version: exit %d\n%s", res.code, res.stderr)
		}
	}
	_ = url
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// deploy/k8s/partitioned-build-s3.yaml run for real, pod by pod: its
// ConfigMap's config (paths pointed at the demo data, the bucket at the
// test server), each partition pod's command and literal environment
// with JOB_COMPLETION_INDEX, each pod with its own empty work directory,
// then the commit pod's. No volume is shared but the read-only captures.
func TestKubernetesS3PartitionedManifest(t *testing.T) {
	srv := s3Setup(t)
	bin := mustBinary(t)
	raw, err := os.ReadFile("../../deploy/k8s/partitioned-build-s3.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type container struct {
		Command []string `yaml:"command"`
		Env     []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom any    `yaml:"valueFrom"`
		} `yaml:"env"`
		VolumeMounts []struct {
			Name      string `yaml:"name"`
			MountPath string `yaml:"mountPath"`
			ReadOnly  bool   `yaml:"readOnly"`
		} `yaml:"volumeMounts"`
	}
	type doc struct {
		Kind string            `yaml:"kind"`
		Data map[string]string `yaml:"data"`
		Spec struct {
			Completions *int `yaml:"completions"`
			Template    struct {
				Spec struct {
					Containers []container `yaml:"containers"`
					Volumes    []struct {
						Name     string `yaml:"name"`
						EmptyDir any    `yaml:"emptyDir"`
						PVC      *struct {
							ClaimName string `yaml:"claimName"`
							ReadOnly  bool   `yaml:"readOnly"`
						} `yaml:"persistentVolumeClaim"`
					} `yaml:"volumes"`
				} `yaml:"spec"`
			} `yaml:"template"`
		} `yaml:"spec"`
	}
	var docs []doc
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var d doc
		if err := dec.Decode(&d); err != nil {
			break
		}
		docs = append(docs, d)
	}
	if len(docs) != 3 || docs[0].Kind != "ConfigMap" || docs[1].Kind != "Job" || docs[2].Kind != "Job" {
		t.Fatalf("want a ConfigMap and two Jobs, got %d documents", len(docs))
	}
	for _, j := range docs[1:] {
		for _, v := range j.Spec.Template.Spec.Volumes {
			if v.PVC != nil && !v.PVC.ReadOnly {
				t.Errorf("volume %s: a writable claim %s; the S3 variant shares none", v.Name, v.PVC.ClaimName)
			}
		}
	}
	cfgText := docs[0].Data["warehouse.jsonc"]
	if !strings.Contains(cfgText, `"output_root": "s3://`) {
		t.Fatalf("the ConfigMap's output_root is not an s3:// location:\n%s", cfgText)
	}
	cfgText = strings.Replace(cfgText, `"/data/captures/polyp"`, fmt.Sprintf("%q", demoRoot(t)), 1)
	cfgText = strings.Replace(cfgText, `"s3://warehouses/polyp-384-u8"`, `"s3://warehouses/k8s"`, 1)
	cfgText = strings.Replace(cfgText, `"shard_target_mb": 192`, `"shard_target_mb": 1`, 1)
	cfgText = strings.Replace(cfgText, `"max_ratio": 0.02`, `"max_ratio": 0.5`, 1)
	cfgText = strings.Replace(cfgText, `"max_ratio": 0.01`, `"max_ratio": 0.5`, 1)
	cfgPath := filepath.Join(t.TempDir(), "warehouse.jsonc")
	if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
		t.Fatal(err)
	}
	runPod := func(c container, extra ...string) string {
		t.Helper()
		args := append([]string(nil), c.Command[1:]...)
		for i := range args {
			if args[i] == "/etc/warehouse-etl/warehouse.jsonc" {
				args[i] = cfgPath
			}
		}
		cmd := exec.Command(bin, args...)
		env := append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, srv.Env()...)
		work := ""
		for _, e := range c.Env {
			switch {
			case e.ValueFrom != nil, strings.HasPrefix(e.Name, "AWS_"):
				// Secrets and the endpoint: the test server's (srv.Env).
			case e.Name == "WAREHOUSE_ETL_S3_WORK":
				work = t.TempDir() // the pod's own emptyDir
				env = append(env, e.Name+"="+work)
			case e.Name == "WAREHOUSE_PARTITIONS":
				env = append(env, e.Name+"=3")
			case e.Name == "TMPDIR":
				env = append(env, e.Name+"="+t.TempDir())
			default:
				env = append(env, e.Name+"="+e.Value)
			}
		}
		if work == "" {
			t.Fatal("a pod without WAREHOUSE_ETL_S3_WORK")
		}
		cmd.Env = append(env, extra...)
		b, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, b)
		}
		return string(b)
	}
	part, commit := docs[1].Spec.Template.Spec.Containers[0], docs[2].Spec.Template.Spec.Containers[0]
	for i := range 3 {
		runPod(part, fmt.Sprintf("JOB_COMPLETION_INDEX=%d", i))
	}
	out := runPod(commit)
	if !strings.Contains(out, "s3://warehouses/k8s/v") {
		t.Fatalf("commit published nowhere in the bucket:\n%s", out)
	}
	if res := runCLI(t, context.Background(), s3CLIEnv(t), "verify", "--tensor-warehouse", "s3://warehouses/k8s", "--full"); res.code != 0 {
		t.Fatalf("verify: exit %d\n%s", res.code, res.stderr)
	}
}

// Two publishers of one version (the same config on two machines): while
// another holds the version's lock object, Push is refused with exit 5's
// error, or waits for it with LockWait; the first to publish stands and
// the other adopts it (no second upload over it), as a build that waited
// for the lock on disk finds the version up to date.
func TestS3SameVersionTwoPublishers(t *testing.T) {
	s3Setup(t)
	bin := mustBinary(t)
	const prefix = "same"
	var mirrors []*objstore.Mirror
	for range 2 {
		work := t.TempDir()
		m := objstore.NewMirror(s3Store(t, prefix), work, objstore.Holder(), time.Minute)
		if err := m.Pull(context.Background(), false); err != nil {
			t.Fatal(err)
		}
		cfg, _ := writeConfig(t, demoRoot(t), map[string]any{"output_root": work})
		if b, err := exec.Command(bin, "build", "--config", cfg).CombinedOutput(); err != nil {
			t.Fatalf("%v\n%s", err, b)
		}
		mirrors = append(mirrors, m)
	}
	a, b := mirrors[0], mirrors[1]
	v, err := os.Readlink(filepath.Join(a.Root, "latest"))
	if err != nil {
		t.Fatal(err)
	}
	s := s3Store(t, prefix)
	held, err := s.LockVersion(context.Background(), v, "elsewhere:1:00000000", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Push(context.Background()); !errors.Is(err, outputroot.ErrLocked) {
		t.Fatalf("push under another's lock: %v, want ErrLocked", err)
	}
	go func() { time.Sleep(time.Second); held.Release() }()
	a.LockWait = 30 * time.Second
	if _, err := a.Push(context.Background()); err != nil {
		t.Fatalf("push waiting for the lock: %v", err)
	}
	first, _, err := s.Get(context.Background(), v+"/manifest.json", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := b.Push(context.Background())
	if err != nil {
		t.Fatalf("the second publisher: %v", err)
	}
	if len(rep.Versions) != 0 {
		t.Fatalf("the second publisher uploaded %v over the first's", rep.Versions)
	}
	second, _, _ := s.Get(context.Background(), v+"/manifest.json", 1<<20)
	if !bytes.Equal(first, second) {
		t.Fatal("the first publisher's manifest was replaced")
	}
	if res := runCLI(t, context.Background(), s3CLIEnv(t), "verify", "--tensor-warehouse", "s3://"+s3Bucket+"/"+prefix, "--full"); res.code != 0 {
		t.Fatalf("verify: exit %d\n%s", res.code, res.stderr)
	}
}

// A build that fails its thresholds exits 3 and puts nothing in the
// bucket, as it publishes nothing on disk.
func TestS3ThresholdFailurePublishesNothing(t *testing.T) {
	s3Setup(t)
	const url = "s3://" + s3Bucket + "/strict"
	cfgPath, _ := writeConfig(t, demoRoot(t), map[string]any{"output_root": url,
		"thresholds": map[string]any{"invalid": map[string]any{"max_ratio": 0.01}}})
	res := runCLI(t, context.Background(), s3CLIEnv(t), "build", "--config", cfgPath)
	if res.code != exitThreshold {
		t.Fatalf("exit %d, want %d\n%s", res.code, exitThreshold, res.stderr)
	}
	if objs, err := s3Store(t, "strict").List(context.Background(), ""); err != nil || len(objs) != 0 {
		t.Fatalf("a rejected build left %d objects (%v)", len(objs), err)
	}
}
