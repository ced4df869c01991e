"""Read-ahead for cold page caches: Warehouse.advise names exactly the image bytes of
each run of the samples it is given (posix_fadvise WILLNEED), a mixture advises each
warehouse of its own samples, and the torch loader advises every planned batch
read_ahead batches before it is read, with or without reader threads, while handing out
the same batches as without the advice (and does not advise an epoch after one that found
every run cached), and checks each batch ahead of its read (Warehouse.check_ahead).
read_batch copies a run whose pages are cached
from the shard's mapping and reads another with preadv: both give the same bytes,
plain and compact."""
import os
import unittest
from unittest import mock

import numpy as np

import warehouse_etl
from warehouse_etl import warehouse as whmod
from warehouse_etl._mix import Mixture
from warehouse_etl import torch as torchmod
from warehouse_etl.torch import make_loader
from tests._fixtures import Reference, fixture, raw


def record_advice(test):
    """Patch posix_fadvise in the reader; returns the list of (fd, offset, length)."""
    calls = []
    if whmod._WILLNEED is None:
        test.skipTest("no posix_fadvise on this platform")

    def fake(fd, offset, length, advice):
        test.assertEqual(advice, os.POSIX_FADV_WILLNEED)
        calls.append((fd, offset, length))

    patcher = mock.patch.object(whmod.os, "posix_fadvise", fake)
    patcher.start()
    test.addCleanup(patcher.stop)
    return calls


def runs(wh, indices):
    """The expected runs: maximal ranges of consecutive sorted samples of one shard."""
    starts = [e["first_sample"] for e in wh.manifest["shards"]] + [len(wh)]
    shard = lambda i: int(np.searchsorted(starts, i, side="right")) - 1
    out = []
    for i in sorted(set(int(i) for i in indices)):
        if out and out[-1][-1] == i - 1 and shard(i) == shard(i - 1):
            out[-1].append(i)
        else:
            out.append([i])
    return out


