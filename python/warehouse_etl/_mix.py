"""Mixtures of warehouses (docs/format/reading.md, "Mixtures"; Go: warehouse.Mixture,
MixQuotas, MixOrder): each epoch draws ``quota[m]`` samples from warehouse ``m``, from
its own endless stream of epoch orders, interleaved by a shuffle of (seed, epoch).

A :class:`Mixture` reads like one :class:`~warehouse_etl.Warehouse` whose sample
indices are the warehouses' concatenated (mixture index ``i`` is sample
``i - offset[m]`` of warehouse ``m``); its batches carry ``warehouse`` (which one each
row came from) and ``index`` (the row's sample index in that warehouse).
"""
import math

import numpy as np

from ._order import OrderStream, epoch_order, mix64, MASK64

# The seed of the stream that interleaves the warehouses (ASCII "mixture!"; Go: mixSalt).
MIX_SALT = 0x6D69787475726521


def mix_quotas(weights, total):
    """Split an epoch of ``total`` samples over warehouses by weight (Go:
    warehouse.MixQuotas): ``floor(total*w/sum(w))`` in float64 (sum left to right), the
    samples left over one each to the largest fractional parts, lower index first on ties."""
    s = 0.0
    for w in weights:
        s += float(w)
    q, frac = [], []
    for w in weights:
        x = float(total) * float(w) / s
        f = math.floor(x)
        q.append(int(f))
        frac.append(x - f)
    left = total - sum(q)
    rank = sorted(range(len(weights)), key=lambda k: -frac[k])  # stable: ties keep the lower index first
    k = 0
    while left > 0 and rank:
        q[rank[k]] += 1
        left -= 1
        k = (k + 1) % len(rank)
    return q


def mix_order(sizes, shard_starts, quotas, shuffle, seed, epoch):
    """Epoch ``epoch``'s order of a mixture (Go: warehouse.MixOrder), an int64 array of
    ``sum(quotas)`` mixture indices: warehouse m's ``quotas[m]`` samples are positions
    [epoch*q, (epoch+1)*q) of its stream of passes ``epoch_order(n_m, starts_m, shuffle,
    seed ^ mix64(m), pass)``; which warehouse each position reads is a list of q_0 zeros,
    q_1 ones, ... shuffled by the stream of (seed ^ MIX_SALT, epoch)."""
    seed = int(seed) & MASK64
    labels = np.repeat(np.arange(len(quotas), dtype=np.int64), quotas)
    OrderStream(seed ^ MIX_SALT, epoch).shuffle(labels)
    out = np.empty(labels.shape[0], dtype=np.int64)
    offset = 0
    for m, (n, q) in enumerate(zip(sizes, quotas)):
        first = epoch * q
        parts, have = [], 0
        p = first // n
        while have < q:
            order = epoch_order(n, shard_starts[m], shuffle, seed ^ mix64(m), p)
            lo = first % n if p == first // n else 0
            take = min(n - lo, q - have)
            parts.append(order[lo:lo + take])
            have += take
            p += 1
        stream = np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
        out[labels == m] = stream + offset
        offset += n
    return out


