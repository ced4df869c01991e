"""Training from a bucket (issue 25): a real S3 server (versitygw, started here on a
free localhost port over a temporary directory), a warehouse version uploaded in the
agreed layout (docs/format/s3.md), and the readers: ``warehouse_etl.open("s3://...")``
and ``make_loader("s3://...")`` against the same version read locally, byte for byte;
damaged objects and damaged cache files; the cache's limit and its sharing between
processes.

The server: ``$VERSITYGW``, else ``versitygw`` on PATH, else ``$(go env GOPATH)/bin``.
Without it the tests skip, except under CI=true, where they fail.
"""
import contextlib
import glob
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from unittest import mock

import numpy as np

from tests._fixtures import DATA, fixtures

ACCESS, SECRET, BUCKET = "warehouse-test-key", "warehouse-test-secret", "warehouse-test"
PY = sys.executable
_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3",
        "AWS_PROFILE", "AWS_SESSION_TOKEN")


def find_versitygw():
    cands = [os.environ.get("VERSITYGW"), shutil.which("versitygw")]
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        gopath = subprocess.run(["go", "env", "GOPATH"], capture_output=True, text=True, timeout=30).stdout.strip()
        if gopath:
            cands.append(os.path.join(gopath.split(os.pathsep)[0], "bin", "versitygw"))
    cands.append(os.path.expanduser("~/go/bin/versitygw"))
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A versitygw process serving a temporary directory, with one bucket."""

    def __init__(self, binary, workdir):
        self.dir = os.path.join(workdir, "s3root")
        os.makedirs(self.dir)
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log = open(os.path.join(workdir, "versitygw.log"), "wb")
        self.proc = subprocess.Popen([binary, "--access", ACCESS, "--secret", SECRET, "--port",
                                      f"127.0.0.1:{self.port}", "posix", self.dir],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + 30
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"versitygw exited with {self.proc.returncode}")
            with contextlib.suppress(OSError):
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                break
            if time.time() > deadline:
                self.stop()
                raise RuntimeError("versitygw did not listen within 30 s")
            time.sleep(0.05)
        self.client = client(self.endpoint)
        self.client.create_bucket(Bucket=BUCKET)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def client(endpoint):
    import boto3
    import botocore.config
    return boto3.session.Session().client(
        "s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id=ACCESS,
        aws_secret_access_key=SECRET, config=botocore.config.Config(s3={"addressing_style": "path"}))


def upload_version(c, bucket, prefix, version_dir, pointers=("latest",)):
    """Upload a local version directory in the agreed layout (the test's own uploader,
    independent of the Go publisher): every file at ``PREFIX/<vname>/<relative path>``,
    ``manifest.json`` last, then the pointer objects. Returns the version name."""
    vname = os.path.basename(os.path.normpath(version_dir))
    key = lambda *p: "/".join(([prefix] if prefix else []) + list(p))
    files = []
    for d, _, names in os.walk(version_dir):
        for n in names:
            rel = os.path.relpath(os.path.join(d, n), version_dir).replace(os.sep, "/")
            files.append(rel)
    files.sort(key=lambda r: (r == "manifest.json", r))
    for rel in files:
        with open(os.path.join(version_dir, rel), "rb") as f:
            c.put_object(Bucket=bucket, Key=key(vname, rel), Body=f.read())
    for p in pointers:
        c.put_object(Bucket=bucket, Key=key(p), Body=(vname + "\n").encode())
    return vname


def _need_server(test):
    binary = find_versitygw()
    if binary is None:
        if os.environ.get("CI") == "true":
            test.fail("versitygw not found (VERSITYGW, PATH, $(go env GOPATH)/bin): .ci/run installs it")
        test.skipTest("versitygw not found (VERSITYGW, PATH or $(go env GOPATH)/bin)")
    try:
        import boto3  # noqa: F401
    except ImportError:
        if os.environ.get("CI") == "true":
            test.fail("boto3 missing: CI installs python3-boto3")
        test.skipTest("no boto3")
    return binary


def _local_version():
    """A version with several shards and per-sample checksums: the u8 fixture (the
    Go test builds it), else $WAREHOUSE_ETL_S3_VERSION."""
    if DATA:
        fx = fixtures()
        for name in ("u8", "f16"):
            if name in fx:
                return fx[name]["dir"]
    return os.environ.get("WAREHOUSE_ETL_S3_VERSION")


_CHILD = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import warehouse_etl
from warehouse_etl import _s3
url, cache, out, mode = sys.argv[2:6]
wh = warehouse_etl.open(url, cache_dir=cache, endpoint_url=sys.argv[6], mode=mode, fetch_ahead=0)
sys.stdin.readline()  # start together
for b in wh.batches(4, shuffle="none"):
    wh.read_batch(b)
wh.close()
with open(out, "w") as f:
    json.dump({"counts": _s3.get_counts(), "fetches": wh.cache.fetches}, f)
"""


