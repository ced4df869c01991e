package main

// Issue 25 end to end: a warehouse published to S3 by the Go CLI (a real
// versitygw, internal/s3test) and read and trained on from Python
// (warehouse_etl with Debian's boto3 and torch): the batches are the local
// build's byte for byte, the Python reader's lease is a lease to Go's gc,
// a damaged shard object is refused, examples/train.py trains from the
// bucket.

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"warehouse-etl/objstore"
	"warehouse-etl/shard"
	"warehouse-etl/warehouse"
)

// s3PythonScript is run by debianPython with PYTHONPATH=python. Its first
// argument says what it does; it exits non-zero with "FAIL: ..." on any
// difference.
const s3PythonScript = `
import json, os, re, socket, sys, tempfile, time
import torch
import warehouse_etl
from warehouse_etl import _s3
from warehouse_etl.torch import make_loader

what, local, url, version, bucket, prefix = sys.argv[1:7]
KW = dict(seed=7, shuffle="global", remainder="pad", reader_threads=2)
B = 4


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def batches(loader, epochs=(0, 1)):
    for e in epochs:
        loader.set_epoch(e)
        for i, b in enumerate(loader):
            yield (e, i), b


def same(a, b, where):
    if sorted(a) != sorted(b):
        fail(f"{where}: keys {sorted(a)} != {sorted(b)}")
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, torch.Tensor):
            if not isinstance(y, torch.Tensor) or x.dtype != y.dtype or x.shape != y.shape:
                fail(f"{where} {k}: {getattr(y, 'dtype', type(y))} {getattr(y, 'shape', '')}, local {x.dtype} {x.shape}")
            if x.contiguous().numpy().tobytes() != y.contiguous().numpy().tobytes():
                fail(f"{where} {k}: bytes differ from the local version's")
        elif x != y:
            fail(f"{where} {k}: {y!r}, local {x!r}")


def leases(c):
    r = c.list_objects_v2(Bucket=bucket, Prefix="/".join([p for p in (prefix, ".leases", version) if p]) + "/")
    out = []
    for o in r.get("Contents", []):
        out.append((o["Key"], json.loads(c.get_object(Bucket=bucket, Key=o["Key"])["Body"].read())))
    return out


local_wh = warehouse_etl.open(local)
want = list(batches(make_loader(local_wh, B, **KW)))
if not want:
    fail("the local version gave no batches")
c = _s3.client()

if what == "compare":
    for mode in ("whole", "range"):
        # open(), then make_loader on the open warehouse.
        # The lease is written during open with expiry = now + TTL (600 s):
        # bracket it by the times before open and after the listing, so a
        # slow machine cannot fail the check.
        t0 = time.time() * 1000
        wh = warehouse_etl.open(url, cache_dir=tempfile.mkdtemp(), mode=mode)
        if wh.dir.rsplit("/", 1)[-1] != version:
            fail(f"{url} opened {wh.dir}, want {version}")
        ls = leases(c)
        t1 = time.time() * 1000
        if len(ls) != 1:
            fail(f"{mode}: {len(ls)} lease objects while open, want 1: {ls}")
        key, body = ls[0]
        holder = body.get("holder", "")
        if (sorted(body) != ["expires_unix_ms", "holder", "version"] or body["version"] != version
                or not re.fullmatch(re.escape(socket.gethostname()) + ":%d:[0-9a-f]{8}" % os.getpid(), holder)
                or not key.endswith("/.leases/%s/%s.json" % (version, holder))
                or not t0 - 1 <= body["expires_unix_ms"] - 600e3 <= t1 + 1):
            fail(f"{mode}: lease {key}: {body}")
        got = list(batches(make_loader(wh, B, **KW)))
        if len(got) != len(want):
            fail(f"{mode}: {len(got)} batches, local {len(want)}")
        for (w, a), (g, b) in zip(want, got):
            same(a, b, f"{mode} open() epoch {g[0]} batch {g[1]}")
        wh.close()
        if leases(c):
            fail(f"{mode}: close() left {leases(c)}")
        # make_loader on the URL, with the mode and a cache of its own.
        loader = make_loader(url, B, cache_dir=tempfile.mkdtemp(), mode=mode, **KW)
        got = list(batches(loader))
        if len(got) != len(want):
            fail(f"{mode}: make_loader(url): {len(got)} batches, local {len(want)}")
        for (w, a), (g, b) in zip(want, got):
            same(a, b, f"{mode} make_loader(url) epoch {g[0]} batch {g[1]}")
        loader.warehouse.close()
        print(f"ok {mode}: {len(got)} batches equal the local version's", flush=True)

elif what == "damaged":
    for mode in ("whole", "range"):
        n, loader = 0, None
        try:
            loader = make_loader(url, B, cache_dir=tempfile.mkdtemp(), mode=mode, **KW)
            for (w, a), ((e, i), b) in zip(want, batches(loader)):
                same(a, b, f"damaged {mode} epoch {e} batch {i}")  # nothing damaged is handed out
                n += 1
        except warehouse_etl.WarehouseError as err:
            if "s3://" not in str(err):
                fail(f"{mode}: the refusal does not name the object: {err}")
            print(f"refused {mode} after {n} good batches: {err}", flush=True)
            continue
        finally:
            if loader is not None:
                loader.warehouse.close()
        fail(f"{mode}: read {n} batches of a damaged shard object without an error")

elif what == "refuse_open":  # argv[7]: what the error must say
    for mode in ("whole", "range"):
        try:
            warehouse_etl.open(url, cache_dir=tempfile.mkdtemp(), mode=mode).close()
        except warehouse_etl.WarehouseError as err:
            if sys.argv[7] not in str(err):
                fail(f"{mode}: {err}: want {sys.argv[7]!r}")
            print(f"refused {mode}: {err}", flush=True)
            continue
        fail(f"{mode}: opened")

elif what == "hold":
    wh = warehouse_etl.open(url, cache_dir=tempfile.mkdtemp())
    wh.read_batch([0, 1])
    print("opened " + wh._lease.holder, flush=True)
    sys.stdin.readline()
    wh.read_batch(list(range(len(wh))))  # every shard, fetched after gc ran: still all there
    wh.close()
    print("closed", flush=True)
else:
    fail("unknown " + what)
`