class Mixture:
    """Several open warehouses of one layout read as one (``make_loader([(path, weight),
    ...])`` builds it). ``len()`` is the number of distinct samples; an epoch has
    ``epoch_samples`` (default: ``len()``, every sample once per epoch on average when
    the weights are proportional to the sizes); ``quotas[m]`` of them come from warehouse
    ``m``. Picklable (DataLoader workers)."""

    def __init__(self, warehouses, weights, epoch_samples=None):
        if not warehouses or len(warehouses) != len(weights):
            raise ValueError(f"mixture: {len(warehouses)} warehouses and {len(weights)} weights: "
                             "want one weight per warehouse, at least one")
        self.warehouses, self.weights = list(warehouses), [float(w) for w in weights]
        first = self.warehouses[0]
        self.layout = first.layout
        offsets = [0]
        for m, (wh, w) in enumerate(zip(self.warehouses, self.weights)):
            if not (math.isfinite(w) and w > 0):
                raise ValueError(f"mixture: warehouse {m}: weight {w!r}, want a finite weight > 0")
            if len(wh) == 0:
                raise ValueError(f"mixture: warehouse {m} has no samples")
            # Compact and pad say how a shard stores its images, not what tensors it reads:
            # a compact_images warehouse mixes with a plain one (Go: warehouse.NewMixture).
            if wh.layout.key()[:6] != self.layout.key()[:6]:
                raise ValueError(f"mixture: warehouse {m} has layout {wh.layout!r}, warehouse 0 {self.layout!r}: "
                                 "a mixture needs one dtype, image shape, max_boxes and extras")
            if (wh.mean, wh.std) != (first.mean, first.std):
                raise ValueError(f"mixture: warehouse {m} is normalised with mean {wh.mean} std {wh.std}, "
                                 f"warehouse 0 with mean {first.mean} std {first.std}: a mixture needs one "
                                 "normalisation")
            offsets.append(offsets[-1] + len(wh))
        self.offsets = np.array(offsets, dtype=np.int64)
        total = int(offsets[-1])
        if epoch_samples is not None and int(epoch_samples) < 0:
            raise ValueError(f"mixture: epoch samples {epoch_samples}: must be >= 0")
        self.epoch_samples = int(epoch_samples) if epoch_samples else total
        self.quotas = mix_quotas(self.weights, self.epoch_samples)
        for m, q in enumerate(self.quotas):
            if q == 0:
                raise ValueError(f"mixture: warehouse {m} gets 0 of {self.epoch_samples} samples per epoch with "
                                 f"weight {self.weights[m]!r}: raise its weight or the epoch length")
        self.image_dtype, self.box_dtype = first.image_dtype, first.box_dtype
        self.record_dtype = first.record_dtype
        self.image_shape, self.mean, self.std = first.image_shape, first.mean, first.std
        self.shard_starts = np.concatenate([wh.shard_starts + off for wh, off in zip(self.warehouses, offsets)])
        self.versions = [wh.manifest["version"] for wh in self.warehouses]

    def __len__(self):
        return int(self.offsets[-1])

    def __repr__(self):
        parts = ", ".join(f"{wh.dir} x{w:g} ({q}/epoch)" for wh, w, q in zip(self.warehouses, self.weights,
                                                                            self.quotas))
        return f"Mixture({parts}; {self.epoch_samples} samples per epoch)"

    def locate(self, indices):
        """``(warehouse, sample)`` int64 arrays of mixture indices."""
        idx = np.asarray(indices, dtype=np.int64)
        m = np.searchsorted(self.offsets, idx, side="right") - 1
        return m, idx - self.offsets[m]

    def epoch_order(self, shuffle, seed, epoch):
        """This mixture's order of ``epoch`` (:func:`mix_order`)."""
        return mix_order([len(wh) for wh in self.warehouses], [wh.shard_starts.tolist() for wh in self.warehouses],
                         self.quotas, shuffle, seed, epoch)

    def normalize_table(self):
        return self.warehouses[0].normalize_table()

    def normalize_images(self, images, out=None):
        return self.warehouses[0].normalize_images(images, out=out)

    def extra_batch_specs(self, b):
        """The batch arrays a mixture adds: ``warehouse`` [B] int64."""
        return [("warehouse", (b,), np.dtype("<i8"))]

    def allocate_batch(self, batch_size):
        out = self.warehouses[0].allocate_batch(batch_size)
        out["warehouse"] = np.empty(batch_size, dtype=np.int64)
        return out

    def read_batch(self, indices, out=None):
        """Read mixture indices into one batch (``Warehouse.read_batch``'s arrays, plus
        ``warehouse``): the rows of each warehouse are read by its ``read_batch`` straight
        into their rows of ``out`` (``rows=``), no copy. ``index`` is each row's index in
        its warehouse."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size and (int(idx.min()) < 0 or int(idx.max()) >= len(self)):
            bad = int(idx[(idx < 0) | (idx >= len(self))][0])
            raise IndexError(f"mixture: sample {bad} out of range [0, {len(self)})")
        b = idx.shape[0]
        if out is None:
            out = self.allocate_batch(b)
        m, local = self.locate(idx)
        present = np.unique(m).tolist()
        if len(present) == 1:
            self.warehouses[present[0]].read_batch(local, out=out)
        else:
            for k in present:
                rows = np.flatnonzero(m == k)
                self.warehouses[k].read_batch(local[rows], out=out, rows=rows)
        if "warehouse" in out:
            out["warehouse"][:] = m
        return out

    @property
    def samples_read(self):
        """``Warehouse.samples_read`` of all its warehouses."""
        return sum(wh.samples_read for wh in self.warehouses)

    @property
    def cold_samples(self):
        """``Warehouse.cold_samples`` of all its warehouses."""
        return sum(wh.cold_samples for wh in self.warehouses)

    def advise(self, indices):
        """``Warehouse.advise`` for mixture indices: each warehouse is advised of its own
        samples."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        m, local = self.locate(idx[(idx >= 0) & (idx < len(self))])
        for k in np.unique(m).tolist():
            self.warehouses[k].advise(local[m == k])

    def check_ahead(self, indices):
        """``Warehouse.check_ahead`` for mixture indices: each warehouse checks its own
        samples ahead. Returns the warehouses' jobs (Futures) as a list."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        idx = idx[(idx >= 0) & (idx < len(self))]
        m, local = self.locate(idx)
        jobs = [self.warehouses[k].check_ahead(local[m == k]) for k in np.unique(m).tolist()]
        return [j for j in jobs if j is not None]

    def close(self):
        for wh in self.warehouses:
            wh.close()
