"""PyTorch data loading from a warehouse-etl tensor warehouse.

    from warehouse_etl.torch import make_loader
    loader = make_loader("out/demo", 32, seed=0, reader_threads=2, pin_memory=True)
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        for batch in loader:            # one whole batch per item, read in one pass
            images = batch["images"]    # [B, C, H, W] float16 / float32 / uint8 (float32 with normalize=True)

Each loader item is a dict of tensors:

    images       [B, C, H, W]  as stored: torch.float16 (F16), torch.float32 (F32), torch.uint8 (U8);
                               torch.float32 (p/255 - mean)/std for U8 with normalize=True
    boxes        [B, K, 4]     x0, y0, x1, y1 in [0, 1]; float16 for F16, float32 for F32 and U8
    mask         [B, K]        1 for real boxes, then 0; dtype of boxes
    class_index  [B, K]        torch.int32, -1 for padding slots
    box_count    [B]           torch.int32, real boxes per sample
    extras       [B, E]        torch.float32, the manifest's extras (E may be 0)
    index        [B]           torch.int64, global sample index of each row
    repeats      int           the last `repeats` rows are wrap-around padding (remainder="pad")

The batch order is the Go reader's for the same (seed, epoch, rank, world, shuffle,
remainder): every rank computes it alone (docs/format/reading.md).

The parts, by job: :class:`WarehouseBatchSampler` plans an epoch and yields each
batch's indices (:class:`PlannedBatch`), nothing else; :class:`WarehouseDataset` reads
a batch into tensors and, with ``reader_threads``, reads the planned batches ahead in
its reader threads; :class:`WarehouseLoader` is the DataLoader that hands the dataset
each epoch's plan; :func:`make_loader` puts them together.
"""
import collections
import mmap
import sys
import threading
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler, get_worker_info

import warehouse_etl
from warehouse_etl._mix import Mixture
from warehouse_etl._order import batches_per_rank, plan_batches, plan_order
from warehouse_etl._s3reader import S3_OPTIONS
from warehouse_etl.warehouse import _MAX_COPY_THREADS, _usable_cpus, copy_threads
from warehouse_etl._state import LoaderStateError, StatefulLoader

__all__ = ["PlannedBatch", "WarehouseBatchSampler", "WarehouseDataset", "WarehouseLoader", "make_loader",
           "Normalize", "normalize", "distributed_rank_world", "Mixture", "LoaderStateError"]

# Batches past those being read whose images are advised to the kernel
# (posix_fadvise WILLNEED), so that a cold page cache is read ahead of the loop
# (docs/performance.md, "Read-ahead, cold shard opens and compact_images"): 0 turns
# the advice off.
READ_AHEAD = 2
#: _ReadAhead advises a plan once COLD_MIN samples and 1 in COLD_SHARE of those read in
#: its last COLD_WINDOW batches were out of the page cache, and from its start when the
#: plan before it was so, or read 1 in COLD_SHARE of its samples out of the page cache.
COLD_SHARE, COLD_MIN, COLD_WINDOW = 8, 4, 4

_TORCH_DTYPES = {np.dtype("<f2"): torch.float16, np.dtype("<f4"): torch.float32, np.dtype("u1"): torch.uint8,
                 np.dtype("<i4"): torch.int32, np.dtype("<i8"): torch.int64}
_NUMPY_DTYPES = {t: d for d, t in _TORCH_DTYPES.items()}


class PlannedBatch(NamedTuple):
    """One batch of a rank's epoch: ``indices`` (int64 array of global sample indices)
    and ``repeats`` (how many of the last rows are wrap-around padding)."""
    indices: np.ndarray
    repeats: int


def distributed_rank_world(rank=None, world=None):
    """``(rank, world)``: the arguments where given, else ``torch.distributed``'s when it
    is initialised, else ``(0, 1)``."""
    if rank is None or world is None:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            rank = dist.get_rank() if rank is None else rank
            world = dist.get_world_size() if world is None else world
    return (0 if rank is None else int(rank)), (1 if world is None else int(world))


def _open(warehouse, ignore_thresholds=False, verify_samples=True, epoch_samples=None, s3_options=None):
    """``warehouse`` open: a path (``s3_options`` go to an ``s3://`` one), a list of
    (path or Warehouse, weight) opened as a Mixture, or an open one as is."""
    if isinstance(warehouse, (warehouse_etl.Warehouse, Mixture)):
        return warehouse
    if isinstance(warehouse, (list, tuple)):  # a mixture: [(path or Warehouse, weight), ...]
        opened = []
        try:
            for item in warehouse:
                part, _ = item
                opened.append(_open(part, ignore_thresholds, verify_samples, s3_options=s3_options))
            return Mixture(opened, [w for _, w in warehouse], epoch_samples)
        except BaseException:
            for wh, item in zip(opened, warehouse):
                if wh is not item[0]:
                    wh.close()
            raise
    s3 = isinstance(warehouse, str) and warehouse.startswith("s3://")
    return warehouse_etl.open(warehouse, ignore_thresholds=ignore_thresholds, verify_samples=verify_samples,
                              **(s3_options or {} if s3 else {}))


