"""The shard layout of docs/format/shard.md: element types, the fixed part of a meta
record, the limits, and where each section of a shard of N samples starts
(Go: shard.Layout). Nothing here reads a file: ``_shard`` parses headers and
``_manifest`` derives a warehouse's layout from its manifest.
"""
import numpy as np

HEADER_SIZE = 80
META_HEADER_SIZE = 24
CHECKSUM_HEADER_SIZE = 16      # "TWCK", checksum_version, samples; then N CRCs and the table's CRC
COMPACT_HEADER_SIZE = 16       # "TWCP", compact_version, pad_value, zeros; then N 16-byte entries
RECORD_FIXED_SIZE = 80
DIMENSION_LIMIT = 16384
CHANNELS_LIMIT = 4
MAX_BOXES_LIMIT = 65535
EXTRA_F32_LIMIT = 65535
MAX_INT = (1 << 63) - 1        # every offset must fit Go's int, as in the Go reader

# dtype tag -> (manifest name, image element type, box/mask element type).
# U8 shards store images as bytes and boxes/mask as f32 (shard.md).
DTYPES = {
    0: ("F32", np.dtype("<f4"), np.dtype("<f4")),
    1: ("F16", np.dtype("<f2"), np.dtype("<f2")),
    2: ("U8", np.dtype("u1"), np.dtype("<f4")),
}
DTYPE_TAGS = {name: tag for tag, (name, _, _) in DTYPES.items()}

# (name, numpy type, offset) of the fixed part of a meta record.
RECORD_FIELDS = (
    ("source_index", "<u4", 0), ("flags", "<u4", 4), ("frame_id", "<u8", 8), ("input_seq", "<u8", 16),
    ("unix_time_ns", "<i8", 24), ("sim_time", "<f8", 32), ("src_width", "<u4", 40), ("src_height", "<u4", 44),
    ("resized_width", "<u4", 48), ("resized_height", "<u4", 52), ("pad_x", "<u4", 56), ("pad_y", "<u4", 60),
    ("scale_x", "<f4", 64), ("scale_y", "<f4", 68), ("box_count", "<u4", 72), ("boxes_dropped", "<u4", 76),
)


def align8(n):
    return (n + 7) // 8 * 8


