"""Per-sample CRC-32Cs (shard.md, "Checksum section"): the CRC implementations against
the definition, the golden shards' tables, the verify_samples modes on a damaged copy
(the refusal's words are the Go reader's: test_damaged.py), and an older warehouse
without checksum sections, read unchecked."""
import ctypes
import os
import platform
import unittest
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import warehouse_etl
from warehouse_etl import _crc32c
from tests._fixtures import EXPECT_COPYCRC, REPO, fixture, load_damaged, load_unchecked, need_data, raw


def crc32c_bitwise(data):
    """CRC-32C one bit at a time from its definition: the reference."""
    crc = 0xFFFFFFFF
    for b in bytes(data):
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
    return crc ^ 0xFFFFFFFF


def backends():
    """Every CRC-32C implementation this machine has (numpy always)."""
    return list(_crc32c.BACKENDS)


class CRC32C(unittest.TestCase):
    def test_check_value(self):
        self.assertEqual(crc32c_bitwise(b"123456789"), 0xE3069283)
        for backend in backends():
            with self.subTest(backend):
                self.assertEqual(_crc32c.crc32c(b"123456789", backend=backend), 0xE3069283)

    def test_lengths_and_rows(self):
        rng = np.random.default_rng(7)
        for n in (0, 1, 3, 4, 5, 7, 8, 9, 511, 512, 513, 2047, 4096, 8883):
            a = rng.integers(0, 256, size=(3, n), dtype=np.uint8)
            want = [crc32c_bitwise(a[r]) for r in range(3)]
            for backend in backends():
                with self.subTest(n=n, backend=backend):
                    self.assertEqual(_crc32c.crc32c_rows([a], [0, 1, 2], backend=backend).tolist(), want)
        # A row is the concatenation of several arrays of any dtype, structured included.
        images = rng.integers(0, 256, size=(4, 3, 5, 7), dtype=np.uint8)
        boxes = rng.random((4, 2, 4)).astype(np.float16)
        mask = np.ones((4, 2), dtype=np.float16)
        records = np.zeros(4, dtype=np.dtype({"names": ["x"], "formats": ["<u8"], "offsets": [8], "itemsize": 96}))
        records["x"] = [1, 2, 3, 4]
        extras = np.zeros((4, 0), dtype=np.float32)
        rows = [3, 0, 2]
        want = [crc32c_bitwise(images[r].tobytes() + boxes[r].tobytes() + mask[r].tobytes() + records[r:r + 1].tobytes())
                for r in rows]
        for backend in backends():
            with self.subTest(backend=backend):
                got = _crc32c.crc32c_rows([images, boxes, mask, records, extras], rows, backend=backend)
                self.assertEqual(got.tolist(), want)

    def test_rows_with_large_parts(self):
        """Rows whose image part is large enough to be checked with the GIL released
        (RELEASE_BYTES) and whose other parts are checked holding it: the same CRCs on
        every backend, the register carried across both kinds of call."""
        rng = np.random.default_rng(9)
        side = int((_crc32c.RELEASE_BYTES // 3) ** 0.5) + 2
        images = rng.integers(0, 256, size=(3, 3, side, side), dtype=np.uint8)
        self.assertGreaterEqual(images[0].nbytes, _crc32c.RELEASE_BYTES)
        boxes = rng.random((3, 4, 4)).astype(np.float32)
        rows = [2, 0]
        want = [crc32c_bitwise(images[r].tobytes() + boxes[r].tobytes()) for r in rows]
        for backend in backends():
            with self.subTest(backend=backend):
                self.assertEqual(_crc32c.crc32c_rows([images, boxes], rows, backend=backend).tolist(), want)

    def test_parts(self):
        """crc32c_parts continues the CRC over each part: the CRC of their bytes joined,
        empty parts and parts of other dtypes included."""
        rng = np.random.default_rng(8)
        parts = [rng.integers(0, 256, size=16, dtype=np.uint8), np.zeros(0, dtype=np.uint8),
                 rng.integers(0, 256, size=(5, 700), dtype=np.uint8)[2], rng.random(9).astype(np.float16),
                 rng.integers(0, 256, size=4099, dtype=np.uint8)]
        want = crc32c_bitwise(b"".join(p.tobytes() for p in parts))
        for backend in backends():
            with self.subTest(backend=backend):
                self.assertEqual(_crc32c.crc32c_parts(parts, backend=backend), want)
                self.assertEqual(_crc32c.crc32c_parts([], backend=backend), 0)

    def test_golden_tables(self):
        """The golden shards' checksum tables (shard/testdata/golden, spelled out in
        shard/golden_test.go) hold the CRC-32C of each sample's bytes."""
        # (offset, bytes per sample) of image, boxes, mask, records, extras.
        layouts = {
            "f16": ((80, 36), (152, 24), (200, 6), (240, 96), (432, 0)),
            "f32": ((80, 72), (224, 32), (288, 8), (328, 88), (504, 8)),
            "u8": ((80, 9), (104, 32), (168, 8), (208, 88), (384, 0)),
        }
        for name, sections in layouts.items():
            with self.subTest(name):
                with open(os.path.join(REPO, "shard", "testdata", "golden", name + ".twh"), "rb") as f:
                    b = f.read()
                start = int(np.frombuffer(b, "<u8", 1, 72)[0])
                self.assertEqual(b[start:start + 4], b"TWCK")
                table = np.frombuffer(b, "<u4", 2, start + 16).tolist()
                for i in range(2):
                    data = b"".join(b[off + i * n:off + (i + 1) * n] for off, n in sections)
                    self.assertEqual(crc32c_bitwise(data), table[i], f"sample {i}")
                    self.assertEqual(_crc32c.crc32c(data), table[i])
                self.assertEqual(_crc32c.crc32c(b[start:-4]), int(np.frombuffer(b, "<u4", 1, len(b) - 4)[0]))


def cpu_flags():
    """The flags of /proc/cpuinfo's first processor ("flags" on x86-64, "Features" on
    arm64; empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("flags", "Features")):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def copycrc_level(flags):
    """The fold level (MAX_LEVEL) and its name warehouse_etl._copycrc must find on a CPU
    with these /proc/cpuinfo flags."""
    if platform.machine() in ("aarch64", "arm64"):
        level = 0 if "crc32" not in flags else 2 if "pmull" in flags else 1
        return level, ["", "armv8-crc32", "armv8-crc32-pmull"][level]
    level = 2 if {"avx2", "vpclmulqdq", "pclmulqdq", "sse4_2"} <= flags else \
        1 if {"pclmulqdq", "sse4_2"} <= flags else 0
    return level, ["", "sse4.2-pclmulqdq", "avx2-vpclmulqdq"][level]


def need_copycrc(test):
    """The compiled copy-and-check (_crc32c.COPY_CRC), or skip; where the harness built it
    (EXPECT_COPYCRC) on a CPU with its instructions, a missing one fails."""
    if _crc32c.COPY_CRC is None:
        if EXPECT_COPYCRC and copycrc_level(cpu_flags())[0] > 0:
            test.fail("warehouse_etl._copycrc was built and this CPU has its instructions, "
                      "but _crc32c.COPY_CRC is None")
        test.skipTest("no compiled copy-and-check here (warehouse_etl._copycrc not built, or no "
                      "PCLMULQDQ or CRC32 instructions)")
    return _crc32c.COPY_CRC


class CopyCRC(unittest.TestCase):
    """warehouse_etl._copycrc (a copy and its CRC-32C in one pass) against the bit-by-bit
    definition and the numpy implementation."""

    def test_built_and_detected(self):
        """Where the harness built it, the module imports, and says it runs exactly where
        /proc/cpuinfo has its instructions."""
        if not EXPECT_COPYCRC:
            self.skipTest("warehouse_etl._copycrc not built for these tests")
        from warehouse_etl import _copycrc
        want, name = copycrc_level(cpu_flags())
        self.assertEqual(_copycrc.MAX_LEVEL, want)
        self.assertEqual(_copycrc.LEVEL, name)
        self.assertEqual(_copycrc.AVAILABLE, want > 0)
        self.assertEqual(_crc32c.COPY_CRC is not None, want > 0)

    def modes(self, m):
        """Each fold level this CPU runs (set_level), each with copies stored through the
        caches and past them (set_stream_bytes: 0, every copy); yields the mode's name, the
        defaults restored after the test."""
        self.addCleanup(m.set_level, m.MAX_LEVEL)
        self.addCleanup(m.set_stream_bytes, m.set_stream_bytes(1 << 62))
        for level in range(1, m.MAX_LEVEL + 1):
            for stream in (1 << 62, 0):
                m.set_stream_bytes(stream)
                yield m.set_level(level) + (", streaming stores" if stream == 0 else "")

    def test_lengths_offsets_and_registers(self):
        """Every length up to 700 and around the vector loop's steps and the GIL's
        threshold, from and to unaligned addresses, continued from another register: the
        bytes copied exactly, nothing around them touched, the CRC the definition's; at
        every fold level, storing through the caches and past them."""
        m = need_copycrc(self)
        for mode in self.modes(m):
            with self.subTest(mode=mode):
                self.lengths_offsets_and_registers(m)

    def lengths_offsets_and_registers(self, m):
        rng = np.random.default_rng(11)
        lengths = list(range(0, 700)) + [1023, 1024, 1025, 4095, 4096, 4097, 10239, 10240, 10241, 20557,
                                         _crc32c.RELEASE_BYTES - 1,
                                         _crc32c.RELEASE_BYTES, _crc32c.RELEASE_BYTES + 129, 442368 + 5]
        src = rng.integers(0, 256, size=max(lengths) + 64, dtype=np.uint8)
        for n in lengths:
            for so, do in ((0, 0), (1, 3), (5, 0), (31, 17)):
                data = src[so:so + n]
                want = crc32c_bitwise(data) if n <= 2048 else _crc32c.crc32c(data, backend="numpy")
                dst = np.full(n + 64, 0xA5, dtype=np.uint8)
                got = m.copy_crc32c(dst.ctypes.data + do, data.ctypes.data, n, 0xFFFFFFFF) ^ 0xFFFFFFFF
                self.assertEqual(got, want, f"copy_crc32c n={n} offsets {so},{do}")
                self.assertTrue(np.array_equal(dst[do:do + n], data), f"copied bytes n={n}")
                self.assertTrue((dst[:do] == 0xA5).all() and (dst[do + n:] == 0xA5).all(), f"around n={n}")
                self.assertEqual(m.crc32c(data.ctypes.data, n, 0xFFFFFFFF) ^ 0xFFFFFFFF, want, f"crc32c n={n}")
            # Continued: the register after a first part carried into the copy of the rest.
            if n >= 2:
                k = n // 3
                head = m.crc32c(src.ctypes.data, k, 0xFFFFFFFF)
                dst = np.zeros(n, dtype=np.uint8)
                reg = m.copy_crc32c(dst.ctypes.data, src.ctypes.data + k, n - k, head)
                self.assertEqual(reg ^ 0xFFFFFFFF, m.crc32c(src.ctypes.data, n, 0xFFFFFFFF) ^ 0xFFFFFFFF, f"continued n={n}")

    def test_blocks(self):
        """count blocks of n bytes, contiguous at src, each to its own place (stride): the
        bytes in place, the gaps untouched, the CRC of the contiguous source; at every fold
        level, storing through the caches and past them."""
        m = need_copycrc(self)
        rng = np.random.default_rng(13)
        for mode in self.modes(m):
            with self.subTest(mode=mode):
                for n, count, stride in ((0, 3, 5), (1, 3, 4), (300, 3, 1000), (41 * 40, 3, 41 * 97), (30000, 3, 30000)):
                    src = rng.integers(0, 256, size=n * count, dtype=np.uint8)
                    dst = np.full(stride * count + 7, 0x5A, dtype=np.uint8)
                    got = m.copy_crc32c(dst.ctypes.data + 7, src.ctypes.data, n, 0xFFFFFFFF, count, stride) ^ 0xFFFFFFFF
                    self.assertEqual(got, _crc32c.crc32c(src, backend="numpy"), (n, count, stride))
                    want = np.full_like(dst, 0x5A)
                    for k in range(count):
                        want[7 + k * stride:7 + k * stride + n] = src[k * n:(k + 1) * n]
                    self.assertTrue(np.array_equal(dst, want), (n, count, stride))

    def test_rows(self):
        """crc32c_rows: row r of each (address, row bytes) part in turn, continued from a
        register, as the CRC of their concatenation; empty parts and no parts."""
        m = need_copycrc(self)
        rng = np.random.default_rng(14)
        arrays = [rng.integers(0, 256, size=(5, n), dtype=np.uint8) for n in (16, 0, 4, 96, 300)]
        parts = tuple((a.ctypes.data, a.shape[1]) for a in arrays)
        for mode in self.modes(m):
            with self.subTest(mode=mode):
                for r in range(5):
                    head = m.crc32c(arrays[4].ctypes.data, 7, 0xFFFFFFFF)
                    want = _crc32c.crc32c(bytes(arrays[4][0, :7]) + b"".join(bytes(a[r]) for a in arrays),
                                          backend="numpy")
                    self.assertEqual(m.crc32c_rows(parts, r, head) ^ 0xFFFFFFFF, want, r)
                self.assertEqual(m.crc32c_rows((), 3, 0x1234), 0x1234)

    def test_gather_rows(self):
        """gather_rows against numpy on made-up shards: plain images of 1 and 2 bytes a
        value and compact ones (bands as wide as the image, narrower rectangles at x 0 and
        further in, an empty region; several pad values), each with small rows of 3 sizes;
        rows out of order, every byte of the batch written, the CRCs of the samples to check
        the tables' (entry, region as stored, then the small rows), the others' untouched;
        probe 2 leaves every sample alone, probe 0 none; the samples taken through a shared
        claims counter by one call and by three threads at once, each exactly once; at every
        fold level, storing through the caches and past them."""
        m = need_copycrc(self)
        for mode in self.modes(m):
            for compact, elem, big in ((False, 1, False), (False, 2, False), (True, 1, False), (True, 1, True)):
                with self.subTest(mode=mode, compact=compact, elem=elem, big=big):
                    self.gather_case(m, compact, elem, big)

    def gather_case(self, m, compact, elem, big=False):
        """big: compact images whose pad bands above and below the region reach
        pad_band's streaming size (4 KiB), some samples flagged as in a batch that has
        left the caches (flag bit 1: their pad stored past them when streaming)."""
        from warehouse_etl import _compact
        rng = np.random.default_rng(17)
        c, h, w, sizes = (3, 120, 128, (64, 3, 20)) if big else (3, 37, 41, (64, 3, 20))
        img = c * h * w * elem
        rects = ([(0, 40, w, 40), (5, 33, 100, 50), (0, 0, 0, 0), (0, 0, w, h), (7, 9, 1, 1), (0, 70, w, 1),
                  (0, 0, w, 60)] if big else
                 [(0, 5, w, 20), (3, 2, 30, 31), (0, 0, 0, 0), (0, 0, w, h), (7, 9, 1, 1), (0, 36, w, 1), (0, 4, 20, 10)])
        n = len(rects)
        order = [4, 0, 5, 2, 1, 3, 6]  # sample j goes to row order[j]
        check = [1, 0, 1, 1, 0, 1, 1]
        cold = [1, 1, 1, 0, 1, 1, 0] if big else [0] * n
        small_src = [rng.integers(0, 256, size=(n, z), dtype=np.uint8) for z in sizes]
        if compact:  # regions back to back after 8 bytes; the entries apart, as a shard's table
            regions = [rng.integers(0, 256, size=c * rw * rh, dtype=np.uint8) for _, _, rw, rh in rects]
            src = np.concatenate([np.zeros(8, np.uint8)] + regions)
            offs = np.cumsum([8] + [r.size for r in regions])[:-1]
            table = np.array([(offs[j],) + rects[j] for j in range(n)], dtype=_compact.ENTRY)
            pads = [114, 0, 255, 114, 7, 114, 3]
            want_img = np.empty((n, c, h, w), np.uint8)
            for j in range(n):
                _compact.restore(want_img[j], regions[j], table[j], pads[j])
            stored = [table[j:j + 1].view(np.uint8).tobytes() + regions[j].tobytes() for j in range(n)]
            image_at = [src.ctypes.data] * n
            entry_at = [table.ctypes.data + 16 * j for j in range(n)]
        else:
            src = want_img = rng.integers(0, 256, size=(n, img), dtype=np.uint8)
            stored, pads = [src[j].tobytes() for j in range(n)], [0] * n
            image_at, entry_at = [src.ctypes.data + j * img for j in range(n)], [0] * n
        jobs = np.array([[image_at[j], entry_at[j], order[j], check[j] | cold[j] << 1 | pads[j] << 8] +
                         [a.ctypes.data + j * a.shape[1] for a in small_src] for j in range(n)], dtype=np.int64)
        # Each probe in one call; then every sample taken through a shared claims counter,
        # by one call and by three threads at once.
        for probe, threads in ((1, 0), (0, 0), (2, 0), (1, 1), (1, 3), (2, 3)):
            out_img = np.full((n, img), 0xA5, np.uint8)
            out_small = [np.full((n, z), 0xA5, np.uint8) for z in sizes]
            status = np.full(n, 9, np.uint8)
            crcs = np.full(n, 0xDEADBEEF, np.uint32)
            params = (out_img.ctypes.data, img, c, h, w, tuple((a.ctypes.data, a.shape[1]) for a in out_small))
            args = (jobs.ctypes.data, n, params, status.ctypes.data, crcs.ctypes.data, probe)
            if threads:
                claims = np.zeros(1, np.int64)
                with ThreadPoolExecutor(threads) as pool:
                    skipped = sum(pool.map(lambda _: m.gather_rows(*args, claims.ctypes.data), range(threads)))
                self.assertEqual(int(claims[0]), n + threads)  # each call's last claim finds none left
            else:
                skipped = m.gather_rows(*args)
            if probe == 2:
                self.assertEqual((skipped, status.tolist()), (n, [1] * n))
                self.assertTrue((out_img == 0xA5).all() and all((a == 0xA5).all() for a in out_small))
                continue
            self.assertEqual((skipped, status.tolist()), (0, [0] * n))
            for j in range(n):
                r = order[j]
                self.assertEqual(out_img[r].tobytes(), want_img[j].tobytes(), (probe, threads, j))
                rows = b"".join(b[j].tobytes() for b in small_src)
                for a, b in zip(out_small, small_src):
                    self.assertEqual(a[r].tobytes(), b[j].tobytes(), (probe, threads, j))
                want = crc32c_bitwise(np.frombuffer(stored[j] + rows, np.uint8)) if check[j] else 0xDEADBEEF
                self.assertEqual(int(crcs[j]), want, (probe, threads, j))

    def test_bad_arguments(self):
        m = need_copycrc(self)
        a = np.zeros(8, dtype=np.uint8)
        with self.assertRaises(TypeError):
            m.crc32c(a.ctypes.data, 8)
        with self.assertRaises(TypeError):
            m.crc32c(a.ctypes.data, 8.0, 0)
        with self.assertRaises(ValueError):
            m.crc32c(a.ctypes.data, 8, 1 << 32)
        with self.assertRaises(OverflowError):
            m.copy_crc32c(a.ctypes.data, a.ctypes.data, -1, 0)
        with self.assertRaises(TypeError):
            m.copy_crc32c(a.ctypes.data, a.ctypes.data, 8, 0, 1)
        with self.assertRaises(OverflowError):
            m.copy_crc32c(a.ctypes.data, a.ctypes.data, 1 << 40, 0, 1 << 40, 0)
        for level in (0, m.MAX_LEVEL + 1):
            with self.assertRaises(ValueError):
                m.set_level(level)
        p = a.ctypes.data
        for args, err in ((([p, 8],), TypeError), (((p, 8), 0), TypeError), ((((p, 8, 1),), 0, 0), TypeError),
                          ((((p, 8.0),), 0, 0), TypeError), ((((p, 8),), 0, 1 << 32), ValueError),
                          ((((p, 1),) * 17, 0, 0), ValueError), ((((p, 8),), 1 << 62, 0), OverflowError)):
            with self.subTest(crc32c_rows=args), self.assertRaises(err):
                m.crc32c_rows(*args)
        small = ((p, 1),)
        for args, err in (((p, 0, (p, 8, 1, 1, 8, small), p, p), TypeError),
                          ((p, 0, (p, 8, 1, 1, 8), p, p, 1), TypeError),
                          ((p, 0, (p, 8, 1, 1, 8, [(p, 1)]), p, p, 1), TypeError),
                          ((p, 0, (p, 8, 1, 1, 8, ((p, 1, 1),)), p, p, 1), TypeError),
                          ((p, 0, (p, 8, 1, 1, 8, small), p, p, 3), ValueError),
                          ((p, 0, (p, 8, 1, 1, 8, small * 17), p, p, 1), ValueError),
                          ((p, 0, (p, 8, 3, 1, 8, small), p, p, 1), ValueError),
                          ((p, 0, (p, 8, 1, 1 << 21, 1, small), p, p, 1), ValueError),
                          ((p, -1, (p, 8, 1, 1, 8, small), p, p, 1), OverflowError),
                          ((p, 0, (p, 8, 1, 1, 8, small), p, p, 1, 1.0), TypeError),
                          ((p, 0, (p, 8, 1, 1, 8, small), p, p, 1, p, p), TypeError)):
            with self.subTest(gather_rows=args), self.assertRaises(err):
                m.gather_rows(*args)
        self.assertEqual(m.gather_rows(p, 0, (p, 8, 1, 1, 8, small), p, p, 1), 0)
        with self.assertRaises(TypeError):
            m.set_stream_bytes(1.0)
        with self.assertRaises(OverflowError):
            m.set_stream_bytes(-1)

    def test_row_function(self):
        """copy_row_function: a row's image copied from an address and the CRC of the whole
        row (image, then the other arrays' row as they are), as crc32c_rows gives it."""
        need_copycrc(self)
        rng = np.random.default_rng(12)
        stored = rng.integers(0, 256, size=(3, 3, 40, 41), dtype=np.uint8)
        images = np.zeros_like(stored)
        boxes = rng.random((3, 4, 4)).astype(np.float32)
        empty = np.zeros((3, 0), dtype=np.float32)
        records = np.zeros(3, dtype=np.dtype({"names": ["x"], "formats": ["<u8"], "offsets": [8], "itemsize": 96}))
        records["x"] = [7, 8, 9]
        f = _crc32c.copy_row_function([images, boxes, empty, records])
        for r, s in ((2, 0), (0, 1)):
            got = f(r, stored[s].ctypes.data)
            self.assertTrue(np.array_equal(images[r], stored[s]))
            want = crc32c_bitwise(stored[s].tobytes() + boxes[r].tobytes() + records[r:r + 1].tobytes())
            self.assertEqual(got, want)
        self.assertFalse(images[1].any())


def unchecked_read(test, name, seed):
    """Fixture ``name``, a shuffled order of all its samples, and their batch read with
    verify_samples=False: what checked reads must hand out."""
    fx = fixture(test, name)
    unchecked = warehouse_etl.open(fx["dir"], verify_samples=False)
    test.addCleanup(unchecked.close)
    order = np.random.default_rng(seed).permutation(len(unchecked))
    return fx, order, unchecked.read_batch(order)


def each_layout(test, body):
    """body(name, threads, order, want, wh) in a subTest per layout fixture (f16, u8,
    compact with both kinds of regions) and 1 and 3 copy threads: the fixture's samples in a
    shuffled order, their unchecked read (unchecked_read) and a checked reader of it."""
    for name in ("f16", "u8", "u8compact", "u8compactwide"):
        for threads in (1, 3):
            with test.subTest(name=name, threads=threads):
                fx, order, want = unchecked_read(test, name, 6)
                wh = warehouse_etl.open(fx["dir"])
                test.addCleanup(wh.close)
                body(name, threads, order, want, wh)


def damaged(test, name):
    need_data(test)
    return next(c for c in load_damaged() if c["name"] == name)


class Backend(unittest.TestCase):
    def test_hardware_crc_where_users_install(self):
        """CI installs what users get (.ci/run: python3-crc32c, libisal2): the checks use
        the CPU's CRC instructions there. Elsewhere this only reports."""
        if os.environ.get("CI") == "true":
            self.assertTrue(_crc32c.HARDWARE, f"CRC-32C backend {_crc32c.BACKEND} of {_crc32c.BACKENDS}: "
                                              f"want ISA-L (libisal2) or a hardware crc32c package")
        elif not _crc32c.HARDWARE:
            self.skipTest(f"CRC-32C in software here ({_crc32c.BACKEND})")
        self.assertIsNotNone(_crc32c.checker())

    def test_numpy_fallback_warns_once(self):
        saved, saved_warned = _crc32c.BACKEND, _crc32c._warned
        _crc32c.BACKEND, _crc32c._warned = "numpy", False
        try:
            with warnings.catch_warnings(record=True) as got:
                warnings.simplefilter("always")
                self.assertEqual(_crc32c.crc32c(b"123456789"), 0xE3069283)
                self.assertEqual(_crc32c.crc32c_rows([np.zeros((2, 9), np.uint8)], [0, 1]).shape, (2,))
                _crc32c.crc32c(b"123456789", backend="numpy")  # asked for by name: no warning
            self.assertEqual(len(got), 1, [str(w.message) for w in got])
            self.assertIs(got[0].category, RuntimeWarning)
            self.assertIn("crc32c", str(got[0].message))
            self.assertIsNone(_crc32c.checker())  # numpy holds the GIL: no checker threads
        finally:
            _crc32c.BACKEND, _crc32c._warned = saved, saved_warned


class VerifySamples(unittest.TestCase):
    def test_modes_on_a_flipped_image_byte(self):
        case = damaged(self, "flipped image byte")
        i = case["sample"]
        # Default: refused on every read (a sample that failed is not remembered).
        wh = warehouse_etl.open(case["path"])
        self.assertEqual(wh.sample_checksums()[0], wh.sample_checksums()[1])
        for _ in range(2):
            with self.assertRaises(warehouse_etl.WarehouseError) as cm:
                wh.read_batch([i])
            self.assertEqual(str(cm.exception), case["go_error"])
        # The first bad row of a batch is named; good rows around it do not hide it.
        with self.assertRaises(warehouse_etl.WarehouseError) as cm:
            wh.read_batch([0, i, len(wh) - 1])
        self.assertEqual(str(cm.exception), case["go_error"])
        # The other samples read, each checked once.
        others = [j for j in range(len(wh)) if j != i]
        before = wh.samples_verified
        wh.read_batch(others)
        wh.read_batch(others)
        self.assertEqual(wh.samples_verified - before, len(others) - 2)  # 0 and n-1 passed above
        # "always": every read is checked.
        wh = warehouse_etl.open(case["path"], verify_samples="always")
        wh.read_batch(others)
        wh.read_batch(others)
        self.assertEqual(wh.samples_verified, 2 * len(others))
        with self.assertRaises(warehouse_etl.WarehouseError):
            wh[i]
        # False: the flipped bytes are handed out, nothing is checked.
        wh = warehouse_etl.open(case["path"], verify_samples=False)
        pristine = warehouse_etl.open(fixture(self, "f16")["dir"])
        got, want = wh.read_batch([i])["images"], pristine.read_batch([i])["images"]
        self.assertNotEqual(raw(got), raw(want))
        self.assertEqual(np.count_nonzero(got.view(np.uint8) != want.view(np.uint8)), 1)
        wh[i]
        self.assertEqual(wh.samples_verified, 0)
        with self.assertRaises(ValueError):
            warehouse_etl.open(case["path"], verify_samples="sometimes")

    def test_numpy_backend_reads_and_refuses_alike(self):
        case = damaged(self, "flipped record byte")
        saved = _crc32c.BACKEND
        _crc32c.BACKEND = "numpy"
        try:
            warnings.simplefilter("ignore", RuntimeWarning)  # test_numpy_fallback_warns_once's
            wh = warehouse_etl.open(case["path"])
            with self.assertRaises(warehouse_etl.WarehouseError) as cm:
                wh[case["sample"]]
            self.assertEqual(str(cm.exception), case["go_error"])
            for name in ("f16", "f32", "u8"):
                fx = fixture(self, name)
                wh = warehouse_etl.open(fx["dir"], verify_samples="always")
                wh.read_batch(np.arange(len(wh)))
                self.assertEqual(wh.samples_verified, len(wh))
        finally:
            _crc32c.BACKEND = saved
            warnings.resetwarnings()

    def test_checks_in_pieces_of_one_sample(self):
        """Checks made piece by piece, one sample a piece, by three copy threads: the
        same refusals and counts as one check per batch, "always" too."""
        from unittest import mock

        from warehouse_etl import warehouse as w
        case = damaged(self, "flipped image byte")
        i = case["sample"]
        small = {"_PARALLEL_BYTES": 0, "_COPY_PIECE_BYTES": 1, "_VERIFY_PIECE_BYTES": 1}
        with mock.patch.multiple(w, **small), mock.patch.object(w, "_usable_cpus", lambda: 3):
            wh = warehouse_etl.open(case["path"])
            n = len(wh)
            order = [n - 1, i, 0] + [j for j in range(1, n - 1) if j != i]
            with self.assertRaises(warehouse_etl.WarehouseError) as cm:
                wh.read_batch(order)
            self.assertEqual(str(cm.exception), case["go_error"])
            self.assertEqual(wh.samples_verified, n - 1)
            with self.assertRaises(warehouse_etl.WarehouseError):
                wh.read_batch(list(range(n)))  # a failed sample is not remembered
            self.assertEqual(wh.read_batch([j for j in range(n) if j != i])["index"].shape[0], n - 1)
            self.assertEqual(wh.samples_verified, n - 1)
            wh = warehouse_etl.open(case["path"], verify_samples="always")
            with self.assertRaises(warehouse_etl.WarehouseError) as cm:
                wh.read_batch(order)
            self.assertEqual(str(cm.exception), case["go_error"])
            self.assertEqual(wh.samples_verified, n - 1)

    def test_first_reads_checked_where_they_are_read(self):
        """read_batch copying alone checks first reads as it copies them: a plain row as
        copied, a compact one from its stored region as copied from the mapping; never
        the stored bytes in checker threads, nor the copied rows again in jobs; "always"
        the same."""
        from unittest import mock

        from warehouse_etl import warehouse as whmod
        for name in ("f16", "u8", "u8compact", "u8compactwide"):
            with self.subTest(name):
                fx, order, want = unchecked_read(self, name, 5)
                n = len(order)
                for mode in (True, "always"):
                    wh = warehouse_etl.open(fx["dir"], verify_samples=mode)
                    self.addCleanup(wh.close)
                    with mock.patch.object(whmod, "_stored_crcs", side_effect=AssertionError("stored bytes were checked")), \
                            mock.patch.object(whmod, "_piece_crcs", side_effect=AssertionError("checked in jobs")), \
                            whmod.copy_threads(1):  # copies in one thread (not test_parallel_copies')
                        got = wh.read_batch(order)
                    self.assertEqual(wh.samples_verified, n)
                    for key in ("images", "boxes", "mask", "records", "extras"):
                        self.assertEqual(raw(got[key]), raw(want[key]), key)

    def test_parallel_copies(self):
        """A batch copied by several threads, in pieces of one row (first reads checked
        right after each piece): the same arrays as one thread's copies, every sample
        checked once (never from the stored bytes in checker threads), and
        on a damaged warehouse the refusal of the first bad row in row order."""
        from unittest import mock

        from warehouse_etl import warehouse as whmod
        small = {"_PARALLEL_BYTES": 0, "_COPY_PIECE_BYTES": 1, "_VERIFY_PIECE_BYTES": 1}
        with mock.patch.multiple(whmod, **small), mock.patch.object(whmod, "_usable_cpus", lambda: 3):
            self.assertEqual(whmod._copy_parts(1), 3)
            with whmod.copy_threads(1):
                self.assertEqual(whmod._copy_parts(1), 1)
                with whmod.copy_threads(2):
                    self.assertEqual(whmod._copy_parts(1), 2)
                self.assertEqual(whmod._copy_parts(1), 1)
            for name in ("f16", "u8", "u8compact", "u8compactwide"):
                fx = fixture(self, name)
                single = warehouse_etl.open(fx["dir"])
                self.addCleanup(single.close)
                n = len(single)
                for order in (np.arange(n), np.random.default_rng(7).permutation(n), np.array([n - 1, 0, n - 1, 1])):
                    with self.subTest(name=name, order=order.tolist()[:4]):
                        with whmod.copy_threads(1):
                            want = single.read_batch(order)
                        wh = warehouse_etl.open(fx["dir"])
                        self.addCleanup(wh.close)
                        stored = AssertionError("stored bytes were checked")
                        with mock.patch.object(whmod, "_stored_crcs", side_effect=stored):
                            got = wh.read_batch(order)
                        self.assertEqual(wh.samples_verified, len(set(order.tolist())))
                        for key in ("images", "boxes", "mask", "records", "extras", "class_index", "box_count", "index"):
                            self.assertEqual(raw(got[key]), raw(want[key]), key)
            case = damaged(self, "flipped image byte")
            i = case["sample"]
            wh = warehouse_etl.open(case["path"])
            n = len(wh)
            order = [n - 1, 0, i] + [j for j in range(1, n - 1) if j != i] + [i]
            with self.assertRaises(warehouse_etl.WarehouseError) as cm:
                wh.read_batch(order)
            self.assertEqual(str(cm.exception), case["go_error"])
            self.assertEqual(wh.samples_verified, n - 1)

    def test_torch_loader_refuses(self):
        try:
            from warehouse_etl.torch import make_loader
        except ImportError:
            self.skipTest("no torch")
        case = damaged(self, "flipped image byte")
        for workers in (0, 2):
            with self.subTest(workers=workers):
                loader = make_loader(case["path"], 1, shuffle="none", reader_threads=workers)
                with self.assertRaises(warehouse_etl.WarehouseError) as cm:
                    for _ in loader:
                        pass
                self.assertEqual(str(cm.exception), case["go_error"])
        loader = make_loader(case["path"], 1, shuffle="none", verify_samples=False)
        self.assertEqual(sum(b["images"].shape[0] for b in loader), len(loader.warehouse))

    def test_first_reads_in_one_pass(self):
        """Where the compiled copy-and-check runs, first reads from the mapping are copied
        and checked in one pass (a compact sample: its region as stored, copied into
        place), each checked row once, and never checked again after a copy; the arrays
        are the unchecked read's, with one copy thread and three."""
        from unittest import mock

        from warehouse_etl import _compact
        from warehouse_etl import warehouse as whmod
        if _crc32c.COPY_CRC is None:
            self.skipTest("two passes here (no compiled copy-and-check, or switched off)")
        plain, compact = _crc32c.copy_row_function, _compact.copy_checker
        calls = []

        def counting_plain(arrays):
            f = plain(arrays)
            return lambda r, src: calls.append(r) or f(r, src)

        def counting_compact(*args):
            f = compact(*args)
            return lambda j, r, *rest: calls.append(r) or f(j, r, *rest)

        def refuse(*args):
            raise AssertionError("a row was checked after its copy")

        def read(name, threads, order, want, wh):
            n = len(order)
            calls.clear()
            small = {"_PARALLEL_BYTES": 0, "_COPY_PIECE_BYTES": 1, "_VERIFY_PIECE_BYTES": 1}
            with mock.patch.object(_crc32c, "copy_row_function", counting_plain), \
                    mock.patch.object(_compact, "copy_checker", counting_compact), \
                    mock.patch.object(_crc32c, "row_function", lambda arrays: refuse), \
                    mock.patch.object(_compact, "row_crc_function", refuse), \
                    mock.patch.object(_compact, "crc_rows", refuse), \
                    mock.patch.multiple(whmod, **small), mock.patch.object(whmod, "_usable_cpus", lambda: threads), \
                    mock.patch.object(whmod, "_GATHER", None):  # run by run (test_batch_in_one_call)
                got = wh.read_batch(order)
            self.assertEqual(sorted(calls), list(range(n)))
            self.assertEqual(wh.samples_verified, n)
            for key in ("images", "boxes", "mask", "records", "extras"):
                self.assertEqual(raw(got[key]), raw(want[key]), key)
            # A compact shard's checker is kept with its mapping, and dropped with it.
            self.assertEqual(any(sh.checker is not None for sh in wh._shards), "compact" in name)
            wh.close()
            self.assertTrue(all(sh.checker is None for sh in wh._shards))
        each_layout(self, read)

    def test_batch_in_one_call(self):
        """Where the compiled part has gather_rows, a batch is read in one call per copy
        thread (the threads sharing the batch's samples through gather_rows' claims): first
        reads copied and checked there, each sample once (a sample twice in a batch once),
        nothing checked again on a second read, none of the run-by-run checks used; the
        arrays are the unchecked read's, with one copy thread and three."""
        from unittest import mock

        from warehouse_etl import _compact
        from warehouse_etl import warehouse as whmod
        if whmod._GATHER is None:
            self.skipTest("no compiled gather_rows here (or switched off)")
        gather = whmod._GATHER
        calls = []

        def counting(jobs, n, params, status, crcs, probe, *claims):
            rows = np.frombuffer((ctypes.c_int64 * (n * (4 + len(params[5])))).from_address(jobs), np.int64)
            rows = rows.reshape(n, -1)
            calls.append((n, rows[rows[:, 3] & 1 == 1, 2].tolist(), bool(claims)))
            return gather(jobs, n, params, status, crcs, probe, *claims)

        def refuse(*args):
            raise AssertionError("read run by run")

        def read(name, threads, order, want, wh):
            n = len(order)
            twice = np.concatenate([order, order[:2]])
            with mock.patch.object(whmod, "_GATHER", counting), \
                    mock.patch.object(_crc32c, "copy_row_function", refuse), \
                    mock.patch.object(_compact, "copy_checker", refuse), \
                    mock.patch.object(_crc32c, "row_function", refuse), \
                    mock.patch.object(whmod, "_PARALLEL_BYTES", 0), \
                    mock.patch.object(whmod, "_usable_cpus", lambda: threads):
                calls.clear()
                got = wh.read_batch(twice)
                # One call, or one per thread taking samples through shared claims: each call
                # is handed the whole batch, its first reads marked once.
                self.assertEqual(len(calls), threads)
                self.assertEqual({(k, shared) for k, _, shared in calls}, {(n + 2, threads > 1)})
                self.assertEqual(sorted(calls[0][1]), sorted(range(n)))
                self.assertEqual(wh.samples_verified, n)
                for key in ("images", "boxes", "mask", "records", "extras", "class_index", "box_count"):
                    self.assertEqual(raw(got[key][:n]), raw(want[key]), key)
                    self.assertEqual(raw(got[key][n:]), raw(want[key][:2]), key)
                calls.clear()
                again = wh.read_batch(order)
                self.assertEqual([r for _, rows, _ in calls for r in rows], [])
                self.assertEqual(wh.samples_verified, n)
                self.assertEqual(raw(again["images"]), raw(want["images"]))
        each_layout(self, read)


class VerifySamplesRunByRun(VerifySamples):
    """VerifySamples again read run by run in Python (no gather_rows: a compiled part built
    before it, and the samples whose pages are not cached)."""

    def setUp(self):
        from warehouse_etl import warehouse as whmod
        saved = whmod._GATHER
        whmod._GATHER = None
        self.addCleanup(setattr, whmod, "_GATHER", saved)


class VerifySamplesTwoPass(VerifySamples):
    """VerifySamples again with the compiled copy-and-check switched off: the two passes
    (copy, then the CRC of the copy) that run where it is not built or the CPU lacks its
    instructions."""

    def setUp(self):
        from warehouse_etl import warehouse as whmod
        saved, gather = _crc32c.COPY_CRC, whmod._GATHER
        _crc32c.COPY_CRC = whmod._GATHER = None
        self.addCleanup(setattr, _crc32c, "COPY_CRC", saved)
        self.addCleanup(setattr, whmod, "_GATHER", gather)


class CheckAhead(unittest.TestCase):
    """Warehouse.check_ahead: a checker thread computes samples' CRC-32C from the shards'
    stored bytes before their read, which then only copies them."""

    def setUp(self):
        if _crc32c.checker() is None:
            self.skipTest("checks hold the GIL here (numpy fallback): nothing is checked ahead")

    def test_stored_bytes_match_the_go_tables(self):
        """The CRC of the stored bytes of every sample, every backend, plain and compact
        (letterbox and pillarbox regions), against the checksum tables Go wrote."""
        from unittest import mock

        from warehouse_etl import warehouse as whmod
        for name in ("f16", "f32", "u8", "u8compact", "u8compactwide"):
            fx = fixture(self, name)
            wh = warehouse_etl.open(fx["dir"])
            self.addCleanup(wh.close)
            for k in range(len(wh.manifest["shards"])):
                sh = wh._shard(k)
                local = np.arange(len(sh.crcs))[::-1].copy()
                for backend in backends():
                    with mock.patch.object(_crc32c, "BACKEND", backend):
                        got = whmod._stored_crcs(wh._mapping(sh), sh.sections, wh.layout, local)
                    self.assertEqual(got.tolist(), sh.crcs[local].tolist(), (name, k, backend))

    def test_read_after_it_only_copies(self):
        from unittest import mock

        from warehouse_etl import warehouse as whmod
        for name in ("f16", "u8", "u8compact", "u8compactwide"):
            with self.subTest(name):
                fx = fixture(self, name)
                wh = warehouse_etl.open(fx["dir"])
                self.addCleanup(wh.close)
                n = len(wh)
                order = np.random.default_rng(3).permutation(n)
                self.assertEqual(wh.check_ahead(np.concatenate([order, order[:3], [-1, n]])).result(), n)
                self.assertEqual(wh.samples_verified, n)
                self.assertIsNone(wh.check_ahead(order))  # all checked: nothing queued
                checked_again = AssertionError("a sample checked ahead was checked again")
                with mock.patch.object(whmod, "_piece_crcs", side_effect=checked_again), \
                        mock.patch.object(whmod._crc32c, "row_function", side_effect=checked_again):
                    got = wh.read_batch(order)
                    one = wh[int(order[0])]
                unchecked = warehouse_etl.open(fx["dir"], verify_samples=False)
                self.addCleanup(unchecked.close)
                want = unchecked.read_batch(order)
                for key in ("images", "boxes", "mask", "records", "extras"):
                    self.assertEqual(raw(got[key]), raw(want[key]), key)
                self.assertEqual(raw(one["image"]), raw(want["images"][0]))

    def test_damaged_sample_is_left_to_its_read(self):
        for name in ("flipped image byte", "flipped record byte"):
            with self.subTest(name):
                case = damaged(self, name)
                i = case["sample"]
                wh = warehouse_etl.open(case["path"])
                self.addCleanup(wh.close)
                n = len(wh)
                self.assertEqual(wh.check_ahead(np.arange(n)).result(), n - 1)
                self.assertFalse(wh._verified[i])
                with self.assertRaises(warehouse_etl.WarehouseError) as cm:
                    wh.read_batch([0, i, n - 1])
                self.assertEqual(str(cm.exception), case["go_error"])
                self.assertEqual(wh.check_ahead([i]).result(), 0)  # a failure is not remembered
                with self.assertRaises(warehouse_etl.WarehouseError):
                    wh[i]
                self.assertEqual(wh.samples_verified, n - 1)

    def test_modes_that_check_nothing_ahead(self):
        fx = fixture(self, "u8")
        for mode in ("always", False):
            wh = warehouse_etl.open(fx["dir"], verify_samples=mode)
            self.addCleanup(wh.close)
            self.assertIsNone(wh.check_ahead(np.arange(len(wh))), mode)
        from unittest import mock
        wh = warehouse_etl.open(fx["dir"])
        self.addCleanup(wh.close)
        with mock.patch.object(_crc32c, "checker", lambda: None):  # the numpy fallback: no checker threads
            self.assertIsNone(wh.check_ahead(np.arange(len(wh))))
        self.assertIsNone(wh.check_ahead([]))
        self.assertEqual(wh.samples_verified, 0)
        # After close() nothing is queued, and a job queued before it reopens nothing.
        job = wh.check_ahead(np.arange(len(wh)))
        wh.close()
        self.assertIn(job.result(), range(len(wh) + 1))
        self.assertIsNone(wh.check_ahead(np.arange(len(wh))))
        self.assertTrue(all(sh.fd is None for sh in wh._shards))


class OlderWarehouse(unittest.TestCase):
    def test_reads_unchecked(self):
        need_data(self)
        c = load_unchecked()
        original = warehouse_etl.open(c["original"])
        n = len(original)
        want = original.read_batch(np.arange(n))
        for mode in (True, "always", False):
            with self.subTest(verify_samples=mode):
                wh = warehouse_etl.open(c["path"], verify_samples=mode)
                checked, shards = wh.sample_checksums()
                self.assertEqual(checked, 0)
                self.assertGreater(shards, 1)
                got = wh.read_batch(np.arange(n))
                for key in ("images", "boxes", "mask", "class_index", "box_count", "records", "extras"):
                    self.assertEqual(raw(got[key]), raw(want[key]), key)
                self.assertEqual(raw(wh[n - 1]["image"]), raw(want["images"][n - 1]))
                # Nothing records what a sample's bytes were: a flip goes through.
                flipped = warehouse_etl.open(c["flipped"], verify_samples=mode)
                b = flipped.read_batch([c["sample"]])
                self.assertNotEqual(raw(b["images"]), raw(want["images"][c["sample"]:c["sample"] + 1]))
                self.assertEqual(wh.samples_verified + flipped.samples_verified, 0)


if __name__ == "__main__":
    unittest.main()