// s3PythonCmd runs argv under debianPython with PYTHONPATH=python, the repository as working
// directory and this process's environment (s3Setup put the server's AWS
// variables there).
func s3PythonCmd(t *testing.T, argv ...string) *exec.Cmd {
	t.Helper()
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(debianPython, argv...)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(repo, "python"), "PYTHONDONTWRITEBYTECODE=1",
		"WAREHOUSE_ETL_CACHE="+t.TempDir())
	return cmd
}

func s3PythonScriptPath(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "s3_e2e.py")
	if err := os.WriteFile(p, []byte(s3PythonScript), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// s3BuildWithBinary publishes cfg with the built CLI binary, a process of
// its own (the AWS variables from the environment, its own mirror).
func s3BuildWithBinary(t *testing.T, cfg string) string {
	t.Helper()
	cmd := exec.Command(mustBinary(t), "build", "--config", cfg)
	cmd.Env = append(os.Environ(), "WAREHOUSE_ETL_S3_WORK="+t.TempDir(), "WAREHOUSE_ETL_S3_CACHE="+t.TempDir())
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("warehouse-etl build %s: %v\n%s", cfg, err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

func TestS3PythonReadsGoPublished(t *testing.T) {
	requirePython(t, "numpy", "torch", "boto3")
	srv := s3Setup(t)
	const prefix = "team/py"
	url := "s3://" + s3Bucket + "/" + prefix
	localCfg, _ := writeConfig(t, demoRoot(t), nil)
	local, _ := mustBuild(t, localCfg, nil)
	v := filepath.Base(local)
	cfg, _ := writeConfig(t, demoRoot(t), map[string]any{"output_root": url})
	if got := s3BuildWithBinary(t, cfg); got != url+"/"+v {
		t.Fatalf("build printed %q, want %s/%s", got, url, v)
	}
	script := s3PythonScriptPath(t)
	py := func(what string, args ...string) string {
		t.Helper()
		out, err := s3PythonCmd(t, append([]string{script, what, local, url, v, s3Bucket, prefix}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("python %s: %v\n%s", what, err, out)
		}
		return string(out)
	}
	out := py("compare")
	for _, mode := range []string{"whole", "range"} {
		if !strings.Contains(out, "ok "+mode+":") {
			t.Fatalf("python compare did not check %s mode:\n%s", mode, out)
		}
	}
	t.Logf("python compare:\n%s", out)

	// train.py from the bucket, its root (latest) and a version URL.
	for _, arg := range []string{url, url + "/" + v} {
		tr, err := s3PythonCmd(t, "examples/train.py", "--tensor-warehouse", arg, "--steps", "2", "--batch-size", "4").CombinedOutput()
		if err != nil || !strings.Contains(string(tr), "step 2 ") || !strings.Contains(string(tr), url+"/"+v) {
			t.Fatalf("train.py --tensor-warehouse %s: %v\n%s", arg, err, tr)
		}
	}
	// AWS_ENDPOINT_URL_S3 before AWS_ENDPOINT_URL, on both sides (here the
	// general one points at a closed port): the Go CLI's verify and
	// train.py through latest-<config>.
	t.Setenv("AWS_ENDPOINT_URL_S3", srv.Endpoint)
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
	if res := runCLI(t, context.Background(), s3CLIEnv(t), "verify", "--tensor-warehouse", url+"/latest-config", "--full"); res.code != 0 {
		t.Fatalf("go verify with AWS_ENDPOINT_URL_S3: exit %d\n%s", res.code, res.stderr)
	}
	tr, err := s3PythonCmd(t, "examples/train.py", "--tensor-warehouse", url, "--config", "config", "--steps", "1", "--batch-size", "4").CombinedOutput()
	if err != nil || !strings.Contains(string(tr), "step 1 ") {
		t.Fatalf("train.py --config with AWS_ENDPOINT_URL_S3: %v\n%s", err, tr)
	}
	t.Setenv("AWS_ENDPOINT_URL", srv.Endpoint)
	if err := os.Unsetenv("AWS_ENDPOINT_URL_S3"); err != nil {
		t.Fatal(err)
	}
	if objs, _ := s3Store(t, prefix).List(context.Background(), ".leases/"); len(objs) != 0 {
		t.Errorf("python readers left leases: %v", objs)
	}

	// The manifest's digest object Go uploaded is what Python checks the
	// manifest against: a wrong one, or none (the manifest records file
	// checksums), is refused.
	s := s3Store(t, prefix)
	digestKey := v + "/manifest.json.sha256"
	digest, _, err := s.Get(context.Background(), digestKey, 4096)
	if err != nil {
		t.Fatal(err)
	}
	bad := []byte(string(digest))
	bad[0] ^= 0x01 // the first hex digit's low bit
	if _, err := s.Put(context.Background(), digestKey, bad, objstore.Cond{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("python, wrong digest:\n%s", py("refuse_open", "manifest.json.sha256"))
	if err := s.Delete(context.Background(), digestKey); err != nil {
		t.Fatal(err)
	}
	t.Logf("python, no digest:\n%s", py("refuse_open", "manifest.json.sha256"))
	if _, err := s.Put(context.Background(), digestKey, digest, objstore.Cond{}); err != nil {
		t.Fatal(err)
	}

	// A byte of sample 0's image in the first shard flipped on the
	// server (a PUT of the changed bytes): Python refuses it in both
	// modes, from a fresh cache, and hands out no batch that differs.
	m, err := warehouse.ReadManifest(local)
	if err != nil {
		t.Fatal(err)
	}
	key := v + "/" + m.Shards[0].RelativePath
	body, _, err := s.Get(context.Background(), key, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	body[shard.HeaderSize+1000] ^= 0x01
	if _, err := s.Put(context.Background(), key, body, objstore.Cond{}); err != nil {
		t.Fatal(err)
	}
	out = py("damaged")
	for _, mode := range []string{"whole", "range"} {
		if !strings.Contains(out, "refused "+mode+" ") {
			t.Fatalf("python did not refuse the damaged shard in %s mode:\n%s", mode, out)
		}
	}
	t.Logf("python damaged:\n%s", out)
	tr, err = s3PythonCmd(t, "examples/train.py", "--tensor-warehouse", url, "--steps", "2", "--batch-size", "4").CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(string(tr), "s3://") {
		t.Fatalf("train.py on a damaged shard object: %v, want exit 1\n%s", err, tr)
	}
}

// While a Python process holds a lease on a version, gc (with --keep 1,
// which would remove it) keeps it and names the Python holder; once the
// process closes the warehouse, gc removes it.
func TestS3GCKeepsPythonLease(t *testing.T) {
	requirePython(t, "numpy", "torch", "boto3")
	s3Setup(t)
	const prefix = "gcpy"
	url := "s3://" + s3Bucket + "/" + prefix
	cfgA, _ := writeConfig(t, demoRoot(t), map[string]any{"output_root": url})
	cfgB, _ := writeConfig(t, demoRoot(t), map[string]any{"output_root": url, "shard_target_mb": 2})
	a := s3BuildWithBinary(t, cfgA)
	b := s3BuildWithBinary(t, cfgB)
	va, vb := filepath.Base(a), filepath.Base(b)
	if va == vb || b != url+"/"+vb {
		t.Fatalf("builds printed %s and %s", a, b)
	}
	localCfg, _ := writeConfig(t, demoRoot(t), nil)
	local, _ := mustBuild(t, localCfg, nil)

	cmd := s3PythonCmd(t, s3PythonScriptPath(t), "hold", local, url+"/"+va, va, s3Bucket, prefix)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := false
	t.Cleanup(func() {
		if !done {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	lines := bufio.NewScanner(stdout)
	if !lines.Scan() || !strings.HasPrefix(lines.Text(), "opened ") {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		done = true
		t.Fatalf("python hold: %q\n%s", lines.Text(), stderr.String())
	}
	holder := strings.TrimPrefix(lines.Text(), "opened ")

	s := s3Store(t, prefix)
	live, err := s.LiveLeases(context.Background(), time.Now())
	if err != nil || len(live[va]) != 1 || live[va][0] != holder {
		t.Fatalf("Go reads the Python lease as %v (%v), want %s holding %s", live, err, holder, va)
	}
	res := runCLI(t, context.Background(), s3CLIEnv(t), "gc", "--output-root", url, "--keep", "1")
	if res.code != 0 || !strings.Contains(res.stdout, "kept "+va) || !strings.Contains(res.stdout, holder) {
		t.Fatalf("gc while python holds %s: exit %d\n%s%s", va, res.code, res.stdout, res.stderr)
	}
	if _, _, err := s.Get(context.Background(), va+"/manifest.json", 1<<20); err != nil {
		t.Fatalf("gc removed the version python reads: %v", err)
	}

	if _, err := stdin.Write([]byte("\n")); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() || lines.Text() != "closed" {
		t.Fatalf("python close: %q\n%s", lines.Text(), stderr.String())
	}
	err = cmd.Wait()
	done = true
	if err != nil {
		t.Fatalf("python hold: %v\n%s", err, stderr.String())
	}
	if objs, _ := s.List(context.Background(), ".leases/"); len(objs) != 0 {
		t.Fatalf("python close left %v", objs)
	}
	res = runCLI(t, context.Background(), s3CLIEnv(t), "gc", "--output-root", url, "--keep", "1")
	if res.code != 0 || !strings.Contains(res.stdout, "removed "+url+"/"+va) {
		t.Fatalf("gc after python closed: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if objs, _ := s.List(context.Background(), va+"/"); len(objs) != 0 {
		t.Fatalf("gc left %d objects of %s", len(objs), va)
	}
}
