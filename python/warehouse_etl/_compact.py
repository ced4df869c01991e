"""Compact images (shard_version 5, docs/format/shard.md, "Compact images"; Go:
shard/compact.go and warehouse/compact.go): a U8 shard stores of each image only the
rectangle of pixels that differ from the pad value, and a table of the rectangles. This
module validates that section and restores the images, byte for byte the images of the
same build without ``compact_images``.

The compact header (16 bytes at ``compact_offset``, the regions' end rounded up to 8):
``"TWCP"``, ``compact_version`` u32 (1), ``pad_value`` u8, 7 zero bytes; then one
16-byte entry per sample: ``region_offset`` u64 (absolute), ``x``, ``y``, ``w``, ``h``
u16. Sample i's CRC-32C covers its entry, its region bytes, then its boxes, mask, record
and extras.
"""
import os

import numpy as np

from . import _crc32c
from ._crc32c import crc32c_parts
from ._gofmt import quote
from ._layout import COMPACT_HEADER_SIZE, HEADER_SIZE, align8
from .errors import WarehouseError

IOV_MAX = 1024  # buffers per preadv call (Linux IOV_MAX)
VERSION_COMPACT = 5
COMPACT_VERSIONS = (1, 1)      # supported compact_version range
ENTRY = np.dtype({"names": ["offset", "x", "y", "w", "h"], "formats": ["<u8", "<u2", "<u2", "<u2", "<u2"],
                  "offsets": [0, 8, 10, 12, 14], "itemsize": 16})


def _corrupt(path, what):
    return WarehouseError(f"{path}: shard: corrupt: {what}")


def header_sections(path, layout, samples, boxes_off, meta, checksums):
    """The sections of a compact shard whose header says ``boxes_offset`` (Go: Parse's
    sectionsOf): the regions end where the compact table before the boxes leaves room."""
    table = HEADER_SIZE + COMPACT_HEADER_SIZE + 16 * samples
    s = None
    if boxes_off >= table and boxes_off % 8 == 0:
        s = layout.compact_sections(samples, boxes_off - table, meta, checksums)
    if s is None:
        raise _corrupt(path, f"boxes_offset {boxes_off}: no room for the compact table of {samples} samples "
                             f"(or not a multiple of 8)")
    return s


def parse_compact(fd, path, layout, samples, s):
    """Validate the compact header and table of a shard whose other sections were
    checked (Go: parseCompact), in Go's order and words. Returns ``(pad_value, table)``,
    the table a structured array of ``ENTRY``."""
    c = s["compact"]
    raw = os.pread(fd, COMPACT_HEADER_SIZE + 16 * samples, c)
    if len(raw) != COMPACT_HEADER_SIZE + 16 * samples:
        raise WarehouseError(f"{path}: short read of the compact table")
    hdr = raw[:COMPACT_HEADER_SIZE]
    if hdr[:4] != b"TWCP":
        raise _corrupt(path, f"bad compact magic {quote(hdr[:4])}, want {quote('TWCP')}")
    version = int(np.frombuffer(hdr, "<u4", 1, 4)[0])
    if not COMPACT_VERSIONS[0] <= version <= COMPACT_VERSIONS[1]:
        raise _corrupt(path, f"unsupported compact_version {version}, want {COMPACT_VERSIONS[0]}..{COMPACT_VERSIONS[1]}")
    for k in range(9, COMPACT_HEADER_SIZE):
        if hdr[k]:
            raise _corrupt(path, f"compact header byte {k} is {hdr[k]}, want 0")
    table = np.frombuffer(raw, ENTRY, samples, COMPACT_HEADER_SIZE)
    off, x, y = table["offset"].astype(np.uint64), table["x"].astype(np.int64), table["y"].astype(np.int64)
    w, h = table["w"].astype(np.int64), table["h"].astype(np.int64)
    ends = HEADER_SIZE + np.cumsum(layout.channels * w * h, dtype=np.int64)
    starts = np.concatenate(([HEADER_SIZE], ends[:-1])).astype(np.uint64)
    empty = (w == 0) | (h == 0)
    bad_empty = empty & ((x != 0) | (y != 0) | (w != 0) | (h != 0))
    outside = (x + w > layout.width) | (y + h > layout.height)
    after = ends > c
    bad = np.flatnonzero((off != starts) | bad_empty | outside | after)
    if bad.size:
        i = int(bad[0])
        if off[i] != starts[i]:
            raise _corrupt(path, f"sample {i}: region_offset {int(off[i])}, want {int(starts[i])}")
        if bad_empty[i]:
            raise _corrupt(path, f"sample {i}: empty region {w[i]}x{h[i]} at ({x[i]}, {y[i]}), want 0x0 at (0, 0)")
        if outside[i]:
            raise _corrupt(path, f"sample {i}: region {w[i]}x{h[i]} at ({x[i]}, {y[i]}) outside the "
                                 f"{layout.width}x{layout.height} image")
        raise _corrupt(path, f"sample {i}: region ends at {int(ends[i])}, after compact_offset {c}")
    end = int(ends[-1])
    if align8(end) != c:
        raise _corrupt(path, f"regions end at {end}, compact_offset is {c}, want {align8(end)}")
    pad = os.pread(fd, c - end, end)
    for k, v in enumerate(pad):
        if v:
            raise _corrupt(path, f"padding byte at {end + k} is {v}, want 0")
    return hdr[8], table


