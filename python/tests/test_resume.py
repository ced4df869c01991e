"""Resuming an epoch (docs/format/reading.md, "Resuming"): the plan from a position equals
the Go reader's (`load --start-position`, with another world size and batch size, mixtures
included); the two runs together read every position once; the loader's state_dict /
load_state_dict deliver exactly the batches of the run that was not interrupted, with
reader threads and with DataLoader worker processes, in O(1); a state of another version
is refused."""
import json
import os
import unittest

import numpy as np

import warehouse_etl
from warehouse_etl import _order
from tests._fixtures import DATA, fixture, need_data

try:
    import torch  # noqa: F401
    from warehouse_etl.torch import (LoaderStateError, Mixture, WarehouseBatchSampler, WarehouseDataset,
                                     WarehouseLoader, make_loader)
except ImportError:  # the numpy-only part still runs
    torch = None


def load_cases():
    with open(os.path.join(DATA, "resume.json")) as f:
        return json.load(f)


def plan(order, c, world, rank, batch, start):
    idx, rep = _order.plan_order(order, batch, rank=rank, world=world, remainder=c["remainder"], start=start)
    return [{"indices": i.tolist(), "repeats": int(r)} for i, r in zip(idx, rep)]


class ResumeMatchesGo(unittest.TestCase):
    def test_cases(self):
        need_data(self)
        cases = load_cases()
        self.assertGreaterEqual(len(cases), 8)
        for c in cases:
            with self.subTest(**{k: v for k, v in c.items() if k not in ("before", "after", "mix", "dir")},
                              mix=bool(c.get("mix"))):
                if c.get("mix"):
                    if torch is None:
                        self.skipTest("no torch")
                    whs = [warehouse_etl.open(p["path"]) for p in c["mix"]]
                    mix = Mixture(whs, [p["weight"] for p in c["mix"]], c["epoch_samples"] or None)
                    order = mix.epoch_order(c["shuffle"], c["seed"], c["epoch"])
                else:
                    wh = warehouse_etl.open(c["dir"])
                    whs = [wh]
                    order = _order.epoch_order(len(wh), wh.shard_starts.tolist(), c["shuffle"], c["seed"], c["epoch"])
                try:
                    n = len(order)
                    for r in range(c["world"]):
                        self.assertEqual(plan(order, c, c["world"], r, c["batch"], 0)[:c["steps"]], c["before"][r])
                    for r in range(c["world2"]):
                        self.assertEqual(plan(order, c, c["world2"], r, c["batch2"], c["start"]), c["after"][r])
                    # Exactly once: positions [0, start) before, the rest after, a tail < W'*B' left out
                    # with drop, repeats only past N with pad.
                    positions = {}
                    for p, i in enumerate(order.tolist()):
                        positions.setdefault(i, []).append(p)
                    read = [i for rank in c["before"] + c["after"] for b in rank
                            for i in b["indices"][:len(b["indices"]) - b["repeats"]]]
                    after = sum(len(rank) for rank in c["after"]) * c["batch2"]
                    end = min(n, c["start"] + after)
                    self.assertEqual(sorted(read), sorted(order[:end].tolist()))
                    if c["remainder"] == "pad":
                        self.assertEqual(end, n)
                        self.assertEqual(sum(b["repeats"] for rank in c["before"] + c["after"] for b in rank),
                                         max(0, c["start"] + after - n))
                    else:
                        self.assertLess(n - end, c["world2"] * c["batch2"])
                finally:
                    for wh in whs:
                        wh.close()

    def test_more_ranks_than_batches(self):
        need_data(self)
        cases = [c for c in load_cases() if c["world2"] == 8 and not c.get("mix")]
        self.assertEqual({c["remainder"]: [len(b) for b in c["after"]] for c in cases},
                         {"drop": [0] * 8, "pad": [1] * 8})


