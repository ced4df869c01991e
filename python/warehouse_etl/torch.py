"""PyTorch data loading from a warehouse-etl tensor warehouse.

    from warehouse_etl.torch import make_loader
    loader = make_loader("out/demo", 32, seed=0, num_workers=2, pin_memory=True)
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
"""
import collections
import mmap
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, Sampler, get_worker_info

import warehouse_etl
from warehouse_etl._order import plan_batches

__all__ = ["PlannedBatch", "WarehouseBatchSampler", "WarehouseDataset", "WarehouseLoader", "make_loader",
           "Normalize", "normalize", "distributed_rank_world"]

_TORCH_DTYPES = {np.dtype("<f2"): torch.float16, np.dtype("<f4"): torch.float32, np.dtype("u1"): torch.uint8,
                 np.dtype("<i4"): torch.int32, np.dtype("<i8"): torch.int64}


class PlannedBatch(NamedTuple):
    """One batch of a rank's epoch: ``indices`` (int64 array of global sample indices)
    and ``repeats`` (how many of the last rows are wrap-around padding). ``pending`` is
    the read already under way in a reader thread of :func:`make_loader`, or None."""
    indices: np.ndarray
    repeats: int
    pending: Any = None


def distributed_rank_world(rank=None, world=None):
    """``(rank, world)``: the arguments where given, else ``torch.distributed``'s when it
    is initialised, else ``(0, 1)``."""
    if rank is None or world is None:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            rank = dist.get_rank() if rank is None else rank
            world = dist.get_world_size() if world is None else world
    return (0 if rank is None else int(rank)), (1 if world is None else int(world))


def _open(warehouse, ignore_thresholds=False, verify_samples=True):
    if isinstance(warehouse, warehouse_etl.Warehouse):
        return warehouse
    return warehouse_etl.open(warehouse, ignore_thresholds=ignore_thresholds, verify_samples=verify_samples)


class WarehouseBatchSampler(Sampler):
    """Yields this rank's batches of an epoch as :class:`PlannedBatch` items (an int64
    index array and its repeat count), in the Go reader's order. ``set_epoch(e)``
    selects the epoch, as with ``DistributedSampler``; ``len()`` is the number of
    batches per rank and epoch (the same on every rank)."""

    def __init__(self, warehouse, batch_size, *, seed=0, epoch=0, rank=None, world=None, shuffle="global",
                 remainder="drop"):
        wh = _open(warehouse)
        self.n, self.shard_starts = len(wh), wh.shard_starts.tolist()
        self.batch_size, self.seed, self.epoch = int(batch_size), int(seed), int(epoch)
        self.rank, self.world = distributed_rank_world(rank, world)
        self.shuffle, self.remainder = shuffle, remainder
        self._plan()  # refuse bad arguments now, not in the first epoch

    def _plan(self):
        return plan_batches(self.n, self.shard_starts, self.batch_size, seed=self.seed, epoch=self.epoch,
                            rank=self.rank, world=self.world, shuffle=self.shuffle, remainder=self.remainder)

    def set_epoch(self, epoch):
        """Use the order of ``epoch`` from the next iteration on."""
        if epoch < 0:
            raise ValueError(f"epoch {epoch}: must be >= 0")
        self.epoch = int(epoch)

    def __len__(self):
        per = self.batch_size * self.world
        return self.n // per if self.remainder == "drop" else -(-self.n // per)

    def __iter__(self):
        indices, repeats = self._plan()
        for t in range(indices.shape[0]):
            yield PlannedBatch(indices[t], int(repeats[t]))