def restore(dst, region, entry, pad):
    """Write one whole image into ``dst`` (C, H, W) uint8: ``pad`` around the entry's
    rectangle, the region's bytes (C, h, w) inside it."""
    x, y, w, h = int(entry["x"]), int(entry["y"]), int(entry["w"]), int(entry["h"])
    if not (w and h):
        dst[...] = pad
        return
    # Each byte written once: the pad bands around the rectangle, then the region.
    dst[:, :y] = pad
    dst[:, y + h:] = pad
    if x:
        dst[:, y:y + h, :x] = pad
    if x + w < dst.shape[2]:
        dst[:, y:y + h, x + w:] = pad
    dst[:, y:y + h, x:x + w] = np.frombuffer(region, np.uint8).reshape(dst.shape[0], h, w)


def image(raw, sections, layout, j):
    """Sample j's restored image as a new (C, H, W) uint8 array, from the shard's
    mapping ``raw``."""
    e = sections["compact_table"][j]
    n = layout.channels * int(e["w"]) * int(e["h"])
    out = np.empty((layout.channels, layout.height, layout.width), np.uint8)
    restore(out, raw[int(e["offset"]):int(e["offset"]) + n], e, sections["pad"])
    out.flags.writeable = False  # as the views of the other shards
    return out


def preadv_full(fd, path, bufs, offset):
    """Fill the buffers ``bufs`` in order from ``fd`` at ``offset`` with os.preadv, at
    most IOV_MAX buffers a call; a short read (path: the file, for the message) is a
    WarehouseError."""
    for i in range(0, len(bufs), IOV_MAX):
        chunk = bufs[i:i + IOV_MAX]
        want = sum(memoryview(x).nbytes for x in chunk)
        got = os.preadv(fd, chunk, offset)
        if got != want:
            raise WarehouseError(f"{path}: short read: {got} of {want} bytes at offset {offset}")
        offset += want


def read_run(fd, path, sections, layout, first, rows, images):
    """Read samples first, first+1, ... of a compact shard into ``images[rows[k]]``
    (images: [B, C, H, W] uint8): one preadv of their regions (stored back to back),
    then the pad around each. A region as wide as the image (a letterbox of a wider
    frame: x 0, w W) is, per channel, one contiguous band of its row, so it is read
    straight into place; another region is read into a buffer of its own and restored
    from it."""
    table = sections["compact_table"]
    pad = sections["pad"]
    c, width = layout.channels, layout.width
    ents = table[first:first + len(rows)]
    start = int(ents[0]["offset"])
    bufs, later = [], []  # later: (row, entry, buffer) restored after the read
    for k, r in enumerate(rows):
        e = ents[k]
        w, h = int(e["w"]), int(e["h"])
        if not (w and h):
            later.append((r, e, b""))
        elif w == width:
            y = int(e["y"])
            bufs.extend(images[r, ch, y:y + h] for ch in range(c))
            later.append((r, e, None))
        else:
            buf = bytearray(c * w * h)
            bufs.append(buf)
            later.append((r, e, buf))
    preadv_full(fd, path, bufs, start)
    for r, e, buf in later:
        if buf is None:  # read in place: the bands above and below
            y, h = int(e["y"]), int(e["h"])
            images[r, :, :y] = pad
            images[r, :, y + h:] = pad
        else:
            restore(images[r], buf, e, pad)


def copy_run(raw, sections, layout, first, rows, images):
    """read_run from the shard's mapping ``raw`` (uint8 array): each region copied
    into place (as one band per channel when it is as wide as the image), the pad
    around it."""
    table = sections["compact_table"]
    pad = sections["pad"]
    c, width = layout.channels, layout.width
    for k, r in enumerate(rows):
        e = table[first + k]
        off, w, h = int(e["offset"]), int(e["w"]), int(e["h"])
        if w == width and h:
            y = int(e["y"])
            images[r, :, y:y + h] = raw[off:off + c * w * h].reshape(c, h, w)
            images[r, :, :y] = pad
            images[r, :, y + h:] = pad
        else:
            restore(images[r], raw[off:off + c * w * h], e, pad)


