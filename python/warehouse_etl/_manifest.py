"""manifest.json (docs/format/manifest.md; Go: warehouse.ParseManifest and
manifestLayout): finding the version directory, the detached digest, the schema and
consistency checks, and the shard layout the manifest implies, with the Go reader's
wording of every refusal (docs/format/reading.md, "Opening").
"""
import hashlib
import json
import math
import os
import re
import posixpath

from ._gofmt import format_g, go_errno, go_join, ints, quote
from ._layout import DTYPE_TAGS, EXTRA_F32_LIMIT, Layout
from . import _compact, _shard
from .errors import WarehouseError

FORMAT_VERSION = 1
MAX_MANIFEST_BYTES = 256 << 20
MANIFEST_NAME = "manifest.json"
LATEST_NAME = "latest"
MANIFEST_DIGEST_NAME = MANIFEST_NAME + ".sha256"


_CONFIG_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")


def is_pointer_name(name):
    """``latest`` or ``latest-<config>``: the pointers of an output root (reading.md, Opening 1)."""
    if name == LATEST_NAME:
        return True
    rest = name[len(LATEST_NAME) + 1:] if name.startswith(LATEST_NAME + "-") else ""
    return _CONFIG_NAME.fullmatch(rest) is not None


def resolve_dir(path):
    """The version directory of ``path``: the version a pointer (``ROOT/latest``,
    ``ROOT/latest-<config>``) names beside it, itself when it holds manifest.json, else the
    version its ``latest`` symlink names beside it (reading.md, Opening 1)."""
    path = os.fspath(path)
    base = os.path.basename(path.rstrip("/"))
    if os.path.islink(path.rstrip("/")) and is_pointer_name(base):
        return _follow(os.path.dirname(path.rstrip("/")) or ".", base)
    if os.path.exists(go_join(path, MANIFEST_NAME)):
        return path
    return _follow(path, LATEST_NAME)


def _follow(path, name):
    link = go_join(path, name)
    try:
        target = os.readlink(link)
    except OSError:
        if name != LATEST_NAME:
            raise WarehouseError(f"{link}: not a pointer") from None
        raise WarehouseError(f"{path}: neither a warehouse version (no {MANIFEST_NAME}) nor a root with a "
                             f"{quote(LATEST_NAME)} pointer") from None
    if os.path.isabs(target) or "/" in target or target.startswith("."):
        raise WarehouseError(f"{path}/{name} -> {quote(target)}: the pointer must name a version directory beside it")
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
    "extra_stats": [{"name": str, "count": int, "mean": [float], "std": [float], "min": [float], "max": [float],
                     "q01": [float], "q99": [float]}],
    "source_fingerprint": {"files": int, "bytes": int, "sha256": str},
    "input_samples": int, "samples": int, "samples_per_shard": int,
    "shards": [{"id": str, "relative_path": str, "shard_version": int, "first_sample": int, "samples": int,
                "width": int, "height": int, "channels": int, "max_boxes": int, "dtype": str,
                "endianness": str, "bytes": int, "checksum_sha256": str}],
    "files": {"samples": str, "fingerprint": str, "build_report": str,
              "parquet": {"samples": str, "runs": str, "build": str},
              "checksums": dict, "episodes": str},
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
    if files.get("episodes"):
        names.append(files["episodes"])
        if files.get("checksums") is None:
            raise ValueError(f"files.episodes {quote(files['episodes'])} without files.checksums")
    for p in names:
        problem = _relative_problem(p)
        if problem:
            raise ValueError(f"files: {problem}")
    return m



def _manifest_digest(raw):
    """The contents of manifest.json.sha256 for manifest bytes ``raw`` (sha256sum's format)."""
    return (hashlib.sha256(raw).hexdigest() + "  " + MANIFEST_NAME + "\n").encode()


