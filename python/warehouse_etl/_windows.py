"""Episode windows: the values of an extra at a set of step offsets around each sample,
read from the version's episode index (docs/format/manifest.md, "episodes.bin"; Go:
warehouse.Episodes).

    w = warehouse_etl.Windows(wh, {"action/ctrl": range(0, 50), "signal/joint_pos": [-2, -1, 0]})
    values, mask = w.gather(indices)["action/ctrl"]   # [B, 50, dim] float32, [B, 50] bool

A window is gathered by (episode, step), never by read order, so it is the same whatever
the epoch's shuffle. A step that is not a kept sample of the anchor's episode (before its
first kept step, after its last, or a frame the build skipped) is masked (False) and
padded with the kept frame of the same episode nearest to it on the anchor's side: past
the episode's ends its first or last frame, as LeRobot pads, and across a gap the last
kept frame before it (for positive offsets) or the first after it (negative).
"""
import builtins
import hashlib
import os

import numpy as np

from .errors import WarehouseError

MAGIC = b"TWEP"
VERSION = 1
HEADER = 24
_MAX_E = 65535
_MAX_OFFSET = 1 << 31
_MAX_STEP = 1 << 62


def _layout(n, e):
    steps = (HEADER + 4 * n + 7) & ~7
    extras = steps + 8 * n
    return steps, extras, extras + 4 * n * e


def extra_f32(manifest):
    """E: the f32 extras per sample the manifest's ``extras`` table describes."""
    e = 0
    for x in manifest["extras"]:
        e = max(e, x["offset"] + int(np.prod(x["shape"], dtype=np.int64)))
    return e


def parse_episodes(raw, samples, e_want, where="episodes.bin"):
    """(episode u32[N], step u64[N], extras f32[N, E]) from episodes.bin bytes, checked
    against the manifest's samples and extra_f32 (ValueError naming the problem)."""
    if len(raw) < HEADER:
        raise ValueError(f"{where}: {len(raw)} bytes, shorter than the {HEADER}-byte header")
    if raw[:4] != MAGIC:
        raise ValueError(f"{where}: magic {raw[:4]!r}, want {MAGIC!r}")
    version, n, e, reserved = (int.from_bytes(raw[4:8], "little"), int.from_bytes(raw[8:16], "little"),
                               int.from_bytes(raw[16:20], "little"), int.from_bytes(raw[20:24], "little"))
    if version != VERSION:
        raise ValueError(f"{where}: version {version}, this reader reads {VERSION}")
    if reserved:
        raise ValueError(f"{where}: reserved header bytes are not zero")
    if n != samples or e != e_want:
        raise ValueError(f"{where}: {n} samples of {e} extras, the manifest says {samples} of {e_want}")
    steps_off, extras_off, size = _layout(n, e)
    if len(raw) != size:
        raise ValueError(f"{where}: {len(raw)} bytes, want {size} for {n} samples of {e} extras")
    if any(raw[HEADER + 4 * n:steps_off]):
        raise ValueError(f"{where}: padding before the steps is not zero")
    episode = np.frombuffer(raw, dtype="<u4", count=n, offset=HEADER)
    step = np.frombuffer(raw, dtype="<u8", count=n, offset=steps_off)
    extras = np.frombuffer(raw, dtype="<f4", count=n * e, offset=extras_off).reshape(n, e)
    return episode, step, extras


