"""Read warehouse-etl tensor warehouses from Python (numpy only).

Written from docs/format/ (reading.md, shard.md, manifest.md): the same checks, the
same refusals (worded as the Go reader words them), the same values and the same
(seed, epoch, rank, world) batch order as the Go reader ``warehouse.Open``.

    import warehouse_etl
    wh = warehouse_etl.open("out/demo")          # a version directory or a root with `latest`
    len(wh)                                      # samples
    s = wh[7]                                    # zero-copy numpy views into the shard's mapping
    s["image"]                                   #   (C, H, W) float16, float32 or uint8
    s["boxes"], s["mask"], s["class_index"]      #   (K, 4), (K,), (K,) int32 with -1 padding
    s["box_count"], s["meta"], s["extras"]       #   int, dict of record fields, dict name -> array
    for idx in wh.batches(32, seed=0, epoch=3, rank=0, world=1):
        b = wh.read_batch(idx, out=b if "b" in dir() else None)   # contiguous arrays, one pass

Every sample handed out is checked against its shard's CRC-32C on its first read in this
process (``verify_samples``; shard.md, "Checksum section").

PyTorch: ``warehouse_etl.torch`` (imported separately; torch is optional). The API is
in python/README.md. The modules, by job: ``warehouse`` (open, Warehouse), ``errors``,
``_manifest`` (manifest.json), ``_thresholds``, ``_shard`` (a shard's header and
sections), ``_layout`` (section sizes), ``_compact`` (compact image regions, shard_version 5),
``_order`` (batch order), ``_crc32c``, ``_mix`` (mixtures of warehouses), ``_state``
(loader state for resuming), ``_windows`` (episode windows, extra_stats), and for
``s3://`` warehouses ``_s3`` (bucket access), ``_s3reader`` (S3Warehouse) and ``_cache``
(the node-local cache).
"""
from ._argparse import BUILD_COMMAND, add_argument
from ._order import epoch_order, plan_batches
from .errors import ThresholdError, WarehouseError
from .warehouse import Warehouse, open  # noqa: A004 (the API name)
from ._windows import Episodes, Windows, extra_stats

# Importable from here since the reader was one module; the API is __all__.
from ._gofmt import go_join  # noqa: E402,F401
from ._layout import DTYPES, RECORD_FIELDS  # noqa: E402,F401
from ._manifest import manifest_layout, read_manifest, resolve_dir  # noqa: E402,F401
from ._shard import has_sample_checksums, parse_shard, stat_shard  # noqa: E402,F401
from ._thresholds import evaluate_thresholds, finding_text  # noqa: E402,F401

__version__ = "0.1.0"
__all__ = ["open", "Warehouse", "WarehouseError", "ThresholdError", "add_argument", "epoch_order",
           "plan_batches", "BUILD_COMMAND", "Windows", "Episodes", "extra_stats", "__version__"]
