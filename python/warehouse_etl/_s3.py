"""Reading a warehouse from S3 (docs/format/s3.md): ``s3://`` URLs, the client, the
version pointer, the reader's lease, and a per-process count of GET requests.

The object layout is the Go publisher's: ``PREFIX/v<16 hex>/<path>`` holds the files
of a version at their local relative paths (``manifest.json`` uploaded last),
``PREFIX/latest`` and ``PREFIX/latest-<config>`` hold a version name and a newline,
``PREFIX/.leases/v<16 hex>/<holder>.json`` are readers' leases that keep ``gc`` away.

boto3 is imported only here, and only when an ``s3://`` path is opened. Debian's
boto3 1.26 ignores ``AWS_ENDPOINT_URL``: the endpoint is read from the environment
here (``AWS_ENDPOINT_URL_S3``, then ``AWS_ENDPOINT_URL``) and passed explicitly, with
path-style addressing whenever an endpoint is set.
"""
import collections
import json
import os
import re
import secrets
import socket
import threading
import time

from ._manifest import is_pointer_name
from .errors import WarehouseError

SCHEME = "s3://"
_VERSION_DIR = re.compile(r"v[0-9a-f]{16}")
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
MAX_POINTER_BYTES = 4096
_RETRIES = 3

# GET requests of this process: (bucket, key) -> [whole-object GETs, range GETs, bytes].
# Tests and benchmarks read it (get_counts); the cache's "each shard once" is checked on it.
_counts = collections.defaultdict(lambda: [0, 0, 0])
_counts_lock = threading.Lock()


def _after_fork():
    # A fork while another thread held the lock (a DataLoader forking its workers while
    # the fetch-ahead thread counts a GET) would leave it held forever in the child.
    global _counts_lock
    _counts_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def is_s3(path):
    return isinstance(path, str) and path.startswith(SCHEME)


def get_counts():
    """A copy of this process's GET counts: ``{"bucket/key": [whole, ranged, bytes]}``."""
    with _counts_lock:
        return {f"{b}/{k}": list(v) for (b, k), v in _counts.items()}


def reset_counts():
    with _counts_lock:
        _counts.clear()


def _count(bucket, key, ranged, nbytes):
    with _counts_lock:
        c = _counts[(bucket, key)]
        c[1 if ranged else 0] += 1
        c[2] += nbytes


class Location:
    """A parsed ``s3://bucket/prefix[/v<16 hex>|/latest|/latest-<config>]``: ``bucket``,
    ``prefix`` (the output root, "" or without a trailing slash), and either
    ``version`` (``v<16 hex>``) or ``pointer`` (``latest`` by default)."""

    def __init__(self, url):
        if not is_s3(url):
            raise WarehouseError(f"{url}: not an s3:// URL")
        rest = url[len(SCHEME):].strip("/")
        bucket, _, key = rest.partition("/")
        if not _BUCKET.fullmatch(bucket or ""):
            raise WarehouseError(f"{url}: {bucket!r} is not an S3 bucket name")
        parts = [p for p in key.split("/") if p]
        if any(p in (".", "..") for p in parts):
            raise WarehouseError(f"{url}: '.' and '..' are not allowed in the key")
        self.bucket, self.version, self.pointer = bucket, None, "latest"
        if parts and _VERSION_DIR.fullmatch(parts[-1]):
            self.version = parts.pop()
        elif parts and is_pointer_name(parts[-1]):
            self.pointer = parts.pop()
        self.prefix = "/".join(parts)

    def key(self, *names):
        return "/".join(([self.prefix] if self.prefix else []) + list(names))

    def url(self, *names):
        return f"{SCHEME}{self.bucket}/{self.key(*names)}"


_clients = {}


def client(endpoint_url=None, region=None, max_pool=32):
    """A boto3 S3 client: the AWS environment and files for credentials and region, the
    endpoint from ``endpoint_url`` or ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``,
    path-style addressing when an endpoint is set. One per process and settings (making
    one takes a few hundred ms; clients are thread-safe; a forked process makes its own)."""
    endpoint = endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or None
    creds = tuple(os.environ.get(k) for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                                              "AWS_PROFILE"))
    key = (os.getpid(), endpoint, region, max_pool, creds)
    with _counts_lock:
        c = _clients.get(key)
    if c is None:
        c = _new_client(endpoint, region, max_pool)
        with _counts_lock:
            c = _clients.setdefault(key, c)
    return c


def _new_client(endpoint, region, max_pool):
    try:
        import boto3
        import botocore.config
    except ImportError as e:
        raise WarehouseError(f"reading s3:// warehouses needs boto3 ({e}): apt-get install python3-boto3, "
                             f"or pip install 'warehouse-etl[s3]'") from None
    cfg = {"max_pool_connections": max_pool, "retries": {"max_attempts": _RETRIES, "mode": "standard"}}
    if endpoint:
        cfg["s3"] = {"addressing_style": "path"}
        region = region or "us-east-1"
    return boto3.session.Session().client("s3", endpoint_url=endpoint, region_name=region,
                                          config=botocore.config.Config(**cfg))


def _missing(e):
    code = getattr(e, "response", {}).get("Error", {}).get("Code", "")
    return code in ("NoSuchKey", "404", "NotFound")


