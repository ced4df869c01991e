"""The open warehouse: :func:`open` checks a version as docs/format/reading.md says and
returns a :class:`Warehouse`, which hands out samples (``wh[i]``, zero-copy views) and
batches (``read_batch``, one copy or ``os.preadv`` of images per run), each checked against
its shard's CRC-32C, in the Go reader's batch order (``batches``, ``plan``).

The manifest checks live in ``_manifest``, the thresholds in ``_thresholds``, a shard's
header in ``_shard``, the section arithmetic in ``_layout``; this module opens files,
keeps the per-process state (file descriptors, mappings, which samples passed their
check) and reads.
"""
import builtins
import concurrent.futures
import hashlib
import logging
import mmap
import os
import threading
import time

import numpy as np

from . import _compact, _crc32c
from ._gofmt import go_errno, go_join
from ._layout import DTYPES, RECORD_FIELDS
from ._manifest import manifest_layout, read_manifest, resolve_dir
from ._order import plan_batches
from ._shard import has_sample_checksums, parse_shard, stat_shard
from ._thresholds import check_thresholds
from .errors import WarehouseError

__all__ = ["open", "Warehouse"]

log = logging.getLogger("warehouse_etl")

_BATCH_KEYS = ("images", "boxes", "mask", "class_index", "box_count", "records", "extras", "index")


_VERIFY_SAMPLES = (True, "always", False)


def open(path, *, ignore_thresholds=False, thresholds=None, verify_checksums=False,  # noqa: A001 (the API name)
         verify_samples=True, **s3_options):
    """Open the warehouse version at ``path`` (a version directory, or an output root whose
    ``latest`` symlink names one) and check it as docs/format/reading.md says.

    Refuses, raising :class:`WarehouseError` with the Go reader's wording: a manifest of
    another ``format_version``, unknown fields or an inconsistent manifest, paths that
    leave the warehouse, shard entries that disagree with the layout or whose ``bytes``
    do not match their sample count, and shard files that are missing, not regular
    files or of the wrong size. A recorded validation summary that exceeds a threshold
    with action ``fail`` raises :class:`ThresholdError` unless ``ignore_thresholds``
    (``thresholds`` substitutes a dict of stricter limits, manifest.md's ``thresholds``
    shape). Each shard's header is checked when it is first read; with
    ``verify_checksums`` its sha256 is also compared with the manifest then.

    ``verify_samples`` checks every sample ``wh[i]`` and ``read_batch`` hand out against
    its shard's CRC-32C and raises :class:`WarehouseError` naming the shard file and the
    sample (the Go reader's words) when its bytes changed since the build: ``True``
    (default) on the sample's first read in this process (a bit per sample remembers
    it, so later epochs read at unchecked speed), ``"always"`` on every read, ``False``
    never (benchmarks of the reads alone). Shards of warehouses built before per-sample
    checksums have none: they are read unchecked (``sample_checksums()`` says so).

    An ``s3://bucket/prefix`` path (``.../latest-<config>``, ``.../v<16 hex>``) is read
    through a node-local cache (python/README.md, "Training from S3"; needs boto3):
    ``s3_options`` are :class:`warehouse_etl._s3reader.S3Warehouse`'s (``cache_dir``,
    ``cache_limit``, ``mode``, ``fetch_threads``, ``fetch_ahead``, ``lease_ttl_s``,
    ``endpoint_url``).
    """
    if isinstance(path, str) and path.startswith("s3://"):
        from ._s3reader import S3Warehouse
        return S3Warehouse(path, ignore_thresholds=ignore_thresholds, thresholds=thresholds,
                           verify_checksums=verify_checksums, verify_samples=verify_samples, **s3_options)
    if s3_options:
        raise TypeError(f"open: {', '.join(sorted(s3_options))}: options of s3:// paths only")
    return Warehouse(path, ignore_thresholds=ignore_thresholds, thresholds=thresholds,
                     verify_checksums=verify_checksums, verify_samples=verify_samples)


# posix_fadvise's WILLNEED where the platform has it (Linux, most Unixes; not macOS).
_WILLNEED = getattr(os, "POSIX_FADV_WILLNEED", None) if hasattr(os, "posix_fadvise") else None


def _runs(ss, ll):
    """The runs of samples sorted by shard ``ss`` then sample ``ll`` (int arrays): lists
    of their start and end (exclusive) positions, a run being consecutive samples of one
    shard."""
    cuts = np.flatnonzero((np.diff(ss) != 0) | (np.diff(ll) != 1)) + 1
    return [0] + cuts.tolist(), cuts.tolist() + [len(ss)]


def _libc_mincore():
    """libc's mincore(2) through ctypes, or None where it cannot be had. Called holding
    the GIL (PyDLL): it reads nothing and returns in a microsecond, and giving the GIL
    up around it only makes the calling reader thread queue to take it back behind the
    other readers."""
    try:
        import ctypes
        import ctypes.util
        f = ctypes.PyDLL(ctypes.util.find_library("c") or None, use_errno=True).mincore
    except (OSError, AttributeError, ImportError):
        return None
    f.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    f.restype = ctypes.c_int
    return f, ctypes.create_string_buffer(1)


_mincore, _vec = _libc_mincore() or (None, None)
_PAGE = mmap.PAGESIZE


#: None: whether a page is in the page cache is asked of the kernel (mincore); True or
#: False: every page is taken as cached or not, in both of read_batch's ways (tests).
_CACHED = None


def _resident(base, offset):
    """Whether the page holding byte offset of the file mapped at address base is in
    the page cache: mincore, which reads nothing and does not wait (or _CACHED). Threads
    share the one-byte answer buffer, which the GIL (held through the call and the read
    of the answer) keeps to one thread at a time."""
    if _CACHED is not None:
        return _CACHED
    addr = base + int(offset)
    return _mincore(addr - addr % _PAGE, 1, _vec) == 0 and _vec.raw[0] & 1 == 1


def _willneed(fd, offset, length):
    """posix_fadvise(WILLNEED) on [offset, offset+length) of fd: the kernel starts
    reading those pages and returns. A hint: errors are ignored."""
    if _WILLNEED is not None and length > 0:
        try:
            os.posix_fadvise(fd, offset, length, _WILLNEED)
        except OSError:
            pass


class _Shard:
    """One shard: an fd for preadv (reopened after fork or unpickling) and a read-only
    memmap for zero-copy views, both opened on first use."""

    __slots__ = ("entry", "path", "fd", "pid", "sections", "mmap", "base", "error", "crcs", "verified", "checker")

    def __init__(self, entry, path):
        self.entry, self.path = entry, path
        self.fd = self.pid = self.sections = self.mmap = self.base = self.error = None
        self.crcs = None      # the checksum table (uint32 per sample), None without one
        self.verified = None  # bool per sample: passed its CRC-32C check in this process
        self.checker = None   # compact: (mapping, _compact.copy_checker of it), made once


