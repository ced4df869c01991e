"""A warehouse version read from S3 through the node-local cache: :class:`S3Warehouse`,
what :func:`warehouse_etl.open` returns for an ``s3://`` path.

It is a :class:`~warehouse_etl.warehouse.Warehouse` whose shard files are cache files:
the manifest comes from the bucket and is checked as a local one (detached digest,
schema, layout, thresholds); each shard is fetched when a read first needs it (or
ahead of it, :meth:`S3Warehouse.fetch_ahead`) and then read by the local code path.

``mode="whole"`` downloads whole shards, checked against the manifest's sha256 before
they get their final name in the cache. ``mode="range"`` fetches a shard's header and
metadata sections (everything but the images, checked by the shard parser and the
checksum table's own CRC) and then only the images of the samples a batch needs, one
GET per run of consecutive samples, each sample checked against its CRC-32C before it
is marked present. Either way a read then checks each sample's CRC-32C on its first
read in the process (``verify_samples``), so a cache file damaged after it was fetched
(truncated, overwritten) is caught: the reader drops it, fetches it again and reads
the batch again, once; a second failure is raised. A shard object that does not match
the manifest raises :class:`WarehouseError` naming its ``s3://`` URL: no tensor is ever
made of unchecked bytes.
"""
import collections
import contextlib
import errno
import fcntl
import hashlib
import logging
import os
import shutil
import tempfile
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import _crc32c, _s3
from ._cache import Cache, default_dir
from ._manifest import MANIFEST_DIGEST_NAME, MANIFEST_NAME, MAX_MANIFEST_BYTES, manifest_layout, read_manifest
from ._shard import has_sample_checksums, parse_shard
from ._thresholds import check_thresholds
from .errors import WarehouseError
from .warehouse import Warehouse

log = logging.getLogger("warehouse_etl")

MODES = ("whole", "range")
# open()'s keyword arguments for s3:// paths (make_loader passes them on).
S3_OPTIONS = ("cache_dir", "cache_limit", "mode", "fetch_threads", "fetch_ahead", "lease_ttl_s", "endpoint_url")


class _Proc:
    """What one process keeps of an S3Warehouse: locks, use counts, the client, the
    fetch pool. A forked DataLoader worker makes its own (keyed by pid)."""

    def __init__(self, n):
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.shard_locks = [threading.Lock() for _ in range(n)]
        self.range_locks = [threading.Lock() for _ in range(n)]
        self.users = [0] * n
        self.retired = collections.defaultdict(list)  # shard -> fds to close once unused
        self.present = [None] * n  # range mode: (mmap, uint8 view) of the presence file
        self.rw = [None] * n  # range mode: the cache file, read-write
        self.last_use = [0] * n
        self.tick = 0
        self.client = None
        self.pool = None
        self.closed = False