def crc_rows(sections, layout, local, arrays, rows):
    """The CRC-32C of each of samples ``local`` of a compact shard as its checksum table
    defines it, computed over the restored rows ``rows`` of ``arrays`` (images, boxes,
    mask, records, extras): the entry, the region's bytes taken from the restored image,
    then the other arrays' rows. Nothing is joined: a region as wide as the image is
    one contiguous band per channel, another is copied out once.

    With ISA-L (``_crc32c.BACKEND == "isal"``) the parts are passed by address, the
    regions' corners read from the table in one step (the per-row Python of building
    views cost about as much as the CRCs themselves), and only large parts release the
    GIL."""
    table = sections["compact_table"]
    entries = table.view(np.uint8).reshape(-1, ENTRY.itemsize)
    mats = _crc32c._byte_rows(arrays[1:])
    local, rows = np.asarray(local, dtype=np.int64), np.asarray(rows, dtype=np.int64)
    out = np.empty(len(rows), dtype=np.uint32)
    shape = (layout.channels, layout.height, layout.width)
    images = arrays[0]
    raw = _crc32c._ISAL_RAW if _crc32c.BACKEND == "isal" else None
    if (raw is not None and images.flags.c_contiguous and images.itemsize == 1 and entries.flags.c_contiguous
            and images[:1].nbytes < _crc32c._ISAL_CHUNK):
        # crc32_iscsi on the raw register, the GIL released only for large parts
        # (_crc32c.RELEASE_BYTES).
        held = raw[1]
        big = _crc32c.isal_raw
        sel = table[local]
        xs, ys, ws, hs = (sel[f].astype(np.int64).tolist() for f in ("x", "y", "w", "h"))
        esize, plane, width = ENTRY.itemsize, layout.height * layout.width, layout.width
        ebase, ibase = entries.ctypes.data, images.ctypes.data
        ibytes = plane * layout.channels
        small = _crc32c.row_parts(mats)
        for k, (j, r) in enumerate(zip(local.tolist(), rows.tolist())):
            x, y, w, h = xs[k], ys[k], ws[k], hs[k]
            reg = held(ebase + j * esize, esize, 0xFFFFFFFF)
            if w == width and h:
                first, fn = ibase + r * ibytes + y * width, big(h * width)
                for ch in range(layout.channels):
                    reg = fn(first + ch * plane, h * width, reg)
            elif w and h:
                region = np.ascontiguousarray(images[r].reshape(shape)[:, y:y + h, x:x + w])
                reg = big(region.size)(region.ctypes.data, region.size, reg)
            for base, n in small:
                reg = held(base + r * n, n, reg)
            out[k] = reg ^ 0xFFFFFFFF
        return out
    for k, (j, r) in enumerate(zip(local.tolist(), rows.tolist())):
        e = table[j]
        x, y, w, h = int(e["x"]), int(e["y"]), int(e["w"]), int(e["h"])
        region = np.asarray(images[r]).view(np.uint8).reshape(shape)[:, y:y + h, x:x + w]
        parts = [entries[j]]
        parts += list(region) if w == layout.width else [np.ascontiguousarray(region)]
        parts += [m[r] for m in mats]
        out[k] = crc32c_parts(parts)
    return out


def crc_stored(raw, sections, layout, local):
    """The CRC-32C of each of samples ``local`` of a compact shard from its stored bytes
    (``raw``: the shard's mapping as uint8): the table entry, the region as stored, then
    the boxes, mask, record and extras rows (row_crc_function over the stored rows)."""
    n = sections["compact_table"].shape[0]
    smalls = [raw[sections[sec]:sections[sec] + n * size].reshape(n, size) for sec, size in layout.small_sections()]
    crc = row_crc_function(raw, sections, layout, smalls)
    return np.array([crc(j, j) for j in np.asarray(local, dtype=np.int64).tolist()], dtype=np.uint32)


