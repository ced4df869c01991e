"""Episode windows and extra_stats (warehouse_etl._windows, make_loader(windows=...)) on the
WShard demo warehouse that the Go test TestEpisodeWindowsEndToEnd (cmd/warehouse-etl)
builds. Expected values come from Go's reader (its Neighbour and Window, checked there
against the demo's formulas) and from numpy/fractions here, never from the code under
test. Run with

    go test ./cmd/warehouse-etl -run TestEpisodeWindowsEndToEnd -v

Without WAREHOUSE_ETL_WINDOWS the tests that need the warehouse skip.
"""
import json
import math
import os
import shutil
import tempfile
import unittest
from fractions import Fraction

import numpy as np

import warehouse_etl

FIXTURE = os.environ.get("WAREHOUSE_ETL_WINDOWS")


def load(test):
    if not FIXTURE:
        test.skipTest("no WAREHOUSE_ETL_WINDOWS: run via go test ./cmd/warehouse-etl -run TestEpisodeWindowsEndToEnd")
    with open(FIXTURE) as f:
        return json.load(f)


class Windows(unittest.TestCase):
    def setUp(self):
        self.fx = load(self)
        self.wh = warehouse_etl.open(self.fx["dir"])
        self.addCleanup(self.wh.close)

    def test_windows_match_go(self):
        fx, n = self.fx, len(self.wh)
        w = warehouse_etl.Windows(self.wh, {fx["extra"]: fx["offsets"]})
        j, valid = w.episodes.neighbours(np.arange(n), fx["offsets"])
        self.assertEqual(j.tolist(), fx["sample"])
        self.assertEqual(valid.tolist(), fx["valid"])
        # The search path, taken when the episodes' step ranges are too sparse for the table.
        w.episodes._lut = None
        j, valid = w.episodes.neighbours(np.arange(n), fx["offsets"])
        self.assertEqual(j.tolist(), fx["sample"])
        self.assertEqual(valid.tolist(), fx["valid"])
        w.episodes._lut = warehouse_etl.Episodes(self.wh)._lut
        # Shuffled and repeated indices: gathered by (episode, step), not by order.
        idx = np.random.default_rng(7).permutation(np.concatenate([np.arange(n), np.arange(n)]))
        values, mask = w.gather(idx)[fx["extra"]]
        self.assertEqual(values.dtype, np.float32)
        self.assertEqual(values.shape, (2 * n, len(fx["offsets"]), 2))
        want = np.array(fx["values"], dtype=np.float32)[idx]
        self.assertEqual(values.tobytes(), want.tobytes())
        self.assertEqual(mask.tolist(), np.array(fx["valid"])[idx].tolist())
        self.assertGreater(int((~mask).sum()), 0)
        # Without the per-sample table (windows over more than 2^24 sample-steps): the same.
        w._tables = [(name, offs, cols, None) for name, offs, cols, _ in w._table()]
        values2, mask2 = w.gather(idx)[fx["extra"]]
        self.assertEqual(values2.tobytes(), want.tobytes())
        self.assertEqual(mask2.tolist(), mask.tolist())

    def test_stats_match_numpy(self):
        """extra_stats against numpy (mean, std, quantiles with numpy's default linear
        method) and exact rational arithmetic, over the extras as the shards store them."""
        n = len(self.wh)
        extras = self.wh.read_batch(np.arange(n))["extras"]
        stats = self.wh.manifest["extra_stats"]
        self.assertEqual([s["name"] for s in stats], [x["name"] for x in self.wh.extras_spec])
        for x in self.wh.extras_spec:
            st = warehouse_etl.extra_stats(self.wh, x["name"])
            dim = int(np.prod(x["shape"], dtype=np.int64))
            self.assertEqual(st["count"], n)
            for c in range(dim):
                col = extras[:, x["offset"] + c].astype(np.float64)
                where = f"{x['name']}[{c}]"
                q01, q99 = np.quantile(col, [0.01, 0.99])
                self.assertEqual((st["q01"][c], st["q99"][c]), (q01, q99), where)  # bit for bit
                self.assertEqual((st["min"][c], st["max"][c]), (col.min(), col.max()), where)
                exact = [Fraction(v) for v in col.tolist()]
                mean = sum(exact, Fraction(0)) / n
                var = sum(((v - mean) ** 2 for v in exact), Fraction(0)) / n
                self.assertEqual(st["mean"][c], float(mean), where)
                self.assertEqual(st["std"][c], math.sqrt(float(var)), where)
                np.testing.assert_allclose(st["mean"][c], col.mean(), rtol=1e-12, atol=1e-12, err_msg=where)
                np.testing.assert_allclose(st["std"][c], col.std(), rtol=1e-12, atol=1e-12, err_msg=where)

    def test_loader_windows(self):
        import torch
        from warehouse_etl.torch import WarehouseDataset, make_loader

        fx = self.fx
        windows = {fx["extra"]: fx["offsets"], "signal/joint_pos": [-2, -1, 0], "reward": range(0, 3)}
        loader = make_loader(fx["root"], 5, seed=3, shuffle="global", windows=windows, reader_threads=2)
        self.addCleanup(loader.dataset.close)
        want, valid = np.array(fx["values"], dtype=np.float32), np.array(fx["valid"])
        seen = 0
        for epoch in range(2):
            loader.set_epoch(epoch)
            for b in loader:
                idx = b["index"].numpy()
                a, m = b["windows"][fx["extra"]], b["window_mask"][fx["extra"]]
                self.assertEqual((a.dtype, m.dtype), (torch.float32, torch.bool))
                self.assertEqual(tuple(a.shape), (5, len(fx["offsets"]), 2))
                self.assertEqual(a.numpy().tobytes(), want[idx].tobytes())
                self.assertEqual(m.numpy().tolist(), valid[idx].tolist())
                self.assertEqual(tuple(b["windows"]["signal/joint_pos"].shape), (5, 3, 7))
                self.assertEqual(tuple(b["windows"]["reward"].shape), (5, 3, 1))  # a scalar: dim 1
                # Offset 0 is the sample itself: its extras as the shard stores them.
                off = {x["name"]: x for x in loader.warehouse.extras_spec}["signal/joint_pos"]["offset"]
                self.assertTrue(torch.equal(b["windows"]["signal/joint_pos"][:, 2], b["extras"][:, off:off + 7]))
                seen += len(idx)
        self.assertEqual(seen, 2 * (len(self.wh) // 5) * 5)
        ds = WarehouseDataset(fx["dir"], windows={fx["extra"]: fx["offsets"]})
        self.addCleanup(ds.close)
        one = ds[3]
        self.assertEqual(one["windows"][fx["extra"]].numpy().tobytes(), want[3].tobytes())
        self.assertEqual(one["window_mask"][fx["extra"]].tolist(), fx["valid"][3])

    def test_old_version_reads_and_refuses_windows(self):
        fx = self.fx
        old = warehouse_etl.open(fx["old"])
        self.addCleanup(old.close)
        self.assertEqual(np.asarray(old[3]["extras"][fx["extra"]], dtype=np.float32).tobytes(),
                         np.array(fx["values"][3][fx["offsets"].index(0)], dtype=np.float32).tobytes())
        for make in (lambda: warehouse_etl.Windows(old, {fx["extra"]: [0]}),
                     lambda: warehouse_etl.extra_stats(old, fx["extra"])):
            with self.assertRaises(warehouse_etl.WarehouseError) as cm:
                make()
            self.assertIn("WAREHOUSE_CLEAR=1", str(cm.exception))
        from warehouse_etl.torch import make_loader
        with self.assertRaisesRegex(warehouse_etl.WarehouseError, "no episode index"):
            make_loader(fx["old"], 4, windows={fx["extra"]: [0, 1]})

    def test_bad_requests(self):
        with self.assertRaisesRegex(ValueError, "no extra 'nope'.*action/ctrl"):
            warehouse_etl.Windows(self.wh, {"nope": [0]})
        with self.assertRaisesRegex(ValueError, "at least one"):
            warehouse_etl.Windows(self.wh, {self.fx["extra"]: []})
        with self.assertRaisesRegex(ValueError, "want a dict"):
            warehouse_etl.Windows(self.wh, [0, 1])

    def test_damaged_episode_index(self):
        with tempfile.TemporaryDirectory() as tmp:
            d = os.path.join(tmp, os.path.basename(self.fx["dir"]))
            shutil.copytree(self.fx["dir"], d)
            p = os.path.join(d, "episodes.bin")
            with open(p, "rb") as f:
                raw = bytearray(f.read())
            raw[-1] ^= 1
            with open(p, "wb") as f:
                f.write(raw)
            wh = warehouse_etl.open(d)
            try:
                w = warehouse_etl.Windows(wh, {self.fx["extra"]: [0]})
                with self.assertRaisesRegex(warehouse_etl.WarehouseError, "episodes.bin: .*sha256"):
                    w.gather([0])
            finally:
                wh.close()


class WindowsFromS3(unittest.TestCase):
    """windows= on an s3:// version: episodes.bin fetched into the cache and checked, the
    windows Go's (test_s3's versitygw and uploader; skipped without them, as there)."""

    def test_loader_windows_from_s3(self):
        fx = load(self)
        from tests import test_s3
        binary = test_s3._need_server(self)
        from warehouse_etl.torch import make_loader
        work = tempfile.mkdtemp(prefix="warehouse-windows-s3-")
        self.addCleanup(shutil.rmtree, work, True)
        server = test_s3.Server(binary, work)
        self.addCleanup(server.stop)
        test_s3.upload_version(server.client, test_s3.BUCKET, "w", fx["dir"])
        env = {"AWS_ACCESS_KEY_ID": test_s3.ACCESS, "AWS_SECRET_ACCESS_KEY": test_s3.SECRET,
               "AWS_REGION": "us-east-1"}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        self.addCleanup(lambda: [os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
                                 for k, v in saved.items()])
        cache = os.path.join(work, "cache")
        want, valid = np.array(fx["values"], dtype=np.float32), np.array(fx["valid"])
        seen = 0
        for mode in ("whole", "range"):
            loader = make_loader(f"s3://{test_s3.BUCKET}/w", 5, seed=3, windows={fx["extra"]: fx["offsets"]},
                                 cache_dir=cache, endpoint_url=server.endpoint, mode=mode)
            for b in loader:
                idx = b["index"].numpy()
                self.assertEqual(b["windows"][fx["extra"]].numpy().tobytes(), want[idx].tobytes())
                self.assertEqual(b["window_mask"][fx["extra"]].numpy().tolist(), valid[idx].tolist())
                seen += len(idx)
            vdir = loader.warehouse._vdir
            loader.dataset.close()
            with open(os.path.join(fx["dir"], "episodes.bin"), "rb") as f, \
                    open(os.path.join(vdir, "files", "episodes.bin"), "rb") as g:
                self.assertEqual(f.read(), g.read())
        self.assertGreater(seen, 0)


class ParseEpisodes(unittest.TestCase):
    """episodes.bin bytes written here from docs/format/manifest.md's table (no warehouse
    needed), and the reader's refusals."""

    def layout(self, episode, step, extras):
        n, e = len(episode), extras.shape[1]
        head = b"TWEP" + (1).to_bytes(4, "little") + n.to_bytes(8, "little") + e.to_bytes(4, "little") + bytes(4)
        body = np.asarray(episode, "<u4").tobytes()
        body += bytes(((24 + 4 * n + 7) & ~7) - 24 - 4 * n)
        return head + body + np.asarray(step, "<u8").tobytes() + np.asarray(extras, "<f4").tobytes()

    def test_layout_and_refusals(self):
        from warehouse_etl._windows import parse_episodes

        ex = np.arange(14, dtype=np.float32).reshape(7, 2)
        raw = self.layout([3, 3, 1, 3, 3, 3, 1], [0, 1, 11, 2, 6, 5, 10], ex)
        self.assertEqual(len(raw), 168)  # the worked example
        episode, step, extras = parse_episodes(raw, 7, 2)
        self.assertEqual(episode.tolist(), [3, 3, 1, 3, 3, 3, 1])
        self.assertEqual(step.tolist(), [0, 1, 11, 2, 6, 5, 10])
        self.assertEqual(extras.tobytes(), ex.tobytes())
        bad = {
            "shorter than": raw[:20], "want 168": raw[:-4], "magic": b"XXXX" + raw[4:],
            "manifest says 8 of 2": raw, "padding": raw[:53] + b"\x01" + raw[54:],
            "reserved": raw[:21] + b"\x01" + raw[22:], "version 2": raw[:4] + b"\x02" + raw[5:],
        }
        for what, b in bad.items():
            with self.assertRaisesRegex(ValueError, what):
                parse_episodes(b, 8 if what.startswith("manifest") else 7, 2)


if __name__ == "__main__":
    unittest.main()
