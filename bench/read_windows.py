#!/usr/bin/python3
"""bench/read_windows.sh's measurement: two make_loader loops over one warehouse, the same
except for episode windows, timed epoch by epoch in alternation (A B B A A B ...) in one
process, so load on a shared machine hits both alike. Prints one JSON line: per-epoch
samples/s of each (medians) and the median of the per-pair ratios (windows / without).

    read_windows.py --tensor-warehouse DIR --batch 32 --pairs 15 --workers 0 \\
        --windows action/ctrl=0:50,signal/joint_pos=-2:1
"""
import argparse
import json
import statistics
import time

import warehouse_etl
from read_python import parse_windows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    warehouse_etl.add_argument(p)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--pairs", type=int, default=15)
    p.add_argument("--workers", type=int, default=0, help="reader threads")
    p.add_argument("--windows", default="action/ctrl=0:50,signal/joint_pos=-2:1")
    p.add_argument("--label", help="print a table row under this label instead of the JSON line")
    args = p.parse_args()
    from warehouse_etl.torch import make_loader

    loaders = {w: make_loader(args.tensor_warehouse, args.batch, seed=0, shuffle="global", remainder="drop",
                              reader_threads=args.workers, windows=parse_windows(args.windows) if w else None)
               for w in (False, True)}

    def epoch(w, e):
        loader = loaders[w]
        loader.set_epoch(e)
        n, t0, c0 = 0, time.perf_counter(), time.process_time()
        for b in loader:
            n += b["images"].shape[0]
        return n / (time.perf_counter() - t0), n / (time.process_time() - c0)

    for w in (False, True):
        epoch(w, 0)  # warm-up: buffers, the episode index
    rates = {False: [], True: []}
    ratios, cpu_ratios = [], []
    for i in range(args.pairs):
        first = bool(i % 2)  # alternate which goes first
        r = {first: epoch(first, i + 1), not first: epoch(not first, i + 1)}
        for w in (False, True):
            rates[w].append(r[w][0])
        ratios.append(r[True][0] / r[False][0])
        cpu_ratios.append(r[True][1] / r[False][1])
    # cpu_ratio: samples per CPU-second of this process (all its threads), with / without:
    # the work windows add, which the load of other processes on the machine does not change.
    r = {"plain": statistics.median(rates[False]), "windows": statistics.median(rates[True]),
         "ratio": statistics.median(ratios), "ratio_min": min(ratios), "ratio_max": max(ratios),
         "cpu_ratio": statistics.median(cpu_ratios), "pairs": args.pairs}
    if args.label:
        print(f"{args.label:<16} {r['plain']:>10.0f} {r['windows']:>13.0f} {r['ratio']:>10.3f}x "
              f"{r['ratio_min']:>7.3f}-{r['ratio_max']:<7.3f} {r['cpu_ratio']:>9.3f}x", flush=True)
    else:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