class Episodes:
    """A version's episode index, checked (size and sha256 against ``files.checksums``,
    then its header against the manifest) and sorted for search. ``episode``, ``step``
    (int64 [N]) and ``extras`` (float32 [N, E]) are by sample index."""

    def __init__(self, wh):
        m = wh.manifest
        name = m["files"].get("episodes") or ""
        if not name:
            raise WarehouseError(
                f"{wh.dir}: version {m['version'][:16]} has no episode index (episodes.bin): it was built before "
                f"episode windows or from a source without extras; rebuild it with WAREHOUSE_CLEAR=1 to gather windows")
        entry = (m["files"].get("checksums") or {}).get(name)
        if entry is None:
            raise WarehouseError(f"{wh.dir}: files.checksums has no entry for {name}")
        fetch = getattr(wh, "_version_file", None)  # S3Warehouse: fetched whole into the node's cache
        if fetch is not None:
            path = wh.dir + "/" + name
            raw = fetch(name, entry["bytes"], entry["sha256"])
        else:
            path = os.path.join(wh.dir, name)
            fd = wh._dir()
            with builtins.open(name, "rb", opener=lambda p, fl: os.open(p, fl, dir_fd=fd)) as f:
                size = os.fstat(f.fileno()).st_size
                if size != entry["bytes"]:  # checked before reading it whole
                    raise WarehouseError(f"{path}: {size} bytes, the manifest says {entry['bytes']}")
                raw = f.read(size + 1)
        got = hashlib.sha256(raw).hexdigest()
        if len(raw) != entry["bytes"] or got != entry["sha256"]:
            raise WarehouseError(f"{path}: {len(raw)} bytes of sha256 {got}, the manifest says "
                                 f"{entry['bytes']} bytes of {entry['sha256']}")
        try:
            episode, step, self.extras = parse_episodes(raw, m["samples"], extra_f32(m), path)
        except ValueError as e:
            raise WarehouseError(str(e)) from None
        if step.size and int(step.max()) >= _MAX_STEP:
            raise WarehouseError(f"{path}: step {int(step.max())} beyond 2^62: no windows over it")
        self.episode, self.step = episode.astype(np.int64), step.astype(np.int64)
        n = self.episode.shape[0]
        # Sorted by (episode, step, index); key is strictly increasing across episodes:
        # base[e] + (step - first[e]), base the running sum of the episodes' step spans.
        self.order = np.lexsort((np.arange(n), self.step, self.episode))
        ne = int(self.episode.max()) + 1 if n else 0
        self.first = np.zeros(ne, dtype=np.int64)
        self.last = np.full(ne, -1, dtype=np.int64)
        np.maximum.at(self.last, self.episode, self.step)
        self.first[:] = self.last
        np.minimum.at(self.first, self.episode, self.step)
        span = np.where(self.last >= self.first, self.last - self.first + 1, 0)
        if span.sum(dtype=np.float64) >= 2.0 ** 62:
            raise WarehouseError(f"{path}: the episodes' step ranges add up beyond 2^62: no windows over them")
        self.base = np.concatenate(([0], np.cumsum(span)[:-1])).astype(np.int64) if ne else span
        self.keys = self.base[self.episode[self.order]] + self.step[self.order] - self.first[self.episode[self.order]]
        # Every key's answer precomputed when the step ranges are dense enough (recorded
        # episodes: frame indices with a few gaps): a window is then a few gathers, no search.
        total = int(span.sum())
        self._lut = None
        if total <= 4 * n + 4096:
            q = np.arange(total, dtype=np.int64)
            right = np.searchsorted(self.keys, q, side="right") - 1
            left = np.searchsorted(self.keys, q, side="left")
            self._lut = (self.order[right], self.order[left], self.keys[right] == q)

    def neighbours(self, indices, offsets):
        """(j, valid): int64 and bool [B, W], the sample each window position reads and
        whether it is the exact step (module docstring)."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        offs = np.asarray(offsets, dtype=np.int64).reshape(-1)
        e, s = self.episode[idx], self.step[idx]
        lo, hi = self.first[e][:, None], self.last[e][:, None]
        t = s[:, None] + offs[None, :]
        tc = np.minimum(np.maximum(t, lo), hi)  # np.clip is several times slower on small arrays
        q = self.base[e][:, None] + (tc - lo)
        if self._lut is not None:
            right, left, exact = self._lut
            j = np.where(offs[None, :] >= 0, right[q], left[q])
            valid = (t == tc) & exact[q]
        else:
            p = np.where(offs[None, :] >= 0, np.searchsorted(self.keys, q, side="right") - 1,
                         np.searchsorted(self.keys, q, side="left"))
            valid = (t == tc) & (self.keys[p] == q)
            j = self.order[p]
        at = offs == 0
        j[:, at], valid[:, at] = idx[:, None], True
        return j, valid


class Windows:
    """``windows`` (extra name -> step offsets: a range, a list of ints) compiled against
    warehouse ``wh``; :meth:`gather` reads them for a batch of sample indices. The episode
    index is loaded on first use in each process (a pickled copy reloads it)."""

    def __init__(self, wh, windows):
        if not isinstance(windows, dict) or not windows:
            raise ValueError(f"windows={windows!r}: want a dict of extra name -> step offsets")
        extras = {x["name"]: x for x in wh.manifest["extras"]}
        self.wh, self.specs = wh, []
        for name, offsets in windows.items():
            x = extras.get(name)
            if x is None:
                raise ValueError(f"windows: no extra {name!r} in {wh.dir}: its extras are {sorted(extras)}")
            offs = [int(d) for d in offsets]
            if not offs or any(abs(d) >= _MAX_OFFSET for d in offs):
                raise ValueError(f"windows[{name!r}]: {len(offs)} offsets, want at least one, each below 2^31")
            dim = int(np.prod(x["shape"], dtype=np.int64))
            self.specs.append((name, int(x["offset"]), dim, np.array(offs, dtype=np.int64)))
        self._episodes = self._tables = None
        if not wh.manifest["files"].get("episodes"):
            Episodes(wh)  # raises the clear error now, not at the first batch

    def __getstate__(self):
        return {"wh": self.wh, "specs": self.specs}

    def __setstate__(self, state):
        self.wh, self.specs, self._episodes, self._tables = state["wh"], state["specs"], None, None

    @property
    def episodes(self):
        if self._episodes is None:
            self._episodes = Episodes(self.wh)
        return self._episodes

    def _table(self):
        """Per window: the extra's columns as one contiguous [N, dim] array, and, when the
        whole table is small (N x W <= 2^24), every sample's neighbours and mask up front
        (int32, bool [N, W]): a batch is then three takes."""
        if self._tables is None:
            ep, n = self.episodes, self.episodes.episode.shape[0]
            tables = []
            for name, offset, dim, offs in self.specs:
                cols = np.ascontiguousarray(ep.extras[:, offset:offset + dim])
                full = None
                if n * len(offs) <= 1 << 24:
                    j, valid = ep.neighbours(np.arange(n), offs)
                    full = (j.astype(np.int32), valid)
                tables.append((name, offs, cols, full))
            self._tables = tables
        return self._tables

    def gather(self, indices):
        """name -> (values float32 [B, W, dim], mask bool [B, W]) for the samples
        ``indices``; dim is prod(shape) of the extra (1 for a scalar)."""
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        out = {}
        for name, offs, cols, full in self._table():
            if full is not None:
                j, valid = full[0].take(idx, axis=0), full[1].take(idx, axis=0)
            else:
                j, valid = self.episodes.neighbours(idx, offs)
            out[name] = (cols.take(j, axis=0), valid)
        return out

    def stats(self, name):
        """The build's statistics of extra ``name`` (manifest ``extra_stats``): a dict of
        ``count`` and float64 arrays ``mean``, ``std``, ``min``, ``max``, ``q01``, ``q99``."""
        return extra_stats(self.wh, name)


def extra_stats(wh, name):
    """The manifest's ``extra_stats`` entry of extra ``name`` with numpy arrays; raises
    WarehouseError for a version built without them."""
    for st in wh.manifest.get("extra_stats") or []:
        if st["name"] == name:
            out = {k: np.asarray(v, dtype=np.float64) for k, v in st.items() if k not in ("name", "count")}
            out["count"] = int(st["count"])
            return out
    raise WarehouseError(f"{wh.dir}: version {wh.manifest['version'][:16]} has no extra_stats for {name!r}: "
                         f"built before they were recorded or without that extra; rebuild it with WAREHOUSE_CLEAR=1")
