"""The node-local cache of an S3 warehouse's shards (docs/format/s3.md, "Cache"), shared
by the threads, DataLoader workers and processes (ranks) of one node.

Layout under ``root``: ``<bucket>/<prefix>/<v16>/whole/<relative path>`` holds whole
shard files, ``.../range/<relative path>`` sparse shard files filled by byte range with
``<relative path>.present`` beside them (one byte per sample, 1 once the sample's
bytes are written and passed their CRC-32C, and a last byte for the shard's header and
metadata sections), and ``<file>.lock`` the entry's lock file.

Locks (``flock``): a process that uses a cache file holds a shared lock on it for as
long as it has it open; eviction takes the entry's lock and then an exclusive lock on
the file, both without waiting, so a file in use anywhere on the node is never removed.
Filling an entry (a whole download, or creating a sparse file) happens under the
entry's exclusive lock: the ranks of a node that want the same shard wait for the one
that fetches it and then find the file. A whole file is downloaded to a temporary name,
checked against the manifest's sha256 and renamed into place, so a partial download is
never under the final name.
"""
import builtins
import contextlib
import fcntl
import logging
import os
import secrets
import time

from .errors import WarehouseError

log = logging.getLogger("warehouse_etl")

DEFAULT_LIMIT = 8 << 30
_TMP = ".tmp-"
_SIDE = (".lock", ".present")
_STALE_TMP_S = 3600


def default_dir():
    """``$WAREHOUSE_ETL_CACHE``, else ``$XDG_CACHE_HOME/warehouse-etl``, else
    ``~/.cache/warehouse-etl``."""
    d = os.environ.get("WAREHOUSE_ETL_CACHE")
    if d:
        return d
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "warehouse-etl")


def _flags(*f):
    v = getattr(os, "O_CLOEXEC", 0)
    for x in f:
        v |= x
    return v


def _same_file(fd, path):
    """Whether ``path`` still names the file open as ``fd`` (not unlinked or replaced)."""
    try:
        a, b = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)


def _touch(fd):
    """Record a use: the access time orders eviction (set explicitly: relatime/noatime
    mounts do not)."""
    try:
        st = os.fstat(fd)
        os.utime(fd, ns=(time.time_ns(), st.st_mtime_ns))
    except OSError:
        pass


