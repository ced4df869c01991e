#!/usr/bin/env bash
# Training-read benchmark: every way a training job can read the same frames,
# interleaved in one run: warm (page cache holds the files), the first epoch
# of a process, and cold (the files dropped from the page cache before each
# epoch).
#
#   bash bench/read.sh                               # 600 frames, 384x384, batch 32, 3 rounds
#   DTYPES=u8 ROUNDS=5 EPOCHS=5 COLD_EPOCHS=2 bash bench/read.sh
#   DTYPES="u8 u8c" bash bench/read.sh               # u8c: u8 with compact_images
#   (FRAMES <= 100 per run: gen_dataset.py's objects leave the frame after frame 100)
#
# Needs Go, and from Debian: imagemagick python3-numpy python3-torch
# python3-ffcv python3-opencv (all used through /usr/bin/python3).
#
# What it does:
#   1. makes RUNS x FRAMES 1920x1080 JPEG q90 frames with ImageMagick
#      (bench/gen_dataset.py, the frames bench/run.sh uses);
#   2. builds our warehouse of them per dtype in DTYPES (u8, f16), SIZE x SIZE
#      letterbox; and writes an FFCV .beton of the same frames with
#      RGBImageField(write_mode="raw", max_resolution=SIZE) (uint8 HWC,
#      longer side SIZE: 1080p -> SIZE x SIZE*9/16, no letterbox padding,
#      so 0.56x our u8 bytes per sample);
#   3. reads every file twice to warm the page cache, then ROUNDS times, each
#      reader in turn (one function each below; each reads its files into the
#      page cache again first, after the cold runs before it): cat of the shard files,
#      `warehouse-etl load` (sequential and global shuffle, checked and
#      --no-verify-samples), numpy read_batch (checked and verify_samples=False), our make_loader with 0, 1 and 2
#      reader threads (checked and verify_samples=False), FFCV's Loader with
#      1 and 2 workers (random order, os_cache);
#   4. times the disk's ceiling for a shuffled cold epoch: random reads of
#      a stored sample's size with 1 and 4 in flight (bench/randread.py);
#   5. prints one table of medians: samples/s and GB/s warm, in the first
#      epoch of a process, and cold; then the ratios the issues ask for.
#
# warm: EPOCHS epochs after a first one, page cache warm. first: a process's
# first epoch (for ours every sample's CRC-32C is checked then; FFCV compiles
# its pipeline with numba then; `load` times from after Open). cold: before
# each of COLD_EPOCHS epochs every shard file (or the .beton) is dropped from
# the page cache (bench/evict.py: posix_fadvise DONTNEED; FFCV's own mapping
# of the .beton is dropped first, as it would keep the pages); for cat and
# `load` each cold epoch is a new process. GB/s counts bytes handed out:
# images + boxes + masks for ours, images for FFCV, file bytes for cat.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

RUNS=${RUNS:-6}
FRAMES=${FRAMES:-100}
SIZE=${SIZE:-384}
BATCH=${BATCH:-32}
EPOCHS=${EPOCHS:-5}
COLD_EPOCHS=${COLD_EPOCHS:-2}
ROUNDS=${ROUNDS:-3}
DTYPES=${DTYPES:-u8 f16}
WORK=${WORK:-/tmp/warehouse-read-bench}   # kept: frames are reused by the next run
PY=/usr/bin/python3
for tool in go convert "$PY"; do
  command -v "$tool" >/dev/null || { echo "bench: $tool not found" >&2; exit 1; }
done
"$PY" -c 'import numpy, torch, ffcv, cv2' ||
  { echo "bench: $PY cannot import numpy/torch/ffcv/cv2 (apt-get install python3-numpy python3-torch python3-ffcv python3-opencv)" >&2; exit 1; }
# The package as pip installs it: its compiled part built (bench/python_package.sh).
export PYTHONPATH=$(bash bench/python_package.sh "$PY" "$WORK/python")

