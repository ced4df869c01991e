"""Mixtures of warehouses (docs/format/reading.md, "Mixtures"): the order equals the Go
reader's (resume.json's mixture cases, from `load --mix`; test_resume.py), every row of a
mixed batch is its warehouse's sample, quotas per epoch, streams that continue across
epochs, refusals, and resuming a mixture."""
import json
import os
import unittest

import numpy as np

import warehouse_etl
from warehouse_etl import _mix, _order
from tests._fixtures import DATA, fixture, need_data

try:
    import torch  # noqa: F401
    from warehouse_etl.torch import (LoaderStateError, Mixture, WarehouseBatchSampler, WarehouseDataset,
                                     WarehouseLoader, make_loader)
except ImportError:
    torch = None


def mix_paths(test):
    need_data(test)
    with open(os.path.join(DATA, "resume.json")) as f:
        for c in json.load(f):
            if c.get("mix"):
                return [(p["path"], p["weight"]) for p in c["mix"]]
    test.fail("no mixture case in resume.json")


class Quotas(unittest.TestCase):
    def test_quotas_as_go(self):
        # The table of warehouse/resume_test.go's TestMixQuotas.
        for weights, total, want in [([1], 7, [7]), ([1, 1], 7, [4, 3]), ([0.7, 0.2, 0.1], 10, [7, 2, 1]),
                                     ([3, 1], 10, [8, 2]), ([1, 2, 3], 100, [17, 33, 50]), ([1e-9, 1], 5, [0, 5])]:
            self.assertEqual(_mix.mix_quotas(weights, total), want, (weights, total))

    def test_streams_continue_across_epochs(self):
        sizes, starts, quotas = [10, 7], [[0, 4], [0]], [6, 9]
        for shuffle in ("none", "global", "shard"):
            streams = [[], []]
            for e in range(4):
                o = _mix.mix_order(sizes, starts, quotas, shuffle, 11, e).tolist()
                streams[0] += [i for i in o if i < 10]
                streams[1] += [i - 10 for i in o if i >= 10]
            for m, n in enumerate(sizes):
                want = np.concatenate([_order.epoch_order(n, starts[m], shuffle, 11 ^ _order.mix64(m), p)
                                       for p in range(6)]).tolist()
                self.assertEqual(streams[m], want[:len(streams[m])], (shuffle, m))
            one = _mix.mix_order([10], [[0, 4]], [10], shuffle, 11, 3)
            self.assertEqual(one.tolist(), _order.epoch_order(10, [0, 4], shuffle, 11, 3).tolist())