class Advise(unittest.TestCase):
    def test_plain_runs_are_their_image_bytes(self):
        wh = warehouse_etl.open(fixture(self, "u8")["dir"])
        self.addCleanup(wh.close)
        self.assertGreater(len(wh.manifest["shards"]), 2)
        n = len(wh)
        idx = np.random.default_rng(7).permutation(n)[: n // 2].tolist() + [0, 1, 2, n - 1, 1]
        for i in range(len(wh.manifest["shards"])):  # opened first: advise only advises
            wh._shard(i)
        calls = record_advice(self)
        wh.advise(idx + [-1, n])  # out of range: ignored
        want = runs(wh, idx)
        self.assertEqual(len(calls), len(want))
        for (fd, offset, length), run in zip(calls, want):
            got = os.pread(fd, length, offset)
            self.assertEqual(got, raw(wh.read_batch(run)["images"]), f"run {run[0]}..{run[-1]}")

    def test_compact_runs_are_their_regions(self):
        wh = warehouse_etl.open(fixture(self, "u8compact")["dir"])
        self.addCleanup(wh.close)
        for i in range(len(wh.manifest["shards"])):
            wh._shard(i)
        calls = record_advice(self)
        idx = np.arange(len(wh))[::3]
        wh.advise(idx)
        want = runs(wh, idx)
        self.assertEqual(len(calls), len(want))
        c = wh.layout.channels
        for (fd, offset, length), run in zip(calls, want):
            k = int(np.searchsorted(wh.shard_starts, run[0], side="right")) - 1
            table = wh._shard(k).sections["compact_table"]
            local = [i - int(wh.shard_starts[k]) for i in run]
            self.assertEqual(offset, int(table[local[0]]["offset"]))
            self.assertEqual(length, sum(c * int(table[j]["w"]) * int(table[j]["h"]) for j in local))

    def test_mixture_advises_each_warehouse(self):
        fx = fixture(self, "u8")
        mix = Mixture([warehouse_etl.open(fx["dir"]), warehouse_etl.open(fx["dir"])], [1, 1])
        self.addCleanup(mix.close)
        got = [[], []]
        for k, wh in enumerate(mix.warehouses):
            wh.advise = lambda idx, k=k: got[k].append(sorted(np.asarray(idx).tolist()))
        n = len(mix.warehouses[0])
        mix.advise([1, n + 2, 0, n, 2 * n + 5, -1])
        self.assertEqual(got, [[[0, 1]], [[0, 2]]])


class CopyPaths(unittest.TestCase):
    def read_both(self, name):
        """read_batch of a shuffled order with every page taken as cached (copied from
        the mapping) and as not cached (preadv), each both ways: in one compiled call
        (_gather, where the compiled part is built) and run by run in Python."""
        wh = warehouse_etl.open(fixture(self, name)["dir"], verify_samples="always")
        self.addCleanup(wh.close)
        idx = np.random.default_rng(5).permutation(len(wh))
        out = {}
        for gather in dict.fromkeys((whmod._GATHER, None)):  # compiled (where built), run by run
            for cached in (True, False):
                cold, read = wh.cold_samples, wh.samples_read
                with mock.patch.object(whmod, "_CACHED", cached), mock.patch.object(whmod, "_GATHER", gather):
                    out[(gather is not None, cached)] = {k: raw(v) for k, v in wh.read_batch(idx).items()}
                # Samples not cached are read with preadv and counted (the torch loader's cue).
                self.assertEqual(wh.cold_samples - cold, 0 if cached else len(idx))
                self.assertEqual(wh.samples_read - read, len(idx))
        first = out[(False, True)]
        for k, v in out.items():
            self.assertEqual(v, first, k)
        return wh, first

    def check_go(self, name):
        """Both ways give the Go reader's images (its dump of the same warehouse)."""
        fx = fixture(self, name)
        wh, got = self.read_both(name)
        l = wh.layout
        ref = Reference(fx, wh.image_dtype, wh.box_dtype, wh.image_shape, l.max_boxes, l.extra_f32)
        idx = np.random.default_rng(5).permutation(len(wh))
        self.assertEqual(got["images"], raw(ref.images[idx]))
        return wh

    def test_plain(self):
        self.check_go("u8")

    def test_compact(self):
        # Regions of both kinds take part: as wide as the image (read into place, the
        # letterbox of the demo's frames) and narrower (restored around, a pillarbox).
        widths = set()
        for name in ("u8compact", "u8compactwide"):
            wh = self.check_go(name)
            for k in range(len(wh.manifest["shards"])):
                t = wh._shard(k).sections["compact_table"]
                widths |= {"full" if w == wh.layout.width else "part" for w in t["w"][t["h"] > 0].tolist()}
        self.assertEqual(widths, {"full", "part"})


    def test_run_rows_out_of_order(self):
        """A run of consecutive samples whose rows are out of order although its first
        and last rows are as far apart as the run is long (samples 0, 1, 2 to rows 0, 3,
        2): once copied as if in order, so sample 1 landed in row 1. Small shuffled
        batches too, where such runs are common. Both copy paths, both ways (one compiled
        call and run by run), against the Go reader's dump."""
        for name in ("u8", "u8compact"):
            fx = fixture(self, name)
            wh = warehouse_etl.open(fx["dir"], verify_samples="always")
            self.addCleanup(wh.close)
            l = wh.layout
            ref = Reference(fx, wh.image_dtype, wh.box_dtype, wh.image_shape, l.max_boxes, l.extra_f32)
            perm = np.random.default_rng(11).permutation(len(wh))
            batches = [np.array([0, 5, 2, 1])] + [perm[i:i + 6] for i in range(0, len(wh) - 5, 6)]
            for gather in dict.fromkeys((whmod._GATHER, None)):
                for cached in (True, False):
                    with mock.patch.object(whmod, "_CACHED", cached), mock.patch.object(whmod, "_GATHER", gather):
                        for idx in batches:
                            got = wh.read_batch(idx)
                            what = (name, gather is not None, cached, idx.tolist())
                            self.assertEqual(raw(got["images"]), raw(ref.images[idx]), what)
                            self.assertEqual(raw(got["boxes"]), raw(ref.boxes[idx]), what)


def record_reads(loader, events):
    """Append ("read", sorted indices) to events for each batch the loader's dataset reads."""
    read = loader.dataset._read

    def recording(idx, repeats, shared):
        events.append(("read", sorted(idx.tolist())))
        return read(idx, repeats, shared)

    loader.dataset._read = recording


def cold_samples(test, cold):
    """Take the samples in the set ``cold`` (global indices) as out of the page cache and
    every other as cached: read_batch reads run by run (no compiled gather, which asks
    mincore itself), a run with a cold sample with preadv."""
    resident = whmod.Warehouse._resident_mapping

    def fake(wh, sh, first, last):
        base = int(wh.shard_starts[wh._shards.index(sh)])
        if any(base + i in cold for i in range(first, last + 1)):
            return None
        return resident(wh, sh, first, last)
    for p in (mock.patch.object(whmod, "_CACHED", True), mock.patch.object(whmod, "_GATHER", None),
              mock.patch.object(whmod.Warehouse, "_resident_mapping", fake)):
        p.start()
        test.addCleanup(p.stop)


class ColdShare(unittest.TestCase):
    """The torch loader advises once a share of the samples it reads is cold, not on one
    cold sample: a warm cache that drops a page now and then stays unadvised, an epoch
    is advised from where it reaches the part of the dataset that is not cached, and an
    epoch after one with a cold share from its start. Batches of one sample: the
    fixture has about 20."""

    def epochs(self, cold, shuffle, count=2, advice_reads=False):
        """``count`` epochs of a loader over the u8 fixture, the samples ``cold(i, n)``
        out of the page cache at the start of each (with ``advice_reads``, until they are
        advised: the advice kept ahead of the reads); per epoch, its batches in read order
        as (sample, advised before its read)."""
        fx = fixture(self, "u8")
        wh = warehouse_etl.open(fx["dir"])
        self.addCleanup(wh.close)
        n = len(wh)
        self.assertGreaterEqual(n, 16)
        events, got, now_cold = [], [], set()

        def advise(idx):
            events.append(("advise", sorted(np.asarray(idx).tolist())))
            if advice_reads:
                now_cold.difference_update(np.asarray(idx).tolist())
        wh.advise = advise
        cold_samples(self, now_cold)
        loader = make_loader(wh, 1, read_ahead=2, seed=3, shuffle=shuffle)
        self.addCleanup(loader.dataset.close)
        record_reads(loader, events)
        for _ in range(count):
            now_cold.clear()
            now_cold.update(i for i in range(n) if cold(i, n))
            events.clear()
            self.assertEqual(sum(1 for _ in loader), n)
            advised = [b for kind, b in events if kind == "advise"]
            got.append([(b[0], b in advised) for kind, b in events if kind == "read"])
        return n, got

    def test_a_trickle_is_not_advised(self):
        # One sample in 10 cold, shuffled (a warm cache's evictions, and more): never advised.
        n, epochs = self.epochs(lambda i, n: i % 10 == 3, "global", 3)
        for e, got in enumerate(epochs):
            self.assertEqual([i for i, a in got if a], [], f"epoch {e}")

    def test_the_cold_part_is_advised(self):
        # In order over a dataset whose second half is not cached: the first half is not
        # advised; the second is, once COLD_MIN of its samples were read, from then on;
        # the next epoch from its start (half its samples were cold).
        n, (first, second) = self.epochs(lambda i, n: i >= n // 2, "none")
        self.assertEqual([i for i, _ in first], list(range(n)))
        self.assertEqual([i for i, a in first if a], list(range(n // 2 + torchmod.COLD_MIN + 2, n)), first)
        self.assertEqual([i for i, a in second if a], list(range(1, n)), second)

    def test_a_cache_that_stays_cold(self):
        # Every sample cold at the start of each epoch, the advice reading what it names
        # before it is read: the first epoch turns the advice on after its first
        # COLD_MIN batches; the second is advised from its start and finds none of its
        # advised samples cold (fewer than 1 in 8 in all), so the third starts unadvised
        # and turns it on again; the fourth is advised from its start.
        n, epochs = self.epochs(lambda i, n: True, "global", 4, advice_reads=True)
        turned = [False] * (torchmod.COLD_MIN + 2) + [True] * (n - torchmod.COLD_MIN - 2)
        advised_from_start = [False] + [True] * (n - 1)
        self.assertEqual([[a for _, a in e] for e in epochs], [turned, advised_from_start] * 2)

    def test_an_epoch_after_a_cold_share(self):
        # One sample in 6 cold, shuffled: never COLD_MIN in a window, but 1 in 8 or more
        # of the epoch's, so the next epoch is advised from its start (all but the first
        # batch, which goes to its read as the plan starts).
        n, (first, second) = self.epochs(lambda i, n: i % 6 == 1, "global")
        self.assertEqual([i for i, a in first if a], [])
        self.assertEqual([a for _, a in second], [False] + [True] * (n - 1))


class LoaderReadAhead(unittest.TestCase):
    def check(self, threads):
        fx = fixture(self, "u8")
        kw = dict(seed=3, epoch=1, shuffle="global", remainder="pad")
        plain = make_loader(fx["dir"], 4, read_ahead=0, **kw)
        want = [b["index"].tolist() for b in plain]
        plain.dataset.close()
        self.assertGreater(len(want), 4)
        plan = [sorted(w) for w in want]
        events = []

        def new_loader():
            """A loader of a new process, as it were: its advice and reads recorded."""
            wh = warehouse_etl.open(fx["dir"])
            self.addCleanup(wh.close)
            wh.advise = lambda idx: events.append(("advise", sorted(np.asarray(idx).tolist())))
            loader = make_loader(wh, 4, reader_threads=threads, read_ahead=2, **kw)
            self.addCleanup(loader.dataset.close)
            record_reads(loader, events)
            return loader

        def epoch(loader, cached):
            """One epoch with every image run taken as cached or not; its events."""
            events.clear()
            with mock.patch.object(whmod, "_CACHED", cached):
                got = [b["index"].tolist() for b in loader]
            self.assertEqual(got, want)
            return list(events)

        def advised_before_read(ev, what, first=1):
            advised = [b for kind, b in ev if kind == "advise"]
            # Every batch from plan[first] on is advised once, in plan order.
            self.assertEqual(advised, plan[first:], what)
            for t, batch in enumerate(plan[first:], first):
                a = ev.index(("advise", batch))
                r = ev.index(("read", batch))
                self.assertLess(a, r, f"{what}: batch {t} read before it was advised")

        def advised_once_cold(ev, what):
            """A plan that starts unadvised is advised once one of its reads finds a run
            out of the page cache: the batches taken from the plan after that, from the
            fourth on without reader threads (the next batch is taken before the loop
            reads the first), from the third to the fifth with one (as its first read
            ends before or after the next batches are taken)."""
            advised = [b for kind, b in ev if kind == "advise"]
            self.assertTrue(advised, what)
            first = plan.index(advised[0])
            self.assertIn(first, range(2, 4 + threads), what)
            advised_before_read(ev, what, first)

        def not_advised(ev, what):
            self.assertEqual([e for e in ev if e[0] == "advise"], [], what)

        # A process's first epoch is advised once a read finds a cold run (a warm one
        # never is); an epoch after one that read cold runs from its start; an epoch
        # after one that found every run cached once a read finds a cold run.
        loader = new_loader()
        not_advised(epoch(loader, cached=True), "first epoch, warm")
        advised_once_cold(epoch(loader, cached=False), "a cold epoch after a warm one")
        advised_before_read(epoch(loader, cached=True), "an epoch after a cold one")
        not_advised(epoch(loader, cached=True), "a warm epoch after a warm one")
        advised_once_cold(epoch(loader, cached=False), "a cold epoch after a warm one, again")
        advised_before_read(epoch(loader, cached=False), "a cold epoch after a cold one")
        advised_once_cold(epoch(new_loader(), cached=False), "first epoch, cold")

    def test_without_reader_threads(self):
        self.check(0)

    def test_with_a_reader_thread(self):
        self.check(1)

    def test_reads_check_their_copies(self):
        """Nothing is checked ahead, whatever the layout, CPUs and reader threads: each
        read checks its first reads as it copies them, every sample once, never from the
        stored bytes in checker threads."""
        for name in ("u8", "u8compact"):
            for threads, cpus in ((0, 2), (1, 3), (2, 2), (0, 16), (2, 16)):
                with self.subTest(name=name, threads=threads, cpus=cpus):
                    fx = fixture(self, name)
                    wh = warehouse_etl.open(fx["dir"])
                    self.addCleanup(wh.close)
                    wh.check_ahead = mock.Mock(side_effect=AssertionError("checked ahead"))
                    stored = AssertionError("stored bytes were checked")
                    with mock.patch.object(torchmod, "_usable_cpus", lambda: cpus), \
                            mock.patch.object(whmod, "_usable_cpus", lambda: cpus), \
                            mock.patch.object(whmod, "_stored_crcs", side_effect=stored):
                        loader = make_loader(wh, 2, reader_threads=threads, read_ahead=2, seed=3, shuffle="global")
                        n = sum(b["images"].shape[0] for b in loader)
                    loader.dataset.close()
                    self.assertEqual(wh.samples_verified, n)
                    wh.check_ahead.assert_not_called()

    def test_read_ahead_zero_advises_nothing(self):
        fx = fixture(self, "u8")
        wh, calls = warehouse_etl.open(fx["dir"]), []
        self.addCleanup(wh.close)
        wh.advise = calls.append
        for threads in (0, 1):
            loader = make_loader(wh, 4, read_ahead=0, reader_threads=threads)
            self.assertEqual(len(list(loader)), len(wh) // 4)
            loader.dataset.close()
        self.assertEqual(calls, [])
        with self.assertRaises(ValueError):
            make_loader(fx["dir"], 4, read_ahead=-1)


if __name__ == "__main__":
    unittest.main()
