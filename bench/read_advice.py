#!/usr/bin/python3
"""How the torch loader's read-ahead advice behaves, epoch by epoch, in one process:
samples/s, samples read from disk (``Warehouse.cold_samples``) and batches advised
(``Warehouse.advise`` calls) per epoch. Run from the repository root with the package
on PYTHONPATH (bench/python_package.sh).

    /usr/bin/python3 bench/read_advice.py WAREHOUSE [--threads 1] [--epochs 4] [--cold]

--cold drops the shards from the page cache (posix_fadvise DONTNEED) before the first
epoch; pages this process has mapped stay cached after it, so later epochs are warm.
"""
import argparse
import os
import sys
import time

import warehouse_etl
from warehouse_etl.torch import make_loader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evict  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("warehouse")
    p.add_argument("--threads", type=int, default=1, help="reader threads")
    p.add_argument("--epochs", type=int, default=4)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--cold", action="store_true")
    a = p.parse_args()
    wh = warehouse_etl.open(a.warehouse)
    calls = [0]
    advise = wh.advise

    def counted(idx):
        calls[0] += 1
        return advise(idx)
    wh.advise = counted
    if a.cold:
        evict.evict([os.path.realpath(wh.dir)])
    loader = make_loader(wh, a.batch, reader_threads=a.threads, seed=1, shuffle="global")
    out = []
    for e in range(a.epochs):
        cold, advised, t = wh.cold_samples, calls[0], time.perf_counter()
        n = sum(b["images"].shape[0] for b in loader)
        out.append(f"epoch {e}: {n / (time.perf_counter() - t):.0f}/s, {wh.cold_samples - cold} cold, "
                   f"{calls[0] - advised} of {len(loader)} batches advised")
    print(" | ".join(out))
    loader.dataset.close()


if __name__ == "__main__":
    main()
