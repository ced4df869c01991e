#!/usr/bin/python3
"""Train a tiny policy head on an action window from an episode warehouse.

    go run ./cmd/warehouse-etl build --config configs/wshard.jsonc     # once: builds out/wshard
    PYTHONPATH=python /usr/bin/python3 examples/train_policy.py --tensor-warehouse out/wshard --steps 40

Each sample is one step of a recorded episode. The loader gathers, by (episode, step) and
whatever the shuffle, the next ``--horizon`` actions (``action/ctrl`` at steps 0..H-1: an
action chunk) and the last three proprioception readings (``signal/joint_pos`` at steps
-2, -1, 0), each with a validity mask: a step past the episode's ends, or a frame the build
skipped, is masked and padded with the nearest kept frame (as LeRobot pads). The inputs
and targets are normalised with the statistics the build recorded (manifest
``extra_stats``: no second pass over the data): proprioception by mean/std, actions mapped
from [q01, q99] to [-1, 1]. An MLP over the image (pooled to 8x8) and the proprioception
window predicts the action chunk; the loss is the MSE over the valid action steps only.
Logs step, loss and samples/s. CPU is fine.

Exit codes: 0 trained; 1 a damaged warehouse; 2 usage, no warehouse, or one without
episode windows (the message says how to build one); 3 the warehouse's validation summary
exceeds its thresholds.
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

ACTION, STATE = "action/ctrl", "signal/joint_pos"
BUILD = "go run ./cmd/warehouse-etl build --config configs/wshard.jsonc"


class PolicyHead(torch.nn.Module):
    """MLP: (pooled image, proprioception window, its mask) -> horizon x action_dim."""

    def __init__(self, image_features, state_features, horizon, action_dim):
        super().__init__()
        self.horizon, self.action_dim = horizon, action_dim
        self.net = torch.nn.Sequential(
            torch.nn.Linear(image_features + state_features, 128), torch.nn.ReLU(),
            torch.nn.Linear(128, 128), torch.nn.ReLU(),
            torch.nn.Linear(128, horizon * action_dim))

    def forward(self, images, state, state_mask):
        x = torch.cat([F.adaptive_avg_pool2d(images, 8).flatten(1), state.flatten(1), state_mask.float()], dim=1)
        return self.net(x).view(-1, self.horizon, self.action_dim)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    warehouse_etl.add_argument(ap, help=f"an episode warehouse with {ACTION} and {STATE} extras "
                                        f"(build the demo with: {BUILD})")
    ap.add_argument("--steps", type=int, default=40, help="optimizer steps (default 40)")
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--horizon", type=int, default=4, help="actions predicted per sample (default 4)")
    ap.add_argument("--seed", type=int, default=0, help="model init and batch order")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--ignore-thresholds", action="store_true")
    args = ap.parse_args(argv)
    if not args.tensor_warehouse or not os.path.exists(args.tensor_warehouse):
        print(f"train_policy.py: no tensor warehouse at {args.tensor_warehouse!r}; build the WShard demo first: "
              f"{BUILD}, then pass --tensor-warehouse out/wshard", file=sys.stderr)
        return 2
    if args.horizon < 1:
        print("train_policy.py: --horizon must be at least 1", file=sys.stderr)
        return 2
    windows = {ACTION: range(0, args.horizon), STATE: [-2, -1, 0]}
    try:
        wh = warehouse_etl.open(args.tensor_warehouse, ignore_thresholds=args.ignore_thresholds)
        loader = make_loader(wh, args.batch_size, seed=args.seed, windows=windows)
        action_stats, state_stats = warehouse_etl.extra_stats(wh, ACTION), warehouse_etl.extra_stats(wh, STATE)
    except warehouse_etl.ThresholdError as e:
        print(f"train_policy.py: {e}\n(--ignore-thresholds overrides)", file=sys.stderr)
        return 3
    except warehouse_etl.WarehouseError as e:
        code = 2 if "episode" in str(e) or "extra_stats" in str(e) or "neither a warehouse version" in str(e) else 1
        print(f"train_policy.py: {e}" + (f"\nbuild an episode warehouse: {BUILD}" if code == 2 else ""),
              file=sys.stderr)
        return code
    except ValueError as e:  # no such extra, or a batch the warehouse cannot fill
        print(f"train_policy.py: {e}", file=sys.stderr)
        return 2

    t = lambda a: torch.tensor(a, dtype=torch.float32)
    s_mean, s_std = t(state_stats["mean"]), t(state_stats["std"]).clamp(min=1e-6)
    a_lo, a_hi = t(action_stats["q01"]), t(action_stats["q99"])
    a_scale = (a_hi - a_lo).clamp(min=1e-6) / 2
    torch.manual_seed(args.seed)
    c = wh.layout.channels
    model = PolicyHead(c * 64, 3 * len(s_mean) + 3, args.horizon, len(a_lo))
    norm = Normalize(wh)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    print(f"train_policy.py: {wh}, {len(loader)} batches of {args.batch_size} per epoch; "
          f"{ACTION} q01 {a_lo.tolist()} q99 {a_hi.tolist()}", flush=True)
    step, epoch, samples, t0 = 0, 0, 0, time.perf_counter()
    while step < args.steps:
        loader.set_epoch(epoch)
        for batch in loader:
            images = norm(batch["images"]).float()
            state = (batch["windows"][STATE] - s_mean) / s_std
            target = (batch["windows"][ACTION] - a_lo) / a_scale - 1
            valid = batch["window_mask"][ACTION].unsqueeze(-1).float()
            pred = model(images, state, batch["window_mask"][STATE])
            loss = ((pred - target) ** 2 * valid).sum() / (valid.sum() * target.shape[-1]).clamp(min=1)
            opt.zero_grad()
            loss.backward()
            opt.step()
            step += 1
            samples += images.shape[0]
            rate = samples / (time.perf_counter() - t0)
            print(f"step {step} epoch {epoch} loss {loss.item():.4f} valid {int(valid.sum())}/{valid.numel()} "
                  f"{rate:.1f} samples/s", flush=True)
            if step >= args.steps:
                break
        epoch += 1
    print(f"train_policy.py: {step} steps, {samples} samples in {time.perf_counter() - t0:.2f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