class Cache:
    """A cache directory ``root`` whose evictable files are kept under ``limit`` bytes
    (allocated bytes: a sparse range file counts what it holds)."""

    def __init__(self, root, limit=DEFAULT_LIMIT):
        if limit is None:
            limit = DEFAULT_LIMIT
        if int(limit) <= 0:
            raise ValueError(f"cache_limit {limit}: want > 0 bytes")
        self.root, self.limit = os.path.abspath(os.fspath(root)), int(limit)
        self.fetches = 0  # whole files this object downloaded (tests, benchmarks)

    def version_dir(self, bucket, prefix, version):
        return os.path.join(self.root, bucket, *[p for p in prefix.split("/") if p], version)

    @contextlib.contextmanager
    def lock(self, path, blocking=True):
        """The entry's exclusive lock (``path.lock``); yields False when not blocking and
        it is held elsewhere."""
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path + ".lock", _flags(os.O_RDWR, os.O_CREAT), 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            yield True
        finally:
            os.close(fd)  # releases the lock

    def _open_shared(self, path, flags=os.O_RDONLY):
        """``path`` opened and share-locked, or None when it does not exist (or was
        removed while the lock was awaited)."""
        try:
            fd = os.open(path, _flags(flags))
        except FileNotFoundError:
            return None
        fcntl.flock(fd, fcntl.LOCK_SH)
        if not _same_file(fd, path):
            os.close(fd)
            return None
        return fd

    def open_whole(self, path, size, fetch, check=None, make_room=None):
        """An fd (read-only, share-locked) on the whole file cached at ``path`` of
        ``size`` bytes, and whether it was downloaded now. A file of another size, or
        one that ``check(fd)`` refuses, is fetched again. ``fetch(f)`` writes the bytes
        into the open file ``f`` and raises when they do not check out.
        ``make_room()`` releases one file this process holds (False when none)."""
        if size > self.limit:
            raise WarehouseError(f"{path}: {size} bytes do not fit in cache_limit {self.limit}")
        for _ in range(5):
            fd = self._open_shared(path)
            if fd is not None:
                if os.fstat(fd).st_size == size and (check is None or check(fd)):
                    _touch(fd)
                    return fd, False
                os.close(fd)
            with self.lock(path):
                fd = self._open_shared(path)
                if fd is not None:
                    if os.fstat(fd).st_size == size and (check is None or check(fd)):
                        _touch(fd)
                        return fd, False
                    log.warning("cache: %s is damaged (%d bytes, want %d): fetching it again", path,
                                os.fstat(fd).st_size, size)
                    os.close(fd)
                self.make_room(size, make_room)
                tmp = os.path.join(os.path.dirname(path), f"{_TMP}{os.getpid()}-{secrets.token_hex(4)}")
                try:
                    with builtins.open(tmp, "wb") as f:
                        fetch(f)
                    os.rename(tmp, path)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(tmp)
                    raise
                self.fetches += 1
                fd = self._open_shared(path)
                if fd is not None:
                    return fd, True
        raise WarehouseError(f"{path}: removed 5 times while being opened")

    def open_range(self, path, size, slots, make_room=None, init=None):
        """``(fd, pfd, fresh)``: the sparse file of ``size`` bytes cached at ``path``
        (read-write, share-locked; created empty when missing or of another size) and its
        presence file of ``slots`` bytes (zeroed whenever the data file is new). While
        the entry is locked, ``init(fd)`` fills what the last presence byte stands for
        unless it is set (``fresh``: it ran)."""
        for _ in range(5):
            with self.lock(path):
                fd = self._open_shared(path, os.O_RDWR)
                if fd is not None and os.fstat(fd).st_size != size:
                    log.warning("cache: %s is damaged (%d bytes, want %d): starting it again", path,
                                os.fstat(fd).st_size, size)
                    os.close(fd)
                    os.unlink(path)
                    fd = None
                fresh = fd is None
                if fresh:
                    self.make_room(0, make_room)
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(path + ".present")
                    fd = os.open(path, _flags(os.O_RDWR, os.O_CREAT, os.O_EXCL), 0o644)
                    os.ftruncate(fd, size)
                    fcntl.flock(fd, fcntl.LOCK_SH)
                pfd = os.open(path + ".present", _flags(os.O_RDWR, os.O_CREAT), 0o644)
                if os.fstat(pfd).st_size != slots:
                    os.ftruncate(pfd, 0)
                    os.ftruncate(pfd, slots)
                ran = False
                if init is not None and os.pread(pfd, 1, slots - 1) != b"\x01":
                    try:
                        init(fd)
                    except BaseException:
                        os.close(fd)
                        os.close(pfd)
                        raise
                    os.pwrite(pfd, b"\x01", slots - 1)
                    ran = True
                _touch(fd)
                return fd, pfd, ran
        raise WarehouseError(f"{path}: removed 5 times while being opened")

    def invalidate(self, path, fd):
        """Remove the cache file ``path`` when it is still the file open as ``fd`` (found
        damaged): the next open fetches it again. Readers that have it open keep their
        copy until they find it damaged themselves."""
        with self.lock(path):
            if _same_file(fd, path):
                os.unlink(path)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path + ".present")
                log.warning("cache: %s was damaged: removed, fetching it again", path)

    def entries(self):
        """``[(atime_ns, bytes, path)]`` of every evictable file (whole and range
        files, with their presence files), removing temporaries left by dead
        processes."""
        out, now = [], time.time()
        for d, _, files in os.walk(self.root):
            for name in files:
                p = os.path.join(d, name)
                try:
                    st = os.stat(p)
                except FileNotFoundError:
                    continue
                if name.startswith(_TMP):
                    if now - st.st_mtime > _STALE_TMP_S:
                        with contextlib.suppress(OSError):
                            os.unlink(p)
                    continue
                if name.endswith(_SIDE) or not (os.sep + "whole" + os.sep in p or os.sep + "range" + os.sep in p):
                    continue
                # Whole files count their size, sparse range files what they hold.
                n = st.st_size
                if os.sep + "range" + os.sep in p:
                    n = st.st_blocks * 512
                    with contextlib.suppress(OSError):
                        n += os.stat(p + ".present").st_size
                out.append((st.st_atime_ns, n, p))
        return out

    def usage(self):
        return sum(n for _, n, _ in self.entries())

    def evict(self, need):
        """Remove least recently used files that no process has open until ``need`` more
        bytes fit under the limit. Returns the bytes still over (0: it fits)."""
        entries = sorted(self.entries())
        over = sum(n for _, n, _ in entries) + need - self.limit
        for _, n, p in entries:
            if over <= 0:
                break
            with self.lock(p, blocking=False) as locked:
                if not locked:
                    continue
                try:
                    fd = os.open(p, _flags(os.O_RDONLY))
                except FileNotFoundError:
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    continue  # open in some process
                finally:
                    os.close(fd)
                os.unlink(p)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(p + ".present")
                over -= n
                log.info("cache: evicted %s (%d bytes)", p, n)
        return max(over, 0)

    def make_room(self, need, release=None):
        """Evict until ``need`` more bytes fit; while files this process holds are in
        the way, ``release()`` lets go of one (least recently used first) and eviction
        is tried again. A cache held full by other processes is left over its limit
        (logged): their open files are theirs."""
        over = self.evict(need)
        while over > 0 and release is not None and release():
            over = self.evict(need)
        if over > 0:
            log.warning("cache %s: %d bytes over its limit %d: every other file is in use", self.root, over,
                        self.limit)
        return over


__all__ = ["Cache", "DEFAULT_LIMIT", "default_dir"]
