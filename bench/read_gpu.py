#!/usr/bin/env python3
"""The torch loader feeding a GPU: samples/s delivered to CUDA (images normalised on
the GPU, boxes and masks moved), interleaved in one process, against the pipeline a
team would otherwise write (a DataLoader whose worker processes decode the JPEGs with
OpenCV and letterbox them, pin_memory=True). Prints one JSON line per measurement and
a table of medians at the end.

    read_gpu.py --tensor-warehouse OUT/u8 --jpeg-root DATA [--threads 0 1 2 4]
                [--workers 4 8 16] [--rounds 3] [--epochs 2] [--model resnet50]

Ours, per reader-thread count, three ways of reaching the GPU:
  pageable    make_loader(pin_memory=False); .to(device, non_blocking=True) from
              ordinary memory (the copy waits for the GPU);
  pin-thread  the DataLoader's own pinning: WarehouseLoader(pin_memory=True) over a
              dataset that reads into ordinary memory, so its pinning thread copies
              every batch once more (what make_loader(pin_memory=True) did before);
  pinned      make_loader(pin_memory=True): batches read straight into page-locked
              memory.
The reference decodes 1080p JPEGs (cv2.imread), letterboxes them to SIZE x SIZE
(cv2.resize INTER_AREA, warehouse-etl's size rule: bench/reference.py's letterbox), stacks uint8 CHW tensors and padded boxes, with N worker
processes (cv2.setNumThreads(1) in each), persistent workers, pin_memory=True.

Each loader reads one untimed epoch first (ours checks every sample's CRC-32C then;
the reference starts its workers), then EPOCHS timed epochs; the GPU is synchronised
at the end of each. With --model, a training step (torchvision resnet50 at SIZE,
channels_last, bf16 autocast, SGD) runs per batch, and the table shows samples/s and
the share of the epoch spent waiting for the loader, beside the same steps on one
batch kept on the GPU (the GPU's own rate).

--unchecked adds our pinned loader with verify_samples=False, whose first epoch reads
without the checks: the table's `first` of both gives the cost of checking.

--check reads the warehouse once pinned with non-blocking copies, dropping each batch
right after its copy is queued, and compares every batch on the GPU with an unpinned
read: a pinned buffer reused before its copy finished would show here.

--device cpu runs everything on the CPU (a dry run of the script where CUDA is
missing; the numbers then mean nothing). Run with PYTHONPATH=python.
"""

import argparse
import glob
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

