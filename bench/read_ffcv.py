#!/usr/bin/python3
"""FFCV side of bench/read.sh: write a .beton of the benchmark frames, or time
FFCV's Loader over it.

    read_ffcv.py write --root DATA --out FILE.beton --size 384
    read_ffcv.py read  --beton FILE.beton --batch 64 --workers 1 --epochs 5 --order random

`write` stores every frame of DATA (capture runs, bench/gen_dataset.py) with
RGBImageField(write_mode="raw", max_resolution=SIZE): FFCV resizes each frame
so its longer side is SIZE (1920x1080 -> 384x216, cv2.INTER_AREA) and stores
the uint8 HWC pixels without compression, the fastest FFCV layout to read.
`read` runs one warm-up epoch (numba compiles the pipeline), then times
EPOCHS epochs of Loader(SimpleRGBImageDecoder, ToTensor) and prints one JSON
line: samples, seconds, bytes (the image tensors handed out).

Needs Debian's python3-ffcv (and python3-opencv for `write`), through
/usr/bin/python3.
"""

import argparse
import glob
import json
import os
import sys
import time


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


def read(args):
    from ffcv.fields.decoders import IntDecoder, SimpleRGBImageDecoder
    from ffcv.loader import Loader, OrderOption
    from ffcv.transforms import ToTensor

    order = {"random": OrderOption.RANDOM, "sequential": OrderOption.SEQUENTIAL}[args.order]
    loader = Loader(args.beton, batch_size=args.batch, num_workers=args.workers, order=order, os_cache=True,
                    drop_last=True, seed=0,
                    pipelines={"image": [SimpleRGBImageDecoder(), ToTensor()], "index": [IntDecoder(), ToTensor()]})
    for _ in loader:  # warm-up: numba compiles the pipeline
        pass
    samples = nbytes = 0
    t0 = time.perf_counter()
    for _ in range(args.epochs):
        for images, _index in loader:
            samples += images.shape[0]
            nbytes += images.numel() * images.element_size()
    secs = time.perf_counter() - t0
    print(json.dumps({"samples": samples, "seconds": secs, "bytes": nbytes}))


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
    args = p.parse_args()
    write(args) if args.cmd == "write" else read(args)


if __name__ == "__main__":
    main()