class WarehouseBatchSampler(Sampler):
    """Yields this rank's batches of an epoch as :class:`PlannedBatch` items (an int64
    index array and its repeat count), in the Go reader's order, as torch's
    ``BatchSampler`` yields index lists: it plans, it reads nothing. ``set_epoch(e)``
    selects the epoch, as with ``DistributedSampler``; ``len()`` is the number of
    batches per rank and epoch (the same on every rank)."""

    def __init__(self, warehouse, batch_size, *, seed=0, epoch=0, rank=None, world=None, shuffle="global",
                 remainder="drop"):
        wh = _open(warehouse)
        self.n, self.shard_starts = len(wh), wh.shard_starts.tolist()
        # A mixture plans from its own order (epoch_samples long); start is the position
        # a resumed epoch begins at (WarehouseLoader.load_state_dict sets it).
        self._mixture = wh if isinstance(wh, Mixture) else None
        self.epoch_samples = wh.epoch_samples if self._mixture is not None else self.n
        self.start = 0
        self.batch_size, self.seed, self.epoch = int(batch_size), int(seed), int(epoch)
        self.rank, self.world = distributed_rank_world(rank, world)
        self.shuffle, self.remainder = shuffle, remainder
        self._plan()  # refuse bad arguments now, not in the first epoch

    def _plan(self):
        """This epoch's ``(indices, repeats)``, planned once per epoch: a
        :class:`WarehouseLoader` iterates the sampler twice per epoch (the dataset's
        read-ahead and the DataLoader), and a global shuffle of a million samples takes
        most of a second. The arrays are read-only."""
        key = (self.n, self.batch_size, self.seed, self.epoch, self.rank, self.world, self.shuffle, self.remainder,
               self.start)
        planned = getattr(self, "_planned", None)
        if planned is None or planned[0] != key:
            if self._mixture is not None:
                indices, repeats = plan_order(self._mixture.epoch_order(self.shuffle, self.seed, self.epoch),
                                              self.batch_size, rank=self.rank, world=self.world,
                                              remainder=self.remainder, start=self.start)
            else:
                indices, repeats = plan_batches(self.n, self.shard_starts, self.batch_size, seed=self.seed,
                                                epoch=self.epoch, rank=self.rank, world=self.world,
                                                shuffle=self.shuffle, remainder=self.remainder, start=self.start)
            indices.flags.writeable = repeats.flags.writeable = False
            planned = self._planned = (key, (indices, repeats))
        return planned[1]

    def set_epoch(self, epoch):
        """Use the order of ``epoch`` from the next iteration on."""
        if epoch < 0:
            raise ValueError(f"epoch {epoch}: must be >= 0")
        self.epoch = int(epoch)

    def __len__(self):
        return batches_per_rank(self.epoch_samples, self.batch_size, self.world, self.remainder, self.start)

    def __iter__(self):
        indices, repeats = self._plan()
        for t in range(indices.shape[0]):
            yield PlannedBatch(indices[t], int(repeats[t]))


def _empty(shape, dtype, shared, pinned=False):
    """An uninitialised tensor in shared memory (no copy when a DataLoader worker sends
    it to the main process) when ``shared``; else page-locked when ``pinned`` (from
    torch's caching host allocator, which reuses a block only after the non-blocking
    copies recorded on it are done), else in ordinary memory."""
    if not shared:
        return torch.empty(shape, dtype=dtype, pin_memory=pinned)
    nbytes = int(np.prod(shape, dtype=np.int64)) * torch.empty((), dtype=dtype).element_size()
    storage = torch.UntypedStorage._new_shared(max(nbytes, 1))
    return torch.empty(0, dtype=dtype).set_(storage, 0, tuple(shape))


def _pinnable(pin_memory):
    """Whether batches can be read into page-locked memory: asked for, and CUDA is
    there (as the DataLoader's own ``pin_memory``, a warning and ordinary memory
    without it)."""
    if not pin_memory:
        return False
    if not torch.cuda.is_available():
        warnings.warn("pin_memory=True but CUDA is not available: batches are read into ordinary memory",
                      stacklevel=3)
        return False
    return True


