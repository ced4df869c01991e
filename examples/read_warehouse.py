#!/usr/bin/python3
"""Reference reader of a warehouse-etl tensor warehouse: numpy only, written
from docs/format/ (manifest.md, shard.md, reading.md) and nothing else.

As a library:

    from read_warehouse import Warehouse, epoch_order, plan_batches
    wh = Warehouse("out/demo")          # a version directory, or a root with `latest`
    len(wh)                             # samples
    s = wh[7]                           # dict of numpy views into the mapped shard:
    s["image"]                          #   (C, H, W) float16 or float32
    s["boxes"], s["mask"]               #   (max_boxes, 4), (max_boxes,) in the same dtype
    s["class_index"], s["box_count"]    #   (max_boxes,) int32 with -1 padding, int
    s["meta"], s["extras"]              #   dict of record fields, dict name -> array
    for batch in plan_batches(len(wh), wh.shard_starts, 32, seed=0, epoch=3,
                              rank=0, world=1, shuffle="global", remainder="drop"):
        images = np.stack([wh[i]["image"] for i in batch["indices"]])

From the shell:

    read_warehouse.py PATH                       a summary
    read_warehouse.py PATH --digests             one JSON line per sample: sha256 of every
                                                 tensor as little-endian float32, the class
                                                 indices and every meta field (the Go tests
                                                 compare these with the Go reader's values)
    read_warehouse.py PATH --plan --batch 4 [--seed S --epoch E --rank R --world W
                      --shuffle none|global|shard --remainder drop|pad]
                                                 this rank's batches as JSON
"""
import argparse
import hashlib
import json
import os
import posixpath
import sys

import numpy as np

FORMAT_VERSION = 1
HEADER_SIZE = 80
META_HEADER_SIZE = 24
DTYPES = {0: np.dtype("<f4"), 1: np.dtype("<f2")}  # header dtype tag -> element type
DTYPE_NAMES = {"F32": 0, "F16": 1}                 # manifest name -> header dtype tag
RECORD_FIELDS = [  # (name, numpy type, offset) of the fixed part of a meta record
    ("source_index", "<u4", 0), ("flags", "<u4", 4), ("frame_id", "<u8", 8), ("input_seq", "<u8", 16),
    ("unix_time_ns", "<i8", 24), ("sim_time", "<f8", 32), ("src_width", "<u4", 40), ("src_height", "<u4", 44),
    ("resized_width", "<u4", 48), ("resized_height", "<u4", 52), ("pad_x", "<u4", 56), ("pad_y", "<u4", 60),
    ("scale_x", "<f4", 64), ("scale_y", "<f4", 68), ("box_count", "<u4", 72), ("boxes_dropped", "<u4", 76),
]


class WarehouseError(ValueError):
    """The warehouse is not one this reader may trust; the message names the file."""


def resolve(path):
    """A version directory has manifest.json; a root has a `latest` symlink naming one beside it."""
    if os.path.exists(os.path.join(path, "manifest.json")):
        return path
    link = os.path.join(path, "latest")
    if not os.path.islink(link):
        raise WarehouseError(f"{path}: neither a warehouse version (no manifest.json) nor a root with a latest pointer")
    target = os.readlink(link)
    if os.path.isabs(target) or "/" in target or target.startswith("."):
        raise WarehouseError(f"{link} -> {target!r}: the pointer must name a version directory beside it")
    return os.path.join(path, target)


def clean_relative(p):
    return bool(p) and not p.startswith("/") and "\\" not in p and posixpath.normpath(p) == p \
        and p != ".." and not p.startswith("../")


def check_manifest(m, name):
    if m.get("format_version") != FORMAT_VERSION:
        raise WarehouseError(f"{name}: format_version {m.get('format_version')}, this reader reads {FORMAT_VERSION}")
    total = 0
    for k, s in enumerate(m["shards"]):
        if not clean_relative(s["relative_path"]):
            raise WarehouseError(f"{name}: shards[{k}].relative_path {s['relative_path']!r} leaves the warehouse")
        if s["samples"] <= 0 or s["first_sample"] != total:
            raise WarehouseError(f"{name}: shards[{k}] is not contiguous (first_sample {s['first_sample']}, want {total})")
        if s["dtype"] != m["default_dtype"] or s["endianness"] != "Little":
            raise WarehouseError(f"{name}: shards[{k}] dtype {s['dtype']} {s['endianness']}")
        total += s["samples"]
    if total != m["samples"] or m["summary"]["total"]["kept"] != m["samples"]:
        raise WarehouseError(f"{name}: samples {m['samples']}, shards hold {total}, summary kept {m['summary']['total']['kept']}")


def align8(n):
    return (n + 7) // 8 * 8


