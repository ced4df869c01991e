#!/usr/bin/python3
"""Our Python readers' side of bench/read.sh: time warehouse_etl over a
warehouse and print one JSON line: samples, seconds, bytes of the timed
epochs, and first_samples, first_seconds of the process's first epoch.

    read_python.py numpy --tensor-warehouse DIR --batch 32 --epochs 5 --shuffle global
    read_python.py torch --tensor-warehouse DIR --batch 32 --epochs 5 --shuffle global --workers 1
    read_python.py torch ... --cold DIR_OR_FILE...     # page cache dropped before each timed epoch

`numpy` plans each epoch with Warehouse.batches and fills one reused set of
arrays with Warehouse.read_batch (with --check-ahead T, after handing batch
t+T to Warehouse.check_ahead, which the torch loader no longer uses). `torch` iterates
make_loader (a batch sampler, one whole batch per DataLoader item, --workers
reader threads in this process), calling set_epoch each epoch. Both read a first epoch
(every sample checked against its CRC-32C then, unless --no-verify), timed
apart, then time EPOCHS epochs; with --cold the files named are dropped
from the page cache (bench/evict.py) before each of those, outside the
timing, after this process's own mappings of them are dropped. bytes
counts the images, boxes and masks handed out; cpu_seconds is the
process's CPU time over the timed epochs (all threads). Run with
PYTHONPATH=python.
"""

import argparse
import mmap
import json
import os
import sys
import time

import warehouse_etl

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evict  # noqa: E402


def drop_mappings(wh):
    """Drop the pages this process has mapped of wh's shards (MADV_DONTNEED; they stay
    in the page cache): read_batch copies cached runs from the shard mappings, and
    posix_fadvise(DONTNEED) does not drop pages a process has mapped, so without this
    a cold epoch would find the pages of the first one still cached (as
    read_ffcv.py does for FFCV's mapping)."""
    for w in getattr(wh, "warehouses", [wh]):
        for sh in w._shards:
            if sh.mmap is not None:
                m = sh.mmap.base  # np.frombuffer keeps a memoryview of the mmap
                (m.obj if isinstance(m, memoryview) else m).madvise(mmap.MADV_DONTNEED)


def tensor_bytes(arrays):
    return sum(int(a.nbytes) for a in arrays)


def numpy_epochs(args):
    wh = warehouse_etl.open(args.tensor_warehouse, verify_samples=not args.no_verify)
    out = None

    def epoch(e):
        nonlocal out
        samples = nbytes = 0
        plan = list(wh.batches(args.batch, seed=0, epoch=e, rank=0, world=1, shuffle=args.shuffle, remainder="drop"))
        for t, idx in enumerate(plan):
            if args.check_ahead and t + args.check_ahead < len(plan):
                if t == 0:  # the batches between the first and the one checked ahead
                    for later in plan[1:args.check_ahead]:
                        wh.check_ahead(later)
                wh.check_ahead(plan[t + args.check_ahead])
            out = wh.read_batch(idx, out=out)
            samples += len(idx)
            nbytes += tensor_bytes([out["images"], out["boxes"], out["mask"]])
        return samples, nbytes

    epoch.warehouse = wh
    return epoch


def torch_epochs(args):
    from warehouse_etl.torch import make_loader

    source = args.tensor_warehouse
    if args.mix:  # a mixture: --mix PATH=WEIGHT, repeated
        source = [(m.rpartition("=")[0], float(m.rpartition("=")[2])) for m in args.mix]
    loader = make_loader(source, args.batch, seed=0, rank=0, world=1, shuffle=args.shuffle,
                         remainder="drop", reader_threads=args.workers, verify_samples=not args.no_verify,
                         windows=parse_windows(args.windows),
                         **({} if args.read_ahead is None else {"read_ahead": args.read_ahead}))

    def epoch(e):
        loader.set_epoch(e)
        samples = nbytes = 0
        for b in loader:
            samples += b["images"].shape[0]
            nbytes += sum(b[k].numel() * b[k].element_size() for k in ("images", "boxes", "mask"))
        return samples, nbytes

    epoch.warehouse = loader.warehouse
    return epoch


def parse_windows(spec):
    """``NAME=A:B,NAME=A:B`` (steps A to B-1 of each extra) as make_loader's windows."""
    if not spec:
        return None
    out = {}
    for part in spec.split(","):
        name, _, span = part.rpartition("=")
        a, _, b = span.partition(":")
        out[name] = range(int(a), int(b))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["numpy", "torch"])
    warehouse_etl.add_argument(p)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--shuffle", choices=["none", "shard", "global"], default="global")
    p.add_argument("--workers", type=int, default=0, help="torch: reader threads")
    p.add_argument("--no-verify", action="store_true", help="verify_samples=False")
    p.add_argument("--read-ahead", type=int, default=None, help="torch: make_loader's read_ahead (default: its own)")
    p.add_argument("--check-ahead", type=int, default=0, metavar="T",
                   help="numpy: Warehouse.check_ahead of batch t+T before read_batch of batch t (default 0: none)")
    p.add_argument("--cold", nargs="+", default=[], help="drop these from the page cache before each timed epoch")
    p.add_argument("--mix", action="append", default=[], metavar="PATH=WEIGHT",
                   help="torch: read a mixture of warehouses (make_loader([(path, weight), ...]))")
    p.add_argument("--windows", default="", help="torch: episode windows, NAME=A:B[,NAME=A:B] (bench/read_windows.sh)")
    args = p.parse_args()
    epoch = (numpy_epochs if args.mode == "numpy" else torch_epochs)(args)
    t0 = time.perf_counter()
    first_samples, _ = epoch(0)
    first_seconds = time.perf_counter() - t0
    samples = nbytes = 0
    seconds = cpu = 0.0
    for e in range(1, args.epochs + 1):
        if args.cold:
            drop_mappings(epoch.warehouse)
            evict.evict(args.cold)
        c0, t0 = time.process_time(), time.perf_counter()
        s, b = epoch(e)
        seconds += time.perf_counter() - t0
        cpu += time.process_time() - c0
        samples, nbytes = samples + s, nbytes + b
    print(json.dumps({"samples": samples, "seconds": seconds, "bytes": nbytes, "cpu_seconds": cpu,
                      "first_samples": first_samples, "first_seconds": first_seconds}))


if __name__ == "__main__":
    main()