class _BatchMemory:
    """Recycles the memory of batches that nothing references any more.

    Every batch's tensors are views of one anonymous mapping (``torch.from_numpy`` of
    numpy arrays over it, _carve), and each holds a reference to it through its array:
    a mapping whose reference count is back to the pool's own is referenced by no
    tensor, view or slice, so its next batch may overwrite it. A batch the caller keeps
    (a list of batches, a slice of one) keeps its mapping out of reach; the pool then
    maps a new one. So the memory of a training loop's batches is written once and
    reused, without the page faults (and the kernel zeroing) of fresh memory per batch,
    and no batch is ever overwritten under a caller. Mappings ask for transparent huge
    pages where the kernel offers them."""

    def __init__(self, limit):
        self._lock = threading.Lock()
        self._pool = []
        self._limit = max(int(limit), 1)

    def take(self, nbytes):
        with self._lock:
            for k in range(len(self._pool)):
                # Two references: the pool's list and getrefcount's argument.
                if len(self._pool[k]) == nbytes and sys.getrefcount(self._pool[k]) == 2:
                    return self._pool[k]
            m = mmap.mmap(-1, nbytes)
            if hasattr(mmap, "MADV_HUGEPAGE"):
                try:
                    m.madvise(mmap.MADV_HUGEPAGE)
                except OSError:
                    pass
            self._pool.append(m)
            if len(self._pool) > self._limit:
                del self._pool[0]  # busy or not: its tensors keep it alive while needed
            return m


def _carve_plan(specs):
    """The layout _carve cuts a batch's mapping into, for (name, shape, torch dtype)
    specs: ``([(name, shape, numpy dtype, offset), ...], bytes)``, each array at a 64-byte
    boundary."""
    plan, off = [], 0
    for name, shape, dtype in specs:
        dt = _NUMPY_DTYPES[dtype]
        plan.append((name, tuple(shape), dt, off))
        off += -(-int(np.prod(shape, dtype=np.int64)) * dt.itemsize // 64) * 64
    return plan, max(off, 64)


def _carve(m, plan):
    """numpy arrays laid out in mapping ``m`` as _carve_plan says, by name. Each holds a
    reference to m (_BatchMemory's sign that a batch is in use), and so does each
    tensor made from one with torch.from_numpy. 2 us an array and its tensor, against
    12 for the np.prod, torch.frombuffer and view of each that this replaced (a batch
    has 7)."""
    return {name: np.ndarray(shape, dt, m, off) for name, shape, dt, off in plan}


class _ReadAhead:
    """The reader threads of a :class:`WarehouseDataset`: they read the batches of a
    plan (an iterator of batch keys) in order, up to ``ahead`` batches before the
    dataset is asked for them, and hand over each when asked for exactly that batch.
    Asked for anything else, the plan is dropped (reads not yet started are
    cancelled) and the caller reads the batch itself.

    ``advise_ahead`` batches past those handed to the threads are advised to the kernel
    (``advise``, the warehouse's ``posix_fadvise(WILLNEED)`` of their images) as they
    are taken from the plan, so that on a cold page cache the disk reads them while the
    threads copy the batches before. Whether to advise is decided by the share of the
    samples read whose images were out of the page cache (``counts``: the warehouse's
    ``(cold_samples, samples_read)``): a plan is advised from the moment 1 in COLD_SHARE
    of the samples its last COLD_WINDOW batches read were cold (COLD_MIN samples at
    least), and from its start when the plan before it was so, or read 1 in COLD_SHARE of
    its samples cold. (A plan advised from its start whose advice kept ahead of its reads
    finds few samples cold, and the next starts unadvised: on a cache that stays cold its
    first batches turn the advice on again, on one that became warm it stays off; the
    Go reader has the same rule, warehouse/readahead.go.) On a warm cache the advice only
    costs (10-12% of a warm epoch at one reader thread; a warm first epoch ran 1.11-1.17x
    faster without it), and the first batches of an epoch, never advised, tell a cold
    cache at once. A share, not one cold sample: a page cache with memory to spare
    still drops a page now and then (0.5% of a cached warehouse's pages within 20 s
    here), which turned the advice on for warm epochs; a window, not the whole plan: an
    epoch that reaches the part of a dataset the cache could not hold is advised from
    there. With ``threads`` 0 nothing is read here: the plan only tracks which batch
    comes next, for the advice, and the caller reads each.

    ``read`` is a bound method of the dataset, held weakly: the dataset owns this
    object, not the other way round, so dropping the dataset stops the threads."""

    def __init__(self, read, threads, ahead, advise=None, advise_ahead=0, counts=None):
        self._read = weakref.WeakMethod(read)
        self._threads, self._ahead = int(threads), max(int(ahead), 1)
        self._advise, self._advise_ahead = advise, int(advise_ahead) if advise is not None else 0
        self._counts = counts if self._advise_ahead else None
        self._at_start = None  # counts when the plan started
        self._turned = False  # the plan's reads turned the advice on
        self._marks = collections.deque(maxlen=COLD_WINDOW + 1)  # counts as the plan's last batches were taken
        self._advising = self._advise_ahead > 0
        self._pool = None
        self._lock = threading.Lock()
        self._plan = iter(())
        self._pending = collections.deque()  # (indices, repeats, future or None), in plan order
        self._taken = collections.deque()  # (indices, repeats) taken from the plan, advised once advising

    def start(self, plan):
        """Read ahead the batches of ``plan``, after dropping the plan before."""
        with self._lock:
            self._drop()
            if self._counts is not None:
                now = self._counts()
                self._advising = self._at_start is not None and (
                    self._turned or _mostly_cold(self._at_start, now, 1))
                self._at_start, self._turned = now, False
                self._marks.clear()
                self._marks.append(now)  # unused when advising from the start
            if self._pool is None and self._threads:
                self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="warehouse-read")
            self._plan = iter(plan)
            while len(self._pending) < self._ahead and self._submit():
                pass

    def _next(self):
        """The next batch key of the plan (None at its end), keeping ``advise_ahead``
        keys after it taken and advised (when advising). The key returned goes to a read
        at once: not advised (its read would do the same work beside it)."""
        key = self._taken.popleft() if self._taken else self._take_key()
        if not self._advising and self._counts is not None:
            self._marks.append(self._counts())
            if _mostly_cold(self._marks[0], self._marks[-1], COLD_MIN):
                # This plan's last reads found enough samples out of the page cache: advise
                # from here on, the batches taken already (not the one going to a read now) too.
                self._advising = self._turned = True
                for idx, _ in self._taken:
                    self._advise(idx)
        while key is not None and len(self._taken) < self._advise_ahead:
            more = self._take_key()
            if more is None:
                break
            if self._advising:
                self._advise(more[0])
            self._taken.append(more)
        return key

    def _take_key(self):
        item = next(self._plan, None)
        return None if item is None else _batch_key(item)

    def _submit(self):
        key = self._next()
        if key is None:
            return False
        idx, repeats = key
        future = self._pool.submit(_call, self._read, idx, repeats) if self._threads else None
        self._pending.append((idx, repeats, future))
        return True

    def take(self, idx, repeats):
        """The finished read of the next planned batch when it is ``(idx, repeats)`` (its
        error raised), else None (without threads: always None, the caller reads it)."""
        with self._lock:
            if not self._pending:
                return None
            want, want_repeats, future = self._pending[0]
            # Bytes, not np.array_equal: a tenth of the time for batch-sized int64 arrays.
            if want_repeats != repeats or want.shape != idx.shape or want.tobytes() != idx.tobytes():
                self._drop()
                return None
            self._pending.popleft()
            self._submit()
        return None if future is None else future.result()

    def _drop(self):
        for _, _, future in self._pending:
            if future is not None:
                future.cancel()  # one already running finishes; its batch is dropped
        self._pending.clear()
        self._taken.clear()
        self._plan = iter(())

    def close(self):
        with self._lock:
            self._drop()
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None


