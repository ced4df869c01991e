"""The byte-level contract of docs/format/: manifest checks, the shard layout and the
TWH1 header validation, with the Go reader's wording of every refusal.

Nothing here reads tensors; ``warehouse_etl.Warehouse`` does, on top of ``Layout`` and
``parse_shard``. The order of the checks and the messages follow
docs/format/reading.md and docs/format/shard.md ("Validation"); the messages are the
Go reader's (``warehouse/reader_test.go``, ``badInputCases``).
"""
import hashlib
import json
import math
import os
import posixpath
import stat

import numpy as np

from ._crc32c import crc32c
from ._gofmt import format_g, ints, quote

FORMAT_VERSION = 1
MAX_MANIFEST_BYTES = 256 << 20
MANIFEST_NAME = "manifest.json"
LATEST_NAME = "latest"
HEADER_SIZE = 80
META_HEADER_SIZE = 24
CHECKSUM_HEADER_SIZE = 16      # "TWCK", checksum_version, samples; then N CRCs and the table's CRC
RECORD_FIXED_SIZE = 80
SHARD_VERSIONS = (1, 4)        # supported shard_version range (shard.md, "Versions")
# The shard_version that adds each feature; a version 1 shard signals them by its offsets
# and dtype instead (the legacy rule).
VERSION_META, VERSION_CHECKSUMS, VERSION_U8 = 2, 3, 4
META_VERSIONS = (1, 1)         # supported meta_version range
CHECKSUM_VERSIONS = (1, 1)     # supported checksum_version range
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


class WarehouseError(ValueError):
    """A warehouse this reader must not trust, or cannot read. The message names the
    file at fault and words the cause as the Go reader does."""


class ThresholdError(WarehouseError):
    """The warehouse's recorded validation summary exceeds a threshold with action
    ``fail``. ``findings`` lists each exceeded limit (dicts with ``threshold``,
    ``value``, ``count``, ``total``, ``limit``, ``action``)."""

    def __init__(self, message, findings):
        super().__init__(message)
        self.findings = findings


def _go_errno(e):
    """An OSError's text as Go's syscall.Errno prints it (lower case)."""
    text = e.strerror or os.strerror(e.errno or 0)
    return text[:1].lower() + text[1:]


def go_join(*parts):
    """filepath.Join: joined and cleaned."""
    return os.path.normpath(os.path.join(*parts))


def resolve_dir(path):
    """The version directory of ``path``: itself when it holds manifest.json, else the
    version its ``latest`` symlink names beside it (reading.md, Opening 1)."""
    path = os.fspath(path)
    if os.path.exists(go_join(path, MANIFEST_NAME)):
        return path
    link = go_join(path, LATEST_NAME)
    try:
        target = os.readlink(link)
    except OSError:
        raise WarehouseError(f"{path}: neither a warehouse version (no {MANIFEST_NAME}) nor a root with a "
                             f"{quote(LATEST_NAME)} pointer") from None
    if os.path.isabs(target) or "/" in target or target.startswith("."):
        raise WarehouseError(f"{path}/{LATEST_NAME} -> {quote(target)}: the pointer must name a version directory beside it")
    return go_join(path, target)


def _clean_relative(p):
    return (isinstance(p, str) and p != "" and not p.startswith("/") and "\\" not in p
            and posixpath.normpath(p) == p and p != ".." and not p.startswith("../"))


def _relative_problem(p):
    if _clean_relative(p):
        return None
    return f"{quote(p)} is not a clean relative path inside the warehouse"


# The manifest schema (warehouse.Manifest): the Go reader refuses unknown fields at
# every level of its structs; maps (by_reason, attributes) take any key.
_COUNTS = {"total": int, "non_empty": int, "empty": int, "missing_image": int, "missing_file": int,
           "invalid": int, "kept": int, "skipped": int, "by_reason": dict}
