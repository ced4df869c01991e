#!/usr/bin/python3
"""A first read's copy and its CRC-32C, per sample: numpy's copy alone, the copy then
ISA-L's CRC of it (the two passes), warehouse_etl._copycrc's one pass (and its level 1,
one-pass-level1, where the CPU runs level 2: the 128-bit fold on x86-64, one CRC32 stream on
arm64; one-pass-cached: the one pass with plain stores, where copies of 256 KiB or more
store past the caches by default), and os.preadv alone. Each way reads the images of one
shard of a plain warehouse through a fresh mapping (the page cache warm: the first touch of
the mapping's pages, as a process's first epoch pays it), then once more through the same
mapping (faulted in), sample i into row i % 32 of a batch, as read_batch fills one (a
single 443 KB destination would stay in the caches and hide what a store costs that
reads its line first). Each way runs in its own
process, the ways alternated ROUNDS times over the warehouse's shards; prints microseconds
per sample, medians. Needs the package with its compiled part on PYTHONPATH and ISA-L:

    PYTHONPATH=$(bash bench/python_package.sh /usr/bin/python3 /tmp/pkg) \\
        /usr/bin/python3 bench/copycrc.py out/u8-384 5
"""
import json
import mmap
import os
import statistics
import subprocess
import sys
import time

WAYS = ("copy", "copy+isal", "one-pass", "one-pass-cached", "one-pass-level1", "preadv")
BATCH = 32


def one(way, version_dir, k):
    import numpy as np

    import warehouse_etl
    from warehouse_etl import _crc32c
    if _crc32c.COPY_CRC is None or _crc32c._ISAL is None:
        sys.exit("bench: needs warehouse_etl._copycrc (bench/python_package.sh) and ISA-L (libisal2)")
    wh = warehouse_etl.open(version_dir, verify_samples=False)
    sh = wh._shard(k)
    img, off, n = wh.layout.image_bytes, sh.sections["image"], len(sh.crcs)
    fd = os.open(sh.path, os.O_RDONLY)
    raw = np.frombuffer(mmap.mmap(fd, 0, access=mmap.ACCESS_READ), dtype=np.uint8)
    base = raw.ctypes.data
    batch = np.ones((BATCH, img), dtype=np.uint8)
    b0 = batch.ctypes.data
    isal, fused = _crc32c.isal_raw(img), _crc32c.COPY_CRC.copy_crc32c
    if way == "one-pass-level1":
        _crc32c.COPY_CRC.set_level(1)
    if way == "one-pass-cached":
        _crc32c.COPY_CRC.set_stream_bytes(1 << 62)

    def run():
        t = time.perf_counter()
        for i in range(n):
            o = off + i * img
            dst, d = batch[i % BATCH], b0 + i % BATCH * img
            if way == "copy":
                np.copyto(dst, raw[o:o + img])
            elif way == "copy+isal":
                np.copyto(dst, raw[o:o + img])
                isal(d, img, 0xFFFFFFFF)
            elif way.startswith("one-pass"):
                fused(d, base + o, img, 0xFFFFFFFF)
            else:
                os.preadv(fd, [dst], o)
        return (time.perf_counter() - t) / n * 1e6
    first = run()
    print(json.dumps({"first": first, "again": run()}))


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--one":
        return one(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    import warehouse_etl
    wh = warehouse_etl.open(sys.argv[1], verify_samples=False)
    d, shards, rounds = wh.dir, len(wh.manifest["shards"]), int(sys.argv[2])
    for k in range(shards):  # the page cache warm
        with open(wh._shard(k).path, "rb") as f:
            while f.read(1 << 24):
                pass
    from warehouse_etl import _crc32c
    ways = [w for w in WAYS if w != "one-pass-level1" or getattr(_crc32c.COPY_CRC, "MAX_LEVEL", 0) == 2]
    res = {w: [] for w in ways}
    for r in range(rounds):
        for w in ways:
            out = subprocess.run([sys.executable, __file__, "--one", w, d, str(r % shards)],
                                 capture_output=True, text=True, check=True)
            res[w].append(json.loads(out.stdout))
    copy = statistics.median(x["first"] for x in res["copy"])
    for w in ways:
        first = statistics.median(x["first"] for x in res[w])
        again = statistics.median(x["again"] for x in res[w])
        print(f"{w:15s} first touch {first:6.1f} us/sample ({copy / first:.2f}x the copy's rate)  "
              f"mapped {again:6.1f} us  firsts {[round(x['first'], 1) for x in res[w]]}")


if __name__ == "__main__":
    main()
