"""One shard file (docs/format/shard.md): its place in the version directory, its
header, meta header and checksum section, validated as shard.md's "Validation" says
and then against its manifest entry, with the Go reader's wording of every refusal
(Go: shard.Parse, statShard and checkShardHeader).

Each ``shard_version`` adds one feature (shard.md, "Versions"): 1 the original layout,
2 the meta section, 3 the checksum section, 4 dtype U8. From version 2 on the version
says which sections a shard has; a version 1 shard (every shard written before the
versions named features) signals them by non-zero offsets and U8 by its dtype: the
legacy rule, applied to version 1 only.
"""
import os
import stat

import numpy as np

from . import _compact
from ._crc32c import crc32c
from ._gofmt import go_errno, quote
from ._layout import (CHECKSUM_HEADER_SIZE, DTYPE_TAGS, DTYPES, EXTRA_F32_LIMIT, HEADER_SIZE, META_HEADER_SIZE,
                      Layout)
from .errors import WarehouseError

SHARD_VERSIONS = (1, 5)        # supported shard_version range (shard.md, "Versions")
META_VERSIONS = (1, 1)         # supported meta_version range
CHECKSUM_VERSIONS = (1, 1)     # supported checksum_version range
# The shard_version that adds each feature; a version 1 shard signals them by its offsets
# and dtype instead (the legacy rule).
VERSION_LEGACY = 1
VERSION_META, VERSION_CHECKSUMS, VERSION_U8 = 2, 3, 4


def has_sample_checksums(entry, layout):
    """Whether a shard entry has per-sample CRCs: from shard_version 2 on its version says;
    a version 1 shard (the legacy rule) has them when its recorded size is that of a shard
    with the checksum section (manifest_layout accepted no other sizes). Go:
    hasSampleChecksums."""
    if entry["shard_version"] != VERSION_LEGACY:
        return entry["shard_version"] >= VERSION_CHECKSUMS
    return entry["bytes"] == layout.file_size(entry["samples"])


def shard_version_problem(entry, layout):
    """How a shard entry's shard_version contradicts its dtype or size, or "": from
    shard_version 2 on the version says whether the shard has per-sample checksums and may
    be U8 (Go: shardVersionProblem)."""
    v, with_crcs = entry["shard_version"], entry["bytes"] == layout.file_size(entry["samples"])
    if v == VERSION_LEGACY:
        return ""
    if layout.dtype == DTYPE_TAGS["U8"] and v < VERSION_U8:
        return f"shard_version {v} has no dtype U8, shard_version {VERSION_U8} adds it"
    if v >= VERSION_CHECKSUMS and not with_crcs:
        return f"shard_version {v} has per-sample checksums, but bytes {entry['bytes']} is the size without them"
    if v < VERSION_CHECKSUMS and with_crcs:
        return f"shard_version {v} has no per-sample checksums, but bytes {entry['bytes']} is the size with them"
    return ""


def stat_shard(directory, path, entry, dir_fd=None):
    """The shard file exists inside the version directory, is a regular file and has the
    recorded size (Go: statShard; a symlink leaving the directory is refused). With
    ``dir_fd`` the file is the one in that pinned directory handle."""
    try:
        st = os.stat(path) if dir_fd is None else os.stat(entry["relative_path"], dir_fd=dir_fd)
    except FileNotFoundError:
        if os.path.islink(path):
            raise WarehouseError(f"{path}: statat {entry['relative_path']}: path escapes from parent") from None
        raise WarehouseError(f"{path}: missing: the manifest lists shard {entry['id']}") from None
    except OSError as e:
        raise WarehouseError(f"{path}: statat {entry['relative_path']}: {go_errno(e)}") from None
    real_dir = os.path.realpath(directory)
    real = os.path.realpath(path)
    if os.path.commonpath([real_dir, real]) != real_dir:
        raise WarehouseError(f"{path}: statat {entry['relative_path']}: path escapes from parent")
    if not stat.S_ISREG(st.st_mode):
        raise WarehouseError(f"{path}: not a regular file")
    if st.st_size != entry["bytes"]:
        raise WarehouseError(f"{path}: {st.st_size} bytes, the manifest says {entry['bytes']}")


def _corrupt(path, what):
    return WarehouseError(f"{path}: shard: corrupt: {what}")


def _features(path, version, meta_off, checksum_off):
    """``(legacy, has_meta, has_checksums)`` of a shard of a supported ``version``
    whose header holds these offsets: from version 2 on the version decides, and a
    section it has with a zero offset, or one it lacks with a non-zero one, is corrupt;
    a version 1 shard has each section whose offset is not zero (the legacy rule)."""
    legacy = version == VERSION_LEGACY
    if legacy:
        return True, meta_off != 0, checksum_off != 0
    has_meta, has_checksums = version >= VERSION_META, version >= VERSION_CHECKSUMS
    if has_meta and meta_off == 0:
        raise _corrupt(path, f"shard_version {version} has a meta section, meta_offset is 0")
    if has_checksums and checksum_off == 0:
        raise _corrupt(path, f"shard_version {version} has a checksum section, checksum_offset is 0")
    if not has_checksums and checksum_off != 0:
        raise _corrupt(path, f"shard_version {version} has no checksum section, checksum_offset is {checksum_off}")
    return False, has_meta, has_checksums


