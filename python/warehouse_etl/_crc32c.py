"""CRC-32C (Castagnoli) of sample bytes, for the per-sample checksums of shard.md
("Checksum section"): reflected polynomial 0x82F63B78, initial value and final xor
0xFFFFFFFF; the CRC-32C of ``b"123456789"`` is 0xE3069283.

Three implementations, the same values, the first available one used (each must give
the check value, in one piece and continued, before it is trusted):

* ISA-L's ``crc32_iscsi`` (Debian ``libisal2``, ``libisal.so.2``) through ctypes: the
  CPU's CRC32 and carry-less multiply instructions, 25 GB/s and more, and ctypes
  releases the GIL, so reader threads check in parallel;
* the ``crc32c`` package (Debian ``python3-crc32c``, PyPI ``crc32c``), a C extension:
  about 2 GB/s in software, several times that where it uses the CPU's CRC32
  instruction;
* numpy only: each message is cut into many equal chunks whose CRCs are computed
  side by side, one 32-bit word of every chunk per step through two 65536-entry
  tables, then combined with the CRC's shift operators (the CRC of zeros is linear
  in the register: shifting by n zero bytes is a 32x32 bit matrix, applied through
  four byte tables). A few hundred MB/s: it keeps the checks exact where the C
  extension is missing.

:func:`crc32c_rows` computes the CRC of each row of a batch, a row being the
concatenation of the same slice of several arrays (image, boxes, mask, record,
extras).

Besides these, the package's one compiled part, ``_copycrc`` (built by pip where a C
compiler is; used where the CPU has PCLMULQDQ and SSE4.2, or on arm64 the CRC32
instructions), copies a row and computes its
CRC in one pass (:data:`COPY_CRC`, :func:`copy_row_function`; compact samples:
``_compact.copy_checker``): read_batch's first reads from a shard's mapping, which
otherwise copy and then compute the CRC of the copy.
"""
import os
import threading
import warnings

import numpy as np

_POLY = 0x82F63B78
CHECK = 0xE3069283  # CRC-32C of b"123456789"


def _byte_table():
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(_POLY), t >> 1).astype(np.uint32)
    return t


_T = _byte_table()


def _shift1(r):
    """The register after one zero byte (r: uint32 array)."""
    return _T[r & 0xFF] ^ (r >> 8)


def _word_tables():
    """TL, TH: the register after a 32-bit little-endian word w was xored in is
    TL[r & 0xffff] ^ TH[r >> 16] (slicing-by-4, two bytes per lookup)."""
    t = [_T]
    for _ in range(3):
        t.append((t[-1] >> 8) ^ _T[t[-1] & 0xFF])
    lo = np.arange(1 << 16, dtype=np.uint32)
    tl = t[3][lo & 0xFF] ^ t[2][lo >> 8]
    th = t[1][lo & 0xFF] ^ t[0][lo >> 8]
    return tl, th


_TL = _TH = None
_shift_tables = {}


def _matrix_of(fn):
    """The 32x32 GF(2) matrix (uint8, column j = fn(1 << j)) of a linear map."""
    cols = fn(np.uint32(1) << np.arange(32, dtype=np.uint32))
    return ((cols[None, :] >> np.arange(32, dtype=np.uint32)[:, None]) & 1).astype(np.uint8)


def _shift_table(n):
    """Four 256-entry tables U with S_n(r) = U[0][r & 255] ^ U[1][r >> 8 & 255] ^
    U[2][r >> 16 & 255] ^ U[3][r >> 24]: the register after n zero bytes."""
    u = _shift_tables.get(n)
    if u is not None:
        return u
    one = _matrix_of(_shift1)
    m = np.eye(32, dtype=np.uint8)
    k = n
    while k:  # square and multiply over GF(2)
        if k & 1:
            m = (m.astype(np.int64) @ one) % 2
        one = (one.astype(np.int64) @ one) % 2
        k >>= 1
    cols = (m.astype(np.uint64) << np.arange(32, dtype=np.uint64)[:, None]).sum(axis=0).astype(np.uint32)
    bits = ((np.arange(256)[:, None] >> np.arange(8)) & 1).astype(bool)
    u = np.stack([np.bitwise_xor.reduce(np.where(bits, cols[8 * p:8 * p + 8], np.uint32(0)), axis=1)
                  for p in range(4)]).astype(np.uint32)
    if len(_shift_tables) < 256:
        _shift_tables[n] = u
    return u