def get(c, bucket, key, start=None, end=None, limit=None):
    """The bytes of object ``key`` (``[start, end)`` when given). Raises
    FileNotFoundError for a missing object, WarehouseError for an answer of the wrong
    length or larger than ``limit``."""
    kw = {"Bucket": bucket, "Key": key}
    ranged = start is not None
    if ranged:
        if end <= start:
            return b""
        kw["Range"] = f"bytes={start}-{end - 1}"
    try:
        r = c.get_object(**kw)
    except Exception as e:  # botocore.exceptions.ClientError; boto3 is imported lazily
        if _missing(e):
            raise FileNotFoundError(f"{SCHEME}{bucket}/{key}") from None
        raise WarehouseError(f"{SCHEME}{bucket}/{key}: GET: {e}") from None
    n = r.get("ContentLength")
    if limit is not None and n is not None and n > limit:
        r["Body"].close()
        raise WarehouseError(f"{SCHEME}{bucket}/{key}: {n} bytes, more than the {limit} allowed")
    body = r["Body"].read() if limit is None else r["Body"].read(limit + 1)
    _count(bucket, key, ranged, len(body))
    if limit is not None and len(body) > limit:
        raise WarehouseError(f"{SCHEME}{bucket}/{key}: more than the {limit} bytes allowed")
    if ranged and len(body) != end - start:
        raise WarehouseError(f"{SCHEME}{bucket}/{key}: short read: {len(body)} of {end - start} bytes at offset "
                             f"{start}")
    return body


def download(c, bucket, key, f, hasher, size):
    """Stream object ``key`` into the file object ``f``, feeding ``hasher``; returns the
    byte count. Refuses an object longer than ``size``."""
    try:
        r = c.get_object(Bucket=bucket, Key=key)
    except Exception as e:
        if _missing(e):
            raise FileNotFoundError(f"{SCHEME}{bucket}/{key}") from None
        raise WarehouseError(f"{SCHEME}{bucket}/{key}: GET: {e}") from None
    n, body = 0, r["Body"]
    try:
        while True:
            chunk = body.read(4 << 20)
            if not chunk:
                break
            n += len(chunk)
            if n > size:
                break
            hasher.update(chunk)
            f.write(chunk)
    finally:
        body.close()
    _count(bucket, key, False, n)
    return n


def resolve_version(c, loc):
    """The version directory name (``v<16 hex>``) that ``loc`` names: itself, or the one
    its pointer object names."""
    if loc.version:
        return loc.version
    try:
        body = get(c, loc.bucket, loc.key(loc.pointer), limit=MAX_POINTER_BYTES)
    except FileNotFoundError:
        if loc.pointer == "latest":
            raise WarehouseError(f"{loc.url()}: neither a warehouse version nor a root with a \"latest\" pointer "
                                 f"(no object {loc.key('latest')})") from None
        raise WarehouseError(f"{loc.url(loc.pointer)}: not a pointer") from None
    name = body.decode("utf-8", "replace").strip()
    if not _VERSION_DIR.fullmatch(name):
        raise WarehouseError(f"{loc.url(loc.pointer)} -> {name[:100]!r}: the pointer must name a version "
                             f"(v<16 hex digits>)")
    return name


class Lease:
    """A reader's lease on a version (S3 layout: ``PREFIX/.leases/<version>/<holder>.json``):
    PUT on open and every ``ttl_s / 3`` seconds from a daemon thread, deleted on close.
    Only the process that took it renews or deletes it (a forked DataLoader worker
    inherits the object, not the thread)."""

    def __init__(self, c, loc, version, ttl_s):
        self.c, self.loc, self.version, self.ttl_s = c, loc, version, float(ttl_s)
        self.holder = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"  # <8 random hex>, as Go
        self.key = loc.key(".leases", version, self.holder + ".json")
        self.pid = os.getpid()
        self._stop = threading.Event()
        self.put()
        self._thread = threading.Thread(target=self._renew, name="warehouse-s3-lease", daemon=True)
        self._thread.start()

    def body(self):
        return json.dumps({"version": self.version, "holder": self.holder,
                           "expires_unix_ms": int(time.time() * 1000 + self.ttl_s * 1000)}).encode()

    def put(self):
        # Tried a few times: a server may refuse one of several PUTs racing to create
        # the same new prefix (versitygw's posix backend: ExistingObjectIsDirectory).
        for attempt in range(5):
            try:
                self.c.put_object(Bucket=self.loc.bucket, Key=self.key, Body=self.body(),
                                  ContentType="application/json")
                return
            except Exception as e:
                if attempt == 4:
                    raise WarehouseError(f"{SCHEME}{self.loc.bucket}/{self.key}: PUT lease: {e}") from None
                time.sleep(0.05 * 2 ** attempt)

    def _renew(self):
        while not self._stop.wait(self.ttl_s / 3):
            try:
                self.put()
            except WarehouseError:
                pass  # retried at the next period; gc honours the last expiry until then

    def close(self):
        if self.pid != os.getpid() or self._stop.is_set():
            return
        self._stop.set()
        try:
            self.c.delete_object(Bucket=self.loc.bucket, Key=self.key)
        except Exception:
            pass  # it expires by itself


__all__ = ["SCHEME", "is_s3", "Location", "client", "get", "download", "resolve_version", "Lease", "get_counts",
           "reset_counts"]