class Warehouse:
    """An open, checked warehouse version. Use :func:`open`.

    Attributes: ``dir`` (the version directory), ``manifest`` (the checked manifest
    dict), ``layout`` (``dtype``, ``width``, ``height``, ``channels``, ``max_boxes``,
    ``extra_f32``), ``shard_starts`` (int64 array, first sample of each shard),
    ``image_dtype``/``box_dtype`` (numpy dtypes as stored), ``classes`` (names by index),
    ``extras_spec`` (manifest ``extras``), ``mean``/``std`` (the recorded normalisation,
    or None).

    A Warehouse may be pickled (DataLoader workers): the copy keeps the checked manifest
    and reopens shards lazily in its process. Not thread-safe for the first use of a
    shard from several threads at once beyond what its lock covers: reads themselves
    (``os.preadv``) are safe from any thread.
    """

    def __init__(self, path, *, ignore_thresholds=False, thresholds=None, verify_checksums=False,
                 verify_samples=True):
        if not any(verify_samples is v or (isinstance(v, str) and verify_samples == v) for v in _VERIFY_SAMPLES):
            raise ValueError(f"verify_samples={verify_samples!r}: want True (first read), 'always' or False")
        self.dir = resolve_dir(path)
        self._readers_lock = _lock_for_reading(self.dir)
        # Everything is read through the pinned directory: the version this reader
        # opened, whatever build takes its name later (_pin_dir).
        fd = _pin_dir(self.dir)
        try:
            m = read_manifest(self.dir, fd)
            check_thresholds(self.dir, m, thresholds, ignore_thresholds)
            try:
                layout = manifest_layout(m)
            except ValueError as e:
                raise WarehouseError(f"{go_join(self.dir, 'manifest.json')}: manifest invalid: {e}") from None
            self._init(self.dir, m, layout, verify_checksums, verify_samples)
            for sh in self._shards:
                stat_shard(self.dir, sh.path, sh.entry, fd)
        except BaseException:
            os.close(fd)
            raise
        st = os.fstat(fd)
        self._dir_fd, self._dir_pid, self._dir_id = fd, os.getpid(), (st.st_dev, st.st_ino)
        log.info("warehouse opened: %s version %s, %d samples in %d shards, %s", self.dir, m["version"][:16],
                 len(self), len(self._shards), m["default_dtype"])

    def _init(self, directory, manifest, layout, verify_checksums, verify_samples):
        self.dir, self.manifest, self.layout = directory, manifest, layout
        self.verify_checksums = verify_checksums
        self.verify_samples = verify_samples
        self.samples_verified = 0  # CRC-32C checks that passed in this process
        self._count_lock = threading.Lock()  # reader and checker threads add to samples_verified and the counts below
        # Samples read_batch read (each row of each batch), and those of them whose images
        # it read with preadv, their pages not in the page cache (or no mapping to copy
        # them from): the torch loader advises read-ahead once a share of its reads is
        # cold (_ReadAhead). Added under _count_lock: reader threads read side by side.
        self.samples_read = 0
        self.cold_samples = 0
        self._n = int(manifest["samples"])
        # Per sample: passed its check in this process, or in a shard without checksums
        # (each opened shard's ``verified`` is its slice; set by read_batch, wh[i] and
        # check_ahead).
        self._verified = np.zeros(self._n, dtype=bool)
        self._shards = [_Shard(e, go_join(directory, e["relative_path"])) for e in manifest["shards"]]
        # Per sample: each opened shard's checksum table, and per shard whether it has
        # one, for read_batch's checks of a whole batch at once (_gather).
        self._crc_all = np.zeros(self._n, dtype=np.uint32)
        self._has_crc = np.zeros(len(self._shards), dtype=bool)
        self._addr = self._addr_pid = None  # _gather's addresses of each mapped shard (_addresses)
        # The layout's small sections (boxes, mask, records, extras) and the bytes a sample
        # copies (image, boxes, mask), worked out once: a read_batch is tens of us of Python.
        self._small = layout.small_sections()
        self._row_bytes = layout.image_bytes + layout.box_bytes + layout.mask_bytes
        self._slots = np.arange(layout.max_boxes)[None, :]  # class_index: -1 from box_count on
        self.shard_starts = np.array([e["first_sample"] for e in manifest["shards"]], dtype=np.int64)
        self._starts_end = np.append(self.shard_starts, self._n)
        self.image_dtype, self.box_dtype = layout.image_dtype, layout.box_dtype
        self.record_dtype = layout.record_dtype()
        self.extras_spec = manifest["extras"]
        self.classes = [c["name"] for c in sorted(manifest["classes"], key=lambda c: c["index"])]
        t = manifest["transform"]
        self.mean = list(t["mean"]) if t.get("mean") else None
        self.std = list(t["std"]) if t.get("std") else None
        self._lock = threading.Lock()
        self._closed = False  # close() was called: check_ahead's jobs reopen nothing
        self._dir_fd = self._dir_pid = self._dir_id = None

    # Pickling: the checked manifest travels, the handles do not; the copy checks that
    # the directory it reopens is still the one opened (_dir).
    def __getstate__(self):
        return {"dir": self.dir, "manifest": self.manifest, "layout": self.layout,
                "verify_checksums": self.verify_checksums, "verify_samples": self.verify_samples,
                "dir_id": self._dir_id}

    def __setstate__(self, state):
        self._init(state["dir"], state["manifest"], state["layout"], state["verify_checksums"],
                   state.get("verify_samples", True))
        self._dir_id = state.get("dir_id")

    def _dir(self):
        """The pinned version directory's fd (inherited across fork). An unpickled copy
        pins the directory again and refuses one that is not the directory the original
        opened (a forced rebuild replaced it): an error, never another build's shards."""
        if self._dir_fd is not None:
            return self._dir_fd
        fd = _pin_dir(self.dir)
        st = os.fstat(fd)
        if self._dir_id is not None and (st.st_dev, st.st_ino) != tuple(self._dir_id):
            os.close(fd)
            raise WarehouseError(f"{self.dir}: replaced by another build since this warehouse was opened: "
                                 f"open it again")
        self._dir_fd, self._dir_pid = fd, os.getpid()
        return fd

    def __len__(self):
        return self._n

    def __repr__(self):
        l = self.layout
        return (f"<warehouse_etl.Warehouse {self.dir}: {self._n} samples, {len(self._shards)} shards, "
                f"{DTYPES[l.dtype][0]} {l.channels}x{l.height}x{l.width}, max_boxes {l.max_boxes}>")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def normalize_table(self):
        """The build's normalisation as a float32 table of shape (3, 256): row c maps the
        8-bit pixel value p of channel c to ``(p/255 - mean[c]) / std[c]`` (``p/255``
        without mean/std), computed in float64 and rounded once to float32 exactly as
        the pipeline computes an F32 build's values (shard.md "Images"). Normalising a
        U8 image through it gives the F32 build's pixels bit for bit."""
        v = np.arange(256, dtype=np.float64) / 255
        if self.mean is None:
            return np.stack([v] * 3).astype(np.float32)
        return np.stack([(v - self.mean[c]) / self.std[c] for c in range(3)]).astype(np.float32)

    def normalize_images(self, images, out=None):
        """Float32 images from a batch's ``images`` ([..., C, H, W]): U8 through
        :meth:`normalize_table` (the F32 build's values, bit for bit), F16 widened,
        F32 as they are (F16/F32 were normalised by the build)."""
        images = np.asarray(images)
        if out is None:
            out = np.empty(images.shape, dtype=np.float32)
        if images.dtype != np.uint8:
            out[...] = images
            return out
        table = self.normalize_table()
        for c in range(images.shape[-3]):
            np.take(table[c % 3], images[..., c, :, :], out=out[..., c, :, :])
        return out

    def sample_checksums(self):
        """``(checked, shards)``: how many of the shards carry per-sample CRC-32Cs, from
        the manifest (Go: ``Reader.SampleChecksums``). A warehouse built before they
        existed has none and is read unchecked."""
        return sum(has_sample_checksums(sh.entry, self.layout) for sh in self._shards), len(self._shards)

    @property
    def image_shape(self):
        """(C, H, W) of one image."""
        return (self.layout.channels, self.layout.height, self.layout.width)

    def close(self):
        """Close every shard file this process opened and drop the mappings (views handed
        out by ``wh[i]`` keep their mapping alive until they are freed), and release the
        readers lock that keeps ``warehouse-etl gc`` away from this version."""
        lock, self._readers_lock = getattr(self, "_readers_lock", None), None
        if lock is not None:
            lock.close()
        self._closed = True
        with self._lock:
            self._addr = None  # the mappings go: _gather maps again (a read after close reopens)
            for sh in self._shards:
                if sh.fd is not None and sh.pid == os.getpid():
                    os.close(sh.fd)
                sh.fd = sh.pid = sh.mmap = sh.checker = None
            if self._dir_fd is not None and self._dir_pid == os.getpid():
                os.close(self._dir_fd)  # releases the directory's flock
            self._dir_fd = self._dir_pid = None

    def _shard(self, k, reopen=True):
        """Shard k, opened and checked in this process (reopened after a fork). With
        ``reopen`` False a closed warehouse opens nothing (WarehouseError)."""
        sh = self._shards[k]
        if sh.fd is not None and sh.pid == os.getpid():
            return sh
        with self._lock:
            if sh.fd is not None and sh.pid == os.getpid():
                return sh
            if sh.error is not None:
                raise sh.error
            if self._closed and not reopen:
                raise WarehouseError(f"{self.dir}: closed")
            if sh.pid != os.getpid():  # inherited from the parent: not ours to close
                sh.fd = sh.mmap = sh.checker = None
            t0 = time.perf_counter()
            try:
                dir_fd = self._dir()
                if self.verify_checksums:
                    _check_sha256(sh.path, sh.entry, dir_fd)
                try:
                    fd = os.open(sh.entry["relative_path"], os.O_RDONLY | getattr(os, "O_CLOEXEC", 0), dir_fd=dir_fd)
                except OSError as e:
                    raise WarehouseError(f"open {sh.path}: {go_errno(e)}") from None
                try:
                    sh.sections = parse_shard(fd, sh.path, sh.entry, self.layout)
                except BaseException:
                    os.close(fd)
                    raise
                sh.crcs = sh.sections["crc_table"]
                # Batches gather the small sections from the mapping: on a cold page
                # cache each fault there would read a read-ahead window of images around
                # it (read_ahead_kb: megabytes); one advice reads the sections instead.
                _willneed(fd, sh.sections["boxes"], sh.entry["bytes"] - sh.sections["boxes"])
                # This shard's bits of the warehouse's (check_ahead's filter), cleared:
                # a sample passes its check in the process that reads it.
                s0, s1 = int(self._starts_end[k]), int(self._starts_end[k + 1])
                self._verified[s0:s1] = sh.crcs is None  # no checksums: nothing to check
                sh.verified = None if sh.crcs is None else self._verified[s0:s1]
                if sh.crcs is not None:
                    self._crc_all[s0:s1] = sh.crcs
                self._has_crc[k] = sh.crcs is not None
            except WarehouseError as e:
                sh.error = e  # a refused shard stays refused
                raise
            sh.fd, sh.pid = fd, os.getpid()
            log.info("shard loaded: %s, %d bytes, open+check %.3f ms", sh.entry["id"], sh.entry["bytes"],
                     (time.perf_counter() - t0) * 1e3)
            return sh

    def advise(self, indices):
        """Tell the kernel that the images of samples ``indices`` will be read soon:
        ``posix_fadvise(POSIX_FADV_WILLNEED)`` per run of consecutive samples of a shard,
        so that where the shards are not in the page cache the disk reads them while the
        batches before are copied (the torch loader advises the batches ``read_ahead``
        past those it reads). On a warm page cache each advice costs a system call (about
        7 us for a 384x384 u8 image here) and reads nothing. Only a hint: shards are
        opened as a read would open them (a shard that fails to open is left to the read
        to report), and nothing is advised where ``os.posix_fadvise`` does not exist."""
        if _WILLNEED is None:
            return
        idx = np.unique(np.asarray(indices, dtype=np.int64).reshape(-1))  # sorted
        idx = idx[(idx >= 0) & (idx < self._n)]
        if not idx.size:
            return
        shard_of, local = self._locate_all(idx)
        ss_l, ll_l = shard_of.tolist(), local.tolist()
        for r0, r1 in zip(*_runs(shard_of, local)):
            try:
                sh = self._shard(ss_l[r0])
            except (WarehouseError, OSError):
                continue  # the read that follows raises it
            start, end = self._image_spans(sh, ll_l[r0], ll_l[r1 - 1])
            _willneed(sh.fd, start, end - start)

    def check_ahead(self, indices):
        """Check the samples ``indices`` against their CRC-32C ahead of their read: a job
        for a checker thread (``_crc32c.checker()``) computes each sample's CRC from the
        shard's mapping (the stored bytes in the page cache, pages faulted in there) and
        marks those that pass, so that ``read_batch`` only copies them. Neither read_batch
        nor the torch loader uses it: read_batch's own checks, each row right after its
        copy, measured faster (docs/performance.md, "Checks on the copied rows").

        Returns the job's Future (its result: the number of samples that passed), or None
        when nothing was queued: ``verify_samples`` is not True (``"always"`` checks
        every read in ``read_batch`` itself), the checks hold the GIL (the numpy
        fallback), the warehouse is not read through mappings (the S3 reader), or every
        sample is checked already. A mismatch or a shard that fails to open is left to
        the read that follows, which raises the error as it would without this. What is
        checked is the page cache's copy, a moment before ``read_batch`` copies it: a
        page dropped and read again from the disk in between is not checked again (open
        with ``verify_samples="always"`` for that)."""
        if self.verify_samples is not True or not self._map_sections or self._closed:
            return None
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        idx = idx[(idx >= 0) & (idx < self._n)]
        idx = idx[~self._verified[idx]]
        if not idx.size:
            return None
        pool = _crc32c.checker()
        if pool is None:
            return None
        return pool.submit(self._check_stored, np.unique(idx))

    def _check_stored(self, idx):
        """check_ahead's job: the CRC-32C of samples ``idx`` (sorted, unique) from their
        shards' mappings, compared with the checksum tables; marks and counts those that
        pass and returns their number."""
        shard_of, local = self._locate_all(idx)
        bounds = [0] + (np.flatnonzero(np.diff(shard_of)) + 1).tolist() + [idx.shape[0]]
        passed = 0
        for s0, s1 in zip(bounds[:-1], bounds[1:]):
            try:
                sh = self._shard(int(shard_of[s0]), reopen=False)  # a job queued before close() opens nothing
                if sh.crcs is None:
                    continue
                loc = local[s0:s1]
                loc = loc[~sh.verified[loc]]
                if not loc.size:
                    continue
                got = _stored_crcs(self._mapping(sh), sh.sections, self.layout, loc)
            except (WarehouseError, OSError):
                continue  # the read that follows raises it
            ok = got == sh.crcs[loc]
            sh.verified[loc[ok]] = True
            n = int(np.count_nonzero(ok))
            with self._count_lock:
                self.samples_verified += n
            passed += n
        return passed

    def _image_spans(self, sh, first, last):
        """The file bytes [start, end) holding the images of samples first..last of
        shard sh."""
        table, l = sh.sections["compact_table"], self.layout
        if table is not None:  # compact regions, stored back to back (_compact)
            e = table[last]
            return int(table[first]["offset"]), int(e["offset"]) + l.channels * int(e["w"]) * int(e["h"])
        return sh.sections["image"] + first * l.image_bytes, sh.sections["image"] + (last + 1) * l.image_bytes

    def _to_check(self, sh, local):
        """Which of the samples ``local`` (int array) of shard ``sh`` are to be checked
        against their CRC-32C on this read: a bool array."""
        if not self.verify_samples or sh.crcs is None:
            return np.zeros(local.shape[0], dtype=bool)
        if self.verify_samples == "always":
            return np.ones(local.shape[0], dtype=bool)
        return ~sh.verified[local]

    def _check_rows(self, sh, k, local, arrays, rows):
        """Check rows ``rows`` of ``arrays`` (image, boxes, mask, record, extras rows
        along axis 0), holding samples ``local`` of shard ``sh`` (index k), against the
        checksum table, remembering those that pass. Returns None, or the position in
        ``rows`` of the first mismatch and the Go reader's error for it."""
        return self._compare(sh, k, local, _piece_crcs(sh, self.layout, arrays, local, rows))

    def _compare(self, sh, k, local, got):
        """_check_rows with the CRCs ``got`` of the rows already computed."""
        want = sh.crcs[local]
        ok = got == want
        sh.verified[local[ok]] = True
        with self._count_lock:
            self.samples_verified += int(np.count_nonzero(ok))
        bad = np.flatnonzero(~ok)
        if not bad.size:
            return None
        r = int(bad[0])
        j = int(local[r])
        return r, WarehouseError(f"{sh.path}: warehouse sample {int(self.shard_starts[k]) + j}: shard: corrupt: "
                                 f"sample {j}: crc32c 0x{int(got[r]):08x}, the checksum table says "
                                 f"0x{int(want[r]):08x}")

    def _locate_all(self, idx):
        """``(shard, sample in shard)`` int64 arrays of in-range sample indices idx."""
        shard_of = np.searchsorted(self.shard_starts, idx, side="right") - 1
        return shard_of, idx - self.shard_starts[shard_of]

    def _locate(self, i):
        if not 0 <= i < self._n:
            raise IndexError(f"{self.dir}: sample {i} out of range [0, {self._n})")
        k = int(np.searchsorted(self.shard_starts, i, side="right")) - 1
        return k, i - int(self.shard_starts[k])

    def __getitem__(self, i):
        """Sample ``i`` as a dict of zero-copy, read-only numpy views into the shard's
        mapping: ``image`` (C, H, W), ``boxes`` (K, 4) and ``mask`` (K,) as stored,
        ``class_index`` (K,) int32 (-1 padding), ``box_count`` (int), ``record`` (the
        structured meta record), ``meta`` (dict of its fields as Python scalars),
        ``extras`` (dict name -> array of the manifest's shape), ``extras_f32`` (E,),
        ``index``, ``shard`` (id) and ``shard_index``."""
        i = int(i)
        if i < 0:
            i += self._n
        k, j = self._locate(i)
        sh = self._shard(k)
        raw, s, l = self._mapping(sh), sh.sections, self.layout
        if s["compact_table"] is not None:  # compact images: a restored copy (_compact)
            img = _compact.image(raw, s, l, j).reshape(-1)
        else:
            img = raw[s["image"] + j * l.image_bytes:s["image"] + (j + 1) * l.image_bytes]
        box = raw[s["boxes"] + j * l.box_bytes:s["boxes"] + (j + 1) * l.box_bytes]
        msk = raw[s["mask"] + j * l.mask_bytes:s["mask"] + (j + 1) * l.mask_bytes]
        rec_raw = raw[s["records"] + j * l.record_size:s["records"] + (j + 1) * l.record_size]
        ext_raw = raw[s["extras"] + j * l.extra_bytes:s["extras"] + (j + 1) * l.extra_bytes]
        local = np.array([j], dtype=np.int64)
        if self._to_check(sh, local)[0]:
            bad = self._check_rows(sh, k, local, [a[None] for a in (img, box, msk, rec_raw, ext_raw)], [0])
            if bad is not None:
                raise bad[1]
        rec = rec_raw.view(self.record_dtype)[0]
        ext = ext_raw.view("<f4")
        extras = {}
        for e in self.extras_spec:
            size = int(np.prod(e["shape"], dtype=np.int64))
            extras[e["name"]] = ext[e["offset"]:e["offset"] + size].reshape(e["shape"])
        return {
            "index": i, "shard": sh.entry["id"], "shard_index": j,
            "image": img.view(self.image_dtype).reshape(self.image_shape),
            "boxes": box.view(self.box_dtype).reshape(l.max_boxes, 4),
            "mask": msk.view(self.box_dtype),
            "class_index": rec["class_index"], "box_count": int(rec["box_count"]), "record": rec,
            "meta": {name: rec[name].item() for name, _, _ in RECORD_FIELDS},
            "extras": extras, "extras_f32": ext,
        }

    def allocate_batch(self, batch_size):
        """Fresh arrays for :meth:`read_batch`'s ``out=``: ``images`` [B,C,H,W], ``boxes``
        [B,K,4], ``mask`` [B,K] (stored dtypes), ``class_index`` [B,K] int32,
        ``box_count`` [B] int32, ``records`` [B] (structured meta records), ``extras``
        [B,E] float32, ``index`` [B] int64."""
        l, b = self.layout, batch_size
        return {
            "images": np.empty((b,) + self.image_shape, dtype=self.image_dtype),
            "boxes": np.empty((b, l.max_boxes, 4), dtype=self.box_dtype),
            "mask": np.empty((b, l.max_boxes), dtype=self.box_dtype),
            "class_index": np.empty((b, l.max_boxes), dtype=np.int32),
            "box_count": np.empty(b, dtype=np.int32),
            "records": np.empty(b, dtype=self.record_dtype),
            "extras": np.empty((b, l.extra_f32), dtype=np.float32),
            "index": np.empty(b, dtype=np.int64),
        }

    def _check_out(self, out, b):
        want = self.__dict__.get("_empty_batch")
        if want is None:
            want = self._empty_batch = self.allocate_batch(0)
        for key in _BATCH_KEYS:
            a = out.get(key) if isinstance(out, dict) else getattr(out, key, None)
            if a is None:
                raise ValueError(f"read_batch: out has no {key!r}")
            w = want[key]
            if (not isinstance(a, np.ndarray) or a.dtype != w.dtype or a.shape != (b,) + w.shape[1:]
                    or not a.flags.c_contiguous or not a.flags.writeable):
                raise ValueError(f"read_batch: out[{key!r}] is {getattr(a, 'dtype', type(a))} "
                                 f"{getattr(a, 'shape', '')}; want a writable C-contiguous {w.dtype} "
                                 f"{(b,) + w.shape[1:]}")
        if not isinstance(out, dict):
            out = {key: getattr(out, key) for key in _BATCH_KEYS}
        return out

    def read_batch(self, indices, out=None, rows=None):
        """Read the samples ``indices`` (any order, repeats allowed) into contiguous arrays,
        row r holding sample ``indices[r]``; returns the dict of :meth:`allocate_batch`
        (``out`` itself when given: a dict or object with those arrays, reused as is).

        The images go straight from the shard files into the destination array: the
        indices are grouped by shard and sorted, and each run of consecutive samples in a
        shard is one copy from the shard's mapping when its pages are in the page cache
        (``mincore`` asks; a memcpy, about twice as fast as the kernel's copy), else one
        ``os.preadv`` scattering into the destination rows, with no intermediate copy
        either way. Only cached runs are mapped in, so the page tables grow with the page
        cache, not with the dataset. The small sections (boxes, mask, records, extras: a
        few hundred bytes a sample) are gathered per shard from the shard's read-only
        mapping in one vectorised step each, so a shuffled batch costs at most one system
        call per sample.
        ``class_index`` and ``box_count`` come from the records in one vectorised step
        (padding slots -1, as the Go reader's batches). The rows are checked against their
        CRC-32C as :func:`open`'s ``verify_samples`` says. A batch of _PARALLEL_BYTES or
        more is copied by this thread and copy threads side by side, its runs cut into
        pieces (_copy_parts; fewer threads in threads that read side by side:
        :class:`copy_threads`). The thread that copies a sample to check checks it: from
        the mapping, in the same pass as the copy where the package's compiled part runs
        (``_crc32c.COPY_CRC``; a compact sample's region as stored), else right after the
        copy, while the bytes are in its core's cache (a plain row as copied, a compact
        one from its stored region just copied); read with preadv, from its rows as read
        (a compact one's restored rows). One CRC call per part, the comparisons with the
        checksum tables made per shard after the copies. A mismatch raises
        :class:`WarehouseError` naming the shard file and the sample of the first such row
        (in row order), after the whole batch was read.

        ``rows`` (with ``out``) reads ``indices[r]`` into row ``rows[r]`` of ``out``
        instead of row r, leaving the other rows' tensors as they are (a mixture reads
        each warehouse's rows of one batch so, with no copy); ``class_index`` and
        ``box_count`` are derived for every row of ``out`` from its records.
        """
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        b = idx.shape[0]
        order = self._in_range(idx)
        dest = None if rows is None or out is None else np.asarray(rows, dtype=np.int64).reshape(-1)
        if dest is not None:
            n_out = (out["index"] if isinstance(out, dict) else out.index).shape[0]
            if dest.shape[0] != b or (b and (int(dest.min()) < 0 or int(dest.max()) >= n_out)):
                raise ValueError(f"read_batch: rows {dest.tolist()[:8]}...: want {b} rows of out's {n_out}")
        out = self.allocate_batch(b) if out is None else self._check_out(out, b if dest is None else n_out)
        return self._read_checked(idx, order, out, dest)

    def _in_range(self, idx):
        """``np.argsort(idx, kind="stable")`` of int64 indices idx, after an IndexError
        for the first out of range."""
        order = np.argsort(idx, kind="stable")
        if order.shape[0] and (idx[order[0]] < 0 or idx[order[-1]] >= self._n):
            bad = int(idx[(idx < 0) | (idx >= self._n)][0])
            raise IndexError(f"{self.dir}: sample {bad} out of range [0, {self._n})")
        return order

    def _read_into(self, indices, out):
        """read_batch(indices, out=out) for a caller whose out it made itself, the arrays
        of :meth:`allocate_batch` exactly (the torch loader's, carved from its batch
        memory): without read_batch's checks of out, tens of us a batch. A reader with a
        read_batch of its own (the S3 reader's fetches the shards first) runs that."""
        if type(self).read_batch is not Warehouse.read_batch:
            return self.read_batch(indices, out=out)
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        return self._read_checked(idx, self._in_range(idx), out, None, cold_batch=True)

    def _read_checked(self, idx, order, out, dest, cold_batch=False):
        """read_batch, its arguments checked: ``order`` is _in_range(idx). ``cold_batch``:
        out has left the caches (the torch loader's batches rotate through its memory), so
        compact images' pad is stored past them too (_gather)."""
        out["index"][slice(None) if dest is None else dest] = idx
        if idx.shape[0] == 0:
            return out
        got = self._gather(idx, out, dest, order, cold_batch)
        if got is None:
            first_bad = self._read_runs(idx, out, dest)
        else:  # what it left (pages not in the page cache) is read run by run
            rest, rest_rows, first_bad = got
            if rest is not None:
                bad = self._read_runs(rest, out, rest_rows)
                if bad is not None and (first_bad is None or bad[0] < first_bad[0]):
                    first_bad = bad
        with self._count_lock:
            self.samples_read += idx.shape[0]
        if first_bad is not None:
            raise first_bad[1]
        rec = out["records"]
        counts = rec["box_count"]
        out["box_count"][:] = counts
        if self.layout.max_boxes:
            np.copyto(out["class_index"], np.where(self._slots < counts[:, None], rec["class_index"], -1))
        return out

    def _gather(self, idx, out, dest, order=None, cold_batch=False):
        """read_batch's reads from the shards' mappings in one compiled call per copy thread
        (``_copycrc.gather_rows``, where the package's compiled part has it): the batch's
        addresses worked out in a few whole-batch numpy steps, then each sample's image
        (a compact one restored), small rows and, where it is to be checked, its CRC-32C in
        C, the GIL released, with no Python per sample or run (which cost 23-34 us a sample
        warm, the copies aside, against 8-10 now; docs/performance.md, "A batch in one
        compiled call"). The CRCs are compared with the checksum tables in one step.
        ``order`` is ``np.argsort(idx, kind="stable")`` when the caller has it: shard by
        shard in file order, as the global indices are.

        Returns None where that call is not there, the reader does not map its shards (the
        S3 reader) or mincore is missing: read_batch reads run by run instead. Else
        ``(rest, rest_rows, first_bad)``: the samples whose images' pages were not in the
        page cache (their last page, as mincore says), left alone for read_batch to read
        with preadv, and the rows they go to (both None when there are none), and the first
        mismatch in row order as (row, WarehouseError), or None."""
        if _GATHER is None or not self._map_sections or _mincore is None:
            return None
        b = idx.shape[0]
        if order is None:
            order = np.argsort(idx, kind="stable")
        sidx = idx[order]
        ss, ll = self._locate_all(sidx)
        rows = order if dest is None else dest[order]
        tab = self._addresses()
        t = tab[ss]
        if not t[:, 0, 0].all():  # opened and mapped here (a shard that fails raises as a read would)
            for k in np.unique(ss[t[:, 0, 0] == 0]).tolist():
                self._map_addresses(tab, k)
            t = tab[ss]
        jobs = t[:, 1] * ll[:, None]  # each address: the shard's base + sample * its stride
        jobs += t[:, 0]
        jobs[:, 2] = rows
        if self.verify_samples is True:  # first reads; a sample twice in the batch checked once
            need = ~self._verified[sidx]
            if b > 1:
                need[1:] &= sidx[1:] != sidx[:-1]
        elif self.verify_samples:
            need = self._has_crc[ss]
        else:
            need = None
        if need is not None:
            jobs[:, 3] |= need
        if cold_batch:  # a compact image's pad past the caches too (gather_rows' flag bit 1)
            jobs[:, 3] |= 2
        status = np.empty(b, dtype=np.uint8)
        crcs = np.empty(b, dtype=np.uint32)
        l, small = self.layout, self._small
        params = (out["images"].ctypes.data, l.image_bytes, l.channels, l.height, l.width,
                  tuple((out[sec].ctypes.data, size) for sec, size in small))
        jp, sp, cp = jobs.ctypes.data, status.ctypes.data, crcs.ctypes.data
        probe = 1 if _CACHED is None else 0 if _CACHED else 2

        parts = min(_copy_parts(b * self._row_bytes), b)
        if parts > 1:
            # This thread and parts - 1 copy threads each take the next sample not yet taken
            # (gather_rows' claims): a copy thread woken late (a wakeup is tens of us on a
            # VM) or kept off a CPU by the training step does fewer, and no thread waits for
            # another's fixed share (docs/performance.md, "Less Python a batch").
            claims = np.zeros(1, dtype=np.int64)
            args = (jp, b, params, sp, cp, probe, claims.ctypes.data)
            pool = _copier.get()
            futures = [pool.submit(_GATHER, *args) for _ in range(parts - 1)]
            try:
                skipped = _GATHER(*args)
            finally:  # no copy thread is left writing into out after an error here
                concurrent.futures.wait(futures)
            skipped += sum(f.result() for f in futures)
        else:
            skipped = _GATHER(jp, b, params, sp, cp, probe)
        first_bad = None
        if need is not None:
            pos = np.flatnonzero(need & (status == 0) if skipped else need)
            if pos.shape[0]:
                got, gi = crcs[pos], sidx[pos]
                if np.array_equal(got, self._crc_all[gi]):  # as a rule
                    self._verified[gi] = True
                    with self._count_lock:
                        self.samples_verified += pos.shape[0]
                else:
                    first_bad = self._first_mismatch(ss[pos], ll[pos], got, rows[pos])
        if not skipped:
            return None, None, first_bad
        left = np.flatnonzero(status)
        return sidx[left], rows[left], first_bad

    def _addresses(self):
        """_gather's table of each shard's addresses in this process's mappings, int64
        [shards, 2, 4 + small sections]: [k, 0] the bases, [k, 1] the strides, a sample's
        addresses being base + sample * stride. The columns: its image (a compact shard's:
        the mapping, stride 0), its compact table entry (0, stride 0: not compact), the
        row (0: _gather's), the pad value << 8 (stride 0), then each small section; a row
        of zeros until the shard is mapped (_map_addresses). Made again in a forked
        process, whose shards are opened and mapped again."""
        tab = self._addr
        if tab is None or self._addr_pid != os.getpid():
            tab = np.zeros((len(self._shards), 2, 4 + len(self._small)), dtype=np.int64)
            self._addr, self._addr_pid = tab, os.getpid()
        return tab

    def _map_addresses(self, tab, k):
        """Shard k opened and mapped, its rows of ``tab`` (_addresses) filled in."""
        sh = self._shard(k)
        self._mapping(sh)
        s, base, l = sh.sections, sh.base, self.layout
        table = s["compact_table"]
        if table is None:
            row, stride = [base + s["image"], 0], [l.image_bytes, 0]
        else:
            row, stride = [base, table.ctypes.data], [0, _compact.ENTRY.itemsize]
        tab[k, 1] = stride + [0, 0] + [size for _, size in self._small]
        tab[k, 0, 1:] = row[1:] + [0, int(s["pad"] or 0) << 8] + [base + s[sec] for sec, _ in self._small]
        tab[k, 0, 0] = row[0]  # last: a row is whole once its image's address is there

    def _read_runs(self, idx, out, dest):
        """read_batch's reads of samples ``idx`` into rows ``dest`` of ``out`` (None: row r
        holds idx[r]) run by run, in Python (the docstring of read_batch says how); returns
        the first mismatch in row order as (row, WarehouseError), or None."""
        b = idx.shape[0]
        l = self.layout
        shard_of, local = self._locate_all(idx)
        rows = np.lexsort((local, shard_of))
        ss, ll = shard_of[rows], local[rows]
        if dest is not None:  # rows: where each sorted sample goes in out
            rows = dest[rows]
        starts, ends = _runs(ss, ll)
        rows_l, ss_l, ll_l = rows.tolist(), ss.tolist(), ll.tolist()
        small = self._small  # out's arrays of them have the sections' names
        checked = [out["images"], out["boxes"], out["mask"], out["records"], out["extras"]]
        # Per shard, each small section (boxes, mask, records, extras: a few hundred bytes
        # a sample) is gathered from the shard's mapping in one vectorised step, instead of
        # a preadv per run and section: a shuffled batch is a run per sample.
        need = np.zeros(b, dtype=bool)
        bounds = [0] + (np.flatnonzero(np.diff(ss)) + 1).tolist() + [b]
        for s0, s1 in zip(bounds[:-1], bounds[1:]):
            k = ss_l[s0]
            sh = self._shard(k)
            loc, dst = ll[s0:s1], rows[s0:s1]
            if small and self._map_sections:
                raw = self._mapping(sh)
                top = ll_l[s1 - 1] + 1  # ll is sorted within a shard
                for sec, size in small:
                    src = raw[sh.sections[sec]:sh.sections[sec] + top * size].reshape(top, size)
                    out[sec].reshape(out[sec].shape[0], -1).view(np.uint8)[dst] = src[loc]
            if self.verify_samples and sh.crcs is not None:
                need[s0:s1] = self._to_check(sh, loc)
        if self.verify_samples is True and b > 1:  # a sample read twice in the batch is checked once
            need[1:] &= (ss[1:] != ss[:-1]) | (ll[1:] != ll[:-1])
        any_need = bool(need.any())
        # The images: per run of consecutive samples, one copy from the mapping when the
        # run is cached (_resident_mapping), else one preadv, straight into the
        # destination rows. Where a second core is free (_copy_parts), the batch's runs,
        # cut into pieces, are copied by the calling thread and copy threads side by
        # side. First reads are checked by the thread that copies them: copied from the
        # mapping and checked in one pass where the compiled part runs (COPY_CRC: 1.05x the
        # rate of the copy alone into a batch, against 0.73x for a copy and then its CRC;
        # docs/performance.md, "Stores past the caches"), else each piece right after its copy, while
        # its bytes are in that core's cache: a plain row as copied, a compact one from its
        # stored region just copied (or, read into place with preadv, from its restored
        # row). Checking the stored bytes instead, in checker
        # threads from the mapping, was half as fast on 16 cores and 0.7-0.9x on two, a
        # first touch of a mapping's pages costing more than the CRC (docs/performance.md,
        # "Checks on the copied rows"). The copy threads note (sorted position, CRC); the
        # comparisons with the checksum tables are made after the copies, per shard.
        img = l.image_bytes
        parts = _copy_parts(b * self._row_bytes)
        mv = memoryview(out["images"]).cast("B") if img else None
        flat = out["images"].reshape(out["images"].shape[0], -1).view(np.uint8) if img else None
        row_bytes = max(img, 1)
        # Where the package's compiled part runs here, the copy of a plain row to check and
        # its CRC in one pass (_crc32c.copy_row_function) ...
        copy_crc = _crc32c.copy_row_function(checked) if any_need and not l.compact else None
        # ... else (or for rows read with preadv) the CRC of a copied row of a plain shard,
        # the arrays' layout worked out once, on first use (Python per row holds the GIL,
        # which the copy threads share); per compact shard, of a sample from its mapping
        # and the copied small rows.
        row_crc = None
        compact_crc = {}  # shard index: _compact.row_crc_function of its mapping
        # The small rows a compact sample's one-pass check continues over (_compact.copy_checker).
        small_parts = _crc32c.row_parts(checked[1:]) if any_need and l.compact and _crc32c.COPY_CRC else None
        images_base = out["images"].ctypes.data if small_parts is not None else 0
        need_l = need.tolist()
        pieces = []  # (r0, p0, p1, check): rows p0..p1 (sorted order) of run r0.., one copy each
        for r0, r1 in zip(starts, ends):
            check = any_need and any(need_l[r0:r1])
            step = r1 - r0
            if check:
                step = max(1, _VERIFY_PIECE_BYTES // row_bytes)
            elif parts > 1:
                step = max(1, _COPY_PIECE_BYTES // row_bytes)
            pieces += [(r0, p0, min(p0 + step, r1), check) for p0 in range(r0, r1, step)]

        def copy(todo):
            """Copy pieces ``todo`` and compute the CRCs of their rows to check: returns
            (samples read with preadv, [(sorted position, crc)])."""
            nonlocal row_crc
            cold, crcs = 0, []
            for r0, p0, p1, check in todo:
                sh = self._shards[ss_l[r0]]
                compact = sh.sections["compact_table"] is not None  # compact images (_compact)
                raw = self._resident_mapping(sh, ll_l[p0], ll_l[p1 - 1]) if img else None
                fused = False  # copied and checked in one pass
                if compact and raw is not None and check and small_parts is not None:
                    f = self._copy_checker(sh, raw)
                    for p in range(p0, p1):
                        if need_l[p] and f is not None:
                            crcs.append((p, f(ll_l[p], rows_l[p], out["images"], images_base, small_parts)))
                        else:
                            _compact.copy_run(raw, sh.sections, l, ll_l[p], rows_l[p:p + 1], out["images"])
                    fused = f is not None
                elif compact and raw is not None:
                    _compact.copy_run(raw, sh.sections, l, ll_l[p0], rows_l[p0:p1], out["images"])
                elif compact:
                    _compact.read_run(sh.fd, sh.path, sh.sections, l, ll_l[p0], rows_l[p0:p1], out["images"])
                    cold += p1 - p0
                elif raw is not None and check and copy_crc is not None:
                    for p in range(p0, p1):
                        o = sh.sections["image"] + ll_l[p] * img  # a run: consecutive samples
                        if need_l[p]:
                            crcs.append((p, copy_crc(rows_l[p], sh.base + o)))
                        else:
                            flat[rows_l[p]] = raw[o:o + img]
                    fused = True
                elif raw is not None:
                    o = sh.sections["image"] + ll_l[p0] * img
                    src = raw[o:o + (p1 - p0) * img].reshape(p1 - p0, img)
                    q0, n = rows_l[p0], p1 - p0
                    # Rows in order (every row, not only the ends: a shuffled batch can put a
                    # run's middle sample anywhere): one copy.
                    if n == 1 or rows_l[p0:p1] == list(range(q0, q0 + n)):
                        flat[q0:q0 + n] = src
                    else:
                        flat[rows_l[p0:p1]] = src
                elif img:
                    self._read_rows(sh, "image", ll_l[p0], rows_l[p0:p1], mv, img)
                    cold += p1 - p0
                if small and not self._map_sections:
                    for sec, size in small:
                        self._read_rows(sh, sec, ll_l[p0], rows_l[p0:p1], memoryview(out[sec]).cast("B"), size)
                if not check or fused:
                    continue
                if not compact:
                    if row_crc is None:  # two copy threads may both make it: the same function
                        row_crc = _crc32c.row_function(checked)
                    crcs += [(p, row_crc(rows_l[p])) for p in range(p0, p1) if need_l[p]]
                elif raw is not None:  # the stored regions just copied: in cache
                    k = ss_l[r0]
                    f = compact_crc.get(k) or compact_crc.setdefault(
                        k, _compact.row_crc_function(raw, sh.sections, l, checked[1:]))
                    crcs += [(p, f(ll_l[p], rows_l[p])) for p in range(p0, p1) if need_l[p]]
                else:  # read into place: from the restored rows
                    ps = [p for p in range(p0, p1) if need_l[p]]
                    got = _compact.crc_rows(sh.sections, l, [ll_l[p] for p in ps], checked, [rows_l[p] for p in ps])
                    crcs += list(zip(ps, got.tolist()))
            return cold, crcs

        if parts > 1 and len(pieces) > 1:
            # Contiguous shares of about equal rows: the calling thread copies the first.
            cut = np.searchsorted(np.cumsum([p1 - p0 for _, p0, p1, _ in pieces]),
                                  [b * j / parts for j in range(1, parts)], side="left") + 1
            shares = [pieces[i:j] for i, j in zip([0] + cut.tolist(), cut.tolist() + [len(pieces)]) if i < j]
            pool = _copier.get()
            jobs = [pool.submit(copy, share) for share in shares[1:]]
            try:
                done = [copy(shares[0])]
            finally:  # no copy thread is left writing into out after an error here
                concurrent.futures.wait(jobs)
            done += [job.result() for job in jobs]
        else:
            done = [copy(pieces)]
        cold = sum(c for c, _ in done)
        if cold:
            with self._count_lock:
                self.cold_samples += cold
        found = [x for _, crcs in done for x in crcs]
        first_bad = None  # (row, error): the first mismatch in row order
        if found:  # compared with the shards' tables (sorted positions run shard by shard)
            found.sort()
            pos = np.array([p for p, _ in found], dtype=np.int64)
            got = np.array([c for _, c in found], dtype=np.uint32)
            kk, lp = ss[pos], ll[pos]
            cuts = [0] + (np.flatnonzero(np.diff(kk)) + 1).tolist() + [pos.shape[0]]
            segs = [(int(kk[a]), a, e) for a, e in zip(cuts[:-1], cuts[1:])]
            want = np.concatenate([self._shards[k].crcs[lp[a:e]] for k, a, e in segs])
            if np.array_equal(got, want):  # as a rule: each shard's samples marked, one count
                for k, a, e in segs:
                    self._shards[k].verified[lp[a:e]] = True
                with self._count_lock:
                    self.samples_verified += got.shape[0]
            else:
                first_bad = self._first_mismatch(kk, lp, got, rows[pos])
        return first_bad

    def _first_mismatch(self, kk, lp, got, got_rows):
        """After a batch's CRCs ``got`` of samples ``lp`` of shards ``kk`` (shard by
        shard), read into rows ``got_rows``, did not all match the tables: each shard's
        compared (_compare: those that pass marked and counted); the first mismatch in row
        order as (row, WarehouseError)."""
        cuts = [0] + (np.flatnonzero(np.diff(kk)) + 1).tolist() + [kk.shape[0]]
        first = None
        for a, e in zip(cuts[:-1], cuts[1:]):
            k = int(kk[a])
            bad = self._compare(self._shards[k], k, lp[a:e], got[a:e])
            if bad is not None:
                r = int(got_rows[a + bad[0]])
                if first is None or r < first[0]:
                    first = (r, bad[1])
        return first

    # read_batch gathers the small sections (boxes, mask, records, extras) and copies
    # cached image runs from the shard's mapping; a reader whose files can be replaced or
    # truncated under it (the S3 cache) reads them all with preadv, where a short file is
    # an error, not a SIGBUS.
    _map_sections = True

    def _read_rows(self, sh, sec, first, dest_rows, mv, size):
        """Read section ``sec`` of samples first.. (len(dest_rows) consecutive samples of
        shard sh) into rows dest_rows of mv (the batch's array of it as bytes): one
        os.preadv, the rows coalesced where they are adjacent."""
        if len(dest_rows) == 1:
            r = dest_rows[0]
            bufs = [mv[r * size:(r + 1) * size]]
        else:
            groups = []
            g0 = prev = dest_rows[0]
            for r in dest_rows[1:]:
                if r != prev + 1:
                    groups.append((g0, prev + 1))
                    g0 = r
                prev = r
            groups.append((g0, prev + 1))
            bufs = [mv[a * size:e * size] for a, e in groups]
        _compact.preadv_full(sh.fd, sh.path, bufs, sh.sections[sec] + first * size)

    def _resident_mapping(self, sh, first, last):
        """Shard sh's mapping when the images of samples first..last are in the page
        cache (judged by the last of their pages, which the kernel's read-ahead and
        ``advise`` read after the others; asked with mincore: nothing is read), else
        None. A warm run is copied from the mapping (a memcpy, about twice as fast as
        preadv's copy here), a cold one is read with preadv: faulting cold pages in through
        the mapping was 0.8-0.9x preadv's rate. None too where the mapping is not used
        (``_map_sections``) or mincore is not available."""
        if not self._map_sections or _mincore is None:
            return None
        raw = self._mapping(sh)
        start, end = self._image_spans(sh, first, last)
        if end <= start or not _resident(sh.base, end - 1):
            return None
        return raw

    def _copy_checker(self, sh, raw):
        """Compact shard sh's _compact.copy_checker for its mapping ``raw``, made once per
        mapping (a mapping made again after a fork or close gets its own)."""
        got = sh.checker
        if got is None or got[0] is not raw:
            got = sh.checker = (raw, _compact.copy_checker(raw, sh.sections, self.layout))
        return got[1]

    def _mapping(self, sh):
        """Shard sh's read-only mapping as a uint8 array, mapped on first use from the
        open fd (the file this reader opened, never the path again)."""
        if sh.mmap is None:
            with self._lock:
                if sh.mmap is None:
                    if sh.fd is None:  # closed under a check_ahead job
                        raise WarehouseError(f"{sh.path}: closed")
                    m = np.frombuffer(mmap.mmap(sh.fd, 0, access=mmap.ACCESS_READ), dtype=np.uint8)
                    sh.base = m.ctypes.data  # its address, for mincore (_resident)
                    sh.mmap = m
        return sh.mmap

    def plan(self, batch_size, *, seed=0, epoch=0, rank=0, world=1, shuffle="global", remainder="drop"):
        """This rank's batches of one epoch as ``(indices [T, batch_size] int64, repeats
        [T] int64)``, identical to the Go reader's ``warehouse.PlanBatches``
        (reading.md, "Batches and ranks"); ``repeats`` counts each batch's wrap-around
        rows (``remainder="pad"``)."""
        return plan_batches(self._n, self.shard_starts.tolist(), batch_size, seed=seed, epoch=epoch, rank=rank,
                            world=world, shuffle=shuffle, remainder=remainder)

    def batches(self, batch_size, *, seed=0, epoch=0, rank=0, world=1, shuffle="global", remainder="drop"):
        """Yield this rank's batches of one epoch as int64 index arrays, the Go reader's
        order for the same arguments: ``shuffle`` none, global or shard; ``remainder``
        drop (every rank gets floor(N / (world*batch_size)) batches) or pad
        (ceil(...), wrapping around to the start of the order; see :meth:`plan` for
        the repeat counts). Read each with :meth:`read_batch`."""
        indices, _ = self.plan(batch_size, seed=seed, epoch=epoch, rank=rank, world=world, shuffle=shuffle,
                               remainder=remainder)
        yield from indices


_COPY_PIECE_BYTES = 2 << 20  # image bytes per piece when a read_batch copies in several threads
_VERIFY_PIECE_BYTES = 512 << 10  # ... and per piece with samples to check (the CRC follows the copy in cache)
_PARALLEL_BYTES = 4 << 20  # the least batch a read_batch copies in several threads
_MAX_COPY_THREADS = 4  # threads copying one read_batch, the calling one included

_copy_local = threading.local()  # .limit: copy_threads' n in this thread
# The compiled read of a batch's samples (_gather), where the package's compiled part has it.
_GATHER = getattr(_crc32c.COPY_CRC, "gather_rows", None)
# This process's copy threads (parts - 1 of them; see _copy_parts). Separate from the
# checker threads (_crc32c.checker), whose queue of check_ahead jobs a copy must not wait
# behind.
_copier = _crc32c.ProcessThreads(lambda: _MAX_COPY_THREADS - 1, "warehouse-copy")


def _usable_cpus():
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _copy_parts(nbytes):
    """Into how many shares a read_batch of ``nbytes`` (images, boxes, masks) cuts its
    copies: one per usable CPU up to _MAX_COPY_THREADS and the calling thread's
    :class:`copy_threads`, 1 for a small batch or on one CPU."""
    if nbytes < _PARALLEL_BYTES:
        return 1
    return min(_MAX_COPY_THREADS, _usable_cpus(), getattr(_copy_local, "limit", None) or _MAX_COPY_THREADS)


class copy_threads:  # noqa: N801 (a context manager, used as a function)
    """``with copy_threads(n):`` makes the read_batch calls of this thread copy with at
    most n threads, this one included (1: in this thread only). For callers that run
    reads side by side themselves: the torch loader's R reader threads each take
    CPUs // R, DataLoader worker processes CPUs // workers."""

    def __init__(self, n):
        self.n = max(1, int(n))

    def __enter__(self):
        self.before = getattr(_copy_local, "limit", None)
        _copy_local.limit = self.n
        return self

    def __exit__(self, *exc):
        _copy_local.limit = self.before


def _piece_crcs(sh, layout, arrays, local, rows):
    """The CRC-32C of rows ``rows`` of ``arrays``, holding samples ``local`` of shard sh,
    as its checksum table defines them: a plain shard's over the rows as they are, a
    compact one's over its table entries and the stored regions taken from the restored
    rows (_compact.crc_rows)."""
    if sh.sections["compact_table"] is None:
        return _crc32c.crc32c_rows(arrays, rows)
    return _compact.crc_rows(sh.sections, layout, local, arrays, rows)


def _stored_crcs(raw, sections, layout, local):
    """The CRC-32C of samples ``local`` of a shard from its stored bytes (``raw``: the
    shard's mapping as uint8), as its checksum table defines them: a plain shard's
    image, boxes, mask, record and extras rows; a compact one's table entry and region,
    then the same small rows (_compact.crc_stored)."""
    if sections["compact_table"] is not None:
        return _compact.crc_stored(raw, sections, layout, local)
    n = int(sections["crc_table"].shape[0])
    views = [raw[sections[sec]:sections[sec] + n * size].reshape(n, size) for sec, size in
             [("image", layout.image_bytes)] + layout.small_sections() if size]
    return _crc32c.crc32c_rows(views, local)


def _lock_for_reading(directory):
    """The shared readers lock of a version (``.<version>.readers`` beside it, Go:
    warehouse.LockForReading): while it is held, ``warehouse-etl gc`` leaves the version
    alone. None when the root has no lock file and cannot get one (another user's
    read-only warehouse): the version is read unprotected."""
    import fcntl

    root, name = os.path.split(os.path.normpath(directory))
    path = os.path.join(root, "." + name + ".readers")
    try:
        f = builtins.open(path, "rb")
    except FileNotFoundError:
        try:
            f = builtins.open(path, "ab")
        except OSError:
            log.warning("no readers lock for %s (the output root is not writable): gc cannot see this reader", directory)
            return None
    except PermissionError:
        return None
    fcntl.flock(f.fileno(), fcntl.LOCK_SH)
    return f


def _pin_dir(directory):
    """An fd on the version directory, flocked shared (Go: warehouse's pinnedDir): the
    reader opens the manifest and every shard relative to it, so it reads the version it
    opened whatever build takes the name later; ``warehouse-etl`` removes a replaced or
    collected version only once it can lock the directory exclusively. The name must
    still be this directory once the lock is held (retried a few times if it was
    swapped meanwhile)."""
    import fcntl

    for _ in range(10):
        try:
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        except OSError as e:
            raise WarehouseError(f"open {directory}: {go_errno(e)}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        except OSError:
            return fd  # no flock on this filesystem's directories: pinned by the handle only
        try:
            now = os.stat(directory)
        except OSError as e:
            os.close(fd)
            raise WarehouseError(f"open {directory}: {go_errno(e)}") from None
        held = os.fstat(fd)
        if (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
            return fd
        os.close(fd)
    raise WarehouseError(f"{directory}: replaced 10 times while being opened")


def _check_sha256(path, entry, dir_fd):
    want = entry["checksum_sha256"]
    h = hashlib.sha256()
    with builtins.open(entry["relative_path"], "rb", opener=lambda p, fl: os.open(p, fl, dir_fd=dir_fd)) as f:
        while True:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            h.update(chunk)
    got = h.hexdigest()
    if got != want:
        raise WarehouseError(f"{path}: sha256 {got}, the manifest says {want}")

