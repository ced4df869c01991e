#!/usr/bin/python3
"""What a per-sample lossless codec would do to a U8 warehouse's reads, measured on its
own images (issue 29: fewer bytes per sample for reads bound by the disk, undone by the
readers faster than the disk delivers).

    PYTHONPATH=python /usr/bin/python3 bench/compress_probe.py WAREHOUSE [--samples 64] [--disk-mbps 900]

For SAMPLES images spread evenly over the warehouse (read through warehouse_etl), it
takes the rectangle a compact build stores (the pixels that differ from the letterbox's
pad value, docs/format/shard.md "Compact images") and encodes it with each codec below,
raw and after a row filter (each byte minus its left neighbour, "hdelta", or minus the
byte one row up in the same plane, "vdelta"; PNG's Sub and Up). It prints per codec:
bytes a sample, the ratio to the compact rectangle, the decode time of one sample
(python-zstandard and python-lz4 are C; best of 5 passes, one core) and, for the
filters, the time to undo them in numpy (np.cumsum); then the samples/s one core can
decode, and with --disk-mbps the samples/s that disk delivers of each. Each
decode is checked against the image it came from.

Needs Debian's python3-numpy, python3-zstandard and python3-lz4 (the package does not
depend on either codec: nothing here is used by the readers).
"""
import argparse
import time

import numpy as np


def rectangle(img, pad):
    """The compact rectangle of a CHW image: rows and columns where any channel differs
    from the pad value; the whole image when nothing differs (this probe's choice)."""
    differs = (img != pad).any(axis=0)
    rows, cols = np.flatnonzero(differs.any(axis=1)), np.flatnonzero(differs.any(axis=0))
    if rows.size == 0:
        return img
    return np.ascontiguousarray(img[:, rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1])


def hdelta(x):
    return np.diff(x.astype(np.int16), axis=2, prepend=0).astype(np.uint8)


def vdelta(x):
    return np.diff(x.astype(np.int16), axis=1, prepend=0).astype(np.uint8)


def undo(kind, d):
    if kind == "raw":
        return d
    return np.cumsum(d, axis=2 if kind == "hdelta" else 1, dtype=np.uint8)


def best(f, passes=5):
    t = float("inf")
    for _ in range(passes):
        t0 = time.perf_counter()
        f()
        t = min(t, time.perf_counter() - t0)
    return t


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("warehouse")
    p.add_argument("--samples", type=int, default=64)
    p.add_argument("--disk-mbps", type=float, default=0, help="the disk's rate (MB/s) to turn bytes into samples/s")
    args = p.parse_args()

    import lz4.frame
    import zstandard
    import warehouse_etl

    wh = warehouse_etl.open(args.warehouse)
    if wh.image_dtype != np.dtype("u1"):
        raise SystemExit(f"{args.warehouse}: image dtype {wh.image_dtype}, want u8 (the codecs here are byte codecs)")
    pad = wh.manifest["transform"].get("pad_value", 0)
    n = min(args.samples, len(wh))
    idx = np.linspace(0, len(wh) - 1, n).round().astype(np.int64)
    images = wh.read_batch(idx)["images"]
    rects = [rectangle(img, pad) for img in images]
    full, stored = images[0].nbytes, sum(r.nbytes for r in rects) / n
    print(f"{args.warehouse}: {n} samples, image {full:,} B, compact rectangle {stored:,.0f} B on average "
          f"({full / stored:.2f}x fewer)")

    codecs = [("zstd -1", zstandard.ZstdCompressor(level=1).compress, zstandard.ZstdDecompressor().decompress),
              ("zstd -3", zstandard.ZstdCompressor(level=3).compress, zstandard.ZstdDecompressor().decompress),
              ("zstd --fast=3", zstandard.ZstdCompressor(level=-3).compress, zstandard.ZstdDecompressor().decompress),
              ("lz4", lz4.frame.compress, lz4.frame.decompress)]
    filters = [("raw", lambda x: x), ("hdelta", hdelta), ("vdelta", vdelta)]
    rate = args.disk_mbps * 1e6
    head = "| codec | filter | B a sample | vs compact | decode ms | undo filter ms | samples/s a core |"
    print(head + (" disk samples/s |" if rate else ""))
    print("|---|---|---:|---:|---:|---:|---:|" + ("---:|" if rate else ""))
    if rate:
        print(f"| none (u8) | | {full:,} | {stored / full:.2f}x | | | | {rate / full:,.0f} |")
        print(f"| none (compact) | | {stored:,.0f} | 1.00x | | | | {rate / stored:,.0f} |")
    for cname, enc, dec in codecs:
        for fname, filt in filters:
            filtered = [filt(r) for r in rects]
            blobs = [enc(f.tobytes()) for f in filtered]
            for blob, r, f in zip(blobs, rects, filtered):
                back = np.frombuffer(dec(blob), np.uint8).reshape(r.shape)
                if not np.array_equal(undo(fname, back), r):
                    raise SystemExit(f"{cname} {fname}: a decode differs from its image")
            size = sum(map(len, blobs)) / n
            t_dec = best(lambda: [dec(b) for b in blobs]) / n
            t_undo = 0.0 if fname == "raw" else best(lambda: [undo(fname, f) for f in filtered]) / n
            row = (f"| {cname} | {fname} | {size:,.0f} | {stored / size:.2f}x | {t_dec * 1e3:.3f} | "
                   f"{t_undo * 1e3:.3f} | {1 / (t_dec + t_undo):,.0f} |")
            print(row + (f" {rate / size:,.0f} |" if rate else ""))


if __name__ == "__main__":
    main()
