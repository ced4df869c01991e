"""shard_version decides which sections a shard has (shard.md, "Versions"): 1 the
original layout, whose meta and checksum sections and U8 dtype are detected (the legacy
rule); 2 adds the meta section, 3 the checksum section, 4 dtype U8, and from 2 on a
section the version lacks, or one it has with a zero offset, is corrupt; 5 adds compact
images. Checked on
shards made here byte by byte (no warehouse needed), with the supported range 1..5, and
on manifest entries."""
import os
import struct
import tempfile
import unittest

from warehouse_etl import _crc32c, _shard
from warehouse_etl._layout import CHECKSUM_HEADER_SIZE, DTYPE_TAGS, DTYPES, META_HEADER_SIZE, Layout
from warehouse_etl.errors import WarehouseError

F16, F32, U8 = DTYPE_TAGS["F16"], DTYPE_TAGS["F32"], DTYPE_TAGS["U8"]
SAMPLES = 2


def make_shard(version, dtype, *, meta=True, checksums=True, meta_off=None):
    """A shard of SAMPLES zero samples (3x2x3 images, 2 boxes) with the sections asked
    for and their offsets in the header, whatever ``version`` says; returns its bytes."""
    layout = Layout(dtype, 3, 2, 3, 2)
    s = layout.sections(SAMPLES, meta=meta, checksums=checksums)
    b = bytearray(s["size"])
    b[0:80] = (b"TWH1" + struct.pack("<7I", version, dtype, 0, 3, 2, 3, 2)
               + struct.pack("<6Q", SAMPLES, s["image"], s["boxes"], s["mask"],
                             s["meta"] if meta_off is None else meta_off, s["checksum"]))
    if meta:
        b[s["meta"]:s["meta"] + META_HEADER_SIZE] = b"TWMD" + struct.pack("<3IQ", 1, layout.record_size, 0, SAMPLES)
    if checksums:
        c = s["checksum"]
        b[c:c + CHECKSUM_HEADER_SIZE] = b"TWCK" + struct.pack("<IQ", 1, SAMPLES)
        b[-4:] = struct.pack("<I", _crc32c.crc32c(bytes(b[c:-4])))
    return bytes(b), layout, s