_LIMIT = {"max_count": int, "max_ratio": float, "action": str}
_SCHEMA = {
    "format_version": int, "version": str, "version_recipe": str, "code_version": str, "dataset_root": str,
    "source": {"kind": str, "root": str, "label_keys": [str]},
    "transform": {"target_width": int, "target_height": int, "channels": int, "resize_mode": str,
                  "pad_value": int, "mean": [float], "std": [float], "dtype": str, "max_boxes": int,
                  "skip_empty": bool, "decoder": str},
    "default_dtype": str, "default_shard_version": int, "created_at_ms": int,
    "thresholds": {"invalid": _LIMIT, "missing": _LIMIT, "empty": _LIMIT},
    "summary": {"runs": [dict(_COUNTS, name=str, index=int)], "total": _COUNTS},
    "classes": [{"index": int, "name": str, "id": int}],
    "sources": [{"index": int, "name": str, "attributes": dict}],
    "extras": [{"name": str, "shape": [int], "source_dtype": str, "offset": int}],
    "image_stats": {"values": int, "mean": [float], "std": [float]},
    "source_fingerprint": {"files": int, "bytes": int, "sha256": str},
    "input_samples": int, "samples": int, "samples_per_shard": int,
    "shards": [{"id": str, "relative_path": str, "shard_version": int, "first_sample": int, "samples": int,
                "width": int, "height": int, "channels": int, "max_boxes": int, "dtype": str,
                "endianness": str, "bytes": int, "checksum_sha256": str}],
    "files": {"samples": str, "fingerprint": str, "build_report": str,
              "parquet": {"samples": str, "runs": str, "build": str},
              "checksums": dict},
}


def _check_schema(value, schema, where):
    """Unknown fields (json: unknown field "x", as Go's DisallowUnknownFields says) and
    values of the wrong JSON type."""
    if value is None:
        return  # JSON null leaves Go's field at its zero value
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            raise ValueError(f"json: {where or 'manifest'}: want an object")
        for k, v in value.items():
            if k not in schema:
                raise ValueError(f"json: unknown field {quote(k)}")
            _check_schema(v, schema[k], f"{where}.{k}" if where else k)
    elif isinstance(schema, list):
        if not isinstance(value, list):
            raise ValueError(f"json: {where}: want an array")
        for i, v in enumerate(value):
            _check_schema(v, schema[0], f"{where}[{i}]")
    elif schema is dict:
        if not isinstance(value, dict):
            raise ValueError(f"json: {where}: want an object")
    elif schema is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"json: {where}: want a number")
    elif schema is int:
        if isinstance(value, bool) or not (isinstance(value, int) or isinstance(value, float) and value.is_integer()):
            raise ValueError(f"json: {where}: want an integer")
    elif not isinstance(value, schema) or (schema is int and isinstance(value, bool)):
        raise ValueError(f"json: {where}: want a {schema.__name__}")


def _fill_defaults(m):
    """Missing fields as Go's zero values, so the checks below can index freely."""
    for k, default in (("shards", []), ("extras", []), ("classes", []), ("sources", []),
                       ("samples", 0), ("version", ""), ("default_dtype", ""), ("thresholds", {}),
                       ("summary", {}), ("transform", {}), ("files", {})):
        if m.get(k) is None:
            m[k] = default
    m["summary"].setdefault("total", {})
    if m["summary"]["total"] is None:
        m["summary"]["total"] = {}
    for s in m["shards"]:
        for k in ("id", "relative_path", "dtype", "endianness", "checksum_sha256"):
            s.setdefault(k, "")
        for k in ("shard_version", "first_sample", "samples", "width", "height", "channels", "max_boxes", "bytes"):
            s.setdefault(k, 0)
    for e in m["extras"]:
        e.setdefault("name", "")
        e["shape"] = e.get("shape") or []
        e.setdefault("offset", 0)
    for k in ("target_width", "target_height", "channels", "max_boxes"):
        m["transform"].setdefault(k, 0)