def parse_shard(fd, path, entry, layout):
    """Validate an open shard as shard.md's Validation section says, then against its
    manifest entry and the warehouse layout (Go: shard.Parse and checkShardHeader).
    Returns the section offsets, with ``crc_table`` the checksum table (uint32 array,
    one CRC-32C per sample) or None without a checksum section. Reads the header, the meta
    header, the records' box_count column and the checksum section, nothing else."""
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        raise WarehouseError(f"{path}: not a regular file")
    size = st.st_size
    if size < HEADER_SIZE:
        raise _corrupt(path, f"file is {size} bytes, shorter than the {HEADER_SIZE}-byte header")
    head = os.pread(fd, HEADER_SIZE, 0)
    if len(head) != HEADER_SIZE:
        raise WarehouseError(f"{path}: short read of the header")
    if head[:4] != b"TWH1":
        raise _corrupt(path, f"bad magic {quote(head[:4])}, want {quote('TWH1')}")
    version, dtype, endian, width, height, channels, max_boxes = (int(v) for v in np.frombuffer(head, "<u4", 7, 4))
    samples, image_off, boxes_off, mask_off, meta_off, checksum_off = (int(v) for v in np.frombuffer(head, "<u8", 6, 32))
    if not SHARD_VERSIONS[0] <= version <= SHARD_VERSIONS[1]:
        raise _corrupt(path, f"unsupported shard_version {version}, want {SHARD_VERSIONS[0]}..{SHARD_VERSIONS[1]}")
    legacy, has_meta, has_checksums = _features(path, version, meta_off, checksum_off)
    if dtype not in DTYPES:
        raise _corrupt(path, f"unknown dtype {dtype}")
    if dtype == DTYPE_TAGS["U8"] and not legacy and version < VERSION_U8:
        raise _corrupt(path, f"shard_version {version} has no dtype {dtype} (U8), shard_version {VERSION_U8} adds it")
    if endian == 1:
        raise _corrupt(path, "big-endian shards unsupported")
    if endian != 0:
        raise _corrupt(path, f"unknown endianness {endian}")
    hl = Layout(dtype, width, height, channels, max_boxes)
    problem = hl.problem()
    if problem:
        raise _corrupt(path, problem)
    if samples == 0:
        raise _corrupt(path, "samples is 0")
    if version >= _compact.VERSION_COMPACT:  # compact images (_compact): U8 only
        if dtype != DTYPE_TAGS["U8"]:
            raise _corrupt(path, f"shard_version {version} has compact images, dtype {dtype} ({DTYPES[dtype][0]}), "
                                 f"want {DTYPE_TAGS['U8']} (U8)")
        hl.compact = True
        s = _compact.header_sections(path, hl, samples, boxes_off, True, False)
    else:
        s = hl.sections(samples, checksums=False)
    if s is None:
        raise _corrupt(path, f"samples {samples} overflow the file size")
    zero_or = "0 or " if legacy else ""
    if image_off != s["image"]:
        raise _corrupt(path, f"image_offset {image_off}, want {s['image']}")
    if boxes_off != s["boxes"]:
        raise _corrupt(path, f"boxes_offset {boxes_off}, want {s['boxes']}")
    if mask_off != s["mask"]:
        raise _corrupt(path, f"mask_offset {mask_off}, want {s['mask']}")
    if has_meta and meta_off != s["meta"]:
        raise _corrupt(path, f"meta_offset {meta_off}, want {zero_or}{s['meta']}")
    if has_meta:
        if size < s["records"]:
            raise _corrupt(path, f"file is {size} bytes, too short for the meta header at {s['meta']}")
        mh = os.pread(fd, META_HEADER_SIZE, s["meta"])
        if mh[:4] != b"TWMD":
            raise _corrupt(path, f"bad meta magic {quote(mh[:4])}, want {quote('TWMD')}")
        meta_version, record_size, extra_f32 = (int(v) for v in np.frombuffer(mh, "<u4", 3, 4))
        meta_samples = int(np.frombuffer(mh, "<u8", 1, 16)[0])
        if not META_VERSIONS[0] <= meta_version <= META_VERSIONS[1]:
            raise _corrupt(path, f"unsupported meta_version {meta_version}, want {META_VERSIONS[0]}..{META_VERSIONS[1]}")
        if record_size != hl.record_size:
            raise _corrupt(path, f"record_size {record_size}, want {hl.record_size}")
        if extra_f32 > EXTRA_F32_LIMIT:
            raise _corrupt(path, f"extra_f32 {extra_f32} out of range [0, {EXTRA_F32_LIMIT}]")
        if meta_samples != samples:
            raise _corrupt(path, f"meta samples {meta_samples}, header samples {samples}")
        hl.extra_f32 = extra_f32
    # Where the checksum section starts depends on extra_f32: checked after the meta header.
    if hl.compact:
        s = _compact.header_sections(path, hl, samples, boxes_off, has_meta, has_checksums)
    else:
        s = hl.sections(samples, meta=has_meta, checksums=has_checksums)
    if s is None:
        raise _corrupt(path, f"samples {samples} overflow the file size")
    crcs = None
    if has_checksums:
        if checksum_off != s["checksum"]:
            raise _corrupt(path, f"checksum_offset {checksum_off}, want {zero_or}{s['checksum']}")
        if size < s["crcs"]:
            raise _corrupt(path, f"file is {size} bytes, too short for the checksum header at {s['checksum']}")
        ch = os.pread(fd, CHECKSUM_HEADER_SIZE, s["checksum"])
        if ch[:4] != b"TWCK":
            raise _corrupt(path, f"bad checksum magic {quote(ch[:4])}, want {quote('TWCK')}")
        checksum_version = int(np.frombuffer(ch, "<u4", 1, 4)[0])
        checksum_samples = int(np.frombuffer(ch, "<u8", 1, 8)[0])
        if not CHECKSUM_VERSIONS[0] <= checksum_version <= CHECKSUM_VERSIONS[1]:
            raise _corrupt(path, f"unsupported checksum_version {checksum_version}, want "
                                 f"{CHECKSUM_VERSIONS[0]}..{CHECKSUM_VERSIONS[1]}")
        if checksum_samples != samples:
            raise _corrupt(path, f"checksum samples {checksum_samples}, header samples {samples}")
    if size != s["size"]:
        raise _corrupt(path, f"file is {size} bytes, header implies {s['size']}")
    if has_checksums:
        section = np.empty(s["size"] - s["checksum"], dtype=np.uint8)
        if os.preadv(fd, [section], s["checksum"]) != section.nbytes:
            raise WarehouseError(f"{path}: short read of the checksum section")
        got, want = crc32c(section[:-4]), int(section[-4:].view("<u4")[0])
        if got != want:
            raise _corrupt(path, f"checksum table crc32c 0x{got:08x}, table_crc32c says 0x{want:08x}")
        crcs = section[CHECKSUM_HEADER_SIZE:-4].view("<u4")
    s["compact_table"] = s["pad"] = None
    if hl.compact:
        hl.pad, s["compact_table"] = _compact.parse_compact(fd, path, hl, samples, s)
        s["pad"] = hl.pad
    if has_meta:
        counts = np.empty(samples, dtype="<u4")
        rec = np.empty(samples * hl.record_size, dtype=np.uint8)
        if os.preadv(fd, [rec], s["records"]) != rec.nbytes:
            raise WarehouseError(f"{path}: short read of the records")
        counts[:] = rec.view(hl.record_dtype())["box_count"]
        over = np.flatnonzero(counts > max_boxes)
        if over.size:
            i = int(over[0])
            raise _corrupt(path, f"sample {i}: box_count {int(counts[i])} exceeds max_boxes {max_boxes}")
    # The manifest entry and the warehouse layout (checkShardHeader).
    if version != entry["shard_version"]:
        raise WarehouseError(f"{path}: header shard_version {version}, manifest says {entry['shard_version']}")
    if samples != entry["samples"]:
        raise WarehouseError(f"{path}: header says {samples} samples, manifest says {entry['samples']}")
    if DTYPES[dtype][0] != entry["dtype"]:
        raise WarehouseError(f"{path}: header dtype {DTYPES[dtype][0]}, manifest says {entry['dtype']}")
    if hl != layout:
        raise WarehouseError(f"{path}: header layout {hl!r}, manifest implies {layout!r}")
    if not has_meta:
        raise WarehouseError(f"{path}: no meta section: manifest format 1 shards carry per-sample records")
    if has_checksums != has_sample_checksums(entry, layout):
        # Unreachable while the file has the size the manifest records (Go keeps it too).
        raise WarehouseError(f"{path}: header checksum section {str(has_checksums).lower()}, the manifest's size "
                             f"says {str(has_sample_checksums(entry, layout)).lower()}")
    s["crc_table"] = crcs
    return s


__all__ = ["SHARD_VERSIONS", "META_VERSIONS", "CHECKSUM_VERSIONS", "VERSION_META", "VERSION_CHECKSUMS", "VERSION_U8",
           "has_sample_checksums", "shard_version_problem", "stat_shard", "parse_shard"]
