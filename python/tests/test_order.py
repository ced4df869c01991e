"""The batch order equals the Go reader's (warehouse.PlanBatches) for a table of
(batch, seed, epoch, rank, world, shuffle, remainder); Lemire's rejection path."""
import time
import unittest

import numpy as np

import warehouse_etl
from warehouse_etl import _order
from tests._fixtures import Reference, fixture


class OrderMatchesGo(unittest.TestCase):
    def test_plans(self):
        for name in ("f16", "f32", "demo"):
            fx = fixture(self, name)
            wh = warehouse_etl.open(fx["dir"])
            l = wh.layout
            ref = Reference(fx, wh.image_dtype, wh.box_dtype, wh.image_shape, l.max_boxes, l.extra_f32)
            self.assertGreaterEqual(len(ref.plans), 8)
            for p in ref.plans:
                args = dict(seed=p["seed"], epoch=p["epoch"], rank=p["rank"], world=p["world"],
                            shuffle=p["shuffle"], remainder=p["remainder"])
                with self.subTest(name=name, batch=p["batch"], **args):
                    got = [b.tolist() for b in wh.batches(p["batch"], **args)]
                    self.assertEqual(got, p["indices"])
                    indices, repeats = wh.plan(p["batch"], **args)
                    self.assertEqual(repeats.tolist(), p["repeats"])


class Rejection(unittest.TestCase):
    """Lemire's rejection happens with probability n/2^64 per draw, so it is forced: a
    state whose next value is 0 gives lo = 0 < threshold (2^64 mod 3 = 1) for n = 3."""

    def test_vectorised_equals_scalar_through_a_rejection(self):
        for length in (3, 5, 1000):
            a, b = _order.OrderStream(0, 0), _order.OrderStream(0, 0)
            a.state = b.state = (-_order.GOLDEN - (length - 3) * _order.GOLDEN) & _order.MASK64
            got = a.draws_for_shuffle(length).tolist()
            want = [b.below(i + 1) for i in range(length - 1, 0, -1)]  # the scalar transcription of reading.md
            self.assertEqual(got, want)
            self.assertEqual(a.state, b.state)
            # The rejected draw really happened: one more value was consumed.
            c = _order.OrderStream(0, 0)
            c.state = (-_order.GOLDEN - (length - 3) * _order.GOLDEN) & _order.MASK64
            for _ in range(length - 1):
                c.next()
            self.assertNotEqual(c.state, b.state, "no rejection was exercised")

    def test_plan_million(self):
        n = 1_000_000
        starts = list(range(0, n, 436))
        t0 = time.perf_counter()
        idx, rep = _order.plan_batches(n, starts, 32, seed=1, epoch=2, rank=0, world=1, shuffle="global")
        dt = time.perf_counter() - t0
        print(f"\nplan_batches(N=1e6, global): {dt:.2f} s", end=" ")
        self.assertEqual(idx.shape, (n // 32, 32))
        self.assertEqual(len(np.unique(idx)), idx.size)
        self.assertLess(dt, 20)


if __name__ == "__main__":
    unittest.main()