class S3Warehouse(Warehouse):
    """An open, checked warehouse version in S3. Use :func:`warehouse_etl.open` with an
    ``s3://bucket/prefix`` URL (the root: its ``latest`` pointer), ``.../latest-<config>``
    or ``.../v<16 hex>``. ``dir`` is the version's ``s3://`` URL; errors name objects by
    their URLs. Picklable: a DataLoader worker shares the cache directory."""

    # A cache file can be replaced or truncated under a reader: read_batch reads every
    # section with preadv (a short read is an error, then a fetch) and never gathers
    # from a mapping (a truncated mapping is a SIGBUS).
    _map_sections = False

    def __init__(self, url, *, ignore_thresholds=False, thresholds=None, verify_checksums=False,
                 verify_samples=True, cache_dir=None, cache_limit=None, mode="whole", fetch_threads=8,
                 fetch_ahead=8, lease_ttl_s=600, endpoint_url=None):
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}: want 'whole' or 'range'")
        if fetch_threads < 1 or fetch_ahead < 0 or lease_ttl_s <= 0:
            raise ValueError(f"fetch_threads {fetch_threads}, fetch_ahead {fetch_ahead}, lease_ttl_s {lease_ttl_s}: "
                             f"want >= 1, >= 0, > 0")
        loc = _s3.Location(url)
        cfg = {"url": url, "bucket": loc.bucket, "prefix": loc.prefix, "mode": mode,
               "cache_dir": os.path.abspath(cache_dir or default_dir()), "cache_limit": cache_limit,
               "fetch_threads": int(fetch_threads), "fetch_ahead": int(fetch_ahead), "endpoint_url": endpoint_url}
        self._cfg, self._loc = cfg, loc
        self._p = None
        self._lease = None
        c = _s3.client(endpoint_url, max_pool=max(32, 2 * int(fetch_threads)))
        version = _s3.resolve_version(c, loc)
        cfg["version"] = version
        vurl = loc.url(version)
        cache = Cache(cfg["cache_dir"], cache_limit)
        vdir = cache.version_dir(loc.bucket, loc.prefix, version)
        m = _fetch_manifest(c, loc, version, vurl, vdir)
        if m["version"][:16] != version[1:]:
            raise WarehouseError(f"{vurl}/{MANIFEST_NAME}: manifest invalid: version {m['version'][:16]}..., "
                                 f"but it is stored under {version}")
        with _urls(loc.bucket):
            check_thresholds(vurl, m, thresholds, ignore_thresholds)
        try:
            layout = manifest_layout(m)
        except ValueError as e:
            raise WarehouseError(f"{vurl}/{MANIFEST_NAME}: manifest invalid: {e}") from None
        # A flipped byte in a cache file must be found before a tensor is made of it:
        # every sample is checked on its first read in each process, whatever the caller
        # asked (False and None mean True here; "always" stays "always").
        self._init(vurl, m, layout, verify_checksums, verify_samples if verify_samples == "always" else True)
        self._readers_lock = None
        self._setup(cache)
        self._proc().client = c
        self._lease = _s3.Lease(c, loc, version, lease_ttl_s)
        weakref.finalize(self, self._lease.close)  # a warehouse dropped unclosed: no lease renewed forever
        if mode == "range" and layout.compact:
            log.info("%s: compact images (shard_version 5): mode='range' fetches whole shards", vurl)
        log.info("warehouse opened: %s, %d samples in %d shards, %s, cache %s (%s mode)", vurl, len(self),
                 len(self._shards), m["default_dtype"], cfg["cache_dir"], mode)

    def _setup(self, cache):
        cfg = self._cfg
        self._cache = cache
        self._vdir = cache.version_dir(cfg["bucket"], cfg["prefix"], cfg["version"])
        for sh in self._shards:  # errors name the object's URL (go_join would clean s3:// to s3:/)
            sh.path = self.dir + "/" + sh.entry["relative_path"]
        self._loc = _s3.Location(cfg["url"])
        self._ahead_lock = threading.Lock()
        self._ahead_gen = 0
        self._consumed = 0
        self._ahead_cv = threading.Condition(self._ahead_lock)
        # Per shard: "range" needs the per-sample checksums to check what it fetches, and
        # images stored whole at a fixed stride: a compact shard's images are regions of
        # varying size (shard.md, "Compact images"), so it is fetched whole.
        self._modes = [cfg["mode"] if has_sample_checksums(sh.entry, self.layout) and not self.layout.compact
                       else "whole" for sh in self._shards]

    def __getstate__(self):
        state = super().__getstate__()
        state["s3"] = dict(self._cfg)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        self._cfg = state["s3"]
        self._p = None
        self._lease = None  # the process that opened it holds the lease
        self._setup(Cache(self._cfg["cache_dir"], self._cfg["cache_limit"]))

    @property
    def mode(self):
        return self._cfg["mode"]

    @property
    def cache(self):
        return self._cache

    def _proc(self):
        p = self._p
        if p is None or p.pid != os.getpid():
            p = self._p = _Proc(len(self._shards))
        return p

    def _client(self):
        p = self._proc()
        if p.client is None:
            p.client = _s3.client(self._cfg["endpoint_url"], max_pool=max(32, 2 * self._cfg["fetch_threads"]))
        return p.client

    def _pool(self):
        p = self._proc()
        with p.lock:
            if p.pool is None:
                p.pool = ThreadPoolExecutor(self._cfg["fetch_threads"], thread_name_prefix="warehouse-s3")
            return p.pool

    def _key(self, k):
        return self._loc.key(self._cfg["version"], self._shards[k].entry["relative_path"])

    def _cache_path(self, k):
        return os.path.join(self._vdir, self._modes[k], *self._shards[k].entry["relative_path"].split("/"))

    # Fetching.

    def _version_file(self, name, size, sha256):
        """The bytes of the version's file ``name`` (episodes.bin), checked against the
        manifest's ``size`` and ``sha256``: from the cache (``<version>/files/<name>``)
        when the copy there checks, else fetched whole, checked and put there (a damaged
        copy is replaced)."""
        path = os.path.join(self._vdir, "files", *name.split("/"))
        ok = lambda b: len(b) == size and hashlib.sha256(b).hexdigest() == sha256
        with contextlib.suppress(OSError):
            with open(path, "rb") as f:
                raw = f.read(size + 1)
            if ok(raw):
                return raw
        url = self.dir + "/" + name
        try:
            raw = _s3.get(self._client(), self._cfg["bucket"], self._loc.key(self._cfg["version"], name), limit=size)
        except FileNotFoundError:
            raise WarehouseError(f"{url}: missing") from None
        if not ok(raw):
            raise WarehouseError(f"{url}: {len(raw)} bytes of sha256 {hashlib.sha256(raw).hexdigest()}, the manifest "
                                 f"says {size} bytes of {sha256}")
        with contextlib.suppress(OSError):  # the cache is a copy: an unwritable one costs a fetch next time
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(raw)
                os.replace(tmp, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
                raise
        return raw

    def _download(self, k):
        """fetch(f) for the cache: the whole shard object, checked against the manifest's
        size and sha256."""
        sh = self._shards[k]

        def fetch(f):
            h = hashlib.sha256()
            n = _s3.download(self._client(), self._cfg["bucket"], self._key(k), f, h, sh.entry["bytes"])
            if n != sh.entry["bytes"]:
                raise WarehouseError(f"{sh.path}: {n} bytes, the manifest says {sh.entry['bytes']}")
            got = h.hexdigest()
            if got != sh.entry["checksum_sha256"]:
                raise WarehouseError(f"{sh.path}: sha256 {got}, the manifest says {sh.entry['checksum_sha256']}")
        return fetch

    def _sha_check(self, k):
        """check(fd) for cache hits when samples are not checked on read."""
        if not self.verify_checksums:
            return None
        want = self._shards[k].entry["checksum_sha256"]

        def check(fd):
            h = hashlib.sha256()
            off = 0
            while True:
                b = os.pread(fd, 4 << 20, off)
                if not b:
                    break
                h.update(b)
                off += len(b)
            return h.hexdigest() == want
        return check

    def _release_one(self, exclude=()):
        """Let go of the least recently used shard this process holds open and is not
        reading (so eviction may take it). False when there is none."""
        p = self._proc()
        order = sorted((p.last_use[k], k) for k, sh in enumerate(self._shards)
                       if sh.fd is not None and sh.pid == p.pid and p.users[k] == 0 and k not in exclude)
        for _, k in order:
            lk = p.shard_locks[k]
            if not lk.acquire(blocking=False):
                continue
            try:
                with p.lock:  # against _use: a shard nobody reads now stays unread until dropped
                    if p.users[k] == 0 and self._shards[k].fd is not None:
                        self._drop(k, close_now=True)
                        return True
            finally:
                lk.release()
        return False

    def _drop(self, k, close_now=False):
        """Forget shard k's open file in this process (closed now, or once no read uses it)."""
        p, sh = self._proc(), self._shards[k]
        fds = {sh.fd if sh.pid == p.pid else None, p.rw[k], p.present[k][2] if p.present[k] else None} - {None}
        sh.fd = sh.mmap = None
        p.rw[k] = None
        p.present[k] = None  # the mapping closes when its views are gone
        if close_now:
            for fd in fds:
                os.close(fd)
        else:
            p.retired[k].extend(fds)

    def _open_cached(self, k):
        """``(fd, fresh)``: shard k's cache file, share-locked, fetched first if need be;
        ``fresh`` when its checked parts were fetched just now."""
        p, sh = self._proc(), self._shards[k]
        path = self._cache_path(k)
        release = lambda: self._release_one(exclude=(k,))
        if self._modes[k] == "whole":
            return self._cache.open_whole(path, sh.entry["bytes"], self._download(k), self._sha_check(k), release)
        n = sh.entry["samples"]

        def init(fd):
            # The header and metadata sections: everything but the images.
            s = self.layout.sections(n, meta=True, checksums=True)
            img_end = s["image"] + n * self.layout.image_bytes
            for a, b in ((0, s["image"]), (img_end, sh.entry["bytes"])):
                data = _s3.get(self._client(), self._cfg["bucket"], self._key(k), a, b)
                os.pwrite(fd, data, a)

        fd, pfd, fresh = self._cache.open_range(path, sh.entry["bytes"], n + 1, release, init)
        import mmap
        try:
            mm = mmap.mmap(pfd, n + 1)
        except BaseException:
            os.close(pfd)
            os.close(fd)
            raise
        p.present[k] = (mm, np.frombuffer(mm, dtype=np.uint8), pfd)
        p.rw[k] = fd
        return fd, fresh

    def _shard(self, k):
        sh = self._shards[k]
        pid = os.getpid()
        if sh.fd is not None and sh.pid == pid:
            return sh
        p = self._proc()
        with p.shard_locks[k]:
            if sh.fd is not None and sh.pid == pid:
                return sh
            if sh.error is not None:
                raise sh.error
            if p.closed:
                raise WarehouseError(f"{self.dir}: closed")
            if sh.pid != pid:  # inherited from the parent: not ours to close
                sh.fd = sh.mmap = None
                sh.verified = None
            self._install(k, *self._open_checked(k))
            return sh

    def _install(self, k, fd, sections):
        sh = self._shards[k]
        sh.sections = sections
        sh.crcs = sections["crc_table"]
        if sh.verified is None or sh.crcs is None or sh.verified.shape[0] != sh.crcs.shape[0]:
            sh.verified = None if sh.crcs is None else np.zeros(sh.crcs.shape[0], dtype=bool)
        sh.mmap = None  # wh[i] maps the new file
        sh.fd, sh.pid = fd, os.getpid()

    def _open_checked(self, k):
        """``(fd, sections)``: shard k's cache file, fetched if need be, parsed and checked
        (shard.md's Validation and the manifest entry). A cached file that fails is
        fetched again, once; a freshly fetched one that fails is refused for good."""
        p, sh = self._proc(), self._shards[k]
        for attempt in range(2):
            fd, fresh = self._open_cached(k)
            try:
                return fd, parse_shard(fd, sh.path, sh.entry, self.layout)
            except WarehouseError as e:
                if not (fresh or attempt):
                    log.warning("cache: %s: %s: fetching it again", self._cache_path(k), e)
                    self._cache.invalidate(self._cache_path(k), fd)
                if p.present[k] is not None:
                    os.close(p.present[k][2])
                p.rw[k] = p.present[k] = None
                os.close(fd)
                if fresh or attempt:
                    sh.error = e  # the object itself is damaged: refused for good
                    raise

    def _replace(self, k, seen):
        """A read found shard k's cache file (open as fd ``seen``) damaged: remove it, fetch
        it again and swap the new file in. The old fd stays open (retired) until no
        thread reads shard k: a reader in flight gets the damaged bytes, fails its own
        check and reads again from the new file. Nothing when another thread swapped
        it already."""
        p, sh = self._proc(), self._shards[k]
        with p.shard_locks[k]:
            if sh.fd != seen or sh.pid != p.pid or seen is None:
                return
            self._cache.invalidate(self._cache_path(k), seen)
            with p.lock:
                p.retired[k].append(seen)  # range mode: p.rw[k] is this fd
                if p.present[k] is not None:
                    p.retired[k].append(p.present[k][2])
            p.rw[k] = p.present[k] = None
            try:
                self._install(k, *self._open_checked(k))
            except BaseException:
                sh.fd = None  # retired above
                raise

    def _fill(self, k, local):
        """Range mode: fetch the images of shard k's samples ``local`` that the cache file
        lacks, one GET per run of consecutive samples, checking each sample's CRC-32C
        (its images as fetched, the rest from the checked metadata) before marking it
        present."""
        p, sh = self._proc(), self._shards[k]
        for _ in range(3):
            self._shard(k)
            pres, fd, s = p.present[k], p.rw[k], sh.sections
            if pres is not None and fd is not None:
                break  # another thread may drop it now: the fd stays open while this thread uses shard k
        else:
            raise WarehouseError(f"{sh.path}: cache file {self._cache_path(k)} replaced 3 times while being filled")
        present = pres[1]
        need = np.unique(local[present[local] == 0])
        if not need.size:
            return
        with p.range_locks[k]:
            need = need[present[need] == 0]
            if not need.size:
                return
            cuts = np.flatnonzero(np.diff(need) != 1) + 1
            self._cache.make_room(int(need.size) * self.layout.image_bytes, lambda: self._release_one(exclude=(k,)))
            for run in np.split(need, cuts):
                j0, j1 = int(run[0]), int(run[-1]) + 1
                # The run's presence bytes, locked against the node's other processes
                # (POSIX record locks; this process's threads are serialised above): one
                # of them fetches the run, the others then find it present.
                _lock_run(pres[2], j0, j1 - j0)
                try:
                    if not present[j0:j1].all():
                        self._fill_run(k, fd, s, j0, j1)
                        present[j0:j1] = 1
                finally:
                    fcntl.lockf(pres[2], fcntl.LOCK_UN, j1 - j0, j0)

    def _fill_run(self, k, fd, s, j0, j1):
        """Fetch the images of samples [j0, j1) of shard k, check each sample's CRC-32C,
        write them into the cache file ``fd`` (sections ``s``)."""
        sh, l, cnt = self._shards[k], self.layout, j1 - j0
        data = _s3.get(self._client(), self._cfg["bucket"], self._key(k), s["image"] + j0 * l.image_bytes,
                       s["image"] + j1 * l.image_bytes)
        parts = [np.frombuffer(data, dtype=np.uint8).reshape(cnt, l.image_bytes)]
        for sec, size in l.small_sections():
            b = os.pread(fd, cnt * size, s[sec] + j0 * size)
            if len(b) != cnt * size:
                raise WarehouseError(f"{sh.path}: cache file {self._cache_path(k)}: short read: {len(b)} of "
                                     f"{cnt * size} bytes at offset {s[sec] + j0 * size}")
            parts.append(np.frombuffer(b, dtype=np.uint8).reshape(cnt, size))
        got = _crc32c.crc32c_rows(parts, range(cnt))
        want = sh.crcs[j0:j1]
        bad = np.flatnonzero(got != want)
        if bad.size:
            j = j0 + int(bad[0])
            raise WarehouseError(f"{sh.path}: warehouse sample {int(self.shard_starts[k]) + j}: shard: corrupt: "
                                 f"sample {j}: crc32c 0x{int(got[bad[0]]):08x}, the checksum table says "
                                 f"0x{int(want[bad[0]]):08x} (fetched by range)")
        if os.pwrite(fd, data, s["image"] + j0 * l.image_bytes) != len(data):
            raise WarehouseError(f"{sh.path}: cache file {self._cache_path(k)}: short write")

    def _ensure(self, shard_of, local, ks):
        """Shards ``ks`` open (fetched in parallel where several are missing) and, in
        range mode, the samples (shard_of, local) present."""
        p = self._proc()
        missing = [k for k in ks if not (self._shards[k].fd is not None and self._shards[k].pid == p.pid)]
        if len(missing) > 1:
            list(self._pool().map(self._shard, missing))
        elif missing:
            self._shard(missing[0])
        ranged = [k for k in ks if self._modes[k] == "range"]
        if not ranged:
            return
        jobs = [(k, local[shard_of == k]) for k in ranged]
        if len(jobs) > 1:
            list(self._pool().map(lambda a: self._fill(*a), jobs))
        else:
            self._fill(*jobs[0])

    def _damaged(self, err, ks):
        """The shard of ``ks`` whose file a read error names, or None."""
        msg = str(err)
        for k in ks:
            if msg.startswith(self._shards[k].path + ":"):
                return k
        return None

    def read_batch(self, indices, out=None, rows=None):
        """:meth:`Warehouse.read_batch`, with the batch's shards fetched first (whole, or
        the batch's runs of samples in range mode). A read that finds a cache file
        damaged (short, or a sample failing its CRC-32C) drops that file, fetches it
        again and reads the batch again, once."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if not idx.size or int(idx.min()) < 0 or int(idx.max()) >= len(self):
            return super().read_batch(idx, out, rows)
        shard_of, local = self._locate_all(idx)
        ks = np.unique(shard_of).tolist()
        self._use(ks)
        try:
            for attempt in range(2):
                seen = {}
                try:
                    self._ensure(shard_of, local, ks)
                    seen = {k: self._shards[k].fd for k in ks}
                    return super().read_batch(idx, out, rows)
                except WarehouseError as e:
                    k = self._damaged(e, ks)
                    if k is None or attempt:
                        raise
                    log.warning("cache: %s: %s: fetching it again", self._cache_path(k), e)
                    self._replace(k, seen.get(k, self._shards[k].fd))
        finally:
            self._unuse(ks)

    def _use(self, ks):
        """Shards ``ks`` are being read by this thread: their fds stay open (a drop only
        retires them) until :meth:`_unuse`."""
        p = self._proc()
        with p.lock:
            p.tick += 1
            for k in ks:
                p.users[k] += 1
                p.last_use[k] = p.tick

    def _unuse(self, ks):
        p = self._proc()
        with p.lock:
            for k in ks:
                p.users[k] -= 1
                if p.users[k] == 0 and p.retired[k]:
                    for fd in p.retired.pop(k):
                        with contextlib.suppress(OSError):
                            os.close(fd)

    def __getitem__(self, i):
        """:meth:`Warehouse.__getitem__`, with the sample fetched first, and its arrays
        copied out of the cache file's mapping: a cache file truncated under a view
        would crash its reader (SIGBUS), so views into cache files are not handed out.
        A cache file found short, or the sample failing its CRC-32C, is fetched again,
        once."""
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            return super().__getitem__(i)
        k, j = self._locate(i)
        sh = self._shards[k]
        self._use([k])
        try:
            for attempt in range(2):
                seen = None
                try:
                    self._ensure(np.array([k]), np.array([j]), [k])
                    seen = sh.fd
                    if os.fstat(seen).st_size != sh.entry["bytes"]:
                        raise WarehouseError(f"{sh.path}: cache file {self._cache_path(k)}: "
                                             f"{os.fstat(seen).st_size} bytes, want {sh.entry['bytes']}")
                    out = super().__getitem__(i)
                    break
                except WarehouseError as e:
                    if attempt or self._damaged(e, [k]) is None:
                        raise
                    log.warning("cache: %s: %s: fetching it again", self._cache_path(k), e)
                    self._replace(k, seen if seen is not None else sh.fd)
        finally:
            self._unuse([k])
        copy = lambda a: np.array(a, copy=True) if isinstance(a, np.ndarray) else a
        out["extras"] = {name: copy(a) for name, a in out["extras"].items()}
        rec = out["record"].copy()
        out.update({key: copy(out[key]) for key in ("image", "boxes", "mask", "extras_f32")})
        out["record"], out["class_index"] = rec, rec["class_index"]
        return out

    # Fetching ahead of the reads.

    def advise(self, indices):
        """No kernel advice here: shards come from the bucket ahead of the loop through
        :meth:`fetch_ahead`, and advising would download them in the caller's thread."""

    def fetch_ahead(self, plan, consumer=None):
        """Fetch what the batches of ``plan`` (an iterable of index arrays or
        PlannedBatch, in the order they will be read) need, in a background thread,
        up to ``fetch_ahead`` batches ahead of the batches consumed: those counted by
        the returned iterator, which wraps ``consumer`` (a DataLoader's iterator), or
        else the batches this process reads with read_batch. Fetch errors are left to
        the read that needs the batch (it raises them). Returns the wrapper (or None)."""
        ahead = self._cfg["fetch_ahead"]
        with self._ahead_lock:
            self._ahead_gen += 1
            gen = self._ahead_gen
            self._consumed = 0
            self._ahead_cv.notify_all()
        if ahead:
            threading.Thread(target=self._ahead_loop, args=(gen, iter(plan), ahead), name="warehouse-s3-ahead",
                             daemon=True).start()
        return None if consumer is None else _Counting(self, gen, consumer)

    def _consume(self, gen):
        with self._ahead_lock:
            if gen == self._ahead_gen:
                self._consumed += 1
                self._ahead_cv.notify_all()

    def _ahead_loop(self, gen, plan, ahead):
        t = 0
        for item in plan:
            idx = np.asarray(getattr(item, "indices", item), dtype=np.int64).reshape(-1)
            with self._ahead_lock:
                while gen == self._ahead_gen and t >= self._consumed + ahead:
                    self._ahead_cv.wait(1.0)
                if gen != self._ahead_gen:
                    return
            t += 1
            if not idx.size or int(idx.min()) < 0 or int(idx.max()) >= len(self):
                continue
            shard_of, local = self._locate_all(idx)
            ks = np.unique(shard_of).tolist()
            try:
                if self.mode == "range":
                    self._use(ks)
                    try:
                        self._ensure(shard_of, local, ks)
                    finally:
                        self._unuse(ks)
                else:
                    # Into the cache only: the read opens (and checks) it; this thread holds
                    # nothing, and leaves alone what is open here or in the cache already.
                    todo = [k for k in ks if (self._shards[k].fd is None or self._shards[k].pid != os.getpid())
                            and not os.path.exists(self._cache_path(k))]
                    if todo:
                        list(self._pool().map(self._prefetch_whole, todo))
            except Exception as e:  # the read of that batch fetches again and raises
                log.info("fetch ahead: %s", e)

    def _prefetch_whole(self, k):
        if self._modes[k] != "whole":
            return self._shard(k)
        fd, _ = self._cache.open_whole(self._cache_path(k), self._shards[k].entry["bytes"], self._download(k),
                                       None, lambda: self._release_one(exclude=(k,)))
        os.close(fd)

    def close(self):
        """Stop fetching ahead, delete the lease, close the cache files (their locks go
        with them: eviction may take them now)."""
        if hasattr(self, "_ahead_lock"):
            with self._ahead_lock:
                self._ahead_gen += 1
                self._ahead_cv.notify_all()
        lease, self._lease = getattr(self, "_lease", None), None
        if lease is not None:
            lease.close()
        p = getattr(self, "_p", None)
        if p is not None and p.pid == os.getpid():
            if p.pool is not None:
                p.pool.shutdown(wait=True, cancel_futures=True)
                p.pool = None
            p.closed = True  # a read still in flight in a reader thread fails instead of reopening
            for k, sh in enumerate(self._shards):
                with p.shard_locks[k], p.lock:
                    fds = {p.rw[k], sh.fd if sh.pid == p.pid else None, p.present[k][2] if p.present[k] else None,
                           *p.retired.pop(k, [])} - {None}
                    sh.fd = sh.mmap = p.rw[k] = p.present[k] = None
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
        super().close()


def _lock_run(fd, start, n):
    """POSIX record lock on bytes [start, start+n) of ``fd``, waiting. The kernel's
    deadlock check sees processes, not threads: two processes whose threads wait on runs
    of different shards look like a cycle (EDEADLK) when none is (a holder waits on
    nothing while it holds a run), so that answer is tried again."""
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX, n, start)
            return
        except OSError as e:
            if e.errno != errno.EDEADLK:
                raise
            time.sleep(0.002)


