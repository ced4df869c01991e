"""examples/train.py: trains for a few steps on the demo warehouse (384x384 f16, the
demo config), and refuses to start without a warehouse, naming the build command."""
import os
import re
import subprocess
import sys
import unittest

from tests._fixtures import PACKAGE, REPO, fixture

SCRIPT = os.path.join(REPO, "examples", "train.py")


def run(*args):
    env = dict(os.environ, PYTHONPATH=PACKAGE)
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True, env=env, timeout=120)


class Train(unittest.TestCase):
    def test_three_steps_on_the_demo(self):
        fx = fixture(self, "demo")
        p = run("--tensor-warehouse", fx["root"], "--steps", "3", "--batch-size", "4")
        self.assertEqual(p.returncode, 0, p.stderr)
        losses = [float(m) for m in re.findall(r"^step \d+ epoch \d+ loss ([0-9.]+) .* samples/s$", p.stdout, re.M)]
        self.assertEqual(len(losses), 3, p.stdout)
        self.assertLess(losses[-1], losses[0], p.stdout)  # deterministic (seed 0): it learns

    def test_config_picks_its_pointer(self):
        """--config NAME reads ROOT/latest-NAME, the newest version of that config when several
        configs share the output root (deploy/README.md)."""
        fx = fixture(self, "demo")
        names = [n[len("latest-"):] for n in os.listdir(fx["root"]) if n.startswith("latest-")]
        self.assertEqual(len(names), 1, os.listdir(fx["root"]))
        p = run("--tensor-warehouse", fx["root"], "--config", names[0], "--steps", "1", "--batch-size", "4")
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn(os.path.basename(fx["dir"]), p.stdout)
        p = run("--tensor-warehouse", fx["root"], "--config", "no-such-config", "--steps", "1")
        self.assertEqual(p.returncode, 2, p.stderr)

    def test_refuses_without_a_warehouse(self):
        for args in ((), ("--tensor-warehouse", os.path.join(REPO, "no", "such", "warehouse"))):
            p = run(*args, "--steps", "1")
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertIn("go run ./cmd/warehouse-etl build --config configs/demo.jsonc", p.stderr)


if __name__ == "__main__":
    unittest.main()
