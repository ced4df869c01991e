#!/usr/bin/python3
"""The Python loader from S3 against the same loader on the local version, in one run
(bench/s3_read.sh builds the warehouse and calls this).

    PYTHONPATH=python bench/s3_read.py --version DIR --batch 32 --rounds 5 --threads 2

Starts versitygw on a free localhost port over a temporary directory (the test's
Server), uploads the version DIR in the agreed layout (the test's uploader), then each
round times one epoch (global shuffle) of make_loader, in turn:

  local        the version directory (page cache warm)
  s3-cold      s3:// with an empty cache directory, mode=whole (every shard downloaded,
               sha256-checked, during the epoch)
  s3-warm      s3:// again with the cache s3-cold filled (a new loader: a new process
               state, every sample CRC-checked on first read, as local)
  s3-range     s3:// with an empty cache directory, mode=range (the images of each
               batch's runs of samples fetched by byte range, CRC-checked)
  s3-range-warm  s3:// with the cache s3-range filled

Every loader checks each sample's CRC-32C on its first read (the default). Prints the
medians and the ratios to local; one JSON line per measurement on stderr.
"""
import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))

import warehouse_etl  # noqa: E402
from warehouse_etl import _s3  # noqa: E402
from warehouse_etl.torch import make_loader  # noqa: E402
from tests.test_s3 import ACCESS, BUCKET, SECRET, Server, find_versitygw, upload_version  # noqa: E402


def epoch(path, args, **kw):
    t0 = time.perf_counter()
    loader = make_loader(path, args.batch, seed=0, epoch=0, shuffle="global", reader_threads=args.threads, **kw)
    t1 = time.perf_counter()
    samples = nbytes = 0
    for b in loader:
        samples += b["images"].shape[0]
        nbytes += b["images"].numel() * b["images"].element_size()
    t2 = time.perf_counter()
    loader.dataset.close()
    return {"samples": samples, "bytes": nbytes, "open_s": t1 - t0, "seconds": t2 - t1}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", required=True, help="a local version directory")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2, help="make_loader reader_threads")
    ap.add_argument("--work", default=None)
    args = ap.parse_args()
    binary = find_versitygw()
    if binary is None:
        sys.exit("bench: versitygw not found (VERSITYGW, PATH, $(go env GOPATH)/bin)")
    work = tempfile.mkdtemp(prefix="warehouse-s3-bench-", dir=args.work)
    server = Server(binary, work)
    try:
        os.environ.update({"AWS_ACCESS_KEY_ID": ACCESS, "AWS_SECRET_ACCESS_KEY": SECRET, "AWS_REGION": "us-east-1",
                           "AWS_ENDPOINT_URL": server.endpoint})
        t0 = time.perf_counter()
        vname = upload_version(server.client, BUCKET, "bench", args.version)
        total = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(args.version) for f in fs)
        print(f"uploaded {vname}: {total / 1e6:.1f} MB in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
        url = f"s3://{BUCKET}/bench"
        wh = warehouse_etl.open(args.version)
        n, shards = len(wh), len(wh._shards)
        wh.close()
        epoch(args.version, args)  # warm the page cache and the code paths
        results = {}
        for r in range(args.rounds):
            cold, ranged = os.path.join(work, f"cache-{r}"), os.path.join(work, f"range-{r}")
            for label, path, kw in (("local", args.version, {}),
                                    ("s3-cold", url, {"cache_dir": cold}),
                                    ("s3-warm", url, {"cache_dir": cold}),
                                    ("s3-range", url, {"cache_dir": ranged, "mode": "range"}),
                                    ("s3-range-warm", url, {"cache_dir": ranged, "mode": "range"})):
                _s3.reset_counts()
                res = epoch(path, args, **kw)
                counts = _s3.get_counts()
                res["gets"] = sum(v[0] + v[1] for v in counts.values())
                res["get_mb"] = sum(v[2] for v in counts.values()) / 1e6
                res["label"], res["round"] = label, r
                print(json.dumps(res), file=sys.stderr)
                results.setdefault(label, []).append(res)
            shutil.rmtree(cold)
            shutil.rmtree(ranged)
        print(f"\n{n} samples in {shards} shards, batch {args.batch}, reader_threads {args.threads}, global shuffle, "
              f"one epoch per measurement, medians of {args.rounds} rounds ({os.cpu_count()} CPUs), "
              f"versitygw on localhost")
        print(f"{'reader':<14} {'samples/s':>10} {'GB/s':>7} {'open ms':>8} {'GETs':>6} {'GET MB':>7} {'x local':>8}")
        med = {k: statistics.median(x["samples"] / x["seconds"] for x in v) for k, v in results.items()}
        for k, v in results.items():
            gbs = statistics.median(x["bytes"] / x["seconds"] / 1e9 for x in v)
            op = statistics.median(x["open_s"] for x in v) * 1e3
            gets = statistics.median(x["gets"] for x in v)
            mb = statistics.median(x["get_mb"] for x in v)
            print(f"{k:<14} {med[k]:>10.0f} {gbs:>7.2f} {op:>8.1f} {gets:>6.0f} {mb:>7.1f} {med[k] / med['local']:>8.2f}")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
