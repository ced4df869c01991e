#!/usr/bin/python3
"""Our Python readers' side of bench/read.sh: time warehouse_etl over a
warehouse and print one JSON line (samples, seconds, bytes).

    read_python.py numpy --tensor-warehouse DIR --batch 64 --epochs 5 --shuffle global
    read_python.py torch --tensor-warehouse DIR --batch 64 --epochs 5 --shuffle global --workers 1

`numpy` plans each epoch with Warehouse.batches and fills one reused set of
arrays with Warehouse.read_batch. `torch` iterates make_loader (a batch
sampler, one whole batch per DataLoader item, worker processes returning
shared-memory tensors), calling set_epoch each epoch. Both run one warm-up
epoch first, as the FFCV side does, then time EPOCHS epochs. bytes counts
the images, boxes and masks handed out. Run with PYTHONPATH=python.
"""

import argparse
import json
import time

import warehouse_etl


def tensor_bytes(arrays):
    return sum(int(a.nbytes) for a in arrays)


def run_numpy(args):
    wh = warehouse_etl.open(args.tensor_warehouse)
    out = None

    def epoch(e):
        nonlocal out
        samples = nbytes = 0
        for idx in wh.batches(args.batch, seed=0, epoch=e, rank=0, world=1, shuffle=args.shuffle, remainder="drop"):
            out = wh.read_batch(idx, out=out)
            samples += len(idx)
            nbytes += tensor_bytes([out["images"], out["boxes"], out["mask"]])
        return samples, nbytes

    epoch(0)
    t0 = time.perf_counter()
    totals = [epoch(e) for e in range(1, args.epochs + 1)]
    return sum(s for s, _ in totals), time.perf_counter() - t0, sum(b for _, b in totals)


def run_torch(args):
    from warehouse_etl.torch import make_loader

    source = args.tensor_warehouse
    if args.mix:  # a mixture: --mix PATH=WEIGHT, repeated
        source = [(m.rpartition("=")[0], float(m.rpartition("=")[2])) for m in args.mix]
    loader = make_loader(source, args.batch, seed=0, rank=0, world=1, shuffle=args.shuffle,
                         remainder="drop", reader_threads=args.workers, windows=parse_windows(args.windows))

    def epoch(e):
        loader.set_epoch(e)
        samples = nbytes = 0
        for b in loader:
            samples += b["images"].shape[0]
            nbytes += sum(b[k].numel() * b[k].element_size() for k in ("images", "boxes", "mask"))
        return samples, nbytes

    epoch(0)
    t0 = time.perf_counter()
    totals = [epoch(e) for e in range(1, args.epochs + 1)]
    return sum(s for s, _ in totals), time.perf_counter() - t0, sum(b for _, b in totals)


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
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--shuffle", choices=["none", "shard", "global"], default="global")
    p.add_argument("--workers", type=int, default=0)
    p.add_argument("--mix", action="append", default=[], metavar="PATH=WEIGHT",
                   help="torch: read a mixture of warehouses (make_loader([(path, weight), ...]))")
    p.add_argument("--windows", default="", help="torch: episode windows, NAME=A:B[,NAME=A:B] (bench/read_windows.sh)")
    args = p.parse_args()
    samples, secs, nbytes = (run_numpy if args.mode == "numpy" else run_torch)(args)
    print(json.dumps({"samples": samples, "seconds": secs, "bytes": nbytes}))


if __name__ == "__main__":
    main()