@unittest.skipIf(torch is None, "no torch")
class MixedLoader(unittest.TestCase):
    def test_rows_are_their_warehouses_samples(self):
        paths = mix_paths(self)
        L = make_loader(paths, 4, seed=3, reader_threads=2, remainder="pad")
        mix = L.warehouse
        self.assertIsInstance(mix, Mixture)
        self.assertEqual(mix.epoch_samples, sum(len(wh) for wh in mix.warehouses))
        counts = np.zeros(2, dtype=np.int64)
        for b in L:
            w, idx = b["warehouse"].numpy(), b["index"].numpy()
            counts += np.bincount(w[:len(w) - b["repeats"]], minlength=2)
            for m in range(2):
                rows = np.flatnonzero(w == m)
                if rows.size:
                    ref = mix.warehouses[m].read_batch(idx[rows])
                    self.assertEqual(b["images"].numpy()[rows].tobytes(), ref["images"].tobytes())
                    self.assertEqual(b["boxes"].numpy()[rows].tobytes(), ref["boxes"].tobytes())
                    self.assertEqual(b["class_index"].numpy()[rows].tolist(), ref["class_index"].tolist())
        self.assertEqual(counts.tolist(), mix.quotas)
        self.assertEqual(mix.quotas, _mix.mix_quotas([w for _, w in paths], mix.epoch_samples))
        L.dataset.close()

    def test_resume_a_mixture(self):
        paths = mix_paths(self)
        whole = make_loader(paths, 3, seed=1, epoch_samples=40)
        want = [(b["warehouse"].tolist(), b["index"].tolist()) for b in whole]
        self.assertEqual(len(want), 13)
        first = make_loader(paths, 3, seed=1, epoch_samples=40, rank=0, world=2)
        got = []
        for k, b in enumerate(first):
            got.append((b["warehouse"].tolist(), b["index"].tolist()))
            if k == 1:
                break
        sd = first.state_dict()
        self.assertEqual((sd["position"], sd["weights"], sd["epoch_samples"]), (12, [1.0, 2.5], 40))
        resumed = make_loader(paths, 3, seed=1, epoch_samples=40)
        resumed.load_state_dict(sd)
        rest = [(b["warehouse"].tolist(), b["index"].tolist()) for b in resumed]
        self.assertEqual(rest, want[4:])
        for change in ({"weights": [1.0, 2.0]}, {"epoch_samples": 41}):
            with self.assertRaises(LoaderStateError):
                resumed.load_state_dict(dict(sd, **change))
        for x in (whole, first, resumed):
            x.dataset.close()

    def test_worker_processes(self):
        """A Mixture pickles into DataLoader worker processes and reads there what the
        loader of this process reads."""
        paths = mix_paths(self)
        L = make_loader(paths, 4, seed=2, epoch_samples=30)
        want = [(b["warehouse"].tolist(), b["index"].tolist(), b["images"].numpy().tobytes()) for b in L]
        mix = L.warehouse
        W = WarehouseLoader(WarehouseDataset(mix), batch_size=None, sampler=WarehouseBatchSampler(mix, 4, seed=2),
                            num_workers=2)
        got = [(b["warehouse"].tolist(), b["index"].tolist(), b["images"].numpy().tobytes()) for b in W]
        self.assertEqual(got, want)
        L.dataset.close()

    def test_read_batch_rows(self):
        """Warehouse.read_batch(rows=): the samples land in the rows named, the others stay."""
        wh = warehouse_etl.open(fixture(self, "f16")["dir"])
        out = wh.read_batch([5, 6, 7, 8])
        before = out["images"].copy()
        wh.read_batch([2, 0], out=out, rows=[3, 1])
        ref = wh.read_batch([5, 0, 7, 2])
        self.assertEqual(out["images"].tobytes(), ref["images"].tobytes())
        self.assertEqual(out["index"].tolist(), [5, 0, 7, 2])
        self.assertEqual(out["class_index"].tolist(), ref["class_index"].tolist())
        self.assertEqual(out["images"][0].tobytes(), before[0].tobytes())
        with self.assertRaises(ValueError):
            wh.read_batch([1], out=out, rows=[4])
        wh.close()

    def test_refusals(self):
        f16, f32 = fixture(self, "f16"), fixture(self, "f32")
        for arg, kw, want in [
            ([(f16["dir"], 1), (f32["dir"], 1)], {}, "mixture: warehouse 1 has layout {DType:F32"),
            ([(f16["dir"], 1), (f16["dir"], 0)], {}, "mixture: warehouse 1: weight 0.0, want a finite weight > 0"),
            ([(f16["dir"], 1), (f16["dir"], 1e-6)], {}, "mixture: warehouse 1 gets 0 of 38 samples per epoch"),
            (f16["dir"], {"epoch_samples": 10}, "epoch_samples is a mixture's epoch length"),
        ]:
            with self.subTest(want=want):
                with self.assertRaises(ValueError) as cm:
                    make_loader(arg, 2, **kw)
                self.assertIn(want, str(cm.exception))
        with self.assertRaises(TypeError) as cm:  # S3 options without an s3:// part
            make_loader([(f16["dir"], 1), (f16["dir"], 1)], 2, cache_dir="/nonexistent")
        self.assertIn("cache_dir: options of s3:// paths only", str(cm.exception))

    def test_compact_mixes_with_plain(self):
        """A compact_images warehouse reads the tensors of the same build without it: the
        two mix (compact and pad are storage, not layout), and each row is its
        warehouse's sample."""
        plain, compact = fixture(self, "u8"), fixture(self, "u8compact")
        L = make_loader([(plain["dir"], 1), (compact["dir"], 1)], 4, seed=2)
        whs = L.warehouse.warehouses
        n = 0
        for b in L:
            for r in range(b["images"].shape[0]):
                wh = whs[int(b["warehouse"][r])]
                self.assertEqual(b["images"][r].numpy().tobytes(), wh[int(b["index"][r])]["image"].tobytes())
                n += 1
        self.assertGreater(n, 0)
        self.assertEqual({int(x) for x in L.warehouse.quotas}, {len(whs[0])})
        L.dataset.close()


if __name__ == "__main__":
    unittest.main()