class Layout:
    """The per-sample layout of every shard of a warehouse (shard.Layout): dtype tag,
    width, height, channels, max_boxes and extra_f32, and the section sizes. ``compact``
    and ``pad``: the images are in the compact image section (shard_version 5, U8 only:
    each image's rectangle that differs from ``pad``; ``_compact``)."""

    __slots__ = ("dtype", "width", "height", "channels", "max_boxes", "extra_f32", "compact", "pad")

    def __init__(self, dtype, width, height, channels, max_boxes, extra_f32=0, compact=False, pad=0):
        self.dtype, self.width, self.height = dtype, width, height
        self.channels, self.max_boxes, self.extra_f32 = channels, max_boxes, extra_f32
        self.compact, self.pad = compact, pad

    def key(self):
        return (self.dtype, self.width, self.height, self.channels, self.max_boxes, self.extra_f32, self.compact,
                self.pad)

    def __eq__(self, other):
        return isinstance(other, Layout) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        """Go's %+v of shard.Layout."""
        name = DTYPES[self.dtype][0] if self.dtype in DTYPES else f"DType({self.dtype})"
        compact = f" Compact:{str(self.compact).lower()} Pad:{self.pad}" if self.compact or self.pad else ""
        return (f"{{DType:{name} Width:{self.width} Height:{self.height} Channels:{self.channels} "
                f"MaxBoxes:{self.max_boxes} ExtraF32:{self.extra_f32}{compact}}}")

    @property
    def image_dtype(self):
        """numpy dtype of the image elements."""
        return DTYPES[self.dtype][1]

    @property
    def box_dtype(self):
        """numpy dtype of the boxes and mask elements."""
        return DTYPES[self.dtype][2]

    @property
    def image_bytes(self):
        return self.channels * self.height * self.width * self.image_dtype.itemsize

    @property
    def box_bytes(self):
        return self.max_boxes * 4 * self.box_dtype.itemsize

    @property
    def mask_bytes(self):
        return self.max_boxes * self.box_dtype.itemsize

    @property
    def record_size(self):
        return align8(RECORD_FIXED_SIZE + 4 * self.max_boxes)

    @property
    def extra_bytes(self):
        return self.extra_f32 * 4

    def small_sections(self):
        """The per-sample sections after the image, in a checksum's order, as (section
        name, bytes per sample): boxes, mask, records, extras; empty ones left out."""
        return [(sec, size) for sec, size in (("boxes", self.box_bytes), ("mask", self.mask_bytes),
                                              ("records", self.record_size), ("extras", self.extra_bytes)) if size]

    def problem(self):
        """What is out of range, worded as shard.Layout.problem, or None."""
        if self.dtype not in DTYPES:
            return f"unknown dtype {self.dtype}"
        if not 1 <= self.width <= DIMENSION_LIMIT:
            return f"width {self.width} out of range [1, {DIMENSION_LIMIT}]"
        if not 1 <= self.height <= DIMENSION_LIMIT:
            return f"height {self.height} out of range [1, {DIMENSION_LIMIT}]"
        if not 1 <= self.channels <= CHANNELS_LIMIT:
            return f"channels {self.channels} out of range [1, {CHANNELS_LIMIT}]"
        if not 0 <= self.max_boxes <= MAX_BOXES_LIMIT:
            return f"max_boxes {self.max_boxes} out of range [0, {MAX_BOXES_LIMIT}]"
        if not 0 <= self.extra_f32 <= EXTRA_F32_LIMIT:
            return f"extra_f32 {self.extra_f32} out of range [0, {EXTRA_F32_LIMIT}]"
        if self.compact and self.dtype != DTYPE_TAGS["U8"]:
            return f"compact images need dtype U8, not {DTYPES[self.dtype][0]}"
        if not self.compact and self.pad:
            return f"pad {self.pad} without compact images"
        return None

    def sections(self, samples, meta=True, checksums=True):
        """Absolute offsets of every section of a shard of ``samples`` samples, with a
        meta section and a checksum section unless told otherwise (shard.md, "Offsets
        and size"; ``checksum`` and ``crcs`` are 0 without one), or None when one
        leaves int64. A compact layout's images are taken at their largest (every image
        stored whole; ``compact_sections`` places them as stored)."""
        if self.compact:
            return self.compact_sections(samples, samples * self.image_bytes, meta, checksums)
        images_end = HEADER_SIZE + samples * self.image_bytes
        boxes = align8(images_end) if self.dtype == DTYPE_TAGS["U8"] else images_end
        return self._sections_from(HEADER_SIZE, boxes, samples, meta, checksums)

    def compact_sections(self, samples, region_bytes, meta=True, checksums=True):
        """``sections`` of a compact shard whose regions take ``region_bytes``:
        ``compact`` is the compact header's offset (shard.md, "Compact images")."""
        compact = align8(HEADER_SIZE + region_bytes)
        s = self._sections_from(HEADER_SIZE, compact + COMPACT_HEADER_SIZE + 16 * samples, samples, meta, checksums)
        if s is not None:
            s["compact"] = compact
        return s

    def _sections_from(self, image, boxes, samples, meta, checksums):
        mask = boxes + samples * self.box_bytes
        mask_end = mask + samples * self.mask_bytes
        s = {"image": image, "boxes": boxes, "mask": mask, "mask_end": mask_end, "meta": 0,
             "records": mask_end, "extras": mask_end, "data_end": mask_end, "checksum": 0, "crcs": 0}
        if meta:
            s["meta"] = align8(mask_end)
            s["records"] = s["meta"] + META_HEADER_SIZE
            s["extras"] = s["records"] + samples * self.record_size
            s["data_end"] = s["extras"] + samples * self.extra_bytes
        s["size"] = s["data_end"]
        if checksums:
            s["checksum"] = align8(s["data_end"])
            s["crcs"] = s["checksum"] + CHECKSUM_HEADER_SIZE
            s["size"] = s["crcs"] + 4 * samples + 4
        if s["size"] > MAX_INT:
            return None
        return s

    def file_size(self, samples, checksums=True):
        """Exact size of a shard of ``samples`` samples as written now, or -1
        (shard.Layout.FileSize); with ``checksums=False``, of one written before the
        checksum section existed (FileSizeWithoutChecksums)."""
        if self.problem() or samples < 0:
            return -1
        s = self.sections(samples, checksums=checksums)
        return -1 if s is None else s["size"]

    def record_dtype(self):
        """numpy structured dtype of one meta record."""
        names, formats, offsets = (list(col) for col in zip(*RECORD_FIELDS))
        return np.dtype({"names": names + ["class_index"], "formats": formats + [("<i4", (self.max_boxes,))],
                         "offsets": offsets + [RECORD_FIXED_SIZE], "itemsize": self.record_size})


__all__ = ["DTYPES", "DTYPE_TAGS", "RECORD_FIELDS", "Layout", "align8", "HEADER_SIZE", "META_HEADER_SIZE",
           "CHECKSUM_HEADER_SIZE", "COMPACT_HEADER_SIZE", "RECORD_FIXED_SIZE", "DIMENSION_LIMIT", "CHANNELS_LIMIT", "MAX_BOXES_LIMIT",
           "EXTRA_F32_LIMIT", "MAX_INT"]