@unittest.skipIf(torch is None, "no torch")
class LoaderState(unittest.TestCase):
    def setUp(self):
        self.fx = fixture(self, "f16")

    def batches(self, loader, limit=None):
        out = []
        for k, b in enumerate(loader):
            out.append((b["index"].tolist(), int(b["repeats"]), b["images"].numpy().tobytes()))
            if limit is not None and k + 1 == limit:
                break
        return out

    def check_resume(self, make, steps):
        """Run a whole epoch; then run `steps` batches, save, resume in a new loader: the
        batches after the save are the whole run's, tensors included."""
        whole = make()
        whole.set_epoch(2)
        want = self.batches(whole)
        first = make()
        first.set_epoch(2)
        got = self.batches(first, steps)
        sd = first.state_dict()
        self.assertEqual(sd["position"], steps * 3)  # one rank, batch 3
        self.assertEqual(sd["epoch"], 2)
        resumed = make()
        resumed.load_state_dict(sd)
        self.assertEqual(resumed.epoch, 2)
        self.assertEqual(len(resumed), len(want) - steps)
        got += self.batches(resumed)
        self.assertEqual(got, want)
        end = resumed.state_dict()
        self.assertEqual((end["epoch"], end["position"]), (2, len(want) * 3))
        # The next epoch starts at 0.
        resumed.set_epoch(3)
        self.assertEqual(resumed.state_dict()["position"], 0)
        self.assertEqual(len(self.batches(resumed)), len(want))
        for x in (whole, first, resumed):
            x.dataset.close()

    def test_reader_threads(self):
        self.check_resume(lambda: make_loader(self.fx["dir"], 3, seed=5, shuffle="shard", remainder="pad",
                                              reader_threads=2), 2)

    def test_no_threads(self):
        self.check_resume(lambda: make_loader(self.fx["dir"], 3, seed=5), 4)

    def test_worker_processes(self):
        def make():
            ds = WarehouseDataset(self.fx["dir"])
            return WarehouseLoader(ds, batch_size=None, sampler=WarehouseBatchSampler(ds.wh, 3, seed=5, world=1, rank=0),
                                   num_workers=2)
        self.check_resume(make, 3)

    def test_elastic(self):
        """Two ranks take 2 steps; the state is the same on both; three ranks of batch 2 take
        the rest: every sample once, the tail < 3*2 dropped."""
        dir_ = self.fx["dir"]
        ranks = [make_loader(dir_, 3, seed=9, rank=r, world=2) for r in range(2)]
        seen = []
        for L in ranks:
            L.set_epoch(1)
            seen += [i for b in self.batches(L, 2) for i in b[0]]
        sd = [L.state_dict() for L in ranks]
        self.assertEqual(sd[0], sd[1])
        self.assertEqual(sd[0]["position"], 12)
        after = [make_loader(dir_, 2, seed=0, rank=r, world=3) for r in range(3)]
        for L in after:
            L.load_state_dict(sd[0])  # takes the seed and epoch of the state
            seen += [i for b in self.batches(L) for i in b[0]]
        n = len(ranks[0].warehouse)
        order = _order.epoch_order(n, ranks[0].warehouse.shard_starts.tolist(), "global", 9, 1)
        end = 12 + ((n - 12) // 6) * 6
        self.assertEqual(sorted(seen), sorted(order[:end].tolist()))
        for L in ranks + after:
            L.dataset.close()

    def test_resume_is_constant_time(self):
        """Resuming reads nothing before the position: only the batch asked for is read
        (the reader's CRC-32C checks count every sample read once)."""
        wh = warehouse_etl.open(self.fx["dir"])
        L = make_loader(wh, 2, seed=1)
        sd = L.state_dict()
        sd["position"] = len(wh) - 3
        L.load_state_dict(sd)
        b = next(iter(L))
        self.assertEqual(wh.samples_verified, 2)
        self.assertEqual(len(L), 1)
        self.assertEqual(b["index"].tolist(), _order.epoch_order(len(wh), wh.shard_starts.tolist(), "global", 1, 0)
                         [len(wh) - 3:len(wh) - 1].tolist())
        wh.close()

    def test_refusals(self):
        L = make_loader(self.fx["dir"], 2)
        sd = L.state_dict()
        for change, want in [
            ({"versions": ["0" * 64]}, "saved reading warehouse version(s) 0000000000000000, this loader reads "),
            ({"shuffle": "none"}, "loader state: shuffle 'none', this loader 'global'"),
            ({"weights": [1.0]}, "loader state: mixture weights [1.0], this loader None"),
            ({"format": "x"}, "loader state: format 'x', want 'warehouse-etl/loader-state/1'"),
            ({"position": -1}, "loader state: position -1, want an integer >= 0"),
        ]:
            with self.subTest(change=change):
                with self.assertRaises(LoaderStateError) as cm:
                    L.load_state_dict(dict(sd, **change))
                self.assertIn(want, str(cm.exception))
                self.assertIsInstance(cm.exception, warehouse_etl.WarehouseError)
        other = fixture(self, "f32")
        L2 = make_loader(other["dir"], 2)
        with self.assertRaises(LoaderStateError):
            L2.load_state_dict(sd)
        for x in (L, L2):
            x.dataset.close()


if __name__ == "__main__":
    unittest.main()
