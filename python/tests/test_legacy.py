"""Warehouses written before shard versions named features (testdata/legacy, built by
warehouse-etl/3): every shard carries shard_version 1 and signals its meta and checksum
sections by their offsets and U8 by its dtype (shard.md, "Versions", the legacy rule).
They open with every shard's per-sample checksums, and every tensor, class index and meta
field equals the Go reader's (bitwise), as for a warehouse built now."""
import unittest

import numpy as np

import warehouse_etl
from tests._fixtures import fixture
from tests import test_read  # the module, not the class: discovery would run ReadMatchesGo here again


class LegacyMatchesGo(unittest.TestCase):
    read_matches_go = test_read.ReadMatchesGo.check  # wh[i] and read_batch against the Go reader's values

    def check(self, name, want_dtype):
        self.read_matches_go(name, want_dtype)
        wh = warehouse_etl.open(fixture(self, name)["root"], verify_samples="always")
        m = wh.manifest
        self.assertEqual((m["code_version"], m["default_shard_version"]), ("warehouse-etl/3", 1))
        self.assertEqual({e["shard_version"] for e in m["shards"]}, {1})
        checked, shards = wh.sample_checksums()
        self.assertEqual(checked, shards)
        wh.read_batch(np.arange(len(wh)))
        self.assertEqual(wh.samples_verified, len(wh))
        wh.close()

    def test_f16(self):
        self.check("legacy-f16", "F16")

    def test_u8(self):
        self.check("legacy-u8", "U8")


if __name__ == "__main__":
    unittest.main()