class S3Test(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.binary = find_versitygw()
        cls.local = _local_version()
        cls.server = None
        cls.work = tempfile.mkdtemp(prefix="warehouse-s3-test-")
        if cls.binary is None or cls.local is None:
            return
        try:
            import boto3  # noqa: F401
        except ImportError:
            return
        cls.server = Server(cls.binary, cls.work)
        # The readers take credentials and the endpoint the AWS way (the environment).
        cls.env = {k: os.environ.get(k) for k in _ENV}
        os.environ.update({"AWS_ACCESS_KEY_ID": ACCESS, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1",
                           "AWS_ENDPOINT_URL": cls.server.endpoint})
        for k in ("AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
            os.environ.pop(k, None)
        cls.prefix = "team/wh"
        cls.vname = upload_version(cls.server.client, BUCKET, cls.prefix, cls.local, pointers=("latest", "latest-u8"))
        cls.url = f"s3://{BUCKET}/{cls.prefix}"

    @classmethod
    def tearDownClass(cls):
        if cls.server is not None:
            cls.server.stop()
            for k, v in cls.env.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        shutil.rmtree(cls.work, ignore_errors=True)

    def setUp(self):
        _need_server(self)
        if self.local is None:
            self.skipTest("no warehouse: run via go test ./cmd/warehouse-etl -run TestPythonPackage")
        import warehouse_etl
        from warehouse_etl import _s3
        self.we, self.s3 = warehouse_etl, _s3
        self.cache = tempfile.mkdtemp(dir=self.work, prefix="cache-")
        self.addCleanup(shutil.rmtree, self.cache, True)
        self.lwh = warehouse_etl.open(self.local)
        self.addCleanup(self.lwh.close)

    def open(self, url=None, **kw):
        kw.setdefault("cache_dir", self.cache)
        kw.setdefault("endpoint_url", self.server.endpoint)
        wh = self.we.open(url or self.url, **kw)
        self.addCleanup(wh.close)
        return wh

    def assertBatchEqual(self, a, b, what=""):
        for key in ("images", "boxes", "mask", "class_index", "box_count", "records", "extras", "index"):
            if key not in a or key not in b:
                continue
            x, y = np.asarray(a[key]), np.asarray(b[key])
            self.assertEqual(x.shape, y.shape, f"{what} {key}")
            self.assertEqual(np.ascontiguousarray(x).tobytes(), np.ascontiguousarray(y).tobytes(), f"{what} {key}")

    def shard_keys(self, wh):
        return [f"{BUCKET}/{self.prefix}/{self.vname}/{sh.entry['relative_path']}" for sh in wh._shards]

    def flip_object(self, rel, offset):
        """Re-upload object ``rel`` of the version with one byte flipped; returns a
        function that puts the original back."""
        key = f"{self.prefix}/{self.vname}/{rel}"
        c = self.server.client
        orig = c.get_object(Bucket=BUCKET, Key=key)["Body"].read()
        bad = bytearray(orig)
        bad[offset] ^= 0x40
        c.put_object(Bucket=BUCKET, Key=key, Body=bytes(bad))
        return lambda: c.put_object(Bucket=BUCKET, Key=key, Body=orig)

    # Opening.

    def test_objects_are_the_local_files(self):
        """The uploaded objects are the version's files, byte for byte (what the readers
        below compare against)."""
        c = self.server.client
        for d, _, names in os.walk(self.local):
            for n in names:
                rel = os.path.relpath(os.path.join(d, n), self.local).replace(os.sep, "/")
                body = c.get_object(Bucket=BUCKET, Key=f"{self.prefix}/{self.vname}/{rel}")["Body"].read()
                with open(os.path.join(d, n), "rb") as f:
                    self.assertEqual(hashlib.sha256(body).digest(), hashlib.sha256(f.read()).digest(), rel)

    def test_open_forms(self):
        for url in (self.url, self.url + "/", f"{self.url}/latest-u8", f"{self.url}/{self.vname}"):
            wh = self.open(url, endpoint_url=None)  # AWS_ENDPOINT_URL
            self.assertEqual(wh.manifest["version"], self.lwh.manifest["version"], url)
            self.assertEqual(wh.dir, f"{self.url}/{self.vname}")
            self.assertEqual(len(wh), len(self.lwh))
        with self.assertRaisesRegex(self.we.WarehouseError, "not a pointer"):
            self.open(f"{self.url}/latest-nope")
        with self.assertRaisesRegex(self.we.WarehouseError, "neither a warehouse version"):
            self.open(f"s3://{BUCKET}/nowhere")
        with self.assertRaisesRegex(self.we.WarehouseError, "not a published version"):
            self.open(f"{self.url}/v0123456789abcdef")
        with self.assertRaisesRegex(TypeError, "options of s3:// paths only"):
            self.we.open(self.local, cache_dir=self.cache)

    def test_lease_held_while_open(self):
        c = self.server.client
        prefix = f"{self.prefix}/.leases/{self.vname}/"
        listed = lambda: {o["Key"] for o in c.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])}
        before = listed()
        wh = self.open()
        keys = sorted(listed() - before)
        self.assertEqual(len(keys), 1, keys)
        body = json.loads(c.get_object(Bucket=BUCKET, Key=keys[0])["Body"].read())
        self.assertEqual(body["version"], self.vname)
        self.assertEqual(keys[0], f"{prefix}{body['holder']}.json")
        self.assertGreater(body["expires_unix_ms"], time.time() * 1000 + 500e3)
        wh.close()
        self.assertEqual(listed(), before)

    def test_lease_renewed(self):
        c = self.server.client
        wh = self.open(lease_ttl_s=0.9)  # renewed every 0.3 s
        key = wh._lease.key
        first = json.loads(c.get_object(Bucket=BUCKET, Key=key)["Body"].read())["expires_unix_ms"]
        deadline = time.time() + 10
        while time.time() < deadline:
            time.sleep(0.1)
            later = json.loads(c.get_object(Bucket=BUCKET, Key=key)["Body"].read())["expires_unix_ms"]
            if later > first:
                break
        self.assertGreater(later, first)

    def test_damaged_manifest_refused(self):
        restore = self.flip_object("manifest.json", 10)
        try:
            with self.assertRaisesRegex(self.we.WarehouseError, "manifest invalid"):
                self.open()
        finally:
            restore()

    # Reading: byte for byte the local version.

    def test_read_batch_equals_local(self):
        for mode in ("whole", "range"):
            wh = self.open(mode=mode, cache_dir=os.path.join(self.cache, mode))
            for seed in (0, 1):
                for b in self.lwh.batches(5, seed=seed, remainder="pad"):
                    self.assertBatchEqual(wh.read_batch(b), self.lwh.read_batch(b), f"{mode} seed {seed}")
            for i in (0, len(wh) - 1):
                self.assertEqual(wh[i]["image"].tobytes(), self.lwh[i]["image"].tobytes())
        # The cache's whole files are the objects.
        for sh in self.lwh._shards:
            rel = sh.entry["relative_path"]
            cached = os.path.join(self.cache, "whole", BUCKET, self.prefix, self.vname, "whole", rel)
            with open(cached, "rb") as f, open(os.path.join(self.local, rel), "rb") as g:
                self.assertEqual(f.read(), g.read(), rel)

    def compact(self):
        """The u8compact fixture (shard_version 5), uploaded once under its own prefix:
        (url, local dir)."""
        fx = fixtures() if DATA else {}
        if "u8compact" not in fx:
            self.skipTest("no u8compact fixture: run via go test ./cmd/warehouse-etl -run TestPythonPackage")
        d = fx["u8compact"]["dir"]
        if not getattr(type(self), "_compact_up", False):
            upload_version(self.server.client, BUCKET, "team/whc", d)
            type(self)._compact_up = True
        return f"s3://{BUCKET}/team/whc", d

    def test_compact_range_mode_reads_whole_shards(self):
        """Compact shards store images as regions of varying size: mode="range" fetches
        them whole, and reads equal the local version's."""
        url, d = self.compact()
        local = self.we.open(d)
        self.addCleanup(local.close)
        self.assertTrue(local.layout.compact)
        with self.assertLogs("warehouse_etl", "INFO") as logs:
            wh = self.open(url, mode="range")
        for b in local.batches(5, seed=1, remainder="pad"):
            self.assertBatchEqual(wh.read_batch(b), local.read_batch(b), "compact range")
        for i in (0, len(wh) - 1):
            self.assertEqual(wh[i]["image"].tobytes(), local[i]["image"].tobytes())
        self.assertEqual(set(wh._modes), {"whole"})
        self.assertTrue(any("mode='range' fetches whole shards" in m for m in logs.output), logs.output)

    def test_mixture_with_s3_part(self):
        """[(s3://, w), (local, w)] reads as the same mixture of two local versions; the
        S3 options go to the s3:// part."""
        from warehouse_etl.torch import make_loader
        url, d = self.compact()
        want = make_loader([(self.local, 1), (d, 2)], 4, seed=5, epoch=1)
        got = make_loader([(self.url, 1), (d, 2)], 4, seed=5, epoch=1, mode="range", cache_dir=self.cache,
                          endpoint_url=self.server.endpoint)
        self.assertEqual(got.warehouse.warehouses[0].mode, "range")
        self.assertEqual(got.warehouse.warehouses[0].cache.root, self.cache)
        n = 0
        for g, w in zip(got, want):
            self.assertBatchEqual({k: v.numpy() for k, v in g.items() if hasattr(v, "numpy")},
                                  {k: v.numpy() for k, v in w.items() if hasattr(v, "numpy")})
            self.assertEqual(g["warehouse"].tolist(), w["warehouse"].tolist())
            n += 1
        self.assertEqual(n, len(want))
        got.dataset.close()
        want.dataset.close()

    def test_windows_refused_closes_the_warehouse(self):
        """windows= on an s3:// version reads episodes.bin through the cache; a version
        without one is refused with the local reader's error, and the S3Warehouse
        make_loader opened is closed (its lease gone)."""
        from warehouse_etl.torch import make_loader
        c = self.server.client
        prefix = f"{self.prefix}/.leases/{self.vname}/"
        listed = lambda: {o["Key"] for o in c.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])}
        before = listed()
        if self.lwh.manifest["files"].get("episodes"):
            self.skipTest("the fixture has episodes.bin")
        extras = [x["name"] for x in self.lwh.manifest["extras"]]
        name = extras[0] if extras else "no-such-extra"
        # Hold what open() returns, so that only an explicit close (not its finalizer)
        # can remove the lease.
        held, real_open = [], self.we.open

        def spy(*a, **kw):
            held.append(real_open(*a, **kw))
            return held[-1]
        with mock.patch.object(self.we, "open", spy):
            with self.assertRaises((self.we.WarehouseError, ValueError)) as cm:
                make_loader(self.url, 2, windows={name: [0]}, cache_dir=self.cache, endpoint_url=self.server.endpoint)
        self.assertIn("has no episode index (episodes.bin)" if extras else "no extra", str(cm.exception))
        self.assertIn(self.url, str(cm.exception))
        self.assertEqual(len(held), 1)
        self.assertEqual(listed(), before)

    def test_version_file_fetched_checked_cached(self):
        """What Episodes reads episodes.bin with on S3: a version file fetched whole,
        checked against the manifest's size and sha256 (here manifest.json's own, taken
        from the local file), kept in the cache, fetched again when the cached copy is
        damaged, refused when the object does not match."""
        with open(os.path.join(self.local, "manifest.json"), "rb") as f:
            want = f.read()
        sha = hashlib.sha256(want).hexdigest()
        wh = self.open()
        self.assertEqual(wh._version_file("manifest.json", len(want), sha), want)
        cached = os.path.join(wh._vdir, "files", "manifest.json")
        with open(cached, "rb") as f:
            self.assertEqual(f.read(), want)
        self.s3.reset_counts()
        self.assertEqual(wh._version_file("manifest.json", len(want), sha), want)
        self.assertEqual(sum(v[0] + v[1] for v in self.s3.get_counts().values()), 0)  # from the cache
        with open(cached, "r+b") as f:
            f.write(b"X")
        self.assertEqual(wh._version_file("manifest.json", len(want), sha), want)
        self.assertEqual(sum(v[0] + v[1] for v in self.s3.get_counts().values()), 1)  # damaged: fetched again
        with self.assertRaises(self.we.WarehouseError) as cm:
            wh._version_file("manifest.json", len(want), "0" * 64)
        self.assertIn(f"{wh.dir}/manifest.json: {len(want)} bytes of sha256 {sha}", str(cm.exception))

    def test_range_mode_fetches_only_what_is_read(self):
        wh = self.open(mode="range", fetch_ahead=0)
        self.s3.reset_counts()
        wh.read_batch([0])
        counts = self.s3.get_counts()
        key = self.shard_keys(wh)[0]
        whole, ranged, nbytes = counts[key]
        self.assertEqual(whole, 0)
        self.assertEqual(ranged, 3)  # header, metadata sections, one image
        self.assertLess(nbytes, wh._shards[0].entry["bytes"])
        self.assertEqual(sum(v[0] + v[1] for k, v in counts.items() if k != key), 0)

    def test_make_loader_equals_local(self):
        from warehouse_etl.torch import make_loader
        want = [self.lwh.read_batch(b) for b in self.lwh.batches(4, seed=3, epoch=1)]
        for mode in ("whole", "range"):
            for threads in (0, 2):
                loader = make_loader(self.url, 4, seed=3, epoch=1, reader_threads=threads, mode=mode,
                                     cache_dir=os.path.join(self.cache, f"{mode}{threads}"),
                                     endpoint_url=self.server.endpoint)
                got = [{k: v.numpy() for k, v in b.items() if k != "repeats"} for b in loader]
                self.assertEqual(len(got), len(want))
                for g, w in zip(got, want):
                    self.assertBatchEqual(g, w, f"{mode} reader_threads={threads}")
                loader.dataset.close()

    def test_dataloader_workers(self):
        from torch.utils.data import DataLoader
        from warehouse_etl.torch import WarehouseBatchSampler, WarehouseDataset, WarehouseLoader
        want = {int(b[0]): self.lwh.read_batch(b) for b in self.lwh.batches(3, seed=5)}
        for mode, cls in (("whole", DataLoader), ("range", DataLoader), ("whole", WarehouseLoader),
                          ("range", WarehouseLoader)):
            # WarehouseLoader: the main process fetches ahead into the cache the workers read.
            wh = self.open(mode=mode, cache_dir=os.path.join(self.cache, mode + cls.__name__))
            ds = WarehouseDataset(wh)
            loader = cls(ds, batch_size=None, sampler=WarehouseBatchSampler(wh, 3, seed=5), num_workers=2)
            n = 0
            for b in loader:
                self.assertBatchEqual({k: v.numpy() for k, v in b.items() if k != "repeats"},
                                      want[int(b["index"][0])], mode)
                n += 1
            self.assertEqual(n, len(want))

    # Damage.

    def test_flipped_object_byte_caught_in_every_mode(self):
        """A flipped image byte of sample 1 in the first shard's object: every way of
        reading that sample raises WarehouseError naming the object; none hands out a
        tensor."""
        from warehouse_etl.torch import make_loader
        sh = self.lwh._shards[0]
        s = self.lwh._shard(0).sections
        rel = sh.entry["relative_path"]
        restore = self.flip_object(rel, s["image"] + self.lwh.layout.image_bytes + 7)
        self.addCleanup(restore)
        obj = f"{self.url}/{self.vname}/{rel}"
        for mode in ("whole", "range"):
            cache = os.path.join(self.cache, "flip-" + mode)
            wh = self.open(mode=mode, cache_dir=cache)
            with self.assertRaises(self.we.WarehouseError) as cm:
                wh.read_batch([0, 1, 2])
            self.assertIn(obj, str(cm.exception))
            with self.assertRaises(self.we.WarehouseError):
                wh[1]
            for threads in (0, 2):
                loader = make_loader(self.url, 4, shuffle="none", reader_threads=threads, mode=mode, cache_dir=cache,
                                     endpoint_url=self.server.endpoint)
                with self.assertRaises(self.we.WarehouseError) as cm:
                    for _ in loader:
                        pass
                self.assertIn(obj, str(cm.exception))
                loader.dataset.close()
            if mode == "whole":  # nothing damaged is left under the final name
                self.assertFalse(os.path.exists(os.path.join(wh._cache_path(0))))

    def test_damaged_cache_file_fetched_again(self):
        """A cache file truncated, or with a flipped byte, under a running loader: the
        loader fetches it again and every batch still equals the local one."""
        from warehouse_etl.torch import make_loader
        want = [self.lwh.read_batch(b) for b in self.lwh.batches(2, shuffle="none")]
        for mode in ("whole", "range"):
            for damage in ("truncate", "flip"):
                cache = os.path.join(self.cache, f"{mode}-{damage}")
                loader = make_loader(self.url, 2, shuffle="none", mode=mode, cache_dir=cache, fetch_ahead=0,
                                     endpoint_url=self.server.endpoint)
                wh = loader.warehouse
                self.s3.reset_counts()
                it = iter(loader)
                got = [next(it)]  # shard 0 fetched and open
                path = wh._cache_path(0)
                size = os.path.getsize(path)
                if damage == "truncate":
                    os.truncate(path, size // 2)
                else:
                    with open(path, "r+b") as f:
                        # An image byte of the last sample of shard 0, not read yet.
                        last = wh._shards[0].entry["samples"] - 1
                        f.seek(wh._shards[0].sections["image"] + last * wh.layout.image_bytes + 3)
                        b = f.read(1)
                        f.seek(-1, 1)
                        f.write(bytes([b[0] ^ 0x10]))
                got += list(it)
                self.assertEqual(len(got), len(want))
                for g, w in zip(got, want):
                    self.assertBatchEqual({k: v.numpy() for k, v in g.items() if k != "repeats"}, w,
                                          f"{mode} {damage}")
                whole, ranged, _ = self.s3.get_counts()[self.shard_keys(wh)[0]]
                if mode == "whole":
                    self.assertEqual(whole, 2, f"{damage}: shard 0 fetched, then once again")
                else:
                    self.assertGreaterEqual(ranged, 2, f"{damage}: shard 0 fetched again")
                self.assertEqual(os.path.getsize(path), size)
                # wh[i] too (copies, never views of a cache file a truncation would pull away).
                os.truncate(path, size // 3)
                for i in range(wh._shards[0].entry["samples"]):
                    got, want_i = wh[i], self.lwh[i]
                    for key in ("image", "boxes", "mask", "extras_f32"):
                        self.assertEqual(got[key].tobytes(), want_i[key].tobytes(), f"{mode} {damage} wh[{i}]")
                    self.assertEqual(got["record"].tobytes(), want_i["record"].tobytes())
                    self.assertEqual(got["meta"], want_i["meta"])
                    self.assertTrue(got["image"].flags.owndata)
                self.assertEqual(os.path.getsize(path), size)
                loader.dataset.close()

    # The cache.

    def test_cache_limit_evicts(self):
        sizes = [sh.entry["bytes"] for sh in self.lwh._shards]
        self.assertGreaterEqual(len(sizes), 3)
        limit = max(sizes) * 2 + 1
        wh = self.open(cache_limit=limit, fetch_ahead=0)
        for epoch in range(2):
            for b in wh.batches(2, shuffle="none", epoch=epoch):
                self.assertBatchEqual(wh.read_batch(b), self.lwh.read_batch(b))
                self.assertLessEqual(wh.cache.usage(), limit)
        self.assertEqual(wh.cache.fetches, 2 * len(sizes))  # evicted, so fetched again in epoch 1
        files = glob.glob(os.path.join(self.cache, "**", "whole", "**", "*"), recursive=True)
        files = [f for f in files if os.path.isfile(f) and not f.endswith(".lock")]
        self.assertLessEqual(len(files), 2)
        with self.assertRaisesRegex(self.we.WarehouseError, "do not fit in cache_limit"):
            self.open(cache_limit=min(sizes) - 1, cache_dir=os.path.join(self.cache, "tiny")).read_batch([0])

    def ranks(self, mode, n=4):
        """``n`` processes (the ranks of one node) reading the same batches with one cache
        directory, started together: their GET counts and fetches."""
        outs, procs = [], []
        pkg = os.path.abspath(os.path.join(os.path.dirname(self.we.__file__), ".."))
        for r in range(n):
            out = os.path.join(self.cache, f"{mode}-rank{r}.json")
            outs.append(out)
            procs.append(subprocess.Popen([PY, "-c", _CHILD, pkg, self.url, os.path.join(self.cache, "shared-" + mode),
                                           out, mode, self.server.endpoint], stdin=subprocess.PIPE))
        time.sleep(1.0)
        for p in procs:
            p.stdin.write(b"go\n")
            p.stdin.close()
        for p in procs:
            self.assertEqual(p.wait(120), 0)
        res = []
        for out in outs:
            with open(out) as f:
                res.append(json.load(f))
        return res

    def test_processes_share_the_cache(self):
        """Four ranks of one node, whole mode: each shard object is fetched exactly once
        between them."""
        res = self.ranks("whole")
        total = {}
        for r in res:
            for k, v in r["counts"].items():
                total[k] = total.get(k, 0) + v[0]
        keys = self.shard_keys(self.lwh)
        self.assertEqual({k: total.get(k, 0) for k in keys}, {k: 1 for k in keys})
        self.assertEqual(sum(r["fetches"] for r in res), len(keys))

    def test_processes_share_the_range_cache(self):
        """Four ranks of one node, range mode: between them they fetch each shard's header
        and metadata once and each read sample's image once: the bytes a single reader
        needs, from the manifest's sizes."""
        res = self.ranks("range")
        l = self.lwh.layout
        read = np.unique(np.concatenate(list(self.lwh.batches(4, shuffle="none"))))
        shard_of = np.searchsorted(self.lwh.shard_starts, read, side="right") - 1
        want = {}
        for key, sh, k in zip(self.shard_keys(self.lwh), self.lwh._shards, range(len(self.lwh._shards))):
            n = int(np.count_nonzero(shard_of == k))
            if n:
                want[key] = sh.entry["bytes"] - sh.entry["samples"] * l.image_bytes + n * l.image_bytes
        got = {}
        for r in res:
            for k, v in r["counts"].items():
                if k in want:
                    self.assertEqual(v[0], 0, k)  # no whole GETs
                    got[k] = got.get(k, 0) + v[2]
        self.assertEqual(got, want)


class S3ImportTest(unittest.TestCase):
    """boto3 is imported for s3:// paths only, and its absence is a clear error."""

    def run_py(self, code):
        pkg = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
        return subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, PYTHONPATH=pkg))

    def test_local_reads_import_no_boto3(self):
        local = _local_version()
        if local is None:
            self.skipTest("no warehouse: run via go test ./cmd/warehouse-etl -run TestPythonPackage")
        r = self.run_py("import sys, warehouse_etl, warehouse_etl.torch\n"
                        f"wh = warehouse_etl.open({local!r}); wh.read_batch([0])\n"
                        "assert 'boto3' not in sys.modules and 'botocore' not in sys.modules, 'boto3 imported'\n")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_missing_boto3_is_a_clear_error(self):
        r = self.run_py("import sys\nsys.modules['boto3'] = None\nimport warehouse_etl\n"
                        "try:\n    warehouse_etl.open('s3://some-bucket/wh')\n"
                        "except warehouse_etl.WarehouseError as e:\n    print(e)\n")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("reading s3:// warehouses needs boto3", r.stdout)
        self.assertIn("python3-boto3", r.stdout)


if __name__ == "__main__":
    unittest.main()
