"""examples/train.py --resume across a change of world size: two processes (torch.distributed,
gloo on CPU) train with checkpoints and are killed (SIGKILL) after a few steps; one process
resumes from the last checkpoint to the end of the epoch. The samples trained on (each
step's, as train.py logged them before the step) up to the checkpoint, and after it, are
the epoch's order exactly once (reading.md, "Resuming")."""
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

import warehouse_etl
from warehouse_etl import _order
from tests._fixtures import PACKAGE, REPO, fixture

try:
    import torch
except ImportError:
    torch = None

SCRIPT = os.path.join(REPO, "examples", "train.py")


def read_log(path):
    """[(step, epoch, [index, ...])] of a --log-indices file."""
    out = []
    with open(path) as f:
        for line in f:
            step, epoch, *ids = line.split()
            out.append((int(step), int(epoch), [int(i) for i in ids]))
    return out


@unittest.skipIf(torch is None or not torch.distributed.is_available(), "no torch.distributed")
class ResumeWithAnotherWorldSize(unittest.TestCase):
    def test_two_processes_killed_then_one(self):
        fx = fixture(self, "demo")
        tmp = self.enterContext(tempfile.TemporaryDirectory(prefix="train-resume-"))
        ck = os.path.join(tmp, "ck.pt")
        common = ["--tensor-warehouse", fx["dir"], "--batch-size", "1", "--seed", "4", "--epochs", "1"]
        env = dict(os.environ, PYTHONPATH=PACKAGE, WORLD_SIZE="2", OMP_NUM_THREADS="1")
        procs = []
        for rank in range(2):
            with open(os.path.join(tmp, f"run1.rank{rank}.out"), "w") as log:
                procs.append(subprocess.Popen(
                    [sys.executable, SCRIPT, *common, "--checkpoint", ck, "--checkpoint-every", "1",
                     "--log-indices", os.path.join(tmp, "run1"), "--dist-init", "file://" + os.path.join(tmp, "init")],
                    env=dict(env, RANK=str(rank)), stdout=log, stderr=subprocess.STDOUT))
        # Kill both as soon as a checkpoint of step >= 2 exists (or they finished the epoch).
        deadline = time.monotonic() + 120
        try:
            while time.monotonic() < deadline:
                if os.path.exists(ck) and torch.load(ck)["step"] >= 2 or any(p.poll() is not None for p in procs):
                    break
                time.sleep(0.02)
            else:
                self.fail("no checkpoint within 120 s")
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGKILL)
                p.wait()
        outs = ""
        for r in range(2):
            with open(os.path.join(tmp, f"run1.rank{r}.out")) as f:
                outs += f.read()
        saved = torch.load(ck)
        self.assertEqual(saved["loader"]["world"], 2, outs)
        k = saved["step"]
        self.assertEqual(saved["loader"]["position"], 2 * k, outs)  # 2 ranks x batch 1 x k steps
        p = subprocess.run([sys.executable, SCRIPT, *common, "--resume", ck, "--log-indices", os.path.join(tmp, "run2")],
                           env=dict(env, WORLD_SIZE="1"), capture_output=True, text=True, timeout=120)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn(f"resumed at step {k}, epoch 0, position {2 * k} (saved with 2 process(es), now 1)", p.stdout)
        # The union: run 1's steps up to the checkpoint (later ones were lost with the kill), then run 2's.
        trained = []
        for rank in range(2):
            trained += [i for step, epoch, ids in read_log(os.path.join(tmp, f"run1.rank{rank}")) if step <= k
                        for i in ids]
        self.assertEqual(len(trained), 2 * k)
        after = read_log(os.path.join(tmp, "run2.rank0"))
        self.assertEqual([s for s, _, _ in after], list(range(k + 1, k + 1 + len(after))))
        trained += [i for _, epoch, ids in after for i in ids]
        with warehouse_etl.open(fx["dir"]) as wh:
            order = _order.epoch_order(len(wh), wh.shard_starts.tolist(), "global", 4, 0).tolist()
        self.assertEqual(sorted(trained), sorted(order), "not the epoch exactly once")
        self.assertEqual(len(trained), len(set(trained)))


if __name__ == "__main__":
    unittest.main()