def parse_manifest(raw):
    """Decode and check manifest bytes (manifest.md; Go: warehouse.ParseManifest). Raises
    ValueError with the Go wording after "manifest invalid: "."""
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ValueError(f"larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        m = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(str(e)) from None
    if not isinstance(m, dict):
        raise ValueError("json: the manifest is not an object")
    fv = m.get("format_version")
    if fv is None:
        raise ValueError("no format_version")
    if fv != FORMAT_VERSION:
        raise ValueError(f"format_version {fv}, this build reads {FORMAT_VERSION}")
    _check_schema(m, _SCHEMA, "")
    _fill_defaults(m)
    version = m["version"]
    if len(version) != 64:
        raise ValueError(f"version {quote(version)}: want 64 hex digits, have {len(version)}")
    try:
        bytes.fromhex(version)
    except ValueError:
        raise ValueError(f"version {quote(version)}: encoding/hex: invalid byte") from None
    t = m["transform"]
    mean, std = t.get("mean") or [], t.get("std") or []
    if mean or std:
        # A U8 reader normalizes with these (warehouse.Manifest.check).
        vec = lambda v: "[" + " ".join(format_g(x) for x in v) + "]"
        if len(mean) != 3 or len(std) != 3:
            raise ValueError(f"transform: mean {vec(mean)} and std {vec(std)} must both have 3 values or both be absent")
        for c in range(3):
            if not (math.isfinite(mean[c]) and math.isfinite(std[c]) and std[c] > 0):
                raise ValueError(f"transform: channel {c}: mean {format_g(mean[c])} std {format_g(std[c])}, "
                                 f"want finite mean and finite std > 0")
    total = 0
    for i, s in enumerate(m["shards"]):
        problem = _relative_problem(s["relative_path"])
        if problem:
            raise ValueError(f"shards[{i}].relative_path: {problem}")
        if s["samples"] <= 0 or s["first_sample"] != total:
            raise ValueError(f"shards[{i}] ({s['id']}): first_sample {s['first_sample']}, samples {s['samples']}; "
                             f"want first_sample {total} and samples > 0")
        if s["dtype"] != m["default_dtype"] or s["endianness"] != "Little":
            raise ValueError(f"shards[{i}] ({s['id']}): dtype {s['dtype']} endianness {s['endianness']}, "
                             f"manifest default {m['default_dtype']} Little")
        total += s["samples"]
    if total != m["samples"]:
        raise ValueError(f"samples {m['samples']} but shards hold {total}")
    kept = m["summary"]["total"].get("kept", 0)
    if kept != m["samples"]:
        raise ValueError(f"samples {m['samples']} but summary.total.kept {kept}")
    offset = 0
    for i, e in enumerate(m["extras"]):
        n = 1
        for d in e["shape"]:
            if d <= 0:
                raise ValueError(f"extras[{i}] ({e['name']}): shape {ints(e['shape'])}")
            n *= d
        if e["offset"] != offset:
            raise ValueError(f"extras[{i}] ({e['name']}): offset {e['offset']}, want {offset}")
        offset += n
    files = m["files"]
    names = [files.get("samples", ""), files.get("fingerprint", ""), files.get("build_report", "")]
    if files.get("parquet") is not None:
        pq = files["parquet"]
        names += [pq.get("samples", ""), pq.get("runs", ""), pq.get("build", "")]
    for p in names:
        problem = _relative_problem(p)
        if problem:
            raise ValueError(f"files: {problem}")
    return m


MANIFEST_DIGEST_NAME = MANIFEST_NAME + ".sha256"


def _manifest_digest(raw):
    """The contents of manifest.json.sha256 for manifest bytes ``raw`` (sha256sum's format)."""
    return (hashlib.sha256(raw).hexdigest() + "  " + MANIFEST_NAME + "\n").encode()


def _check_manifest_digest(directory, raw):
    """Compare directory/manifest.json.sha256 with the manifest bytes (Go:
    checkManifestDigest). Returns whether the digest exists; raises on damage."""
    digest_name = go_join(directory, MANIFEST_DIGEST_NAME)
    try:
        with open(digest_name, "rb") as f:
            want = _manifest_digest(raw)
            got = f.read(len(want) + 1)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise WarehouseError(f"{digest_name}: manifest invalid: {_go_errno(e)}") from None
    hex_len = 64
    well_formed = (len(got) == hex_len + 2 + len(MANIFEST_NAME) + 1 and got[hex_len:] == b"  " + MANIFEST_NAME.encode() + b"\n"
                   and all(c in b"0123456789abcdef" for c in got[:hex_len]))
    if not well_formed:
        shown = got[:100] + (b"..." if len(got) > 100 else b"")
        raise WarehouseError(f'{digest_name}: manifest invalid: {quote(shown)} is not "<64 lowercase hex digits>  '
                             f'{MANIFEST_NAME}\\n"')
    if got != want:
        raise WarehouseError(f"{go_join(directory, MANIFEST_NAME)}: manifest invalid: sha256 {want[:hex_len].decode()}, "
                             f"but {MANIFEST_DIGEST_NAME} records {got[:hex_len].decode()}: the manifest or its digest is damaged")
    return True


def read_manifest(directory):
    """Load and check ``directory/manifest.json``: its detached digest first
    (manifest.json.sha256, required when the manifest records file checksums),
    then the manifest itself; errors name the file (the Go reader's words)."""
    name = go_join(directory, MANIFEST_NAME)
    try:
        with open(name, "rb") as f:
            raw = f.read(MAX_MANIFEST_BYTES + 1)
    except OSError as e:
        raise WarehouseError(f"open {name}: {_go_errno(e)}") from None
    sealed = _check_manifest_digest(directory, raw)
    try:
        m = parse_manifest(raw)
    except ValueError as e:
        raise WarehouseError(f"{name}: manifest invalid: {e}") from None
    if not sealed and (m.get("files") or {}).get("checksums"):
        raise WarehouseError(f"{go_join(directory, MANIFEST_DIGEST_NAME)}: manifest invalid: missing: the manifest "
                             f"records file checksums, so it was published with a digest")
    return m


def evaluate_thresholds(thresholds, total):
    """Every exceeded limit, in the order invalid, missing, empty, max_count before
    max_ratio (Go: validate.Thresholds.Evaluate)."""
    counts = {
        "invalid": total.get("invalid", 0),
        "missing": total.get("missing_image", 0) + total.get("missing_file", 0),
        "empty": total.get("empty", 0),
    }
    n_total = total.get("total", 0)
    out = []
    for name in ("invalid", "missing", "empty"):
        limit = thresholds.get(name) or {}
        n = counts[name]
        action = limit.get("action") or "fail"
        if limit.get("max_count") is not None and n > limit["max_count"]:
            out.append({"threshold": name + ".max_count", "value": float(n), "count": n, "total": n_total,
                        "limit": float(limit["max_count"]), "action": action})
        ratio = n / n_total if n_total > 0 else 0.0
        if limit.get("max_ratio") is not None and ratio > limit["max_ratio"]:
            out.append({"threshold": name + ".max_ratio", "value": ratio, "count": n, "total": n_total,
                        "limit": float(limit["max_ratio"]), "action": action})
    return out


def finding_text(f):
    """One exceeded limit as validate.Finding.Error words it."""
    return (f"threshold {f['threshold']} exceeded: {format_g(f['value'])} ({f['count']} of {f['total']} samples) "
            f"> limit {format_g(f['limit'])} (action {f['action']})")


def align8(n):
    return (n + 7) // 8 * 8


class Layout:
    """The per-sample layout of every shard of a warehouse (shard.Layout): dtype tag,
    width, height, channels, max_boxes and extra_f32, and the section sizes."""

    __slots__ = ("dtype", "width", "height", "channels", "max_boxes", "extra_f32")

    def __init__(self, dtype, width, height, channels, max_boxes, extra_f32=0):
        self.dtype, self.width, self.height = dtype, width, height
        self.channels, self.max_boxes, self.extra_f32 = channels, max_boxes, extra_f32

    def key(self):
        return (self.dtype, self.width, self.height, self.channels, self.max_boxes, self.extra_f32)

    def __eq__(self, other):
        return isinstance(other, Layout) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())

    def __repr__(self):
        """Go's %+v of shard.Layout."""
        name = DTYPES[self.dtype][0] if self.dtype in DTYPES else f"DType({self.dtype})"
        return (f"{{DType:{name} Width:{self.width} Height:{self.height} Channels:{self.channels} "
                f"MaxBoxes:{self.max_boxes} ExtraF32:{self.extra_f32}}}")

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
        return None

    def sections(self, samples, meta=True, checksums=True):
        """Absolute offsets of every section of a shard of ``samples`` samples, with a
        meta section and a checksum section unless told otherwise (shard.md, "Offsets
        and size"; ``checksum`` and ``crcs`` are 0 without one), or None when one
        leaves int64."""
        images_end = HEADER_SIZE + samples * self.image_bytes
        boxes = align8(images_end) if self.dtype == DTYPE_TAGS["U8"] else images_end
        mask = boxes + samples * self.box_bytes
        mask_end = mask + samples * self.mask_bytes
        s = {"image": HEADER_SIZE, "boxes": boxes, "mask": mask, "mask_end": mask_end, "meta": 0,
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


def manifest_layout(m):
    """The layout every shard of m must have, from the manifest alone, checked against
    every shard entry (Go: warehouse.ManifestLayout). Raises ValueError with the Go wording."""
    name = m["default_dtype"]
    if name not in DTYPE_TAGS:
        raise ValueError(f"default_dtype: shard: unknown dtype {quote(name)} (want F32, F16 or U8)")
    t = m["transform"]
    layout = Layout(DTYPE_TAGS[name], t["target_width"], t["target_height"], t["channels"], t["max_boxes"])
    for i, e in enumerate(m["extras"]):
        n = 1
        for d in e["shape"]:
            n *= min(d, EXTRA_F32_LIMIT + 1)
            if n > EXTRA_F32_LIMIT:
                raise ValueError(f"extras[{i}] ({e['name']}): shape {ints(e['shape'])} exceeds {EXTRA_F32_LIMIT} values")
        layout.extra_f32 += n
    problem = layout.problem()
    if problem:
        raise ValueError(f"transform and extras: shard: layout: {problem}")
    for i, e in enumerate(m["shards"]):
        if (e["width"], e["height"], e["channels"], e["max_boxes"]) != (layout.width, layout.height, layout.channels,
                                                                         layout.max_boxes):
            raise ValueError(f"shards[{i}] ({e['id']}): {e['channels']}x{e['height']}x{e['width']} max_boxes "
                             f"{e['max_boxes']}, transform says {layout.channels}x{layout.height}x{layout.width} "
                             f"max_boxes {layout.max_boxes}")
        if not SHARD_VERSIONS[0] <= e["shard_version"] <= SHARD_VERSIONS[1]:
            raise ValueError(f"shards[{i}] ({e['id']}): shard_version {e['shard_version']}, this build reads "
                             f"{SHARD_VERSIONS[0]}..{SHARD_VERSIONS[1]}")
        if e["bytes"] not in (layout.file_size(e["samples"]), layout.file_size(e["samples"], checksums=False)):
            raise ValueError(f"shards[{i}] ({e['id']}): bytes {e['bytes']}, but {e['samples']} samples of this "
                             f"layout take {layout.file_size(e['samples'])} "
                             f"({layout.file_size(e['samples'], checksums=False)} without per-sample checksums)")
        problem = shard_version_problem(e, layout)
        if problem:
            raise ValueError(f"shards[{i}] ({e['id']}): {problem}")
    return layout


def shard_version_problem(entry, layout):
    """How a shard entry's shard_version contradicts its dtype or size, or "": from
    shard_version 2 on the version says whether the shard has per-sample checksums and may
    be U8 (Go: shardVersionProblem)."""
    v, with_crcs = entry["shard_version"], entry["bytes"] == layout.file_size(entry["samples"])
    if v == 1:
        return ""
    if layout.dtype == DTYPE_TAGS["U8"] and v < VERSION_U8:
        return f"shard_version {v} has no dtype U8, shard_version {VERSION_U8} adds it"
    if v >= VERSION_CHECKSUMS and not with_crcs:
        return f"shard_version {v} has per-sample checksums, but bytes {entry['bytes']} is the size without them"
    if v < VERSION_CHECKSUMS and with_crcs:
        return f"shard_version {v} has no per-sample checksums, but bytes {entry['bytes']} is the size with them"
    return ""


def has_sample_checksums(entry, layout):
    """Whether a shard entry has per-sample CRCs: from shard_version 2 on its version says;
    a version 1 shard (the legacy rule) has them when its recorded size is that of a shard
    with the checksum section (manifest_layout accepted no other sizes). Go:
    hasSampleChecksums."""
    if entry["shard_version"] != 1:
        return entry["shard_version"] >= VERSION_CHECKSUMS
    return entry["bytes"] == layout.file_size(entry["samples"])


def stat_shard(directory, path, entry):
    """The shard file exists inside the version directory, is a regular file and has the
    recorded size (Go: statShard; a symlink leaving the directory is refused)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        if os.path.islink(path):
            raise WarehouseError(f"{path}: statat {entry['relative_path']}: path escapes from parent") from None
        raise WarehouseError(f"{path}: missing: the manifest lists shard {entry['id']}") from None
    except OSError as e:
        raise WarehouseError(f"{path}: statat {entry['relative_path']}: {_go_errno(e)}") from None
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
    # From shard_version 2 on the version says which sections the shard has; a version 1
    # shard signals each by a non-zero offset (the legacy rule).
    legacy = version == 1
    has_meta = version >= VERSION_META or legacy and meta_off != 0
    has_checksums = version >= VERSION_CHECKSUMS or legacy and checksum_off != 0
    zero_or = "0 or " if legacy else ""
    if not legacy and meta_off == 0:
        raise _corrupt(path, f"shard_version {version} has a meta section, meta_offset is 0")
    if not legacy and has_checksums and checksum_off == 0:
        raise _corrupt(path, f"shard_version {version} has a checksum section, checksum_offset is 0")
    if not legacy and not has_checksums and checksum_off != 0:
        raise _corrupt(path, f"shard_version {version} has no checksum section, checksum_offset is {checksum_off}")
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
    s = hl.sections(samples, checksums=False)
    if s is None:
        raise _corrupt(path, f"samples {samples} overflow the file size")
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


__all__ = ["WarehouseError", "ThresholdError", "Layout", "resolve_dir", "read_manifest", "parse_manifest",
           "manifest_layout", "has_sample_checksums", "stat_shard", "parse_shard", "evaluate_thresholds",
           "finding_text"]
