#!/usr/bin/python3
"""The OpenCV + NumPy pipeline warehouse-etl is measured against.

    reference.py --root DATASET --out FILE [--size 640] [--procs N] [--interp area|linear]

It does what a user would otherwise script for the same output: list the
capture runs (natural order) and their label JSON files (frame order), read
each label, decode its image with cv2.imread (libjpeg-turbo / libpng; EXIF
orientation applied, alpha dropped), letterbox it to SIZE x SIZE with
cv2.resize and the same integer size/padding rule as warehouse-etl, convert
to RGB, CHW, float16 in [0, 1], and write every tensor into ONE file at
offset index * tensor_bytes (os.pwrite, so a process pool needs no ordering
step and sends no tensors between processes).

Resize: INTER_AREA by default, OpenCV's antialiased downscale, i.e. the same
work as warehouse-etl's antialiased triangle filter (INTER_LINEAR samples
2x2 pixels and aliases when shrinking by more than 2x; --interp linear
measures it anyway).

--procs 1 runs in this process; N > 1 uses a multiprocessing pool of N
worker processes. OpenCV's own thread pool is switched off
(cv2.setNumThreads(1)) so N processes use N cores, like N warehouse-etl
workers.
"""

import argparse
import json
import os
import re
import sys
from multiprocessing import Pool

import cv2
import numpy as np

INTERP = {"area": cv2.INTER_AREA, "linear": cv2.INTER_LINEAR}


def natural_key(name):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def list_images(root):
    """Image paths in warehouse-etl's scan order: runs naturally, frames by file name."""
    paths = []
    for run in sorted((d for d in os.listdir(root) if d.startswith("run_")), key=natural_key):
        labels = os.path.join(root, run, "labels")
        for name in sorted(os.listdir(labels), key=natural_key):
            with open(os.path.join(labels, name)) as f:
                lab = json.load(f)
            if lab.get("image_present", True) and lab.get("image"):
                paths.append(os.path.join(root, run, lab["image"]))
    return paths


def letterbox_size(w, h, size):
    """warehouse-etl's letterbox rule in integers: the limiting side becomes
    size, the other round-half-up(side * scale)."""
    if size * h <= size * w:
        return size, max(1, min(size, (2 * h * size + w) // (2 * w)))
    return max(1, min(size, (2 * w * size + h) // (2 * h))), size


def letterbox(img, size, interp):
    """img (BGR uint8, HxWx3, as cv2.imread gives it) letterboxed to size x size by
    warehouse-etl's rule: the RGB uint8 HxWx3 canvas (zero padding) and the image's
    place in it, (px, py, nw, nh)."""
    h, w = img.shape[:2]
    nw, nh = letterbox_size(w, h, size)
    small = cv2.resize(img, (nw, nh), interpolation=interp)
    small = cv2.cvtColor(small, cv2.COLOR_BGR2RGB)
    canvas = np.zeros((size, size, 3), np.uint8)
    px, py = (size - nw) // 2, (size - nh) // 2
    canvas[py:py + nh, px:px + nw] = small
    return canvas, (px, py, nw, nh)


class Worker:
    def __init__(self, out, size, interp):
        cv2.setNumThreads(1)
        self.fd = os.open(out, os.O_WRONLY)
        self.size, self.interp = size, INTERP[interp]
        self.nbytes = 3 * size * size * 2

    def tensor(self, path):
        img = cv2.imread(path, cv2.IMREAD_COLOR)  # BGR uint8, HxWx3
        if img is None:
            raise RuntimeError(f"cannot decode {path}")
        canvas, _ = letterbox(img, self.size, self.interp)
        chw = canvas.transpose(2, 0, 1).astype(np.float32) / 255.0
        return chw.astype(np.float16)

    def run(self, batch):
        for index, path in batch:
            os.pwrite(self.fd, self.tensor(path).tobytes(), index * self.nbytes)
        return len(batch)


_worker = None


def _init(out, size, interp):
    global _worker
    _worker = Worker(out, size, interp)


def _run(batch):
    return _worker.run(batch)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--size", type=int, default=640)
    ap.add_argument("--procs", type=int, default=1)
    ap.add_argument("--interp", choices=sorted(INTERP), default="area")
    a = ap.parse_args()

    items = list(enumerate(list_images(a.root)))
    with open(a.out, "wb") as f:
        f.truncate(len(items) * 3 * a.size * a.size * 2)
    if a.procs == 1:
        done = Worker(a.out, a.size, a.interp).run(items)
    else:
        batches = [items[i:i + 8] for i in range(0, len(items), 8)]
        with Pool(a.procs, initializer=_init, initargs=(a.out, a.size, a.interp)) as pool:
            done = sum(pool.imap_unordered(_run, batches))
    print(f"{done} tensors of 3x{a.size}x{a.size} f16 -> {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