def row_crc_function(raw, sections, layout, arrays):
    """The CRC-32C of sample j of a compact shard as its checksum table defines it, as
    a function of (j, r): the table entry and the region as stored in ``raw`` (the
    shard's mapping, whose region bytes the caller has just copied: in cache), then row
    r of ``arrays`` (boxes, mask, records, extras as handed out). For read_batch's copy
    threads, which check each sample right after copying it. With ISA-L the parts go by
    address and only the region releases the GIL; otherwise crc32c_parts."""
    table = sections["compact_table"]
    entries = table.view(np.uint8).reshape(-1, ENTRY.itemsize)
    mats = _crc32c._byte_rows(arrays)
    c = layout.channels
    fns = _crc32c._ISAL_RAW if _crc32c.BACKEND == "isal" else None
    if (fns is not None and entries.flags.c_contiguous
            and c * layout.width * layout.height < _crc32c._ISAL_CHUNK):
        held, big = fns[1], _crc32c.isal_raw
        ebase, base = entries.ctypes.data, raw.ctypes.data
        small = _crc32c.row_parts(mats)

        def isal_crc(j, r):
            e = table[j]
            n = c * int(e["w"]) * int(e["h"])
            reg = held(ebase + j * ENTRY.itemsize, ENTRY.itemsize, 0xFFFFFFFF)
            if n:
                reg = big(n)(base + int(e["offset"]), n, reg)
            for b, size in small:
                reg = held(b + r * size, size, reg)
            return reg ^ 0xFFFFFFFF
        return isal_crc

    def parts_crc(j, r):
        e = table[j]
        off, n = int(e["offset"]), c * int(e["w"]) * int(e["h"])
        return crc32c_parts([entries[j], raw[off:off + n]] + [m[r] for m in mats])
    return parts_crc


def copy_checker(raw, sections, layout):
    """copy_run and row_crc_function of one sample in one, for read_batch's copy threads
    where _crc32c.COPY_CRC is there (else None): ``f(j, r, images, base, small)`` copies
    sample j of a compact shard (``raw``: its mapping as uint8) into row r of ``images``
    (the batch's C-contiguous uint8 images, at address ``base``: looked up once a batch,
    about 1 us a sample otherwise), the pad around its region, and returns its
    CRC-32C as the checksum table defines it: the table entry, the region as stored, then
    row r of the small arrays (``small``: (address, row bytes) of boxes, mask, records,
    extras as handed out, :func:`_crc32c.row_parts`). A region as wide as the image (one
    band per channel) is copied and checked in one pass; another is restored, then checked
    from its stored bytes just copied. The table is read once, here: a reader keeps one per
    shard mapping (the per-sample work is a few calls)."""
    m = _crc32c.COPY_CRC
    if m is None:
        return None
    table = sections["compact_table"]
    entries = table.view(np.uint8).reshape(-1, ENTRY.itemsize)
    if not entries.flags.c_contiguous:
        return None
    pad = sections["pad"]
    c, width, plane = layout.channels, layout.width, layout.width * layout.height
    copy, crc, rows = m.copy_crc32c, m.crc32c, m.crc32c_rows
    ebase, esize, base, ibytes = entries.ctypes.data, ENTRY.itemsize, raw.ctypes.data, c * plane
    offs, ys, ws, hs = (table[f].astype(np.int64).tolist() for f in ("offset", "y", "w", "h"))

    def f(j, r, images, ibase, small):
        reg = crc(ebase + j * esize, esize, 0xFFFFFFFF)
        w, h = ws[j], hs[j]
        n = w * h
        if w == width and h:
            y = ys[j]
            reg = copy(ibase + r * ibytes + y * width, base + offs[j], n, reg, c, plane)  # a band per channel
            images[r, :, :y] = pad
            images[r, :, y + h:] = pad
        else:
            off = offs[j]
            restore(images[r], raw[off:off + c * n], table[j], pad)
            if n:
                reg = crc(base + off, c * n, reg)
        return rows(small, r, reg) ^ 0xFFFFFFFF
    return f


__all__ = ["VERSION_COMPACT", "COMPACT_VERSIONS", "ENTRY", "header_sections", "parse_compact", "restore", "image",
           "entry_problem",
           "preadv_full", "read_run", "crc_rows", "crc_stored", "row_crc_function", "copy_checker"]


def entry_problem(e, layout):
    """How a manifest shard entry contradicts a compact layout (or a layout being
    compact), or "" (Go: compactEntryProblem)."""
    from ._shard import SHARD_VERSIONS
    v = e["shard_version"]
    if not SHARD_VERSIONS[0] <= v <= SHARD_VERSIONS[1]:
        return f"shard_version {v}, this build reads {SHARD_VERSIONS[0]}..{SHARD_VERSIONS[1]}"
    if not layout.compact:
        return f"shard_version {v} has compact images, the manifest's default_shard_version 4 does not"
    if v != VERSION_COMPACT:
        return f"shard_version {v}, the manifest's default_shard_version {VERSION_COMPACT} has compact images"
    n = e["samples"]
    lo = layout.compact_sections(n, 0)["size"]
    hi = layout.sections(n)["size"]
    if not lo <= e["bytes"] <= hi:
        return f"bytes {e['bytes']}, but {n} samples of this layout take {lo}..{hi}"
    return ""
