#!/usr/bin/python3
"""Train a small detector head on a tensor warehouse: the training contract end to end.

    go run ./cmd/warehouse-etl build --config configs/demo.jsonc     # once: builds out/demo
    PYTHONPATH=python /usr/bin/python3 examples/train.py --tensor-warehouse out/demo --steps 30

The warehouse is opened with every check of docs/format/reading.md (thresholds included),
batches come from warehouse_etl.torch.make_loader in the Go reader's order, images are
normalised on the device (a no-op for f16/f32 warehouses, which the build normalised), and
a small conv backbone predicts max_boxes boxes and their objectness: loss = masked L1 on
the boxes + BCE on the mask. Logs step, loss and samples/s. CPU is fine; with CUDA
(--device, default cuda where torch sees a GPU, cuda:LOCAL_RANK under torchrun) the loader
reads each batch straight into page-locked memory (make_loader(pin_memory=True)) and the
batch goes to the GPU with non-blocking copies, normalised there.

Preemptible and elastic: --checkpoint FILE saves the model, the optimizer and the loader's
state (docs/format/reading.md, "Resuming") every --checkpoint-every steps, atomically;
--resume FILE continues from one, with the same or another number of processes, exactly
where the epoch stopped. Data parallel when started with WORLD_SIZE > 1 in the environment
(torchrun, or RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT; --dist-init file:///PATH instead of
the address): torch.distributed with the gloo backend (nccl on GPUs) and DistributedDataParallel.

    torchrun --nproc_per_node 2 examples/train.py --tensor-warehouse out/demo --checkpoint ck.pt
    # killed; later, on one process:
    PYTHONPATH=python /usr/bin/python3 examples/train.py --tensor-warehouse out/demo --resume ck.pt

--log-indices FILE writes "step epoch index..." per batch (FILE.rankR), the samples each
step trained on; --mix PATH=WEIGHT (repeated) trains on a mixture of warehouses.
--tensor-warehouse s3://BUCKET/PREFIX (a root published by `build` to S3, or .../v<id>)
trains through the node-local cache (python/README.md, "Training from S3").

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
    ap.add_argument("--steps", type=int, help="optimizer steps in all, a resumed run's included (default 30, "
                    "or unlimited with --epochs)")
    ap.add_argument("--epochs", type=int, help="stop at the end of this many epochs (a resumed run's included)")
    ap.add_argument("--checkpoint", metavar="FILE", help="save model, optimizer and loader state here (atomically)")
    ap.add_argument("--checkpoint-every", type=int, default=10, metavar="STEPS", help="default 10, and at the end")
    ap.add_argument("--resume", metavar="CHECKPOINT", help="continue from this checkpoint (any number of processes)")
    ap.add_argument("--log-indices", metavar="FILE", help="append 'step epoch index...' per batch to FILE.rankR")
    ap.add_argument("--dist-init", default="env://", help="torch.distributed init method when WORLD_SIZE > 1 "
                    "(default env://; file:///PATH needs no port)")
    ap.add_argument("--mix", action="append", default=[], metavar="PATH=WEIGHT",
                    help="train on a mixture of warehouses of one layout (repeat; instead of --tensor-warehouse)")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--reader-threads", "--num-workers", dest="reader_threads", type=int, default=0,
                    help="reader threads that read batches ahead of the step (default 0; --num-workers: old name)")
    ap.add_argument("--seed", type=int, default=0, help="model init and batch order")
    ap.add_argument("--device", help="cpu, cuda or cuda:N (default: cuda where torch sees a GPU, "
                    "cuda:LOCAL_RANK under torchrun, else cpu)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--ignore-thresholds", action="store_true")
    ap.add_argument("--config", metavar="NAME",
                    help="the config whose newest version to train on when several configs share the output root: "
                         "reads ROOT/latest-NAME instead of ROOT/latest (a config's name is its file name without "
                         "the extension, or its \"name\" key)")
    args = ap.parse_args(argv)
    if args.steps is None:
        args.steps = 30 if args.epochs is None else sys.maxsize
    if args.epochs is None:
        args.epochs = sys.maxsize
    mix = []
    for spec in args.mix:
        p, _, w = spec.rpartition("=")
        try:
            mix.append((p, float(w)))
        except ValueError:
            ap.error(f"--mix {spec}: want PATH=WEIGHT")
    if mix and not args.tensor_warehouse:
        args.tensor_warehouse = mix[0][0]
    path = args.tensor_warehouse
    s3 = bool(path) and path.startswith("s3://")  # opened as it is: the reader resolves the pointer
    if path and args.config:
        path = path.rstrip("/") + "/latest-" + args.config if s3 else os.path.join(path, "latest-" + args.config)
    elif path and not s3 and not os.path.exists(os.path.join(path, "manifest.json")):
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
    if not s3 and not os.path.exists(path):
        print(f"train.py: no tensor warehouse at {path}; {hint}", file=sys.stderr)
        return 2
    device = torch.device(args.device or (f"cuda:{os.environ.get('LOCAL_RANK', '0')}" if torch.cuda.is_available()
                                          else "cpu"))
    if device.type == "cuda" and not torch.cuda.is_available():
        print(f"train.py: --device {args.device}: this torch sees no CUDA device", file=sys.stderr)
        return 2
    rank, world = init_distributed(args.dist_init, "nccl" if device.type == "cuda" else "gloo")
    pin = device.type == "cuda"  # batches read into page-locked memory, copied to the GPU without waiting
    try:
        if mix:
            loader = make_loader(mix, args.batch_size, seed=args.seed, reader_threads=args.reader_threads,
                                 ignore_thresholds=args.ignore_thresholds, pin_memory=pin)
            wh = loader.warehouse.warehouses[0]
        else:
            wh = warehouse_etl.open(path, ignore_thresholds=args.ignore_thresholds)
            loader = make_loader(wh, args.batch_size, seed=args.seed, reader_threads=args.reader_threads,
                                 pin_memory=pin)
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
    model = Detector(wh.layout.channels, wh.layout.max_boxes).to(device)
    norm = Normalize(wh).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    step = epoch = 0
    if args.resume:
        try:
            ck = torch.load(args.resume, map_location=device)
            model.load_state_dict(ck["model"])
            opt.load_state_dict(ck["optimizer"])
            loader.load_state_dict(ck["loader"])  # refuses another warehouse version
        except (OSError, KeyError, RuntimeError, warehouse_etl.WarehouseError) as e:
            print(f"train.py: --resume {args.resume}: {e}", file=sys.stderr)
            return 2
        step, epoch = ck["step"], loader.epoch
        st = ck["loader"]
        print(f"train.py: resumed at step {step}, epoch {epoch}, position {st['position']} (saved with "
              f"{st['world']} process(es), now {world})", flush=True)
    if world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device] if pin else None)
    log = open(f"{args.log_indices}.rank{rank}", "a") if args.log_indices else None
    # A resumed loader's len() is what is left of the epoch it resumes in.
    print(f"train.py: {loader.warehouse}, {len(loader)} batches of {args.batch_size} "
          + (f"left in epoch {epoch}" if args.resume else "per epoch")
          + (f" on rank {rank} of {world}" if world > 1 else "") + f", on {device}", flush=True)
    samples, t0 = 0, time.perf_counter()
    while step < args.steps and epoch < args.epochs:
        loader.set_epoch(epoch)
        for batch in loader:
            if log is not None:  # before the step: a checkpoint of this step implies the line
                ids = batch["index"].tolist()
                if "warehouse" in batch:
                    ids = [f"{w}:{i}" for w, i in zip(batch["warehouse"].tolist(), ids)]
                n = len(ids) - batch["repeats"]
                log.write(f"{step + 1} {epoch} {' '.join(map(str, ids[:n]))}\n")
                log.flush()
            images = norm(batch["images"].to(device, non_blocking=pin)).float()
            boxes = batch["boxes"].to(device, non_blocking=pin).float()
            mask = batch["mask"].to(device, non_blocking=pin).float()
            pred_boxes, logits = model(images)
            loss, box, obj = loss_fn(pred_boxes, logits, boxes, mask)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            samples += images.shape[0]
            rate = samples / (time.perf_counter() - t0)
            print(f"step {step} epoch {epoch} loss {loss.item():.4f} (box {box.item():.4f} obj {obj.item():.4f}) "
                  f"{rate:.1f} samples/s", flush=True)
            if args.checkpoint and step % args.checkpoint_every == 0:
                save_checkpoint(args.checkpoint, model, opt, loader, step, rank)
            if step >= args.steps:
                break
        else:
            epoch += 1
            continue
        break
    if args.checkpoint:
        save_checkpoint(args.checkpoint, model, opt, loader, step, rank)
    print(f"train.py: {step} steps, {samples} samples in {time.perf_counter() - t0:.2f} s", flush=True)
    if world > 1:
        torch.distributed.destroy_process_group()
    return 0


def init_distributed(init_method, backend):
    """(rank, world): torch.distributed (gloo on the CPU, nccl on GPUs) when WORLD_SIZE > 1,
    else (0, 1)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return 0, 1
    rank = int(os.environ["RANK"])
    torch.distributed.init_process_group(backend, init_method=init_method, rank=rank, world_size=world)
    return rank, world


def save_checkpoint(path, model, opt, loader, step, rank):
    """Rank 0 writes model, optimizer and loader state (the same on every rank) to a
    temporary file and renames it over ``path``: a kill leaves the old or the new one."""
    if rank != 0:
        return
    m = model.module if hasattr(model, "module") else model
    tmp = f"{path}.tmp{os.getpid()}"
    torch.save({"model": m.state_dict(), "optimizer": opt.state_dict(), "loader": loader.state_dict(),
                "step": step}, tmp)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
