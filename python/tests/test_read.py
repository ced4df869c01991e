"""Every tensor, class index and meta field read by warehouse_etl equals the Go reader's
(bitwise), through wh[i] and read_batch, for f16, f32 and u8 warehouses."""
import os
import unittest

import numpy as np

import warehouse_etl
from tests._fixtures import Reference, fixture, raw


class ReadMatchesGo(unittest.TestCase):
    def check(self, name, want_dtype):
        fx = fixture(self, name)
        wh = warehouse_etl.open(fx["root"])  # the root with `latest`
        self.assertEqual(os.path.realpath(wh.dir), os.path.realpath(fx["dir"]))
        self.assertEqual(wh.manifest["default_dtype"], want_dtype)
        self.assertGreaterEqual(len(wh.manifest["shards"]), 2, "want several shards")
        l = wh.layout
        ref = Reference(fx, wh.image_dtype, wh.box_dtype, wh.image_shape, l.max_boxes, l.extra_f32)
        n = len(wh)
        self.assertEqual(n, fx["samples"])
        for i in range(n):
            s = wh[i]
            self.assertEqual(raw(s["image"]), raw(ref.images[i]), f"sample {i} image")
            self.assertEqual(raw(s["boxes"]), raw(ref.boxes[i]), f"sample {i} boxes")
            self.assertEqual(raw(s["mask"]), raw(ref.mask[i]), f"sample {i} mask")
            self.assertEqual(s["class_index"].tolist(), ref.class_index[i].tolist(), f"sample {i} class_index")
            self.assertEqual(s["box_count"], ref.box_count[i])
            self.assertEqual(raw(s["extras_f32"]), raw(ref.extras[i]))
            self.assertEqual(s["meta"], ref.meta[i], f"sample {i} meta")
            self.assertFalse(s["image"].flags.writeable)
        # read_batch: everything at once, a shuffled batch with repeats, a run across a
        # shard boundary, and out= reuse.
        rng = np.random.default_rng(1)
        for idx in (np.arange(n), rng.permutation(n)[: max(1, n // 2)], np.array([n - 1, 0, 0, n - 1, 1]),
                    np.arange(n)[::-1], np.array([], dtype=np.int64)):
            b = wh.read_batch(idx)
            self.assertEqual(raw(b["images"]), raw(ref.images[idx]))
            self.assertEqual(raw(b["boxes"]), raw(ref.boxes[idx]))
            self.assertEqual(raw(b["mask"]), raw(ref.mask[idx]))
            self.assertEqual(raw(b["class_index"]), raw(ref.class_index[idx]))
            self.assertEqual(raw(b["box_count"]), raw(ref.box_count[idx]))
            self.assertEqual(raw(b["extras"]), raw(ref.extras[idx]))
            self.assertEqual(b["index"].tolist(), idx.tolist())
            self.assertEqual(b["records"]["frame_id"].tolist(), [ref.meta[i]["frame_id"] for i in idx])
        out = wh.allocate_batch(4)
        for start in range(0, n - 3, 3):
            idx = np.arange(start, start + 4)
            got = wh.read_batch(idx, out=out)
            self.assertIs(got, out)
            self.assertEqual(raw(out["images"]), raw(ref.images[idx]))
        with self.assertRaises(ValueError):
            wh.read_batch([0, 1], out=out)  # wrong batch size
        with self.assertRaises(IndexError):
            wh.read_batch([n])
        with self.assertRaises(IndexError):
            wh[n]
        wh.close()
        return wh

    def test_f16(self):
        self.check("f16", "F16")

    def test_f32(self):
        wh = self.check("f32", "F32")
        self.assertEqual(wh.mean, [0.485, 0.456, 0.406])

    def test_u8(self):
        wh = self.check("u8", "U8")
        self.assertEqual(wh.image_dtype, np.dtype("u1"))
        self.assertEqual(wh.box_dtype, np.dtype("<f4"))

    def test_pickle_reopens(self):
        import pickle
        fx = fixture(self, "f16")
        wh = warehouse_etl.open(fx["dir"])
        a = wh.read_batch([0, 3])
        wh2 = pickle.loads(pickle.dumps(wh))
        self.assertEqual(raw(wh2.read_batch([0, 3])["images"]), raw(a["images"]))

    def test_reads_the_directory_it_opened(self):
        """A Warehouse reads the version directory it opened, through a handle, whatever
        takes its name later (a forced rebuild swaps a new directory in), and holds a shared
        flock on that directory until close, which `warehouse-etl` needs exclusively to
        remove it. An unpickled copy refuses a name that is now another directory."""
        import fcntl
        import pickle
        import shutil
        import tempfile
        fx = fixture(self, "f16")
        with tempfile.TemporaryDirectory() as tmp:
            v = os.path.join(tmp, os.path.basename(os.path.normpath(fx["dir"])))
            shutil.copytree(fx["dir"], v)
            wh = warehouse_etl.open(v)
            want = raw(wh.read_batch([0])["images"])
            copy = pickle.dumps(wh)
            fd = os.open(v, os.O_RDONLY | os.O_DIRECTORY)
            try:
                with self.assertRaises(BlockingIOError):
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(fd)
            os.rename(v, v + ".aside")  # what a forced rebuild's swap does to the name
            shutil.copytree(v + ".aside", v)
            last = len(wh) - 1
            self.assertEqual(raw(wh.read_batch([0])["images"]), want)
            wh.read_batch([last])  # a shard first opened after the swap: the old directory's
            with self.assertRaisesRegex(warehouse_etl.WarehouseError, "replaced by another build"):
                pickle.loads(copy).read_batch([0])
            wh.close()
            fd = os.open(v + ".aside", os.O_RDONLY | os.O_DIRECTORY)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free once closed
            finally:
                os.close(fd)

    def test_open_holds_the_readers_lock(self):
        """While a Warehouse is open it holds the version's readers lock shared, so
        `warehouse-etl gc` (which needs it exclusively) leaves the version alone."""
        import fcntl
        fx = fixture(self, "f16")
        wh = warehouse_etl.open(fx["root"])
        root, name = os.path.split(os.path.normpath(wh.dir))
        with open(os.path.join(root, "." + name + ".readers"), "rb") as f:
            with self.assertRaises(BlockingIOError):
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            wh.close()
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # free once closed
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def test_version_dir_and_not_a_warehouse(self):
        fx = fixture(self, "f16")
        self.assertEqual(len(warehouse_etl.open(fx["dir"])), fx["samples"])
        parent = os.path.dirname(fx["root"])
        with self.assertRaises(warehouse_etl.WarehouseError) as cm:
            warehouse_etl.open(parent)
        self.assertEqual(str(cm.exception),
                         f'{parent}: neither a warehouse version (no manifest.json) nor a root with a "latest" pointer')

    def test_pointer_paths(self):
        """ROOT/latest and ROOT/latest-<config> name the version beside them (reading.md,
        Opening 1), as the Go reader resolves them."""
        fx = fixture(self, "f16")
        root = fx["root"]
        pointers = [n for n in os.listdir(root) if n.startswith("latest-") and os.path.islink(os.path.join(root, n))]
        self.assertEqual(len(pointers), 1, f"want one config pointer in {root}: {os.listdir(root)}")
        for name in ["latest", pointers[0]]:
            wh = warehouse_etl.open(os.path.join(root, name))
            self.assertEqual(wh.dir, os.path.join(root, os.readlink(os.path.join(root, name))))
            self.assertEqual(os.path.realpath(wh.dir), os.path.realpath(fx["dir"]))
            wh.close()


if __name__ == "__main__":
    unittest.main()