def _reading_threads(reader_threads, ahead, cpus):
    """How ``reader_threads`` read the ``ahead`` batches ahead on ``cpus`` CPUs: ``(threads,
    copy)``, ``threads`` threads each reading whole batches, copying each with ``copy``
    threads (itself included; ``copy_threads``). Each reader thread has CPUs //
    reader_threads copying threads (at most _MAX_COPY_THREADS, at least 1), as a
    ``read_batch`` in the loop has all of them; those threads read whole batches side by
    side, one per batch ahead, before they split a batch. A split batch ends with a join:
    the reading thread waits for the last copy of its helper, woken tens of
    microseconds late on a VM, and the helper's start and end each take the GIL beside
    the other threads'. On 2 vCPUs one reader thread reading 2 batches side by side ran
    1.22-1.35x warm and 1.12x on a first epoch what it did splitting each batch with a
    copy thread (docs/performance.md, "One reader thread: whole batches side by side").
    The batches ahead, and so the memory for batches, do not change; each reading thread
    keeps its own small scratch (records, and with ``normalize`` a U8 batch)."""
    if reader_threads <= 0:
        return 0, 1
    total = reader_threads * max(1, min(_MAX_COPY_THREADS, cpus // reader_threads))
    threads = max(reader_threads, min(total, ahead))
    return threads, max(1, total // threads)


def _mostly_cold(before, now, least):
    """Whether the reads between two ``(cold_samples, samples_read)`` counts found at
    least ``least`` and 1 in COLD_SHARE of their samples out of the page cache."""
    cold, read = now[0] - before[0], now[1] - before[1]
    return cold >= least and cold * COLD_SHARE >= read


def _call(method_ref, *args):
    method = method_ref()
    if method is None:
        raise ReferenceError("the dataset of this read is gone")
    return method(*args)


def _batch_key(key):
    """``(indices, repeats)`` of a :class:`PlannedBatch` or an index sequence."""
    if isinstance(key, PlannedBatch):
        key, repeats = key.indices, key.repeats
    else:
        repeats = 0
    return np.asarray(key, dtype=np.int64).reshape(-1), int(repeats)


class WarehouseDataset(Dataset):
    """Map-style dataset over a warehouse. ``ds[i]`` (an int) is one sample as a dict of
    tensors (``image`` [C,H,W], ``boxes``, ``mask``, ``class_index``, ``box_count``,
    ``extras``, ``index``); ``ds[indices]`` (a sequence, an int array or a
    :class:`PlannedBatch`) reads the whole batch with ``Warehouse.read_batch`` straight
    into the tensors of the module docstring.

    ``reader_threads`` > 0 gives the dataset reader threads that read batches before they
    are asked for: :meth:`prefetch` hands it an epoch's plan (the sampler's batches, in
    the order the DataLoader will ask for them; :class:`WarehouseLoader` does this at
    each ``iter(loader)``), and the threads keep ``reader_threads * prefetch_factor``
    batches read or being read ahead of the loop (``os.preadv`` and numpy release the
    GIL, so they read beside the training step). Each reader thread's share of the CPUs
    copies: as threads that read whole batches side by side, one per batch ahead, before
    any batch is split among them (_reading_threads). Without a plan, or asked for
    another batch than the plan's next, a batch is read when it is asked for.

    ``read_ahead`` (default 2; 0 off) batches past those being read are advised to the
    kernel as the plan is followed (``Warehouse.advise``: ``posix_fadvise(WILLNEED)`` of
    their images), with or without reader threads: where the shards are not in the page
    cache (a dataset larger than memory, the first epoch after a reboot) the disk reads
    them while the batches before are copied. An epoch (a process's first too) is
    advised once one of its reads finds an image out of the page cache, from its start
    when the epoch before did: on a warm cache the advice would cost a system call per
    run and read nothing. Reads check first reads as they copy them, each row right
    after its copy (``Warehouse.read_batch``); nothing is checked ahead: checking the
    stored bytes in checker threads ahead of the reads measured slower everywhere
    (docs/performance.md, "Checks on the copied rows").

    In the process that iterates (``make_loader``, or a DataLoader with
    ``num_workers=0``) a batch's tensors live in memory that is reused once nothing
    references that batch any more (no page faults per batch; a batch you keep is never
    overwritten). In a DataLoader worker process they are allocated in shared memory,
    so handing them to the main process copies nothing. With ``pin_memory=True`` (and
    CUDA; without it a warning) they are page-locked, taken from torch's caching host
    allocator, for ``.to("cuda", non_blocking=True)``: the batch is read straight into
    them, with no DataLoader pinning thread copying it again, and the allocator reuses a
    block only once the copies queued from it are done.

    Picklable: workers get the checked manifest and reopen the shard files lazily.
    ``normalize=True`` turns U8 images into float32 ``(p/255 - mean)/std`` with the
    manifest's mean/std (``p/255`` when it records none) through
    ``Warehouse.normalize_table``: bit for bit what an F32 build of the same config
    stores. F16/F32 images were normalised by the build and are returned as stored.
    To move 4x fewer bytes to the GPU, leave it off and apply :class:`Normalize` there.

    ``verify_samples`` is :func:`warehouse_etl.open`'s (used when ``warehouse`` is a
    path): each sample is checked against its CRC-32C on its first read in the process
    that reads it (a worker process keeps its own record), ``"always"`` on every read,
    ``False`` never."""

    def __init__(self, warehouse, *, normalize=False, ignore_thresholds=False, verify_samples=True,
                 reader_threads=0, prefetch_factor=2, windows=None, read_ahead=READ_AHEAD, pin_memory=False):
        # Checked before anything is opened: a refused dataset holds nothing.
        if reader_threads < 0 or prefetch_factor < 1 or read_ahead < 0:
            raise ValueError(f"reader_threads {reader_threads}, prefetch_factor {prefetch_factor}, read_ahead "
                             f"{read_ahead}: want reader_threads >= 0, prefetch_factor >= 1 and read_ahead >= 0")
        self._owns_wh = not isinstance(warehouse, (warehouse_etl.Warehouse, Mixture))
        self.wh = _open(warehouse, ignore_thresholds, verify_samples)
        self.normalize = bool(normalize) and self.wh.image_dtype == np.dtype("u1")
        self.reader_threads, self.prefetch_factor = int(reader_threads), int(prefetch_factor)
        self.read_ahead = int(read_ahead)
        self.pin_memory = _pinnable(pin_memory)
        try:  # episode windows (_windows.py): a bad request or a version without them refuses here
            if windows and isinstance(self.wh, Mixture):
                raise ValueError("windows= is not supported on a mixture: episode windows are read from one "
                                 "warehouse's episodes.bin, and a mixture has one per warehouse; read windows from "
                                 "a single warehouse")
            self.windows = warehouse_etl.Windows(self.wh, windows) if windows else None
        except BaseException:
            self.close()
            raise
        self._init_local()

    def _init_local(self):
        self._local = threading.local()  # per reader thread: records and U8 scratch
        ahead = self.reader_threads * self.prefetch_factor
        # Room for the batches read ahead, the one in use and a few the caller keeps.
        self._memory = _BatchMemory(ahead + 4 if ahead else 8)
        threads, self._copy = _reading_threads(self.reader_threads, ahead, _usable_cpus())
        advise = getattr(self.wh, "advise", None) if self.read_ahead else None
        counts = (lambda wh=self.wh: (wh.cold_samples, wh.samples_read)) if hasattr(self.wh, "cold_samples") else None
        self._ahead = (_ReadAhead(self._read_ahead, threads, ahead, advise, self.read_ahead, counts)
                       if ahead or advise is not None else None)

    def __getstate__(self):
        return {"wh": self.wh, "normalize": self.normalize, "reader_threads": self.reader_threads,
                "prefetch_factor": self.prefetch_factor, "windows": self.windows, "read_ahead": self.read_ahead,
                "pin_memory": self.pin_memory}

    def __setstate__(self, state):
        self.wh, self.normalize = state["wh"], state["normalize"]
        self.reader_threads = state.get("reader_threads", 0)
        self.prefetch_factor = state.get("prefetch_factor", 2)
        self.windows = state.get("windows")
        self.read_ahead = state.get("read_ahead", READ_AHEAD)
        self.pin_memory = state.get("pin_memory", False)
        self._init_local()

    def __del__(self):
        # Also runs on an object whose __init__ raised: any attribute may be missing.
        ahead = getattr(self, "_ahead", None)
        if ahead is not None:
            ahead.close()

    def close(self):
        """Stop the reader threads, and close the warehouse when the dataset opened it
        (from a path; one passed in open stays open)."""
        ahead, self._ahead = getattr(self, "_ahead", None), None
        if ahead is not None:
            ahead.close()
        if getattr(self, "_owns_wh", False) and getattr(self, "wh", None) is not None:
            self.wh.close()

    def prefetch(self, batches):
        """Start reading ``batches`` (an iterable of :class:`PlannedBatch` or index
        sequences, in the order ``ds[...]`` will be asked for them, e.g. a
        :class:`WarehouseBatchSampler`) in the reader threads, dropping what was read
        ahead for an earlier plan (an epoch left early). No-op without reader threads."""
        if self._ahead is not None:
            self._ahead.start(iter(batches))

    def __len__(self):
        return len(self.wh)

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            batch = self._read(np.array([int(key) % len(self.wh) if key < 0 else int(key)]), 0, shared=False)
            out = {k: {n: x[0] for n, x in v.items()} if isinstance(v, dict) else v[0]
                   for k, v in batch.items() if k != "repeats"}
            out["image"] = out.pop("images")
            return out
        idx, repeats = _batch_key(key)
        if self._ahead is not None:
            batch = self._ahead.take(idx, repeats)
            if batch is not None:
                return batch
        info = get_worker_info()
        if info is not None:  # a DataLoader worker process: the workers share the CPUs
            with copy_threads(_usable_cpus() // info.num_workers):
                return self._read(idx, repeats, True)
        return self._read(idx, repeats, False)

    def _scratch_for(self, b):
        """This thread's arrays that are not returned (records; U8 images to normalise)."""
        scratch = getattr(self._local, "scratch", None)
        if scratch is None or scratch["records"].shape[0] != b:
            wh = self.wh
            scratch = {"records": np.empty(b, dtype=wh.record_dtype)}
            if self.normalize:
                scratch["images"] = np.empty((b,) + wh.image_shape, dtype=wh.image_dtype)
            self._local.scratch = scratch
        return scratch

    def _read_ahead(self, idx, repeats):
        with copy_threads(self._copy):  # the reading threads share the CPUs (_reading_threads)
            return self._read(idx, repeats, shared=False)

    def _specs(self, b):
        """The (name, shape, torch dtype) of a batch of b rows and _carve_plan's layout of
        them, computed once per batch size (a few tens of microseconds a batch)."""
        cache = self.__dict__.setdefault("_specs_cache", {})
        got = cache.get(b)
        if got is None:
            wh, l = self.wh, self.wh.layout
            image_dtype = torch.float32 if self.normalize else _TORCH_DTYPES[wh.image_dtype]
            specs = [("images", (b,) + wh.image_shape, image_dtype),
                     ("boxes", (b, l.max_boxes, 4), _TORCH_DTYPES[wh.box_dtype]),
                     ("mask", (b, l.max_boxes), _TORCH_DTYPES[wh.box_dtype]),
                     ("class_index", (b, l.max_boxes), torch.int32),
                     ("box_count", (b,), torch.int32),
                     ("extras", (b, l.extra_f32), torch.float32),
                     ("index", (b,), torch.int64)]
            if hasattr(wh, "extra_batch_specs"):  # a Mixture: warehouse [B]
                specs += [(name, shape, _TORCH_DTYPES[dt]) for name, shape, dt in wh.extra_batch_specs(b)]
            got = cache[b] = (specs,) + _carve_plan(specs)
        return got

    def _read(self, idx, repeats, shared):
        wh, b = self.wh, idx.shape[0]
        scratch = self._scratch_for(b)
        specs, plan, nbytes = self._specs(b)
        if shared or self.pin_memory:  # a worker process's shared memory, or page-locked for the GPU
            t = {name: _empty(shape, dtype, shared, not shared) for name, shape, dtype in specs}
            out = {k: v.numpy() for k, v in t.items()}
        else:
            out = _carve(self._memory.take(nbytes), plan)
            t = {k: torch.from_numpy(v) for k, v in out.items()}
        out["records"] = scratch["records"]
        if self.normalize:
            out["images"] = scratch["images"]
        read = getattr(wh, "_read_into", None)  # a Warehouse: out is its arrays as made here
        if read is not None:
            read(idx, out)
        else:
            wh.read_batch(idx, out=out)
        if self.normalize:
            wh.normalize_images(out["images"], out=t["images"].numpy())
        if self.windows is not None:
            w = self.windows.gather(idx)
            pin = (lambda x: x.pin_memory()) if self.pin_memory and not shared else (lambda x: x)
            t["windows"] = {n: pin(torch.from_numpy(v)) for n, (v, _) in w.items()}
            t["window_mask"] = {n: pin(torch.from_numpy(m)) for n, (_, m) in w.items()}
        t["repeats"] = int(repeats)
        return t


class Normalize(torch.nn.Module):
    """The manifest's normalisation as a module, to run on the GPU after transfer:
    ``Normalize(wh)(images)`` turns a uint8 ``[..., C, H, W]`` tensor into float32
    ``(p/255 - mean)/std`` (``p/255`` when the manifest records no mean/std), in float32
    arithmetic on the tensor's device: within 5e-7 (a few float32 ulps) of the exact table
    (``normalize=True`` on the loader), not bit-identical. Float images (F16/F32
    warehouses, normalised at build time) pass through unchanged."""

    def __init__(self, warehouse):
        super().__init__()
        wh = _open(warehouse)
        self.has_stats = wh.mean is not None
        mean = wh.mean if self.has_stats else [0.0] * wh.layout.channels
        std = wh.std if self.has_stats else [1.0] * wh.layout.channels
        self.register_buffer("mean", torch.tensor(mean, dtype=torch.float32).view(-1, 1, 1))
        self.register_buffer("std", torch.tensor(std, dtype=torch.float32).view(-1, 1, 1))

    def forward(self, images):
        if images.dtype != torch.uint8:
            return images
        x = images.to(torch.float32).div_(255.0)
        if self.has_stats:
            x.sub_(self.mean.to(x.device)).div_(self.std.to(x.device))
        return x


def normalize(images, warehouse):
    """Functional :class:`Normalize`: ``normalize(batch["images"].cuda(non_blocking=True), wh)``."""
    return Normalize(warehouse).to(images.device)(images)


class WarehouseLoader(StatefulLoader, DataLoader):
    """A DataLoader whose items are whole batches from a :class:`WarehouseBatchSampler`.
    ``set_epoch(e)`` forwards to the sampler (``loader.sampler.set_epoch(e)`` does the
    same); ``warehouse`` is the open :class:`warehouse_etl.Warehouse`. Each
    ``iter(loader)`` hands the epoch's plan to the dataset's reader threads
    (:meth:`WarehouseDataset.prefetch`) when the loader runs no worker processes."""

    def __iter__(self):
        self._begin_epoch()  # StatefulLoader: a loaded state's position, else 0
        prefetch = getattr(self.dataset, "prefetch", None)
        if self.num_workers == 0 and prefetch is not None:
            prefetch(self.sampler)
        batches = super().__iter__()
        fetch = getattr(getattr(self.dataset, "wh", None), "fetch_ahead", None)  # s3://: fetch what comes next
        return self._counted(batches if fetch is None else fetch(self.sampler, batches))

    @property
    def warehouse(self):
        return self.dataset.wh


def make_loader(path, batch_size, *, seed=0, epoch=0, rank=None, world=None, shuffle="global", remainder="drop",
                reader_threads=0, pin_memory=False, normalize=False, ignore_thresholds=False, prefetch_factor=2,
                verify_samples=True, num_workers=None, epoch_samples=None, windows=None, read_ahead=READ_AHEAD,
                **dataloader_kwargs):
    """A :class:`WarehouseLoader` over the warehouse at ``path`` (or an open Warehouse):
    ``DataLoader(dataset, batch_size=None, sampler=...)`` whose items are whole batch
    dicts (module docstring), each read in one pass. ``rank``/``world`` default to
    ``torch.distributed``'s when it is initialised, else 0/1.

    ``reader_threads`` is the number of reader threads of the dataset in this process,
    each reading a whole batch (``os.preadv`` and numpy release the GIL, so they run
    beside the training step) up to ``reader_threads * prefetch_factor`` batches ahead;
    0 reads each batch when it is asked for. The DataLoader itself runs no worker
    processes: a worker process would add a shared-memory segment, its page faults and a
    second mapping per batch to work that is otherwise one read into reused memory
    (measured in bench/read.sh: processes deliver 3-4x fewer samples/s). A DataLoader
    with worker processes still works with the parts: ``DataLoader(WarehouseDataset(path),
    batch_size=None, sampler=WarehouseBatchSampler(path, B), num_workers=N)``.

    ``read_ahead`` is :class:`WarehouseDataset`'s: batches past those being read whose
    images are advised to the kernel for cold reads (0: off).

    ``num_workers`` is the deprecated name of ``reader_threads`` (it always meant reader
    threads here, never DataLoader worker processes): it still works, with a
    DeprecationWarning.

    Every sample is checked against its shard's CRC-32C on its first read in this
    process (``verify_samples``, as :func:`warehouse_etl.open`; reader threads share
    the record, so later epochs read at unchecked speed); a damaged sample raises
    ``warehouse_etl.WarehouseError`` from the loop, naming the shard file and sample.

    ``windows`` (extra name -> step offsets, e.g. ``{"action/ctrl": range(0, 50)}``)
    adds ``batch["windows"][name]`` (float32 ``[B, len(offsets), dim]``, dim = prod of the
    extra's shape) and ``batch["window_mask"][name]`` (bool ``[B, len(offsets)]``): each
    sample's extra at those steps of its episode, gathered by (episode, step) from the
    version's ``episodes.bin`` whatever the shuffle; a step outside the episode or skipped
    by the build is False and padded with the nearest kept frame (python/README.md,
    "Episode windows"). A version without ``episodes.bin`` refuses here."""
    if num_workers is not None:
        warnings.warn("make_loader(num_workers=N) is deprecated: it means N reader threads in this process "
                      "(the DataLoader runs no worker processes); use make_loader(reader_threads=N)",
                      DeprecationWarning, stacklevel=2)
        if reader_threads:
            raise TypeError(f"make_loader: reader_threads={reader_threads} and num_workers={num_workers}: "
                            f"num_workers is the deprecated name of reader_threads; give reader_threads only")
        reader_threads = num_workers
    # cache_dir=, cache_limit=, mode=...: open()'s, for an s3:// path or each s3:// part of a mixture.
    s3_options = {k: dataloader_kwargs.pop(k) for k in S3_OPTIONS if k in dataloader_kwargs}
    is_s3 = lambda p: isinstance(p, str) and p.startswith("s3://")
    parts = [item[0] for item in path if isinstance(item, (list, tuple))] if isinstance(path, (list, tuple)) else [path]
    if s3_options and not any(is_s3(p) for p in parts):
        raise TypeError(f"make_loader: {', '.join(sorted(s3_options))}: options of s3:// paths only, and no path "
                        f"here is one")
    if epoch_samples is not None and not isinstance(path, (list, tuple, Mixture)):
        raise ValueError("make_loader: epoch_samples is a mixture's epoch length: give [(path, weight), ...]")
    # What make_loader opens it closes (ds.close(), or here when the dataset is refused):
    # an S3Warehouse holds a lease and its renewing thread.
    opened = None
    if is_s3(path):
        path = opened = warehouse_etl.open(path, ignore_thresholds=ignore_thresholds, verify_samples=verify_samples,
                                           **s3_options)
    elif isinstance(path, (list, tuple)):  # [(path, weight), ...]: opened here for epoch_samples
        path = opened = _open(path, ignore_thresholds, verify_samples, epoch_samples, s3_options)
    # pin_memory: the dataset reads each batch straight into page-locked memory, where the
    # DataLoader's pin_memory would copy every batch once more in its pinning thread; that
    # one stays for a pin_memory_device= the dataset does not pin for.
    loader_pins = bool(pin_memory) and "pin_memory_device" in dataloader_kwargs
    try:
        ds = WarehouseDataset(path, normalize=normalize, ignore_thresholds=ignore_thresholds,
                              verify_samples=verify_samples, reader_threads=reader_threads,
                              prefetch_factor=prefetch_factor, windows=windows, read_ahead=read_ahead,
                              pin_memory=pin_memory and not loader_pins)
    except BaseException:
        if opened is not None:
            opened.close()
        raise
    ds._owns_wh = ds._owns_wh or opened is not None  # ds.close() closes what make_loader opened
    try:
        sampler = WarehouseBatchSampler(ds.wh, batch_size, seed=seed, epoch=epoch, rank=rank, world=world,
                                        shuffle=shuffle, remainder=remainder)
        return WarehouseLoader(ds, batch_size=None, sampler=sampler, num_workers=0, pin_memory=loader_pins,
                               **dataloader_kwargs)
    except BaseException:
        ds.close()  # the caller gets the error alone: no threads, no open warehouse left behind
        raise