def _empty(shape, dtype, shared):
    """An uninitialised tensor in shared memory (no copy when a DataLoader worker sends
    it to the main process) when ``shared``, else in ordinary memory."""
    if not shared:
        return torch.empty(shape, dtype=dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * torch.empty((), dtype=dtype).element_size()
    storage = torch.UntypedStorage._new_shared(max(nbytes, 1))
    return torch.empty(0, dtype=dtype).set_(storage, 0, tuple(shape))


class _BatchMemory:
    """Recycles the memory of batches that nothing references any more.

    Every batch's tensors are views (``torch.frombuffer``) of one anonymous mapping, and
    each view holds a reference to it: a mapping whose reference count is back to the
    pool's own is referenced by no tensor, view or slice, so its next batch may
    overwrite it. A batch the caller keeps (a list of batches, a slice of one) keeps its
    mapping out of reach; the pool then maps a new one. So the memory of a training
    loop's batches is written once and reused, without the page faults (and the kernel
    zeroing) of fresh memory per batch, and no batch is ever overwritten under a caller.
    Mappings ask for transparent huge pages where the kernel offers them."""

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


def _carve(m, specs):
    """Tensors of (name, shape, dtype) laid out one after another in mapping ``m``,
    each at a 64-byte boundary."""
    out, off = {}, 0
    for name, shape, dtype in specs:
        n = int(np.prod(shape, dtype=np.int64))
        if n == 0:
            out[name] = torch.empty(shape, dtype=dtype)
            continue
        out[name] = torch.frombuffer(m, dtype=dtype, count=n, offset=off).view(shape)
        off += -(-n * out[name].element_size() // 64) * 64
    return out


def _carve_bytes(specs):
    total = 0
    for _, shape, dtype in specs:
        n = int(np.prod(shape, dtype=np.int64)) * torch.empty((), dtype=dtype).element_size()
        total += -(-n // 64) * 64
    return max(total, 64)


class WarehouseDataset(Dataset):
    """Map-style dataset over a warehouse. ``ds[i]`` (an int) is one sample as a dict of
    tensors (``image`` [C,H,W], ``boxes``, ``mask``, ``class_index``, ``box_count``,
    ``extras``, ``index``); ``ds[indices]`` (a sequence, an int array or a
    :class:`PlannedBatch`) reads the whole batch with ``Warehouse.read_batch`` straight
    into the tensors of the module docstring.

    In the process that iterates (``make_loader``'s reader threads, or a DataLoader with
    ``num_workers=0``) a batch's tensors live in memory that is reused once nothing
    references that batch any more (no page faults per batch; a batch you keep is never
    overwritten). In a DataLoader worker process they are allocated in shared memory,
    so handing them to the main process copies nothing.

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

    def __init__(self, warehouse, *, normalize=False, ignore_thresholds=False, verify_samples=True):
        self.wh = _open(warehouse, ignore_thresholds, verify_samples)
        self.normalize = bool(normalize) and self.wh.image_dtype == np.dtype("u1")
        self._init_local()

    def _init_local(self):
        self._local = threading.local()  # per reader thread: records and U8 scratch
        self._memory = _BatchMemory(8)

    def __getstate__(self):
        return {"wh": self.wh, "normalize": self.normalize}

    def __setstate__(self, state):
        self.wh, self.normalize = state["wh"], state["normalize"]
        self._init_local()

    def __len__(self):
        return len(self.wh)

    def __getitem__(self, key):
        if isinstance(key, (int, np.integer)):
            batch = self._read(np.array([int(key) % len(self.wh) if key < 0 else int(key)]), 0, shared=False)
            out = {k: v[0] for k, v in batch.items() if k != "repeats"}
            out["image"] = out.pop("images")
            return out
        repeats = 0
        if isinstance(key, PlannedBatch):
            if key.pending is not None:
                return key.pending.result()
            key, repeats = key.indices, key.repeats
        return self._read(np.asarray(key, dtype=np.int64).reshape(-1), repeats, get_worker_info() is not None)

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

    def _read(self, idx, repeats, shared):
        wh, b, l = self.wh, idx.shape[0], self.wh.layout
        scratch = self._scratch_for(b)
        image_dtype = torch.float32 if self.normalize else _TORCH_DTYPES[wh.image_dtype]
        specs = [("images", (b,) + wh.image_shape, image_dtype),
                 ("boxes", (b, l.max_boxes, 4), _TORCH_DTYPES[wh.box_dtype]),
                 ("mask", (b, l.max_boxes), _TORCH_DTYPES[wh.box_dtype]),
                 ("class_index", (b, l.max_boxes), torch.int32),
                 ("box_count", (b,), torch.int32),
                 ("extras", (b, l.extra_f32), torch.float32),
                 ("index", (b,), torch.int64)]
        if shared:
            t = {name: _empty(shape, dtype, True) for name, shape, dtype in specs}
        else:
            t = _carve(self._memory.take(_carve_bytes(specs)), specs)
        out = {k: v.numpy() for k, v in t.items()}
        out["records"] = scratch["records"]
        if self.normalize:
            out["images"] = scratch["images"]
        wh.read_batch(idx, out=out)
        if self.normalize:
            wh.normalize_images(out["images"], out=t["images"].numpy())
        t["repeats"] = int(repeats)
        return t


class _ReadAheadSampler(WarehouseBatchSampler):
    """:class:`WarehouseBatchSampler` that starts reading each batch in one of
    ``threads`` reader threads up to ``ahead`` batches before the DataLoader asks for
    it; the dataset hands over the finished read (``PlannedBatch.pending``)."""

    def __init__(self, dataset, batch_size, *, threads, ahead, **kwargs):
        super().__init__(dataset.wh, batch_size, **kwargs)
        self.dataset, self.threads, self.ahead = dataset, int(threads), max(int(ahead), 1)
        self._pool = None

    def _read(self, idx, repeats):
        return self.dataset._read(idx, repeats, shared=False)

    def __iter__(self):
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="warehouse-read")
        indices, repeats = self._plan()
        pending = collections.deque()
        nxt = 0

        def start():
            nonlocal nxt
            f = self._pool.submit(self._read, indices[nxt], int(repeats[nxt]))
            pending.append(PlannedBatch(indices[nxt], int(repeats[nxt]), f))
            nxt += 1

        try:
            while nxt < min(self.ahead, indices.shape[0]):
                start()
            while pending:
                pb = pending.popleft()
                if nxt < indices.shape[0]:
                    start()
                yield pb
        finally:
            for pb in pending:  # an epoch left early: drop what was read ahead
                pb.pending.cancel()

    def __del__(self):
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


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


class WarehouseLoader(DataLoader):
    """A DataLoader whose items are whole batches from a :class:`WarehouseBatchSampler`.
    ``set_epoch(e)`` forwards to the sampler (``loader.sampler.set_epoch(e)`` does the
    same); ``warehouse`` is the open :class:`warehouse_etl.Warehouse`."""

    def set_epoch(self, epoch):
        """Use the order of ``epoch`` from the next ``iter(loader)`` on."""
        self.sampler.set_epoch(epoch)

    @property
    def warehouse(self):
        return self.dataset.wh


def make_loader(path, batch_size, *, seed=0, epoch=0, rank=None, world=None, shuffle="global", remainder="drop",
                num_workers=0, pin_memory=False, normalize=False, ignore_thresholds=False, prefetch_factor=2,
                verify_samples=True, **dataloader_kwargs):
    """A :class:`WarehouseLoader` over the warehouse at ``path`` (or an open Warehouse):
    ``DataLoader(dataset, batch_size=None, sampler=...)`` whose items are whole batch
    dicts (module docstring), each read in one pass. ``rank``/``world`` default to
    ``torch.distributed``'s when it is initialised, else 0/1.

    ``num_workers`` is the number of reader threads in this process, each reading a
    whole batch (``os.preadv`` and numpy release the GIL, so they run beside the training
    step) up to ``num_workers * prefetch_factor`` batches ahead; 0 reads each batch when
    it is asked for. Reader threads instead of DataLoader worker processes because a
    worker process would add a shared-memory segment, its page faults and a second
    mapping per batch to work that is otherwise one read into reused memory (measured
    in bench/read.sh: processes deliver 3-4x fewer samples/s). A DataLoader with worker
    processes still works with the parts: ``DataLoader(WarehouseDataset(path),
    batch_size=None, sampler=WarehouseBatchSampler(path, B), num_workers=N)``.

    Every sample is checked against its shard's CRC-32C on its first read in this
    process (``verify_samples``, as :func:`warehouse_etl.open`; reader threads share
    the record, so later epochs read at unchecked speed); a damaged sample raises
    ``warehouse_etl.WarehouseError`` from the loop, naming the shard file and sample."""
    ds = WarehouseDataset(path, normalize=normalize, ignore_thresholds=ignore_thresholds,
                          verify_samples=verify_samples)
    kwargs = dict(seed=seed, epoch=epoch, rank=rank, world=world, shuffle=shuffle, remainder=remainder)
    if num_workers > 0:
        sampler = _ReadAheadSampler(ds, batch_size, threads=num_workers, ahead=num_workers * prefetch_factor,
                                    **kwargs)
        ds._memory = _BatchMemory(num_workers * prefetch_factor + 4)
    else:
        sampler = WarehouseBatchSampler(ds.wh, batch_size, **kwargs)
    return WarehouseLoader(ds, batch_size=None, sampler=sampler, num_workers=0, pin_memory=pin_memory,
                           **dataloader_kwargs)
