"""Damaged warehouses are refused with the Go reader's message, word for word: the Go
test broke copies of a warehouse and recorded warehouse.Open's (or Sample's) error."""
import unittest

import warehouse_etl
from tests._fixtures import fixture, load_damaged, need_data


class Damaged(unittest.TestCase):
    def test_refusals_match_go(self):
        need_data(self)
        cases = load_damaged()
        names = {c["name"] for c in cases}
        for want in ("truncated shard", "flipped magic byte", "thresholds violated", "missing shard",
                     "flipped image byte", "flipped record byte", "flipped checksum table byte"):
            self.assertIn(want, names)
        for c in cases:
            with self.subTest(c["name"]):
                with self.assertRaises(warehouse_etl.WarehouseError) as cm:
                    wh = warehouse_etl.open(c["path"])
                    self.assertEqual(c["stage"], "sample", "opened, but Go refuses at open")
                    try:
                        wh.read_batch([c["sample"]])
                    finally:
                        wh.close()
                self.assertEqual(str(cm.exception), c["go_error"])
                self.assertEqual(isinstance(cm.exception, warehouse_etl.ThresholdError), c["threshold"])
                if c["stage"] == "sample":
                    # wh[i] refuses the same way, and a refused shard stays refused.
                    wh = warehouse_etl.open(c["path"])
                    for _ in range(2):
                        with self.assertRaises(warehouse_etl.WarehouseError) as cm:
                            wh[c["sample"]]
                        self.assertEqual(str(cm.exception), c["go_error"])

    def test_ignore_thresholds(self):
        need_data(self)
        case = next(c for c in load_damaged() if c["name"] == "thresholds violated")
        with self.assertLogs("warehouse_etl", "WARNING") as logs:
            wh = warehouse_etl.open(case["path"], ignore_thresholds=True)
        self.assertTrue(any("ignored on request" in line for line in logs.output))
        self.assertGreater(len(wh), 0)
        wh.read_batch(range(len(wh)))

    def test_verify_checksums(self):
        fx = fixture(self, "f16")
        wh = warehouse_etl.open(fx["dir"], verify_checksums=True)
        wh.read_batch(range(len(wh)))  # every shard hashed and accepted


if __name__ == "__main__":
    unittest.main()
