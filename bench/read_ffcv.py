#!/usr/bin/python3
"""FFCV side of bench/read.sh: write a .beton of the benchmark frames, or time
FFCV's Loader over it.

    read_ffcv.py write --root DATA --out FILE.beton --size 384
    read_ffcv.py read  --beton FILE.beton --batch 32 --workers 1 --epochs 5 --order random [--cold]

`write` stores every frame of DATA (capture runs, bench/gen_dataset.py) with
RGBImageField(write_mode="raw", max_resolution=SIZE): FFCV resizes each frame
so its longer side is SIZE (1920x1080 -> 384x216, cv2.INTER_AREA) and stores
the uint8 HWC pixels without compression, the fastest FFCV layout to read.
`read` runs a first epoch (numba compiles the pipeline then; timed apart:
first_samples, first_seconds), then times EPOCHS epochs of
Loader(SimpleRGBImageDecoder, ToTensor) and prints one JSON line: samples,
seconds, bytes (the image tensors handed out), cpu_seconds (the process's,
all threads). With --cold the .beton is dropped from the page cache
(bench/evict.py) before each timed epoch, outside the timing.

Needs Debian's python3-ffcv (and python3-opencv for `write`), through
/usr/bin/python3.
"""

import argparse
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import evict  # noqa: E402


def write(args):
    import cv2
    import numpy as np
    from ffcv.fields import IntField, RGBImageField
    from ffcv.writer import DatasetWriter

    paths = sorted(glob.glob(os.path.join(args.root, "*", "images", "*.jpg")))
    if not paths:
        sys.exit(f"read_ffcv.py: no frames under {args.root}")

    class Frames:
        def __len__(self):
            return len(paths)

        def __getitem__(self, i):
            bgr = cv2.imread(paths[i], cv2.IMREAD_COLOR)
            return np.ascontiguousarray(bgr[:, :, ::-1]), i

    fields = {"image": RGBImageField(write_mode="raw", max_resolution=args.size), "index": IntField()}
    DatasetWriter(args.out, fields, num_workers=args.workers).from_indexed_dataset(Frames())
    print(json.dumps({"frames": len(paths), "bytes": os.path.getsize(args.out)}))


def unmap_pages(loader):
    """Drop the pages of the .beton that FFCV's os_cache mapping holds from this
    process (MADV_DONTNEED; they stay in the page cache): posix_fadvise does not
    evict pages that a process maps, so without this a cold epoch would be warm.
    FFCV maps the file again as it reads."""
    import mmap

    mm = getattr(getattr(loader.memory_manager, "context", None), "mmap", None)
    raw = getattr(mm, "_mmap", None)
    if raw is not None:
        raw.madvise(mmap.MADV_DONTNEED)


def read(args):
    from ffcv.fields.decoders import IntDecoder, SimpleRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import ToTensor

    order = {"random": OrderOption.RANDOM, "sequential": OrderOption.SEQUENTIAL}[args.order]
    loader = Loader(args.beton, batch_size=args.batch, num_workers=args.workers, order=order, os_cache=not args.process_cache,
                    drop_last=True, seed=0,
                    pipelines={"image": [SimpleRGBImageDecoder(), ToTensor()], "index": [IntDecoder(), ToTensor()]})
    t0 = time.perf_counter()
    first_samples = 0
    for images, _index in loader:  # numba compiles the pipeline in this epoch
        first_samples += images.shape[0]
    first_seconds = time.perf_counter() - t0
    samples = nbytes = 0
    seconds = cpu = 0.0
    for _ in range(args.epochs):
        if args.cold:
            unmap_pages(loader)
            evict.evict([args.beton])
        c0, t0 = time.process_time(), time.perf_counter()
        for images, _index in loader:
            samples += images.shape[0]
            nbytes += images.numel() * images.element_size()
        seconds += time.perf_counter() - t0
        cpu += time.process_time() - c0
    print(json.dumps({"samples": samples, "seconds": seconds, "bytes": nbytes, "cpu_seconds": cpu,
                      "first_samples": first_samples, "first_seconds": first_seconds}))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("--root", required=True)
    w.add_argument("--out", required=True)
    w.add_argument("--size", type=int, default=384)
    w.add_argument("--workers", type=int, default=2)
    r = sub.add_parser("read")
    r.add_argument("--beton", required=True)
    r.add_argument("--batch", type=int, default=64)
    r.add_argument("--workers", type=int, default=1)
    r.add_argument("--epochs", type=int, default=5)
    r.add_argument("--order", choices=["random", "sequential"], default="random")
    r.add_argument("--cold", action="store_true", help="drop the .beton from the page cache before each timed epoch")
    r.add_argument("--process-cache", action="store_true", help="os_cache=False: FFCV reads the file itself each epoch")
    args = p.parse_args()
    write(args) if args.cmd == "write" else read(args)


if __name__ == "__main__":
    main()
