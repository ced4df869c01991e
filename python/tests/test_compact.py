"""A warehouse built with compact_images (shard_version 5) reads, through wh[i] and
read_batch, exactly as the Go reader reads it, and exactly as the same config built
without the option (the "u8" fixture): the padding the shards do not store is restored
bit for bit. A flipped byte of a stored region is refused."""
import os
import shutil
import tempfile
import unittest

import numpy as np

import warehouse_etl
from tests._fixtures import fixture, raw
from tests.test_read import ReadMatchesGo


class CompactImages(unittest.TestCase):
    def test_matches_go(self):
        wh = ReadMatchesGo.check(self, "u8compact", "U8")
        self.assertTrue(wh.layout.compact)
        self.assertEqual({e["shard_version"] for e in wh.manifest["shards"]}, {5})

    def test_same_tensors_as_without_the_option(self):
        compact = warehouse_etl.open(fixture(self, "u8compact")["dir"])
        plain = warehouse_etl.open(fixture(self, "u8")["dir"])
        self.addCleanup(compact.close)
        self.addCleanup(plain.close)
        n = len(plain)
        self.assertEqual(len(compact), n)
        # (Not necessarily fewer bytes here: the demo's 63x47 letterbox has little
        # padding; the Go e2e test TestCompactImages checks the saving.)
        for i in range(n):
            self.assertEqual(raw(compact[i]["image"]), raw(plain[i]["image"]), f"sample {i}")
        idx = np.random.default_rng(4).permutation(n)
        for key, a in compact.read_batch(idx).items():
            self.assertEqual(raw(a), raw(plain.read_batch(idx)[key]), key)
        # Every read checked (the CRC over the restored copies).
        always = warehouse_etl.open(fixture(self, "u8compact")["dir"], verify_samples="always")
        self.addCleanup(always.close)
        for _ in range(2):
            self.assertEqual(raw(always.read_batch(np.arange(n))["images"]), raw(plain.read_batch(np.arange(n))["images"]))
        self.assertEqual(always.samples_verified, 2 * n)

    def test_crc_rows_every_backend(self):
        """_compact.crc_rows gives the checksum table's CRCs (written by Go) on every
        CRC backend: ISA-L's by address, the others part by part; regions as wide as
        the image (u8compact's letterbox) and narrower (u8compactwide's pillarbox),
        rows shuffled."""
        from unittest import mock

        from warehouse_etl import _compact, _crc32c
        for name in ("u8compact", "u8compactwide"):
            wh = warehouse_etl.open(fixture(self, name)["dir"], verify_samples=False)
            self.addCleanup(wh.close)
            perm = np.random.default_rng(8).permutation(len(wh))
            b = wh.read_batch(perm)
            arrays = [b["images"], b["boxes"], b["mask"], b["records"], b["extras"]]
            rows_of = np.empty_like(perm)
            rows_of[perm] = np.arange(len(perm))
            first = 0
            for k in range(len(wh.manifest["shards"])):
                sh = wh._shard(k)
                n = len(sh.crcs)
                local = np.arange(n)[::-1].copy()
                for backend in _crc32c.BACKENDS:
                    with mock.patch.object(_crc32c, "BACKEND", backend):
                        got = _compact.crc_rows(sh.sections, wh.layout, local, arrays, rows_of[first + local])
                    self.assertEqual(got.tolist(), sh.crcs[local].tolist(), (name, k, backend))
                first += n

    def test_flipped_region_byte(self):
        fx = fixture(self, "u8compact")
        tmp = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, tmp)
        d = os.path.join(tmp, "v")
        shutil.copytree(fx["dir"], d)
        wh = warehouse_etl.open(d)
        entry = wh.manifest["shards"][0]
        path = os.path.join(d, entry["relative_path"])
        sh = wh._shard(0)
        table = sh.sections["compact_table"]
        j = int(np.flatnonzero(table["w"])[0])
        wh.close()
        os.chmod(path, 0o644)
        with open(path, "r+b") as f:
            f.seek(int(table[j]["offset"]))
            b = f.read(1)
            f.seek(int(table[j]["offset"]))
            f.write(bytes([b[0] ^ 0x20]))
        from unittest import mock

        from warehouse_etl import _crc32c
        from warehouse_etl import warehouse as whmod
        # With the compiled copy-and-check where it runs (one pass), and without it.
        for copy_crc in dict.fromkeys((_crc32c.COPY_CRC, None)):
            with self.subTest(one_pass=copy_crc is not None), mock.patch.object(_crc32c, "COPY_CRC", copy_crc):
                wh = warehouse_etl.open(d)
                self.addCleanup(wh.close)
                with self.assertRaisesRegex(warehouse_etl.WarehouseError,
                                            f"sample {j}: crc32c 0x[0-9a-f]{{8}}, the checksum table"):
                    wh.read_batch([j])
                with self.assertRaisesRegex(warehouse_etl.WarehouseError, "crc32c"):
                    wh[j]
                # The same copied and checked by three threads, a sample a piece: the
                # damaged sample is refused, every other one passes.
                n = len(wh)
                order = [n - 1, j, 0] + [i for i in range(1, n - 1) if i != j]
                small = {"_PARALLEL_BYTES": 0, "_COPY_PIECE_BYTES": 1, "_VERIFY_PIECE_BYTES": 1}
                with mock.patch.multiple(whmod, **small), mock.patch.object(whmod, "_usable_cpus", lambda: 3):
                    wh = warehouse_etl.open(d)
                    self.addCleanup(wh.close)
                    with self.assertRaisesRegex(warehouse_etl.WarehouseError,
                                                f"sample {j}: crc32c 0x[0-9a-f]{{8}}, the checksum table"):
                        wh.read_batch(order)
                    self.assertEqual(wh.samples_verified, n - 1)


if __name__ == "__main__":
    unittest.main()
