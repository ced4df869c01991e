"""warehouse_etl.torch: the DataLoader hands out the Go reader's batches with the Go
reader's values; workers deliver each index of an epoch exactly once across ranks."""
import os
import pickle
import threading
import unittest
import warnings
from unittest import mock

import numpy as np
import torch

import warehouse_etl
import warehouse_etl.torch as torchmod
import warehouse_etl.warehouse as whmod
from warehouse_etl.torch import (Normalize, PlannedBatch, WarehouseBatchSampler, WarehouseDataset, make_loader,
                                 normalize)
from tests._fixtures import Reference, fixture, raw


def reference(fx):
    wh = warehouse_etl.open(fx["dir"])
    l = wh.layout
    return wh, Reference(fx, wh.image_dtype, wh.box_dtype, wh.image_shape, l.max_boxes, l.extra_f32)


class Loader(unittest.TestCase):
    def test_batches_equal_go(self):
        fx = fixture(self, "f16")
        wh, ref = reference(fx)
        plan = next(p for p in ref.plans if p["shuffle"] == "shard" and p["remainder"] == "pad")
        loader = make_loader(fx["root"], plan["batch"], seed=plan["seed"], epoch=plan["epoch"], rank=plan["rank"],
                             world=plan["world"], shuffle="shard", remainder="pad")
        self.assertEqual(len(loader), len(plan["indices"]))
        got = list(loader)
        self.assertEqual([b["index"].tolist() for b in got], plan["indices"])
        self.assertEqual([b["repeats"] for b in got], plan["repeats"])
        for b in got:
            idx = b["index"].numpy()
            self.assertEqual(b["images"].dtype, torch.float16)
            self.assertEqual(b["boxes"].dtype, torch.float16)
            self.assertEqual(b["class_index"].dtype, torch.int32)
            self.assertEqual(b["index"].dtype, torch.int64)
            self.assertEqual(tuple(b["images"].shape), (plan["batch"],) + wh.image_shape)
            self.assertEqual(raw(b["images"].numpy()), raw(ref.images[idx]))
            self.assertEqual(raw(b["boxes"].numpy()), raw(ref.boxes[idx]))
            self.assertEqual(raw(b["mask"].numpy()), raw(ref.mask[idx]))
            self.assertEqual(raw(b["class_index"].numpy()), raw(ref.class_index[idx]))
            self.assertEqual(raw(b["box_count"].numpy()), raw(ref.box_count[idx]))

    def test_set_epoch_follows_go(self):
        fx = fixture(self, "f32")
        _, ref = reference(fx)
        p = next(p for p in ref.plans if p["shuffle"] == "global" and p["remainder"] == "drop" and p["epoch"] == 7)
        loader = make_loader(fx["dir"], p["batch"], seed=p["seed"], rank=p["rank"], world=p["world"])
        first = [b["index"].tolist() for b in loader]
        loader.set_epoch(p["epoch"])
        self.assertEqual([b["index"].tolist() for b in loader], p["indices"])
        self.assertNotEqual(first, p["indices"])
        self.assertEqual(loader.sampler.epoch, p["epoch"])

    def test_readers_deliver_each_index_once_per_rank_set(self):
        """make_loader's reader threads, and a DataLoader with worker processes built from
        the parts: each index of an epoch exactly once across the ranks."""
        fx = fixture(self, "f16")
        wh, ref = reference(fx)
        n, batch, world = len(wh), 2, 2

        def thread_loader(rank, epoch, **kw):
            return make_loader(fx["dir"], batch, seed=3, epoch=epoch, rank=rank, world=world, reader_threads=2, **kw)

        def process_loader(rank, epoch, **kw):
            sampler = WarehouseBatchSampler(fx["dir"], batch, seed=3, epoch=epoch, rank=rank, world=world, **kw)
            return torch.utils.data.DataLoader(WarehouseDataset(fx["dir"]), batch_size=None, sampler=sampler,
                                               num_workers=2)

        for name, make in (("threads", thread_loader), ("processes", process_loader)):
            for epoch in (0, 1):
                seen = []
                for rank in range(world):
                    for b in make(rank, epoch):
                        self.assertEqual(b["images"].is_shared(), name == "processes")
                        idx = b["index"].numpy()
                        self.assertEqual(raw(b["images"].numpy()), raw(ref.images[idx]))
                        seen.extend(idx.tolist())
                # drop: no index twice in an epoch across all ranks, and exactly
                # floor(N / (world*batch)) * world * batch of them delivered.
                self.assertEqual(len(seen), len(set(seen)), name)
                self.assertEqual(len(seen), n // (world * batch) * world * batch, name)
                self.assertTrue(set(seen) <= set(range(n)), name)
            # pad: every index at least once, the repeats are the only duplicates.
            seen, repeats = [], 0
            for rank in range(world):
                for b in make(rank, 0, remainder="pad"):
                    seen.extend(b["index"].tolist())
                    repeats += b["repeats"]
            self.assertEqual(set(seen), set(range(n)), name)
            self.assertEqual(len(seen) - repeats, n, name)

    def test_kept_batches_are_never_overwritten(self):
        """Batch memory is reused only when nothing references it: batches (and slices of
        them) kept across an epoch still hold their samples, while a loop that drops each
        batch runs in a bounded set of buffers."""
        fx = fixture(self, "u8")
        wh, ref = reference(fx)
        for workers in (0, 2):
            loader = make_loader(fx["dir"], 3, seed=5, reader_threads=workers)
            kept = list(loader)                                   # whole batches
            slices = [b["images"][1:2] for b in make_loader(fx["dir"], 3, seed=6, reader_threads=workers)]
            for _ in range(3):                                    # more epochs that churn the pool
                for b in loader:
                    pass
            for b in kept:
                self.assertEqual(raw(b["images"].numpy()), raw(ref.images[b["index"].numpy()]))
                self.assertEqual(raw(b["boxes"].numpy()), raw(ref.boxes[b["index"].numpy()]))
            want = [b["index"].numpy()[1:2] for b in make_loader(fx["dir"], 3, seed=6)]
            for got, idx in zip(slices, want):
                self.assertEqual(raw(got.numpy()), raw(ref.images[idx]))
            ptrs = set()
            for _ in range(3):
                for b in loader:
                    ptrs.add(b["images"].data_ptr())
            self.assertLessEqual(len(ptrs), 2 * workers + 4, f"{workers} readers: {len(ptrs)} buffers")

    def test_reader_threads_deliver_what_the_loop_reads(self):
        """The sampler yields plans only; with reader threads the dataset reads them ahead,
        in its threads, and the loader hands out the same batches (order, values,
        dtypes, repeats) as reading each when asked."""
        fx = fixture(self, "f16")
        kw = dict(seed=4, epoch=2, shuffle="shard", remainder="pad")
        want = list(make_loader(fx["dir"], 3, **kw))
        for pb in WarehouseBatchSampler(fx["dir"], 3, **kw):
            self.assertIs(type(pb), PlannedBatch)
            self.assertEqual(len(pb), 2)  # indices and repeats: no read under way travels with it
        loader = make_loader(fx["dir"], 3, reader_threads=2, **kw)
        ds = loader.dataset
        threads = []
        read = ds._read

        def recording(idx, repeats, shared):
            threads.append(threading.current_thread().name)
            return read(idx, repeats, shared)

        ds._read = recording
        for _ in range(2):
            got = list(loader)
            self.assertEqual(len(got), len(want))
            for g, w in zip(got, want):
                self.assertEqual(g.keys(), w.keys())
                self.assertEqual(g["repeats"], w["repeats"])
                for key in ("images", "boxes", "mask", "class_index", "box_count", "extras", "index"):
                    self.assertEqual(g[key].dtype, w[key].dtype, key)
                    self.assertEqual(raw(g[key].numpy()), raw(w[key].numpy()), key)
        self.assertEqual(len(threads), 2 * len(want))
        self.assertTrue(all(name.startswith("warehouse-read") for name in threads), threads)
        # An epoch left early, then a batch off the plan: read when asked, still right.
        it = iter(loader)
        next(it)
        b = ds[want[-1]["index"].numpy()]
        self.assertEqual(raw(b["images"].numpy()), raw(want[-1]["images"].numpy()))
        self.assertEqual([x["index"].tolist() for x in loader], [w["index"].tolist() for w in want])

    def test_reading_threads(self):
        """reader_threads' share of the CPUs reads whole batches side by side, one thread
        per batch ahead, before it splits a batch (torch._reading_threads)."""
        from warehouse_etl.torch import _reading_threads
        for readers, ahead, cpus, want in (
                (0, 0, 2, (0, 1)),
                (1, 2, 1, (1, 1)),
                (1, 2, 2, (2, 1)),    # two threads, a whole batch each (was one, split in two)
                (1, 1, 2, (1, 2)),    # prefetch_factor 1: one batch ahead, split
                (2, 4, 2, (2, 1)),
                (3, 6, 2, (3, 1)),    # more readers than CPUs: each reads alone
                (1, 2, 16, (2, 2)),   # 4 copying threads at most, over the 2 batches ahead
                (2, 4, 16, (4, 2)),
                (4, 8, 16, (8, 2)),
                (2, 2, 16, (2, 4))):  # never fewer threads than reader_threads
            with self.subTest(readers=readers, ahead=ahead, cpus=cpus):
                self.assertEqual(_reading_threads(readers, ahead, cpus), want)

    def test_one_reader_thread_reads_whole_batches_side_by_side(self):
        """With one reader thread on 2 CPUs, two threads read the batches ahead, each copying
        its batch alone, and the loop gets the batches it would read itself; on 16 CPUs
        each of the two splits its batch in two."""
        fx = fixture(self, "u8")
        kw = dict(seed=4, epoch=1, shuffle="global")
        want = [b["images"].numpy().copy() for b in make_loader(fx["dir"], 3, **kw)]
        for cpus, threads, copy in ((2, 2, 1), (16, 2, 2)):
            with self.subTest(cpus=cpus), mock.patch.object(torchmod, "_usable_cpus", lambda: cpus):
                loader = make_loader(fx["dir"], 3, reader_threads=1, **kw)
                ds = loader.dataset
                self.addCleanup(ds.close)
                self.assertEqual((ds._ahead._threads, ds._copy), (threads, copy))
                limits, read = [], ds._read

                def recording(idx, repeats, shared):
                    limits.append((threading.current_thread().name, whmod._copy_local.limit))
                    return read(idx, repeats, shared)

                ds._read = recording
                got = [b["images"].numpy().copy() for b in loader]
                self.assertEqual(len(got), len(want))
                for g, w in zip(got, want):
                    self.assertEqual(raw(g), raw(w))
                self.assertEqual(len(limits), len(want))
                for name, limit in limits:
                    self.assertTrue(name.startswith("warehouse-read"), name)
                    self.assertEqual(limit, copy)

    def test_num_workers_is_the_deprecated_name_of_reader_threads(self):
        fx = fixture(self, "f16")
        with self.assertWarns(DeprecationWarning) as cm:
            loader = make_loader(fx["dir"], 2, seed=1, num_workers=2)
        self.assertIn("reader_threads", str(cm.warning))
        self.assertEqual(loader.dataset.reader_threads, 2)
        self.assertEqual(loader.num_workers, 0)  # threads in this process, no worker processes
        want = [b["index"].tolist() for b in make_loader(fx["dir"], 2, seed=1, reader_threads=2)]
        self.assertEqual([b["index"].tolist() for b in loader], want)
        with self.assertRaises(TypeError), warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            make_loader(fx["dir"], 2, reader_threads=1, num_workers=2)

    def test_pin_memory(self):
        """pin_memory=True reads batches straight into page-locked memory (no DataLoader
        pinning thread, no second copy); without CUDA it warns and reads into ordinary
        memory. The batches are the unpinned loader's either way."""
        fx = fixture(self, "f16")
        want = [{k: raw(v.numpy()) for k, v in b.items() if k != "repeats"}
                for b in make_loader(fx["dir"], 4, reader_threads=1)]
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loader = make_loader(fx["dir"], 4, pin_memory=True, reader_threads=1)
        self.assertFalse(loader.pin_memory)  # the dataset pins; the DataLoader copies nothing more
        if torch.cuda.is_available():
            self.assertTrue(loader.dataset.pin_memory)
        else:
            self.assertFalse(loader.dataset.pin_memory)
            self.assertTrue(any("CUDA is not available" in str(w.message) for w in caught), caught)
        got = []
        for b in loader:
            for k, v in b.items():
                if k != "repeats":
                    self.assertEqual(v.is_pinned(), torch.cuda.is_available(), k)
            got.append({k: raw(v.numpy()) for k, v in b.items() if k != "repeats"})
        self.assertEqual(got, want)
        loader.dataset.close()

    def test_dataset_items_and_pickle(self):
        fx = fixture(self, "f16")
        wh, ref = reference(fx)
        ds = WarehouseDataset(fx["dir"])
        s = ds[3]
        self.assertEqual(raw(s["image"].numpy()), raw(ref.images[3]))
        self.assertEqual(s["index"].item(), 3)
        ds2 = pickle.loads(pickle.dumps(ds))
        b = ds2[PlannedBatch(np.array([4, 1]), 1)]
        self.assertEqual(b["repeats"], 1)
        self.assertEqual(raw(b["images"].numpy()), raw(ref.images[[4, 1]]))
        self.assertEqual(raw(ds2[[0, 2]]["boxes"].numpy()), raw(ref.boxes[[0, 2]]))

    def test_sampler_rank_world_default(self):
        fx = fixture(self, "f16")
        s = WarehouseBatchSampler(fx["dir"], 2)
        self.assertEqual((s.rank, s.world), (0, 1))
        with self.assertRaises(ValueError):
            WarehouseBatchSampler(fx["dir"], 10_000)  # cannot fill one batch


class Normalization(unittest.TestCase):
    def test_u8_normalize_equals_go(self):
        """normalize=True gives the Go reader's normalised values bit for bit (its table
        reproduces an F32 build); Normalize (float32 arithmetic) stays within 5e-7."""
        fx = fixture(self, "u8")
        wh, ref = reference(fx)
        go_norm = np.fromfile(os.path.join(fx["ref"], "normalized.bin"), dtype="<f4").reshape(ref.images.shape)
        np.testing.assert_array_equal(wh.normalize_images(ref.images).view(np.uint32), go_norm.view(np.uint32))
        raw_loader = make_loader(fx["dir"], 4, shuffle="none")
        norm_loader = make_loader(fx["dir"], 4, shuffle="none", normalize=True, reader_threads=2)
        n = 0
        for r, b in zip(raw_loader, norm_loader):
            self.assertEqual(r["images"].dtype, torch.uint8)
            self.assertEqual(b["images"].dtype, torch.float32)
            idx = b["index"].numpy()
            self.assertEqual(raw(r["images"].numpy()), raw(ref.images[idx]))
            self.assertEqual(raw(b["images"].numpy()), raw(go_norm[idx]))
            gpu_style = normalize(r["images"], wh).numpy()
            np.testing.assert_allclose(gpu_style, go_norm[idx], rtol=0, atol=5e-7)
            n += len(idx)
        self.assertEqual(n, len(wh) // 4 * 4)

    def test_normalize_module(self):
        """Normalize on a uint8 tensor follows the f32 warehouse's recorded mean/std;
        float images pass through (they were normalised at build time)."""
        fx = fixture(self, "f32")
        wh = warehouse_etl.open(fx["dir"])
        m = Normalize(wh)
        x = torch.arange(0, 256, dtype=torch.uint8).repeat(3 * 2, 1).view(2, 3, 16, 16)
        mean = np.array([0.485, 0.456, 0.406], dtype=np.float32)[:, None, None]
        std = np.array([0.229, 0.224, 0.225], dtype=np.float32)[:, None, None]
        want = (x.numpy().astype(np.float32) / np.float32(255) - mean) / std
        np.testing.assert_allclose(m(x).numpy(), want, rtol=1e-6, atol=1e-6)
        f = torch.ones(1, 3, 2, 2, dtype=torch.float16)
        self.assertIs(m(f), f)


if __name__ == "__main__":
    unittest.main()


class FailedConstruction(unittest.TestCase):
    """A make_loader or WarehouseDataset that fails raises its error and nothing else:
    collecting the half-made objects prints no "Exception ignored in ... __del__" (issue
    27), and a dataset that opened the warehouse itself closes it again."""

    SCRIPT = r"""
import gc, sys, threading, warnings
from warehouse_etl.torch import WarehouseDataset, make_loader
path, case = sys.argv[1], sys.argv[2]
calls = {
    "batch too big": lambda: make_loader(path, 100000),
    "batch too big, reader threads": lambda: make_loader(path, 100000, reader_threads=2),
    "negative reader threads": lambda: make_loader(path, 2, reader_threads=-1),
    "prefetch factor 0": lambda: WarehouseDataset(path, reader_threads=1, prefetch_factor=0),
    "no warehouse": lambda: WarehouseDataset(path + "/nonexistent", reader_threads=2),
}
try:
    calls[case]()
except Exception as e:
    print(type(e).__name__)
gc.collect()
print(sorted(t.name for t in threading.enumerate() if t.name.startswith("warehouse-read")))
"""

    def test_only_the_error(self):
        import subprocess
        import sys
        fx = fixture(self, "f16")
        for case, want in [("batch too big", "ValueError"), ("batch too big, reader threads", "ValueError"),
                           ("negative reader threads", "ValueError"), ("prefetch factor 0", "ValueError"),
                           ("no warehouse", "WarehouseError")]:
            with self.subTest(case=case):
                p = subprocess.run([sys.executable, "-c", self.SCRIPT, fx["dir"], case], capture_output=True,
                                   text=True, timeout=120)
                self.assertEqual(p.returncode, 0, p.stderr)
                self.assertEqual(p.stderr, "", "a failed construction printed more than its error")
                self.assertEqual(p.stdout.split("\n")[:2], [want, "[]"], p.stdout)

    def test_make_loader_failure_closes_the_warehouse_it_opened(self):
        """The readers lock (a shared flock on .<version>.readers) is released: an
        exclusive flock, what gc takes, succeeds right after the failure."""
        import fcntl
        import gc
        fx = fixture(self, "f16")
        d = fx["dir"].rstrip("/")
        lock_path = os.path.join(os.path.dirname(d), "." + os.path.basename(d) + ".readers")
        gc.disable()  # the close must come from make_loader, not from collection
        try:
            try:
                make_loader(fx["dir"], 100000, reader_threads=2)
                self.fail("make_loader of a batch larger than the warehouse did not raise")
            except ValueError as e:
                # The traceback keeps make_loader's frame and its dataset alive, as an
                # error being logged or re-raised does.
                tb = e.__traceback__
            with open(lock_path, "rb") as f:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises BlockingIOError while a reader holds it
                fcntl.flock(f, fcntl.LOCK_UN)
            del tb
        finally:
            gc.enable()