class Shard:
    """One TWH1 shard, memory-mapped and checked as shard.md's Validation section says."""

    def __init__(self, path, entry, extra_f32):
        self.path = path
        size = os.path.getsize(path)
        if size != entry["bytes"]:
            raise WarehouseError(f"{path}: {size} bytes, the manifest says {entry['bytes']}")
        raw = np.memmap(path, dtype=np.uint8, mode="r")
        if size < HEADER_SIZE:
            raise WarehouseError(f"{path}: shorter than the {HEADER_SIZE}-byte header")
        if bytes(raw[:4]) != b"TWH1":
            raise WarehouseError(f"{path}: bad magic {bytes(raw[:4])!r}")
        version, dtype, endian, W, H, C, B = (int(v) for v in raw[4:32].view("<u4"))
        N, image_off, boxes_off, mask_off, meta_off, checksum_off = (int(v) for v in raw[32:80].view("<u8"))
        if version != 1 or endian != 0 or dtype not in DTYPES:
            raise WarehouseError(f"{path}: shard_version {version}, endianness {endian}, dtype {dtype}: not readable here")
        if dtype != DTYPE_NAMES[entry["dtype"]]:
            raise WarehouseError(f"{path}: header dtype {dtype}, the manifest says {entry['dtype']}")
        if (W, H, C, B, N) != (entry["width"], entry["height"], entry["channels"], entry["max_boxes"], entry["samples"]):
            raise WarehouseError(f"{path}: header {C}x{H}x{W} max_boxes {B} samples {N} disagrees with the manifest")
        d = DTYPES[dtype].itemsize
        want_boxes = HEADER_SIZE + N * C * H * W * d
        want_mask = want_boxes + N * B * 4 * d
        want_meta = align8(want_mask + N * B * d)
        if (image_off, boxes_off, mask_off, meta_off, checksum_off) != (HEADER_SIZE, want_boxes, want_mask, want_meta, 0):
            raise WarehouseError(f"{path}: section offsets {image_off, boxes_off, mask_off, meta_off, checksum_off}, "
                                 f"want {HEADER_SIZE, want_boxes, want_mask, want_meta, 0}")
        record_size = align8(80 + 4 * B)
        if size < meta_off + META_HEADER_SIZE:
            raise WarehouseError(f"{path}: too short for the meta header")
        magic = bytes(raw[meta_off:meta_off + 4])
        meta_version, rec_size, extras = (int(v) for v in raw[meta_off + 4:meta_off + 16].view("<u4"))
        meta_samples = int(raw[meta_off + 16:meta_off + 24].view("<u8")[0])
        if (magic, meta_version, rec_size, extras, meta_samples) != (b"TWMD", 1, record_size, extra_f32, N):
            raise WarehouseError(f"{path}: meta header {magic!r} v{meta_version} record_size {rec_size} "
                                 f"extra_f32 {extras} samples {meta_samples}, want TWMD v1 {record_size} {extra_f32} {N}")
        records_off = meta_off + META_HEADER_SIZE
        extras_off = records_off + N * record_size
        if size != extras_off + N * extra_f32 * 4:
            raise WarehouseError(f"{path}: {size} bytes, the header implies {extras_off + N * extra_f32 * 4}")
        dt = DTYPES[dtype]
        self.samples = N
        self.images = raw[image_off:boxes_off].view(dt).reshape(N, C, H, W)
        self.boxes = raw[boxes_off:mask_off].view(dt).reshape(N, B, 4)
        self.mask = raw[mask_off:mask_off + N * B * d].view(dt).reshape(N, B)
        names, formats, offsets = (list(col) for col in zip(*RECORD_FIELDS))
        record = np.dtype({"names": names + ["class_index"], "formats": formats + [("<i4", (B,))],
                           "offsets": offsets + [80], "itemsize": record_size})
        self.records = raw[records_off:extras_off].view(record)
        self.extras = raw[extras_off:].view("<f4").reshape(N, extra_f32)
        if N and int(self.records["box_count"].max()) > B:
            raise WarehouseError(f"{path}: a record's box_count exceeds max_boxes {B}")


class Warehouse:
    """An open warehouse version. Shards are mapped on first use."""

    def __init__(self, path):
        self.dir = resolve(path)
        name = os.path.join(self.dir, "manifest.json")
        with open(name, encoding="utf-8") as f:
            self.manifest = json.load(f)
        check_manifest(self.manifest, name)
        self.extras_spec = self.manifest.get("extras") or []
        self.extra_f32 = sum(int(np.prod(e["shape"], dtype=np.int64)) for e in self.extras_spec)
        self.shard_starts = [s["first_sample"] for s in self.manifest["shards"]]
        self._shards = {}

    def __len__(self):
        return self.manifest["samples"]

    def shard(self, k):
        if k not in self._shards:
            entry = self.manifest["shards"][k]
            self._shards[k] = Shard(os.path.join(self.dir, entry["relative_path"]), entry, self.extra_f32)
        return self._shards[k]

    def __getitem__(self, i):
        if not 0 <= i < len(self):
            raise IndexError(f"sample {i} out of range [0, {len(self)})")
        k = int(np.searchsorted(self.shard_starts, i, side="right")) - 1
        sh, j = self.shard(k), i - self.shard_starts[k]
        rec = sh.records[j]
        extras = {e["name"]: sh.extras[j, e["offset"]:e["offset"] + int(np.prod(e["shape"], dtype=np.int64))].reshape(e["shape"])
                  for e in self.extras_spec}
        return {
            "index": i, "shard": self.manifest["shards"][k]["id"], "shard_index": j,
            "image": sh.images[j], "boxes": sh.boxes[j], "mask": sh.mask[j],
            "class_index": rec["class_index"], "box_count": int(rec["box_count"]),
            "meta": {name: rec[name].item() for name, _, _ in RECORD_FIELDS},
            "extras": extras, "extras_f32": sh.extras[j],
        }


