#!/usr/bin/python3
"""The disk's ceiling for a shuffled cold epoch, for bench/read.sh: reads of a
stored sample's size (the shard files' bytes / the manifest's samples) at
random sample-aligned offsets of a warehouse's shard files, the page cache
dropped first (evict.py), by THREADS threads each with one read in flight
(os.preadv, which releases the GIL). Prints one JSON line as read_python.py
does: samples (reads), seconds, bytes.

    randread.py --tensor-warehouse DIR --threads 4 [--reads 600]

A reader whose cold rate is close to this one at the same number of reads in
flight is waiting on the disk, not on itself: what it can still gain is in
fewer bytes per sample (compact_images) or more reads in flight.
"""

import argparse
import json
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evict  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tensor-warehouse", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--reads", type=int, default=600)
    args = p.parse_args()
    with open(os.path.join(args.tensor_warehouse, "manifest.json")) as f:
        m = json.load(f)
    paths = [os.path.join(args.tensor_warehouse, s["relative_path"]) for s in m["shards"]]
    size = sum(os.path.getsize(p) for p in paths) // max(int(m["samples"]), 1)
    fds = [os.open(p, os.O_RDONLY) for p in paths]
    spans = [(k, off) for k, fd in enumerate(fds) for off in range(0, os.fstat(fd).st_size - size, size)]
    random.Random(1).shuffle(spans)
    todo = iter(spans[:args.reads])
    lock = threading.Lock()
    done = [0]

    def work():
        buf = bytearray(size)
        while True:
            with lock:
                span = next(todo, None)
            if span is None:
                return
            n = os.preadv(fds[span[0]], [buf], span[1])
            with lock:
                done[0] += n

    evict.evict(paths)
    t0 = time.perf_counter()
    threads = [threading.Thread(target=work) for _ in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    n = min(args.reads, len(spans))
    print(json.dumps({"samples": n, "seconds": seconds, "bytes": done[0]}))


if __name__ == "__main__":
    main()