def _shift(r, n):
    """S_n(r) for a uint32 array r."""
    if n == 0:
        return r
    u = _shift_table(n)
    return u[0][r & 0xFF] ^ u[1][(r >> 8) & 0xFF] ^ u[2][(r >> 16) & 0xFF] ^ u[3][r >> 24]


def _raw_rows(a, words=128):
    """R(0, row) for each row of the uint8 matrix a: the register, started at 0 and
    without the final xor, after each row's bytes (n = a.shape[1] per row)."""
    global _TL, _TH
    if _TL is None:
        _TL, _TH = _word_tables()
    rows, n = a.shape
    if n == 0:
        return np.zeros(rows, dtype=np.uint32)
    # Chunks of m words, a power of two of them per row; zeros in front of a row
    # leave R(0, .) unchanged, so each row is padded at the front to L*m words.
    chunks = 1 << max(0, int(np.ceil(np.log2(max(1.0, n / (4 * words))))))
    m = -(-n // (4 * chunks))
    padded = np.zeros((rows, chunks * m * 4), dtype=np.uint8)
    padded[:, padded.shape[1] - n:] = a
    # Word j of every chunk side by side: one contiguous row per step.
    w = np.ascontiguousarray(padded.view("<u4").reshape(rows * chunks, m).T)
    r = np.zeros(rows * chunks, dtype=np.uint32)
    lo, hi = np.empty_like(r), np.empty_like(r)
    for j in range(m):
        np.bitwise_xor(r, w[j], out=r)
        np.bitwise_and(r, 0xFFFF, out=lo)
        np.right_shift(r, 16, out=hi)
        np.take(_TL, lo, out=r)
        np.take(_TH, hi, out=lo)
        np.bitwise_xor(r, lo, out=r)
    # Combine neighbouring chunks pairwise: R(0, A + B) = S_|B|(R(0, A)) ^ R(0, B).
    r = r.reshape(rows, chunks)
    length = 4 * m
    while r.shape[1] > 1:
        r = _shift(r[:, 0::2], length) ^ r[:, 1::2]
        length *= 2
    return r[:, 0]


def _rows_numpy(parts):
    """CRC-32C of each row of the concatenated uint8 matrices ``parts``."""
    rows = parts[0].shape[0]
    total = sum(p.shape[1] for p in parts)
    acc = np.zeros(rows, dtype=np.uint32)
    after = total
    for p in parts:
        after -= p.shape[1]
        acc ^= _shift(_raw_rows(p), after)
    return _shift(np.full(rows, 0xFFFFFFFF, dtype=np.uint32), total) ^ acc ^ np.uint32(0xFFFFFFFF)


_ISAL_CHUNK = 1 << 30  # crc32_iscsi takes an int length
#: Parts of at least this many bytes are checked with the GIL released (CDLL), smaller
#: ones holding it (PyDLL): a few microseconds of CRC at most.
RELEASE_BYTES = 64 << 10
_ISAL_RAW = None  # (crc32_iscsi releasing the GIL, holding it): raw register, no chunking


def isal_raw(n):
    """The _ISAL_RAW function for a part of n bytes: releasing the GIL from
    RELEASE_BYTES up, holding it below. Only where _ISAL_RAW is set."""
    return _ISAL_RAW[0] if n >= RELEASE_BYTES else _ISAL_RAW[1]


def _isal():
    """ISA-L's crc32_iscsi as fn(address, length, crc) -> crc, continuing a CRC-32C,
    or None. crc32_iscsi keeps the register as it is: the CRC-32C is its result for
    the initial value 0xFFFFFFFF, inverted."""
    import ctypes  # noqa: PLC0415
    lib = None
    # By soname only: ctypes.util.find_library would run ldconfig or a compiler
    # on every import where the library is missing.
    for name in ("libisal.so.2", "libisal.so"):
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    fn = getattr(lib, "crc32_iscsi", None) if lib is not None else None
    if fn is None:
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    fn.restype = ctypes.c_uint32

    def update(address, length, crc):
        crc ^= 0xFFFFFFFF
        while length > 0:
            n = min(length, _ISAL_CHUNK)
            crc = fn(address, n, crc)
            address, length = address + n, length - n
        return crc ^ 0xFFFFFFFF

    check = np.frombuffer(b"123456789", dtype=np.uint8)
    p = check.ctypes.data
    if update(p, 9, 0) != CHECK or update(p + 4, 5, update(p, 4, 0)) != CHECK:
        return None
    # The same function called without releasing the GIL (PyDLL), for small parts: a
    # call through CDLL releases the GIL and must take it back, and where reader
    # threads keep the GIL busy taking it back can wait far longer than the CRC of a
    # few hundred bytes takes.
    global _ISAL_RAW
    try:
        held = getattr(ctypes.PyDLL(lib._name), "crc32_iscsi", None)
    except OSError:
        held = None
    if held is not None:
        held.argtypes, held.restype = fn.argtypes, fn.restype
        if held(p, 9, 0xFFFFFFFF) ^ 0xFFFFFFFF == CHECK:
            _ISAL_RAW = (fn, held)
    return update


_crc32c_module = None


def _c_extension():
    global _crc32c_module
    try:
        import crc32c as ext  # noqa: PLC0415 (a dependency; the numpy fallback covers its absence)
    except ImportError:
        return None
    _crc32c_module = ext
    fn = getattr(ext, "crc32c", None)
    try:
        if fn is None or fn(b"123456789") != CHECK or fn(b"56789", fn(b"1234")) != CHECK:
            return None
    except Exception:  # noqa: BLE001 (an incompatible module is simply not used)
        return None
    return fn


#: CRC-32C of bytes((7 * i + 3) & 255 for i in range(1000)), from hash/crc32 and the crc32c
#: package: a message long enough for the fold's vector loop, its reductions and its tail.
_FOLD_CHECK = 0xDD2EDFF7


def _copycrc():
    """The package's compiled part (_copycrc.c: a copy and its CRC-32C in one pass), where
    it was built and this CPU has its instructions and it gives the check values (in one
    piece, continued, and copying), else None."""
    try:
        from . import _copycrc as m  # noqa: PLC0415 (optional: built by pip where a compiler is)
    except ImportError:
        return None
    if not getattr(m, "AVAILABLE", False):
        return None
    try:
        check = np.frombuffer(b"123456789", dtype=np.uint8)
        p = check.ctypes.data
        if m.crc32c(p, 9, 0xFFFFFFFF) ^ 0xFFFFFFFF != CHECK or \
                m.crc32c(p + 4, 5, m.crc32c(p, 4, 0xFFFFFFFF)) ^ 0xFFFFFFFF != CHECK or \
                m.crc32c_rows(((p - 2, 2), (p - 5, 7)), 1, 0xFFFFFFFF) ^ 0xFFFFFFFF != CHECK:
            return None
        src = ((np.arange(1000) * 7 + 3) & 255).astype(np.uint8)
        dst = np.zeros(1003, dtype=np.uint8)
        reg = m.copy_crc32c(dst.ctypes.data + 1, src.ctypes.data, 1000, 0xFFFFFFFF)
        if reg ^ 0xFFFFFFFF != _FOLD_CHECK or not np.array_equal(dst[1:1001], src) or dst[0] or dst[1001:].any():
            return None
    except Exception:  # noqa: BLE001 (a module that misbehaves is simply not used)
        return None
    return m


try:
    _ISAL = _isal()
except Exception:  # noqa: BLE001 (no usable library: another implementation is used)
    _ISAL = None
_EXT = _c_extension()

#: The compiled copy-and-check (``copy_crc32c(dst, src, n, reg[, count, stride])``,
#: ``crc32c(src, n, reg)``, ``crc32c_rows(parts, r, reg)``: addresses, raw registers;
#: ``LEVEL`` names its fold) where it is
#: built and this CPU runs it, else None: read_batch's first reads from a shard's mapping
#: then copy and check in one pass (:func:`copy_row_function`).
COPY_CRC = _copycrc()

#: Which implementation computes the CRCs by default: "isal", "crc32c" or "numpy".
BACKEND = "isal" if _ISAL is not None else "crc32c" if _EXT is not None else "numpy"

#: The implementations available here, fastest first.
BACKENDS = tuple(name for name, impl in (("isal", _ISAL), ("crc32c", _EXT), ("numpy", True)) if impl is not None)

#: Whether the default implementation uses the CPU's CRC instructions (ISA-L always
#: does; the crc32c package says so in ``hardware_based``; numpy never does).
HARDWARE = BACKEND == "isal" or (BACKEND == "crc32c" and bool(getattr(_crc32c_module, "hardware_based", False)))

_warned = False


def _warn_slow():
    """Warn once per process that the checks run in numpy: 30-40x slower than a read."""
    global _warned
    if not _warned:
        _warned = True
        warnings.warn("warehouse_etl: CRC-32C checks of samples run in numpy (about 0.2-0.4 GB/s, a first read "
                      "30-40x slower than the next): install the crc32c package (pip install crc32c; Debian: "
                      "python3-crc32c) or ISA-L (Debian: libisal2), or open with verify_samples=False",
                      RuntimeWarning, stacklevel=3)


class ProcessThreads:
    """A ThreadPoolExecutor of this process, made on first use (and made again in a
    forked child: the parent's threads did not fork). ``workers`` is called then."""

    def __init__(self, workers, prefix):
        self._workers, self._prefix = workers, prefix
        self._lock = threading.Lock()
        self._pool, self._pid = None, None

    def get(self):
        if self._pid == os.getpid():
            return self._pool
        with self._lock:
            if self._pid != os.getpid():
                from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415
                self._pool = ThreadPoolExecutor(self._workers(), thread_name_prefix=self._prefix)
                self._pid = os.getpid()
            return self._pool


_checker = ProcessThreads(lambda: min(4, max(1, (os.cpu_count() or 2) - 1)), "warehouse-crc")


def checker():
    """This process's checker threads (a ThreadPoolExecutor), or None where the checks
    hold the GIL (the numpy fallback). ISA-L through ctypes and the crc32c extension
    release the GIL while they run, so a checker thread computes CRCs on another core
    while the reading thread reads the next rows. min(4, CPUs - 1), at least 1."""
    return None if BACKEND == "numpy" else _checker.get()


def crc32c(data, backend=None):
    """CRC-32C of a bytes-like object or contiguous array."""
    b = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
    default, backend = backend is None, backend or BACKEND
    if backend == "isal" and _ISAL is not None:
        return _ISAL(b.ctypes.data, b.size, 0) if b.size else 0
    if backend == "crc32c" and _EXT is not None:
        return int(_EXT(b))
    if default:
        _warn_slow()
    return int(_rows_numpy([b.reshape(1, -1)])[0])


def crc32c_rows(arrays, rows, backend=None):
    """CRC-32C of each row in ``rows`` (a sequence of ints) of the concatenation of
    ``arrays``: every array C-contiguous with the rows along axis 0, row r's message
    being ``arrays[0][r]`` then ``arrays[1][r]`` and so on, as raw bytes. Returns a
    uint32 array, one CRC per entry of ``rows``."""
    return rows_function(arrays, backend)(rows)


def rows_function(arrays, backend=None):
    """``crc32c_rows(arrays, rows, backend)`` as a function of ``rows``, the arrays'
    layout worked out once: for a caller that checks a few rows at a time, where that
    work costs as much as the CRCs of a row (one row at a time: :func:`row_function`)."""
    mats = _byte_rows(arrays)
    default, backend = backend is None, backend or BACKEND
    if backend == "isal" and _ISAL is not None:
        parts = row_parts(mats)
        row = _isal_raw_row(parts)
        if row is not None:
            def raw_rows(rows):
                rows = np.asarray(rows, dtype=np.int64)
                out = np.empty(rows.shape[0], dtype=np.uint32)
                for k, r in enumerate(rows.tolist()):
                    out[k] = row(r)
                return out
            return raw_rows

        def isal_rows(rows):
            rows = np.asarray(rows, dtype=np.int64)
            out = np.empty(rows.shape[0], dtype=np.uint32)
            for k, r in enumerate(rows.tolist()):
                c = 0
                for base, n in parts:
                    c = _ISAL(base + r * n, n, c)
                out[k] = c
            return out
        return isal_rows
    if backend == "crc32c" and _EXT is not None:
        def ext_rows(rows):
            rows = np.asarray(rows, dtype=np.int64)
            out = np.empty(rows.shape[0], dtype=np.uint32)
            for k, r in enumerate(rows.tolist()):
                c = 0
                for m in mats:
                    if m.shape[1]:
                        c = _EXT(m[r], c)
                out[k] = c
            return out
        return ext_rows

    def numpy_rows(rows):
        rows = np.asarray(rows, dtype=np.int64)
        if rows.shape[0] == 0:
            return np.zeros(0, dtype=np.uint32)
        if default:
            _warn_slow()
        return _rows_numpy([m[rows] for m in mats])
    return numpy_rows


def row_function(arrays, backend=None):
    """The CRC-32C of row r of ``arrays`` (as :func:`crc32c_rows` defines it) as a
    function of r returning an int, the layout worked out once: for read_batch's copy
    threads, which check each row right after copying it and must hold the GIL as
    little as they can. With ISA-L, one call per array and nothing else (the GIL
    released for the large parts only: :func:`isal_raw`)."""
    if (backend or BACKEND) == "isal" and _ISAL is not None:
        row = _isal_raw_row(row_parts(arrays))
        if row is not None:
            return row
    rows = rows_function(arrays, backend)
    return lambda r: int(rows((r,))[0])


def copy_row_function(arrays):
    """For read_batch's copy threads, where :data:`COPY_CRC` is there: ``f(r, src)`` copies
    row r of ``arrays[0]`` (its bytes) from address ``src`` and returns the CRC-32C of row r
    (as :func:`crc32c_rows` defines it: the copied bytes, then the other arrays' row r as
    they are), the copy and its CRC in one pass over the bytes. None without COPY_CRC."""
    m = COPY_CRC
    if m is None:
        return None
    mats = _byte_rows(arrays)
    first, n0 = mats[0].ctypes.data, mats[0].shape[1]
    rest = row_parts(mats[1:])
    copy, rows = m.copy_crc32c, m.crc32c_rows

    def row(r, src):
        return rows(rest, r, copy(first + r * n0, src, n0, 0xFFFFFFFF)) ^ 0xFFFFFFFF
    return row


def row_parts(arrays):
    """(address, row bytes) of each array with bytes in its rows (C-contiguous, rows along
    axis 0), a tuple: what the compiled copy-and-check continues a row's CRC over
    (``COPY_CRC.crc32c_rows``)."""
    return tuple((a.ctypes.data, a.shape[1]) for a in _byte_rows(arrays) if a.shape[1])


def _byte_rows(arrays):
    """Each array as a C-contiguous uint8 matrix, one row per row of the array."""
    return [np.ascontiguousarray(a).reshape(a.shape[0], -1).view(np.uint8) for a in arrays]


def _isal_raw_row(parts):
    """The CRC-32C of row r of ``parts`` ((address, row bytes) per array) as a function
    of r: crc32_iscsi on the raw register carried from part to part (it neither inverts
    nor finishes it), the GIL released only for large parts. None where the raw function
    is not there or a part is too long for one call."""
    if _ISAL_RAW is None or not all(n < _ISAL_CHUNK for _, n in parts):
        return None
    calls = [(isal_raw(n), base, n) for base, n in parts]

    def row(r):
        reg = 0xFFFFFFFF
        for fn, base, n in calls:
            reg = fn(base + r * n, n, reg)
        return reg ^ 0xFFFFFFFF
    return row


def crc32c_parts(parts, backend=None):
    """CRC-32C of the concatenation of ``parts`` (C-contiguous arrays, read as raw
    bytes), continued part by part: nothing is copied to join them."""
    mats = [np.frombuffer(memoryview(p).cast("B"), dtype=np.uint8) for p in parts]
    default, backend = backend is None, backend or BACKEND
    if backend == "isal" and _ISAL is not None:
        c = 0
        for m in mats:
            if m.size:
                c = _ISAL(m.ctypes.data, m.size, c)
        return c
    if backend == "crc32c" and _EXT is not None:
        c = 0
        for m in mats:
            if m.size:
                c = int(_EXT(m, c))
        return c
    if default:
        _warn_slow()
    return int(_rows_numpy([m.reshape(1, -1) for m in mats])[0]) if mats else 0