mkdir -p "$WORK"/{data,out,cfg}
echo "== frames: $RUNS runs x $FRAMES 1080p JPEG in $WORK/data" >&2
"$PY" bench/gen_dataset.py --root "$WORK/data" --format jpeg --runs "$RUNS" --frames "$FRAMES"

go build -o "$WORK/warehouse-etl" ./cmd/warehouse-etl
WH=$WORK/warehouse-etl
declare -A dir
for dtype in $DTYPES; do
  # u8c: u8 with compact_images (the letterbox stored without its padding).
  compact=false; [ "$dtype" = u8c ] && compact=true
  capture_config "$WORK/cfg/$dtype.jsonc" "$WORK/data" "$SIZE" "${dtype%c}" "$compact" "$WORK/out/$dtype-$SIZE"
  echo "== build $dtype" >&2
  dir[$dtype]=$("$WH" build --config "$WORK/cfg/$dtype.jsonc" --quiet)
done
beton=$WORK/out/ffcv-$SIZE.beton
if [ ! -s "$beton" ]; then
  echo "== write $beton" >&2
  "$PY" bench/read_ffcv.py write --root "$WORK/data" --out "$beton.tmp" --size "$SIZE" && mv "$beton.tmp" "$beton"
fi

n=$(ls "$WORK"/data/run_*/images/*.jpg | wc -l)
for dtype in $DTYPES; do for f in "${dir[$dtype]}"/shards/* "$beton"; do cat "$f" >/dev/null; cat "$f" >/dev/null; done; done

results=$WORK/results.txt
: >"$results"
# line LABEL KIND SAMPLES SECONDS BYTES: one measurement (KIND: warm, first, cold).
line() { echo "$*" | tee -a "$results" >&2; }
# record LABEL JSON [KIND]: the warm (or KIND) and, when the JSON has them,
# first-epoch figures of a Python reader's JSON line.
record() {
  "$PY" -c '
import json, sys
label, kind, r = sys.argv[1], sys.argv[3], json.loads(sys.argv[2])
print(label, kind, r["samples"], r["seconds"], r["bytes"], r.get("cpu_seconds", "-"))
if "first_samples" in r and kind == "warm":
    per = r["bytes"] / max(r["samples"], 1)
    print(label, "first", r["first_samples"], r["first_seconds"], int(r["first_samples"] * per))' "$1" "$2" "${3:-warm}" |
    tee -a "$results" >&2
}
evict() { "$PY" bench/evict.py "$@"; }
# warm FILES...: read them into the page cache again. Every reader's warm and first-epoch
# runs start warm: the cold runs of the reader before (and randread) evicted the files, and
# a first epoch that found them evicted measured the disk, and the torch loader's advice
# that follows a cold epoch, instead.
warm() { cat "$@" >/dev/null; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { print b - a }'; }

# cat_reader DTYPE: cat every shard, EPOCHS times warm, then COLD_EPOCHS
# times each after dropping the shards from the page cache.
cat_reader() {
  local d=${dir[$1]} files t0 t1 bytes
  files=("$d"/shards/*)
  warm "${files[@]}"
  bytes=$(cat "${files[@]}" | wc -c)
  t0=$(now); for _ in $(seq "$EPOCHS"); do cat "${files[@]}"; done >/dev/null; t1=$(now)
  line "cat-$1" warm $((n * EPOCHS)) "$(secs "$t0" "$t1")" $((bytes * EPOCHS))
  for _ in $(seq "$COLD_EPOCHS"); do
    evict "$d/shards"
    t0=$(now); cat "${files[@]}" >/dev/null; t1=$(now)
    line "cat-$1" cold "$n" "$(secs "$t0" "$t1")" "$bytes"
  done
}
# go_reader DTYPE SHUFFLE [FLAG]: `load` of EPOCHS+1 epochs (warm: the
# epochs after the first), a one-epoch process (first) and, after dropping
# the shards from the page cache, COLD_EPOCHS one-epoch processes (cold).
go_reader() {
  local d=${dir[$1]} label=go-load-$2-$1${3:+-unchecked} j
  warm "$d"/shards/*
  j=$("$WH" load --tensor-warehouse "$d" --batch "$BATCH" --epochs $((EPOCHS + 1)) --shuffle "$2" --json --quiet ${3:+"$3"})
  record "$label" "$("$PY" -c 'import json, sys; r = json.loads(sys.argv[1]); print(json.dumps({"samples": r["later_epochs_samples"], "seconds": r["later_epochs_seconds"], "bytes": r["later_epochs_bytes"]}))' "$j")"
  record "$label" "$("$WH" load --tensor-warehouse "$d" --batch "$BATCH" --epochs 1 --shuffle "$2" --json --quiet ${3:+"$3"})" first
  for _ in $(seq "$COLD_EPOCHS"); do
    evict "$d/shards"
    record "$label" "$("$WH" load --tensor-warehouse "$d" --batch "$BATCH" --epochs 1 --shuffle "$2" --json --quiet ${3:+"$3"})" cold
  done
}
# numpy_reader DTYPE [--no-verify]: read_batch into reused arrays, global shuffle.
numpy_reader() {
  local d=${dir[$1]} label=numpy-global-$1
  warm "$d"/shards/*
  [ "${2:-}" = --no-verify ] && label+=-unchecked
  record "$label" "$("$PY" bench/read_python.py numpy --tensor-warehouse "$d" --batch "$BATCH" --epochs "$EPOCHS" ${2:+"$2"})"
  record "$label" "$("$PY" bench/read_python.py numpy --tensor-warehouse "$d" --batch "$BATCH" --epochs "$COLD_EPOCHS" --cold "$d/shards" ${2:+"$2"})" cold
}
# torch_reader DTYPE THREADS [--no-verify | --read-ahead=0]: make_loader, global shuffle.
torch_reader() {
  local d=${dir[$1]} label=torch-w$2-$1
  warm "$d"/shards/*
  case ${3:-} in --no-verify) label+=-unchecked ;; --read-ahead=0) label+=-ra0 ;; esac
  record "$label" "$("$PY" bench/read_python.py torch --tensor-warehouse "$d" --batch "$BATCH" --epochs "$EPOCHS" --workers "$2" ${3:+"$3"})"
  record "$label" "$("$PY" bench/read_python.py torch --tensor-warehouse "$d" --batch "$BATCH" --epochs "$COLD_EPOCHS" --workers "$2" --cold "$d/shards" ${3:+"$3"})" cold
}
# ffcv_reader WORKERS: FFCV's Loader, random order.
ffcv_reader() {
  warm "$beton"
  record "ffcv-w$1" "$("$PY" bench/read_ffcv.py read --beton "$beton" --batch "$BATCH" --epochs "$EPOCHS" --workers "$1")"
  record "ffcv-w$1" "$("$PY" bench/read_ffcv.py read --beton "$beton" --batch "$BATCH" --epochs "$COLD_EPOCHS" --workers "$1" --cold)" cold
}

for round in $(seq "$ROUNDS"); do
  echo "== round $round of $ROUNDS" >&2
  for dtype in $DTYPES; do
    cat_reader "$dtype"
    go_reader "$dtype" none
    go_reader "$dtype" global
    go_reader "$dtype" none --no-verify-samples
    numpy_reader "$dtype"
    numpy_reader "$dtype" --no-verify
    # The disk's ceiling for a shuffled cold epoch: random reads of a sample's size, 1 and 4 in flight.
    for q in 1 4; do
      record "randread-q$q-$dtype" "$("$PY" bench/randread.py --tensor-warehouse "${dir[$dtype]}" --threads "$q" --reads "$n")" cold
    done
    for w in 0 1 2; do torch_reader "$dtype" "$w"; done
    torch_reader "$dtype" 1 --read-ahead=0   # without the kernel read-ahead advice
    torch_reader "$dtype" 0 --no-verify
    torch_reader "$dtype" 1 --no-verify
    # A mixture of the warehouse with itself (weights 1:1): what mixing costs on top (reading.md "Mixtures").
    warm "${dir[$dtype]}"/shards/*
    record "torch-mix-w2-$dtype" "$("$PY" bench/read_python.py torch --mix "${dir[$dtype]}=1" --mix "${dir[$dtype]}=1" --batch "$BATCH" --epochs "$EPOCHS" --workers 2)"
  done
  for w in 1 2; do ffcv_reader "$w"; done
done

echo
echo "$n frames, ${SIZE}x$SIZE, batch $BATCH; warm: $EPOCHS epochs, cold: $COLD_EPOCHS; medians of $ROUNDS rounds ($(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg))"
"$PY" - "$results" <<'PYEOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
cpu_us = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label, kind, samples, secs, nbytes, *cpu = line.split()
    runs[label, kind].append((int(samples) / float(secs), int(nbytes) / float(secs) / 1e9))
    if cpu and cpu[0] != "-":
        cpu_us[label, kind].append(float(cpu[0]) / int(samples) * 1e6)
med = {k: (statistics.median(s for s, _ in v), statistics.median(g for _, g in v)) for k, v in runs.items()}
labels = list(dict.fromkeys(label for label, _ in runs))
# cpu us: the process's CPU time (all threads) per sample over the warm epochs (Python
# readers and FFCV): on a loaded machine it says more than the wall-clock rates.
print(f"{'reader':<30} {'warm/s':>8} {'GB/s':>6} {'cpu us':>7} {'first/s':>8} {'GB/s':>6} {'cold/s':>8} {'GB/s':>6}")
for label in labels:
    cells = []
    for kind in ("warm", "first", "cold"):
        sps, gbs = med.get((label, kind), (None, None))
        cells.append(f"{sps:>8.0f} {gbs:>6.2f}" if sps is not None else f"{'-':>8} {'-':>6}")
        if kind == "warm":
            c = cpu_us.get((label, kind))
            cells.append(f"{statistics.median(c):>7.0f}" if c else f"{'-':>7}")
    print(f"{label:<30} {' '.join(cells)}")
print()
def ratio(a, ka, b, kb, col, what):
    if (a, ka) in med and (b, kb) in med:
        print(f"{a} {ka} / {b} {kb} ({what}): {med[a, ka][col] / med[b, kb][col]:.2f}x")
for d in ("u8", "u8c", "f16"):
    for shuffle in ("none", "global"):
        ratio(f"go-load-{shuffle}-{d}", "warm", f"cat-{d}", "warm", 1, "GB/s")
        ratio(f"go-load-{shuffle}-{d}", "first", f"cat-{d}", "warm", 1, "GB/s")
        ratio(f"go-load-{shuffle}-{d}", "cold", f"cat-{d}", "cold", 1, "GB/s")
    ratio(f"go-load-none-{d}", "first", f"go-load-none-{d}-unchecked", "first", 0, "checked/unchecked")
    for w in (0, 1):
        ratio(f"torch-w{w}-{d}", "first", f"torch-w{w}-{d}-unchecked", "first", 0, "checked/unchecked")
    ratio(f"numpy-global-{d}", "first", f"numpy-global-{d}-unchecked", "first", 0, "checked/unchecked")
    ratio(f"numpy-global-{d}", "warm", f"cat-{d}", "warm", 1, "GB/s")
for kind in ("warm", "cold"):
    for d in ("u8", "u8c"):
        for w in (0, 1, 2):
            ratio(f"torch-w{w}-{d}", kind, "ffcv-w1", kind, 0, "samples/s")
        ratio(f"torch-w2-{d}", kind, "ffcv-w2", kind, 0, "samples/s")
        ratio(f"torch-w1-{d}", kind, f"torch-w1-{d}-ra0", kind, 0, "read-ahead/none")
    ratio("torch-w1-u8", kind, "ffcv-w1", kind, 1, "GB/s")
for d in ("u8", "u8c"):
    for w in (1, 2):
        ratio(f"torch-w{w}-{d}", "cold", f"randread-q4-{d}", "cold", 0, "against the disk's random reads, 4 in flight")
ratio("torch-mix-w2-u8", "warm", "torch-w2-u8", "warm", 0, "samples/s")
PYEOF