class _Counting:
    """A DataLoader iterator that counts the batches it hands out (the fetch window)."""

    def __init__(self, wh, gen, it):
        self._wh, self._gen, self._it = wh, gen, it

    def __iter__(self):
        return self

    def __next__(self):
        item = next(self._it)
        self._wh._consume(self._gen)
        return item

    def __len__(self):
        return len(self._it)

    def __getattr__(self, name):
        return getattr(self._it, name)


@contextlib.contextmanager
def _urls(bucket):
    """Errors of the local code paths name files with go_join, which cleans ``s3://b`` to
    ``s3:/b``: put the URL back."""
    try:
        yield
    except WarehouseError as e:
        raise type(e)(str(e).replace(f"s3:/{bucket}/", f"s3://{bucket}/")) from None


def _fetch_manifest(c, loc, version, vurl, vdir):
    """The version's manifest, fetched with its detached digest and checked as a local
    one (read_manifest, from a private scratch directory; errors name the URLs)."""
    try:
        raw = _s3.get(c, loc.bucket, loc.key(version, MANIFEST_NAME), limit=MAX_MANIFEST_BYTES)
    except FileNotFoundError:
        raise WarehouseError(f"{vurl}: no {MANIFEST_NAME}: not a published version") from None
    try:
        digest = _s3.get(c, loc.bucket, loc.key(version, MANIFEST_DIGEST_NAME), limit=4096)
    except FileNotFoundError:
        digest = None
    os.makedirs(vdir, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=".tmp-manifest-", dir=vdir)
    try:
        with open(os.path.join(scratch, MANIFEST_NAME), "wb") as f:
            f.write(raw)
        if digest is not None:
            with open(os.path.join(scratch, MANIFEST_DIGEST_NAME), "wb") as f:
                f.write(digest)
        fd = os.open(scratch, os.O_RDONLY | os.O_DIRECTORY)
        try:
            with _urls(loc.bucket):
                return read_manifest(vurl, fd)
        finally:
            os.close(fd)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


__all__ = ["S3Warehouse", "MODES", "S3_OPTIONS"]