import warehouse_etl
from warehouse_etl.torch import Normalize, WarehouseBatchSampler, WarehouseDataset, WarehouseLoader, make_loader

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402  (bench/reference.py: warehouse-etl's letterbox rule with OpenCV)


class JpegLetterbox(Dataset):
    """The reference: capture-run frames (RUN/images/*.jpg, RUN/labels/*.json) decoded
    and letterboxed per sample in the DataLoader's workers."""

    def __init__(self, root, size, max_boxes):
        self.images = sorted(glob.glob(os.path.join(root, "*", "images", "*.jpg")))
        if not self.images:
            raise SystemExit(f"read_gpu: no {root}/*/images/*.jpg")
        self.size, self.max_boxes = size, max_boxes

    def __len__(self):
        return len(self.images)

    def __getitem__(self, i):
        import cv2
        path = self.images[i]
        out, (x0, y0, nw, nh) = reference.letterbox(cv2.imread(path, cv2.IMREAD_COLOR), self.size, cv2.INTER_AREA)
        boxes = np.zeros((self.max_boxes, 4), dtype=np.float32)
        mask = np.zeros(self.max_boxes, dtype=np.float32)
        label = os.path.join(os.path.dirname(os.path.dirname(path)), "labels",
                             os.path.splitext(os.path.basename(path))[0] + ".json")
        if os.path.exists(label):
            with open(label) as f:
                got = json.load(f).get("polyp_labels", [])[:self.max_boxes]
            for k, b in enumerate(got):
                x0n, y0n, x1n, y1n = b["bbox_norm"]
                boxes[k] = [(x0 + x0n * nw) / self.size, (y0 + y0n * nh) / self.size,
                            (x0 + x1n * nw) / self.size, (y0 + y1n * nh) / self.size]
                mask[k] = 1
        return {"images": torch.from_numpy(np.ascontiguousarray(out.transpose(2, 0, 1))),
                "boxes": torch.from_numpy(boxes), "mask": torch.from_numpy(mask)}


def _worker_init(_):
    import cv2
    cv2.setNumThreads(1)


def reference_loader(args, workers):
    ds = JpegLetterbox(args.jpeg_root, args.size, args.max_boxes)
    g = torch.Generator()
    g.manual_seed(0)
    return DataLoader(ds, batch_size=args.batch, shuffle=True, drop_last=True, num_workers=workers,
                      pin_memory=args.device == "cuda", persistent_workers=workers > 0, prefetch_factor=2,
                      worker_init_fn=_worker_init, generator=g)


def our_loader(args, threads, how, verify=True):
    if how == "pin-thread":  # the DataLoader's pinning thread over ordinary batches
        ds = WarehouseDataset(args.tensor_warehouse, reader_threads=threads)
        sampler = WarehouseBatchSampler(ds.wh, args.batch, seed=0, rank=0, world=1, shuffle="global")
        return WarehouseLoader(ds, batch_size=None, sampler=sampler, num_workers=0,
                               pin_memory=args.device == "cuda")
    return make_loader(args.tensor_warehouse, args.batch, seed=0, rank=0, world=1, shuffle="global",
                       reader_threads=threads, pin_memory=how == "pinned" and args.device == "cuda",
                       verify_samples=verify)


def close(loader):
    ds = loader.dataset
    if hasattr(ds, "close"):
        ds.close()


class Step:
    """What the training loop does with a batch on the device: normalise the images,
    and with a model, one bf16 training step."""

    def __init__(self, args, norm):
        self.device, self.norm = torch.device(args.device), norm
        self.model = self.opt = None
        if args.model:
            import torchvision
            self.model = getattr(torchvision.models, args.model)(num_classes=16).to(self.device)
            self.model = self.model.to(memory_format=torch.channels_last)
            self.opt = torch.optim.SGD(self.model.parameters(), lr=1e-3, momentum=0.9)

    def __call__(self, images, boxes, mask):
        x = self.norm(images)
        if self.model is None:
            return
        x = x.contiguous(memory_format=torch.channels_last)
        with torch.autocast(self.device.type, dtype=torch.bfloat16):
            logits = self.model(x)
        # A loss that touches the labels, so they are used on the device.
        loss = logits.float().mean() + (boxes.float() * mask.float()[..., None]).mean() * 0
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def run_epoch(loader, step, epoch):
    """samples, seconds, seconds spent waiting for the loader."""
    if hasattr(loader, "set_epoch"):
        loader.set_epoch(epoch)
    dev = step.device
    samples, wait = 0, 0.0
    t0 = time.perf_counter()
    it = iter(loader)
    while True:
        w0 = time.perf_counter()
        try:
            b = next(it)
        except StopIteration:
            break
        wait += time.perf_counter() - w0
        images = b["images"].to(dev, non_blocking=True)
        boxes = b["boxes"].to(dev, non_blocking=True)
        mask = b["mask"].to(dev, non_blocking=True)
        del b
        step(images, boxes, mask)
        samples += images.shape[0]
    sync(dev)
    return samples, time.perf_counter() - t0, wait


def gpu_only(args, step, samples):
    """The steps alone on one batch kept on the device: the GPU's own rate."""
    dev = step.device
    b = args.batch
    images = torch.randint(0, 256, (b, 3, args.size, args.size), dtype=torch.uint8, device=dev)
    boxes = torch.rand(b, args.max_boxes, 4, device=dev)
    mask = torch.ones(b, args.max_boxes, device=dev)
    for _ in range(3):
        step(images, boxes, mask)
    sync(dev)
    t0 = time.perf_counter()
    n = 0
    while n < samples:
        step(images, boxes, mask)
        n += b
    sync(dev)
    return n, time.perf_counter() - t0, 0.0


def check_pinned(args):
    """Every batch read pinned and copied without waiting equals an unpinned read."""
    dev = torch.device(args.device)
    got = []
    loader = make_loader(args.tensor_warehouse, args.batch, seed=3, rank=0, world=1, shuffle="global",
                         reader_threads=2, pin_memory=args.device == "cuda")
    for b in loader:
        if args.device == "cuda" and not b["images"].is_pinned():
            raise SystemExit("read_gpu --check: pin_memory=True handed out a batch that is not pinned")
        got.append((b["index"].clone(), b["images"].to(dev, non_blocking=True),
                    b["boxes"].to(dev, non_blocking=True)))
        del b  # the batch's memory may be reused from here on: only its copy's completion may allow it
    close(loader)
    sync(dev)
    ref = warehouse_etl.open(args.tensor_warehouse)
    bad = 0
    for index, images, boxes in got:
        want = ref.read_batch(index.numpy())
        bad += int(not torch.equal(images.cpu(), torch.from_numpy(want["images"])))
        bad += int(not torch.equal(boxes.cpu(), torch.from_numpy(want["boxes"])))
    ref.close()
    print(json.dumps({"check": "pinned non-blocking copies", "batches": len(got), "mismatches": bad}), flush=True)
    if bad:
        raise SystemExit(f"read_gpu --check: {bad} tensors differ from an unpinned read")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    warehouse_etl.add_argument(p)
    p.add_argument("--jpeg-root", required=True, help="the capture runs the warehouse was built from")
    p.add_argument("--size", type=int, default=384)
    p.add_argument("--max-boxes", type=int, default=16)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--threads", type=int, nargs="*", default=[0, 1, 2, 4], help="our reader threads")
    p.add_argument("--modes", nargs="*", default=["pageable", "pin-thread", "pinned"])
    p.add_argument("--workers", type=int, nargs="*", default=[4, 8, 16], help="reference worker processes")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--model", default="", help="a torchvision model to train per batch (e.g. resnet50)")
    p.add_argument("--model-threads", type=int, nargs="*", default=[1, 2], help="our reader threads with --model")
    p.add_argument("--model-workers", type=int, nargs="*", default=[8, 16], help="reference workers with --model")
    p.add_argument("--check", action="store_true")
    p.add_argument("--unchecked", action="store_true",
                   help="also read pinned with verify_samples=False (a first epoch without the checks)")
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = p.parse_args()
    dev = torch.device(args.device)
    norm = Normalize(args.tensor_warehouse).to(dev)
    if args.device == "cuda":
        print(json.dumps({"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                          "cpus": os.cpu_count(), "crc32c": warehouse_etl._crc32c.BACKEND}), flush=True)
    if args.check:
        check_pinned(args)

    plain = Step(argparse.Namespace(**{**vars(args), "model": ""}), norm)
    configs = [(f"ours {how} t{t}", lambda t=t, how=how: our_loader(args, t, how), plain)
               for t in args.threads for how in args.modes]
    if args.unchecked:
        configs += [(f"ours pinned t{t} unchecked", lambda t=t: our_loader(args, t, "pinned", verify=False), plain)
                    for t in args.threads]
    configs += [(f"jpeg w{w}", lambda w=w: reference_loader(args, w), plain) for w in args.workers]
    if args.model:
        train = Step(args, norm)
        configs += [(f"{args.model} ours pinned t{t}", lambda t=t: our_loader(args, t, "pinned"), train)
                    for t in args.model_threads]
        configs += [(f"{args.model} jpeg w{w}", lambda w=w: reference_loader(args, w), train)
                    for w in args.model_workers]
        configs.append((f"{args.model} gpu only", None, train))
    results = {name: [] for name, _, _ in configs}
    first = {name: [] for name, _, _ in configs}
    for r in range(args.rounds):
        for name, make, step in configs:
            if make is None:
                s, sec, _ = gpu_only(args, step, 64 * args.batch)
                results[name].append((s / sec, 0.0))
                print(json.dumps({"round": r, "name": name, "samples": s, "seconds": sec}), flush=True)
                continue
            loader = make()
            s, sec, _ = run_epoch(loader, step, 0)  # checks (ours) or worker start-up (reference)
            first[name].append(s / sec)
            for e in range(1, args.epochs + 1):
                s, sec, wait = run_epoch(loader, step, e)
                results[name].append((s / sec, wait / sec))
                print(json.dumps({"round": r, "name": name, "epoch": e, "samples": s, "seconds": sec,
                                  "wait": wait}), flush=True)
            close(loader)
            del loader
    print(f"\n{'loader':<32} {'samples/s':>10} {'range':>17} {'first':>8} {'waiting':>8}")
    for name, _, _ in configs:
        rates = [x for x, _ in results[name]]
        waits = [w for _, w in results[name]]
        fr = f"{statistics.median(first[name]):8.0f}" if first[name] else f"{'':8}"
        print(f"{name:<32} {statistics.median(rates):10.0f} {min(rates):8.0f}-{max(rates):<8.0f} {fr} "
              f"{100 * statistics.median(waits):7.1f}%")
    med = {name: statistics.median([x for x, _ in v]) for name, v in results.items()}

    def ratio(a, b):
        if a in med and b in med:
            print(f"{a} / {b}: {med[a] / med[b]:.2f}x")
    print()
    for t in args.threads:
        if args.unchecked and f"ours pinned t{t}" in first and first[f"ours pinned t{t} unchecked"]:
            a, b = statistics.median(first[f"ours pinned t{t}"]), statistics.median(first[f"ours pinned t{t} unchecked"])
            print(f"first epoch, checked / unchecked, pinned t{t}: {a / b:.2f}x")
        ratio(f"ours pinned t{t}", f"ours pin-thread t{t}")
        ratio(f"ours pinned t{t}", f"ours pageable t{t}")
    for t in args.threads:
        for w in args.workers:
            ratio(f"ours pinned t{t}", f"jpeg w{w}")


if __name__ == "__main__":
    sys.exit(main())