class ShardVersions(unittest.TestCase):
    def setUp(self):
        self.assertEqual(_shard.SHARD_VERSIONS, (1, 5))
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def parse(self, version, dtype, **kw):
        raw, layout, s = make_shard(version, dtype, **kw)
        path = os.path.join(self.dir.name, "shard.twh")
        with open(path, "wb") as f:
            f.write(raw)
        entry = {"shard_version": version, "samples": SAMPLES, "dtype": DTYPES[dtype][0], "bytes": len(raw)}
        fd = os.open(path, os.O_RDONLY)
        try:
            return _shard.parse_shard(fd, path, entry, layout), s, path
        finally:
            os.close(fd)

    def refused(self, version, dtype, **kw):
        with self.assertRaises(WarehouseError) as cm:
            self.parse(version, dtype, **kw)
        path = os.path.join(self.dir.name, "shard.twh")
        prefix = f"{path}: shard: corrupt: "
        self.assertTrue(str(cm.exception).startswith(prefix), str(cm.exception))
        return str(cm.exception)[len(prefix):]

    def test_accepted(self):
        for version, dtype, checksums in ((1, F16, True), (1, F16, False), (1, U8, True), (1, U8, False),
                                          (2, F16, False), (2, F32, False), (3, F16, True), (3, F32, True),
                                          (4, U8, True), (4, F16, True)):
            with self.subTest(version=version, dtype=DTYPES[dtype][0], checksums=checksums):
                got, s, _ = self.parse(version, dtype, checksums=checksums)
                self.assertEqual(got["records"], s["records"])
                if checksums:
                    self.assertEqual(got["crc_table"].shape, (SAMPLES,))
                else:
                    self.assertIsNone(got["crc_table"])

    def test_sections_the_version_disagrees_with(self):
        _, _, s = make_shard(2, F16)
        self.assertEqual(self.refused(2, F16), f"shard_version 2 has no checksum section, checksum_offset is "
                                               f"{s['checksum']}")
        self.assertEqual(self.refused(2, F16, meta=False, checksums=False),
                         "shard_version 2 has a meta section, meta_offset is 0")
        self.assertEqual(self.refused(3, F16, checksums=False),
                         "shard_version 3 has a checksum section, checksum_offset is 0")
        self.assertEqual(self.refused(4, U8, meta=False, checksums=False),
                         "shard_version 4 has a meta section, meta_offset is 0")
        self.assertEqual(self.refused(3, U8), "shard_version 3 has no dtype 2 (U8), shard_version 4 adds it")
        self.assertEqual(self.refused(2, U8, checksums=False),
                         "shard_version 2 has no dtype 2 (U8), shard_version 4 adds it")

    def test_unsupported_versions(self):
        for version in (0, 6, 1 << 31):
            with self.subTest(version=version):
                self.assertEqual(self.refused(version, F16), f"unsupported shard_version {version}, want 1..5")
        self.assertEqual(self.refused(5, F16), "shard_version 5 has compact images, dtype 1 (F16), want 2 (U8)")

    def test_offset_wording(self):
        """A wrong meta_offset: "0 or" is a value only a version 1 shard may have."""
        _, _, s = make_shard(1, F16)
        self.assertEqual(self.refused(1, F16, meta_off=s["meta"] + 8),
                         f"meta_offset {s['meta'] + 8}, want 0 or {s['meta']}")
        self.assertEqual(self.refused(3, F16, meta_off=s["meta"] + 8),
                         f"meta_offset {s['meta'] + 8}, want {s['meta']}")

    def test_legacy_without_meta_is_refused_by_the_manifest_rule(self):
        """A version 1 shard without a meta section parses, and is refused as a shard of
        a format 1 manifest (which carries per-sample records), as before."""
        with self.assertRaises(WarehouseError) as cm:
            self.parse(1, F16, meta=False, checksums=False)
        self.assertIn("no meta section: manifest format 1 shards carry per-sample records", str(cm.exception))


class ManifestEntries(unittest.TestCase):
    """A manifest's shard entry: from shard_version 2 on the version says whether the
    shard has per-sample checksums (its recorded size must agree) and may be U8."""

    def test_version_against_size_and_dtype(self):
        f16, u8 = Layout(F16, 3, 2, 3, 2), Layout(U8, 3, 2, 3, 2)
        with_crcs, without = f16.file_size(SAMPLES), f16.file_size(SAMPLES, checksums=False)
        entry = lambda v, size: {"shard_version": v, "samples": SAMPLES, "bytes": size}
        for v, layout, size, problem, crcs in (
                (1, f16, with_crcs, "", True), (1, f16, without, "", False),
                (1, u8, u8.file_size(SAMPLES), "", True),
                (2, f16, without, "", False), (3, f16, with_crcs, "", True), (4, f16, with_crcs, "", True),
                (4, u8, u8.file_size(SAMPLES), "", True),
                (2, f16, with_crcs, f"shard_version 2 has no per-sample checksums, but bytes {with_crcs} is the "
                                    f"size with them", True),
                (3, f16, without, f"shard_version 3 has per-sample checksums, but bytes {without} is the size "
                                  f"without them", True),
                (3, u8, u8.file_size(SAMPLES), "shard_version 3 has no dtype U8, shard_version 4 adds it", True)):
            with self.subTest(version=v, dtype=DTYPES[layout.dtype][0], bytes=size):
                self.assertEqual(_shard.shard_version_problem(entry(v, size), layout), problem)
                if not problem:
                    self.assertEqual(_shard.has_sample_checksums(entry(v, size), layout), crcs)


if __name__ == "__main__":
    unittest.main()