# The epoch order of docs/format/reading.md: SplitMix64 from (seed, epoch),
# Fisher-Yates with Lemire's bounded integers.
MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


class OrderStream:
    def __init__(self, seed, epoch):
        self.state = (seed ^ mix64((epoch + GOLDEN) & MASK64)) & MASK64

    def next(self):
        self.state = (self.state + GOLDEN) & MASK64
        return mix64(self.state)

    def below(self, n):
        m = self.next() * n
        if m & MASK64 < n:
            threshold = (1 << 64) % n  # (2^64 - n) mod n, as uint64 arithmetic computes -n % n
            while m & MASK64 < threshold:
                m = self.next() * n
        return m >> 64

    def shuffle(self, a):
        for i in range(len(a) - 1, 0, -1):
            j = self.below(i + 1)
            a[i], a[j] = a[j], a[i]


def epoch_order(n, shard_starts, shuffle, seed, epoch):
    order = list(range(n))
    s = OrderStream(seed, epoch)
    if shuffle == "global":
        s.shuffle(order)
    elif shuffle == "shard":
        shards = list(range(len(shard_starts)))
        s.shuffle(shards)
        out = []
        for k in shards:
            end = shard_starts[k + 1] if k + 1 < len(shard_starts) else n
            block = order[shard_starts[k]:end]
            s.shuffle(block)
            out += block
        order = out
    elif shuffle != "none":
        raise ValueError(f"shuffle {shuffle!r}: want none, global or shard")
    return order


def plan_batches(n, shard_starts, batch, seed=0, epoch=0, rank=0, world=1, shuffle="global", remainder="drop"):
    per = batch * world
    count = n // per if remainder == "drop" else -(-n // per)
    if count == 0:
        raise ValueError(f"{n} samples cannot fill one batch of {batch} on each of {world} ranks")
    order = epoch_order(n, shard_starts, shuffle, seed, epoch)
    out = []
    for t in range(count):
        start = (t * world + rank) * batch
        out.append({"indices": [order[(start + j) % n] for j in range(batch)],
                    "repeats": max(0, start + batch - max(start, n))})
    return out


def f32_digest(a):
    """sha256 of the values as little-endian float32 (exact for f16 and f32)."""
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<f4").tobytes()).hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path")
    ap.add_argument("--digests", action="store_true")
    ap.add_argument("--plan", action="store_true")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--epoch", type=int, default=0)
    ap.add_argument("--rank", type=int, default=0)
    ap.add_argument("--world", type=int, default=1)
    ap.add_argument("--shuffle", default="global")
    ap.add_argument("--remainder", default="drop")
    args = ap.parse_args()
    try:
        wh = Warehouse(args.path)
        if args.plan:
            json.dump(plan_batches(len(wh), wh.shard_starts, args.batch, args.seed, args.epoch, args.rank,
                                   args.world, args.shuffle, args.remainder), sys.stdout)
            print()
        elif args.digests:
            for i in range(len(wh)):
                s = wh[i]
                print(json.dumps({
                    "index": i, "shard": s["shard"], "shard_index": s["shard_index"],
                    "image": f32_digest(s["image"]), "boxes": f32_digest(s["boxes"]), "mask": f32_digest(s["mask"]),
                    "extras": f32_digest(s["extras_f32"]), "class_index": s["class_index"].tolist(),
                    "box_count": s["box_count"], "meta": s["meta"]}))
        else:
            m = wh.manifest
            print(f"{wh.dir}: version {m['version'][:16]}, {len(wh)} samples in {len(m['shards'])} shards, "
                  f"{m['default_dtype']} {m['transform']['channels']}x{m['transform']['target_height']}x{m['transform']['target_width']}, "
                  f"classes {[c['name'] for c in m['classes']]}")
            for i in range(len(wh)):
                s = wh[i]
                n = s["box_count"]
                print(f"  {i:5d} {s['shard']}[{s['shard_index']}] frame {s['meta']['frame_id']} "
                      f"image mean {float(s['image'].astype(np.float64).mean()):.4f} boxes {s['boxes'][:n].astype(float).round(4).tolist()} "
                      f"classes {s['class_index'][:n].tolist()}")
    except (WarehouseError, OSError) as e:
        print(f"read_warehouse: {e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
