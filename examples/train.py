#!/usr/bin/python3
"""Train a small detector head on a tensor warehouse: the training contract end to end.

    go run ./cmd/warehouse-etl build --config configs/demo.jsonc     # once: builds out/demo
    PYTHONPATH=python /usr/bin/python3 examples/train.py --tensor-warehouse out/demo --steps 30

The warehouse is opened with every check of docs/format/reading.md (thresholds included),
batches come from warehouse_etl.torch.make_loader in the Go reader's order, images are
normalised on the device (a no-op for f16/f32 warehouses, which the build normalised), and
a small conv backbone predicts max_boxes boxes and their objectness: loss = masked L1 on
the boxes + BCE on the mask. Logs step, loss and samples/s. CPU is fine.

Exit codes: 0 trained; 1 a damaged warehouse; 2 usage, or no warehouse (the message says
how to build one); 3 the warehouse's validation summary exceeds its thresholds.
"""
import argparse
import os
import sys
import time

try:
    import warehouse_etl
except ImportError:  # a checkout without PYTHONPATH=python
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
    import warehouse_etl

import torch
import torch.nn.functional as F
from warehouse_etl.torch import Normalize, make_loader


class Detector(torch.nn.Module):
    """Conv backbone on a 4x downsampled image, then a head with max_boxes slots of
    (x0, y0, x1, y1, objectness)."""

    def __init__(self, channels, max_boxes):
        super().__init__()
        self.max_boxes = max_boxes
        self.backbone = torch.nn.Sequential(
            torch.nn.Conv2d(channels, 16, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(32, 64, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten())
        self.head = torch.nn.Linear(64 * 16, max_boxes * 5)

    def forward(self, images):
        x = F.avg_pool2d(images, 4) if min(images.shape[-2:]) >= 64 else images
        out = self.head(self.backbone(x)).view(-1, self.max_boxes, 5)
        return torch.sigmoid(out[..., :4]), out[..., 4]


def loss_fn(pred_boxes, logits, boxes, mask):
    """Masked L1 over the real boxes' coordinates + BCE of the objectness on the mask."""
    m = mask.unsqueeze(-1)
    box = (F.l1_loss(pred_boxes, boxes, reduction="none") * m).sum() / (4 * mask.sum()).clamp(min=1)
    obj = F.binary_cross_entropy_with_logits(logits, mask)
    return box + obj, box, obj


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    warehouse_etl.add_argument(ap)
    ap.add_argument("--steps", type=int, default=30, help="optimizer steps (default 30)")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--reader-threads", "--num-workers", dest="reader_threads", type=int, default=0,
                    help="reader threads that read batches ahead of the step (default 0; --num-workers: old name)")
    ap.add_argument("--seed", type=int, default=0, help="model init and batch order")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--ignore-thresholds", action="store_true")
    ap.add_argument("--config", metavar="NAME",
                    help="the config whose newest version to train on when several configs share the output root: "
                         "reads ROOT/latest-NAME instead of ROOT/latest (a config's name is its file name without "
                         "the extension, or its \"name\" key)")
    args = ap.parse_args(argv)
    path = args.tensor_warehouse
    if path and args.config:
        path = os.path.join(path, "latest-" + args.config)
    elif path and not os.path.exists(os.path.join(path, "manifest.json")):
        configs = sorted(n[len("latest-"):] for n in (os.listdir(path) if os.path.isdir(path) else [])
                         if n.startswith("latest-") and os.path.islink(os.path.join(path, n)))
        if len(configs) > 1:
            print(f"train.py: {path} holds versions of the configs {', '.join(configs)}; reading its latest "
                  f"({os.readlink(os.path.join(path, 'latest')) if os.path.islink(os.path.join(path, 'latest')) else '?'}); "
                  "--config NAME picks one", file=sys.stderr)
    hint = (f"build one first: {warehouse_etl.BUILD_COMMAND}\n"
            "(or with an installed binary: warehouse-etl build --config configs/demo.jsonc), "
            "then pass --tensor-warehouse out/demo")
    if not path:
        print(f"train.py: --tensor-warehouse PATH is required: training reads a tensor warehouse; {hint}",
              file=sys.stderr)
        return 2
    if not os.path.exists(path):
        print(f"train.py: no tensor warehouse at {path}; {hint}", file=sys.stderr)
        return 2
    try:
        wh = warehouse_etl.open(path, ignore_thresholds=args.ignore_thresholds)
        loader = make_loader(wh, args.batch_size, seed=args.seed, reader_threads=args.reader_threads)
    except warehouse_etl.ThresholdError as e:
        print(f"train.py: {e}\n(--ignore-thresholds overrides)", file=sys.stderr)
        return 3
    except warehouse_etl.WarehouseError as e:
        code = 2 if "neither a warehouse version" in str(e) else 1
        print(f"train.py: {e}" + (f"\n{hint}" if code == 2 else
                                   f"\nrun: warehouse-etl verify --tensor-warehouse {path} --full"), file=sys.stderr)
        return code
    except ValueError as e:  # a batch the warehouse cannot fill
        print(f"train.py: {e}", file=sys.stderr)
        return 2

    torch.manual_seed(args.seed)
    model = Detector(wh.layout.channels, wh.layout.max_boxes)
    norm = Normalize(wh)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    print(f"train.py: {wh}, {len(loader)} batches of {args.batch_size} per epoch", flush=True)
    step, epoch, samples, t0 = 0, 0, 0, time.perf_counter()
    while step < args.steps:
        loader.set_epoch(epoch)
        for batch in loader:
            images = norm(batch["images"]).float()
            pred_boxes, logits = model(images)
            loss, box, obj = loss_fn(pred_boxes, logits, batch["boxes"].float(), batch["mask"].float())
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            samples += images.shape[0]
            rate = samples / (time.perf_counter() - t0)
            print(f"step {step} epoch {epoch} loss {loss.item():.4f} (box {box.item():.4f} obj {obj.item():.4f}) "
                  f"{rate:.1f} samples/s", flush=True)
            if step >= args.steps:
                break
        epoch += 1
    print(f"train.py: {step} steps, {samples} samples in {time.perf_counter() - t0:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