def open_in(directory, name, dir_fd=None):
    """Open file ``name`` of a version directory for reading: relative to ``dir_fd``, the
    directory a reader pinned at open (whatever build took its name since), or by path."""
    if dir_fd is None:
        return open(go_join(directory, name), "rb")
    return open(name, "rb", opener=lambda p, flags: os.open(p, flags, dir_fd=dir_fd))


def _check_manifest_digest(directory, raw, dir_fd=None):
    """Compare directory/manifest.json.sha256 with the manifest bytes (Go:
    checkManifestDigest). Returns whether the digest exists; raises on damage."""
    digest_name = go_join(directory, MANIFEST_DIGEST_NAME)
    try:
        with open_in(directory, MANIFEST_DIGEST_NAME, dir_fd) as f:
            want = _manifest_digest(raw)
            got = f.read(len(want) + 1)
    except FileNotFoundError:
        return False
    except OSError as e:
        raise WarehouseError(f"{digest_name}: manifest invalid: {go_errno(e)}") from None
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


def read_manifest(directory, dir_fd=None):
    """Load and check ``directory/manifest.json``: its detached digest first
    (manifest.json.sha256, required when the manifest records file checksums),
    then the manifest itself; errors name the file (the Go reader's words). With
    ``dir_fd``, both are opened relative to that directory handle."""
    name = go_join(directory, MANIFEST_NAME)
    try:
        with open_in(directory, MANIFEST_NAME, dir_fd) as f:
            raw = f.read(MAX_MANIFEST_BYTES + 1)
    except OSError as e:
        raise WarehouseError(f"open {name}: {go_errno(e)}") from None
    sealed = _check_manifest_digest(directory, raw, dir_fd)
    try:
        m = parse_manifest(raw)
    except ValueError as e:
        raise WarehouseError(f"{name}: manifest invalid: {e}") from None
    if not sealed and (m.get("files") or {}).get("checksums"):
        raise WarehouseError(f"{go_join(directory, MANIFEST_DIGEST_NAME)}: manifest invalid: missing: the manifest "
                             f"records file checksums, so it was published with a digest")
    return m


def manifest_layout(m):
    """The layout every shard of m must have, from the manifest alone, checked against
    every shard entry (Go: manifestLayout). Raises ValueError with the Go wording."""
    name = m["default_dtype"]
    if name not in DTYPE_TAGS:
        raise ValueError(f"default_dtype: shard: unknown dtype {quote(name)} (want F32, F16 or U8)")
    t = m["transform"]
    layout = Layout(DTYPE_TAGS[name], t["target_width"], t["target_height"], t["channels"], t["max_boxes"])
    if m.get("default_shard_version", 0) >= _compact.VERSION_COMPACT:
        layout.compact, layout.pad = True, t["pad_value"] if 0 <= t["pad_value"] <= 255 else 0
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
        lo, hi = _shard.SHARD_VERSIONS
        if not lo <= e["shard_version"] <= hi:
            raise ValueError(f"shards[{i}] ({e['id']}): shard_version {e['shard_version']}, this build reads "
                             f"{lo}..{hi}")
        if layout.compact or e["shard_version"] >= _compact.VERSION_COMPACT:
            problem = _compact.entry_problem(e, layout)
            if problem:
                raise ValueError(f"shards[{i}] ({e['id']}): {problem}")
            continue
        if e["bytes"] not in (layout.file_size(e["samples"]), layout.file_size(e["samples"], checksums=False)):
            raise ValueError(f"shards[{i}] ({e['id']}): bytes {e['bytes']}, but {e['samples']} samples of this "
                             f"layout take {layout.file_size(e['samples'])} "
                             f"({layout.file_size(e['samples'], checksums=False)} without per-sample checksums)")
        problem = _shard.shard_version_problem(e, layout)
        if problem:
            raise ValueError(f"shards[{i}] ({e['id']}): {problem}")
    return layout


__all__ = ["FORMAT_VERSION", "MANIFEST_NAME", "MANIFEST_DIGEST_NAME", "LATEST_NAME", "resolve_dir",
           "parse_manifest", "read_manifest", "manifest_layout"]
