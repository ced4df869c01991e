#!/usr/bin/python3
"""Python side of bench/read_compact.sh: time our torch loader or FFCV's Loader,
warm or cold, and print one JSON line (samples, seconds, bytes).

    read_compact.py torch --tensor-warehouse DIR --batch 32 --epochs 3 --workers 1 [--cold]
    read_compact.py ffcv  --beton FILE --batch 32 --epochs 3 --workers 1 [--cold]

Both run one warm-up epoch (FFCV compiles its pipeline with numba; our loader starts
its threads), then time EPOCHS epochs. With --cold, every file of the warehouse (or
the .beton) is dropped from the page cache (posix_fadvise DONTNEED) before each timed
epoch, so each epoch reads from the disk (
FFCV maps the .beton (os_cache=True), and a mapped page survives DONTNEED, so its
mapping's pages are first dropped with madvise(MADV_DONTNEED); os_cache=False, FFCV's
own page cache, fails an assertion in the Debian build after the first epoch). bytes counts the tensors handed out
(images, boxes, masks for ours; images for FFCV). Run with PYTHONPATH=python.
"""

import argparse
import json
import mmap
import os
import time


def evict(paths):
    """posix_fadvise(DONTNEED) every file under paths (fdatasync first)."""
    for p in paths:
        walk = [(p, [], [""])] if os.path.isfile(p) else os.walk(p)
        for root, _, names in walk:
            for n in names:
                fd = os.open(os.path.join(root, n) if n else root, os.O_RDONLY)
                try:
                    os.fdatasync(fd)
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                finally:
                    os.close(fd)


def timed(epoch, args, files, unmap=None):
    epoch(0)  # warm-up
    samples = nbytes = 0
    secs = 0.0
    for e in range(1, args.epochs + 1):
        if args.cold:
            if unmap:
                unmap()
            evict(files)
        t0 = time.perf_counter()
        s, b = epoch(e)
        secs += time.perf_counter() - t0
        samples, nbytes = samples + s, nbytes + b
    return samples, secs, nbytes


def run_torch(args):
    import warehouse_etl
    from warehouse_etl.torch import make_loader

    loader = make_loader(args.tensor_warehouse, args.batch, seed=0, rank=0, world=1, shuffle="global",
                         remainder="drop", reader_threads=args.workers)
    wh = warehouse_etl.open(args.tensor_warehouse)
    files = [os.path.join(wh.dir, "shards")]
    wh.close()

    def epoch(e):
        loader.set_epoch(e)
        samples = nbytes = 0
        for b in loader:
            samples += b["images"].shape[0]
            nbytes += sum(b[k].numel() * b[k].element_size() for k in ("images", "boxes", "mask"))
        return samples, nbytes

    return timed(epoch, args, files)


def run_ffcv(args):
    from ffcv.fields.decoders import IntDecoder, SimpleRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import ToTensor

    loader = Loader(args.beton, batch_size=args.batch, num_workers=args.workers, order=OrderOption.RANDOM,
                    os_cache=True, drop_last=True, seed=0,
                    pipelines={"image": [SimpleRGBImageDecoder(), ToTensor()], "index": [IntDecoder(), ToTensor()]})

    def epoch(_e):
        samples = nbytes = 0
        for images, _index in loader:
            samples += images.shape[0]
            nbytes += images.numel() * images.element_size()
        return samples, nbytes

    def unmap():
        # The loader maps the .beton (os_cache=True), and DONTNEED keeps
        # mapped pages: drop them from its mapping first (MADV_DONTNEED;
        # the next access faults them in again, from the disk once evicted).
        m = loader.memory_manager.context.mmap
        if m is not None:
            m._mmap.madvise(mmap.MADV_DONTNEED)

    return timed(epoch, args, [args.beton], unmap)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("mode", choices=["torch", "ffcv", "evict"])
    p.add_argument("paths", nargs="*", help="evict: files or directories to drop from the page cache")
    p.add_argument("--tensor-warehouse")
    p.add_argument("--beton")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--cold", action="store_true")
    args = p.parse_args()
    if args.mode == "evict":
        evict(args.paths)
        return
    samples, secs, nbytes = (run_torch if args.mode == "torch" else run_ffcv)(args)
    print(json.dumps({"samples": samples, "seconds": secs, "bytes": nbytes}))


if __name__ == "__main__":
    main()
