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
from typing import NamedTuple

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


def _open(warehouse, ignore_thresholds=False):
    if isinstance(warehouse, warehouse_etl.Warehouse):
        return warehouse
    return warehouse_etl.open(warehouse, ignore_thresholds=ignore_thresholds)


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
    """An uninitialised tensor; in shared memory (no copy when a DataLoader worker sends
    it to the main process) when ``shared``."""
    if not shared:
        return torch.empty(shape, dtype=dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * torch.empty((), dtype=dtype).element_size()
    storage = torch.UntypedStorage._new_shared(max(nbytes, 1))
    return torch.empty(0, dtype=dtype).set_(storage, 0, tuple(shape))


class WarehouseDataset(Dataset):
    """Map-style dataset over a warehouse. ``ds[i]`` (an int) is one sample as a dict of
    tensors (``image`` [C,H,W], ``boxes``, ``mask``, ``class_index``, ``box_count``,
    ``extras``, ``index``); ``ds[indices]`` (a sequence, an int array or a
    :class:`PlannedBatch`) reads the whole batch with ``Warehouse.read_batch`` straight
    into the tensors of the module docstring. In a DataLoader worker the tensors are
    allocated in shared memory, so handing them to the main process copies nothing.

    Picklable: workers get the checked manifest and reopen the shard files lazily.
    ``normalize=True`` turns U8 images into float32 ``(p/255 - mean)/std`` with the
    manifest's mean/std (``p/255`` when it records none) through
    ``Warehouse.normalize_table``: bit for bit what an F32 build of the same config
    stores. F16/F32 images were normalised by the build and are returned as stored.
    To move 4x fewer bytes to the GPU, leave it off and apply :class:`Normalize` there."""

    def __init__(self, warehouse, *, normalize=False, ignore_thresholds=False):
        self.wh = _open(warehouse, ignore_thresholds)
        self.normalize = bool(normalize) and self.wh.image_dtype == np.dtype("u1")
        self._scratch = None

    def __getstate__(self):
        return {"wh": self.wh, "normalize": self.normalize}

    def __setstate__(self, state):
        self.wh, self.normalize, self._scratch = state["wh"], state["normalize"], None

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
            key, repeats = key.indices, key.repeats
        return self._read(np.asarray(key, dtype=np.int64).reshape(-1), repeats, get_worker_info() is not None)

    def _scratch_for(self, b):
        """Per-process arrays that are not returned (records; U8 images to normalise)."""
        if self._scratch is None or self._scratch["records"].shape[0] != b:
            wh = self.wh
            self._scratch = {"records": np.empty(b, dtype=wh.record_dtype)}
            if self.normalize:
                self._scratch["images"] = np.empty((b,) + wh.image_shape, dtype=wh.image_dtype)
        return self._scratch

    def _read(self, idx, repeats, shared):
        wh, b, l = self.wh, idx.shape[0], self.wh.layout
        scratch = self._scratch_for(b)
        t = {
            "boxes": _empty((b, l.max_boxes, 4), _TORCH_DTYPES[wh.box_dtype], shared),
            "mask": _empty((b, l.max_boxes), _TORCH_DTYPES[wh.box_dtype], shared),
            "class_index": _empty((b, l.max_boxes), torch.int32, shared),
            "box_count": _empty((b,), torch.int32, shared),
            "extras": _empty((b, l.extra_f32), torch.float32, shared),
            "index": _empty((b,), torch.int64, shared),
        }
        if self.normalize:
            images = _empty((b,) + wh.image_shape, torch.float32, shared)
            raw = scratch["images"]
        else:
            images = _empty((b,) + wh.image_shape, _TORCH_DTYPES[wh.image_dtype], shared)
            raw = images.numpy()
        out = {k: v.numpy() for k, v in t.items()}
        out["images"], out["records"] = raw, scratch["records"]
        wh.read_batch(idx, out=out)
        if self.normalize:
            wh.normalize_images(raw, out=images.numpy())
        t["images"] = images
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
                num_workers=0, pin_memory=False, normalize=False, ignore_thresholds=False, persistent_workers=None,
                prefetch_factor=2, **dataloader_kwargs):
    """A :class:`WarehouseLoader` over the warehouse at ``path`` (or an open Warehouse):
    ``DataLoader(dataset, batch_size=None, sampler=WarehouseBatchSampler(...))``, so each
    item is one batch dict (module docstring) read in one pass. ``rank``/``world``
    default to ``torch.distributed``'s when it is initialised, else 0/1.
    ``persistent_workers`` defaults to ``num_workers > 0``."""
    ds = WarehouseDataset(path, normalize=normalize, ignore_thresholds=ignore_thresholds)
    sampler = WarehouseBatchSampler(ds.wh, batch_size, seed=seed, epoch=epoch, rank=rank, world=world,
                                    shuffle=shuffle, remainder=remainder)
    if persistent_workers is None:
        persistent_workers = num_workers > 0
    extra = dict(dataloader_kwargs)
    if num_workers > 0:
        extra["prefetch_factor"] = prefetch_factor
    return WarehouseLoader(ds, batch_size=None, sampler=sampler, num_workers=num_workers, pin_memory=pin_memory,
                           persistent_workers=persistent_workers, **extra)
