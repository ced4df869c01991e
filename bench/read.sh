#!/usr/bin/env bash
# Training-read benchmark: every way a training job can read the same frames,
# interleaved in one run, page cache warm.
#
#   bash bench/read.sh                               # 600 frames, 384x384, batch 32, 3 rounds
#   FRAMES=100 RUNS=3 SIZE=384 ROUNDS=5 EPOCHS=5 bash bench/read.sh   (FRAMES <= 100: gen_dataset.py's
#                                                    objects leave the frame after frame 100)
#
# Needs Go, and from Debian: imagemagick python3-numpy python3-torch
# python3-ffcv python3-opencv (all used through /usr/bin/python3).
#
# What it does:
#   1. makes RUNS x FRAMES 1920x1080 JPEG q90 frames with ImageMagick
#      (bench/gen_dataset.py, the frames bench/run.sh uses);
#   2. builds our warehouse of them twice, SIZE x SIZE letterbox, dtype u8
#      and f16; and writes an FFCV .beton of the same frames with
#      RGBImageField(write_mode="raw", max_resolution=SIZE) (uint8 HWC,
#      longer side SIZE: 1080p -> SIZE x SIZE*9/16, no letterbox padding);
#   3. reads every file twice to warm the page cache, then ROUNDS times, each
#      tool in turn: cat of the shard files, `warehouse-etl load` (sequential
#      and global shuffle), numpy read_batch, our make_loader with 0, 1 and 2
#      workers, and FFCV's Loader with 1 and 2 workers (random order), each
#      for EPOCHS epochs of batch BATCH;
#   4. prints per tool the median samples/s and GB/s (bytes handed out:
#      images + boxes + masks for ours, images for FFCV, file bytes for cat)
#      and the ratios the issue asks for.
#
# Every reader runs a warm-up epoch first (FFCV compiles its pipeline with
# numba then; every reader faults in its batch buffers) and times the next
# EPOCHS; `go-load-*-e1` is also a whole one-epoch `load` (its seconds start
# after Open), what a one-shot measurement sees; cat is the wall time of cat.
set -euo pipefail
cd "$(dirname "$0")/.."

RUNS=${RUNS:-6}
FRAMES=${FRAMES:-100}
SIZE=${SIZE:-384}
BATCH=${BATCH:-32}
EPOCHS=${EPOCHS:-5}
ROUNDS=${ROUNDS:-3}
WORK=${WORK:-/tmp/warehouse-read-bench}   # kept: frames are reused by the next run
PY=/usr/bin/python3

for tool in go convert "$PY"; do
  command -v "$tool" >/dev/null || { echo "bench: $tool not found" >&2; exit 1; }
done
"$PY" -c 'import numpy, torch, ffcv, cv2' ||
  { echo "bench: $PY cannot import numpy/torch/ffcv/cv2 (apt-get install python3-numpy python3-torch python3-ffcv python3-opencv)" >&2; exit 1; }
export PYTHONPATH=$PWD/python

mkdir -p "$WORK"/{data,out,cfg}
echo "== frames: $RUNS runs x $FRAMES 1080p JPEG in $WORK/data" >&2
"$PY" bench/gen_dataset.py --root "$WORK/data" --format jpeg --runs "$RUNS" --frames "$FRAMES"

go build -o "$WORK/warehouse-etl" ./cmd/warehouse-etl
WH=$WORK/warehouse-etl
declare -A dir
for dtype in u8 f16; do
  cat >"$WORK/cfg/$dtype.jsonc" <<CFG
{
  "source": {"kind": "capture", "root": "$WORK/data"},
  "target_size": [$SIZE, $SIZE],
  "resize_mode": "letterbox",
  "dtype": "$dtype",
  "max_boxes": 16,
  "shard_target_mb": 64,
  "output_root": "$WORK/out/$dtype-$SIZE"
}
CFG
  echo "== build $dtype" >&2
  dir[$dtype]=$("$WH" build --config "$WORK/cfg/$dtype.jsonc" --quiet)
done
beton=$WORK/out/ffcv-$SIZE.beton
if [ ! -s "$beton" ]; then
  echo "== write $beton" >&2
  "$PY" bench/read_ffcv.py write --root "$WORK/data" --out "$beton.tmp" --size "$SIZE" && mv "$beton.tmp" "$beton"
fi

n=$(ls "$WORK"/data/run_*/images/*.jpg | wc -l)
for f in "${dir[u8]}"/shards/* "${dir[f16]}"/shards/* "$beton"; do cat "$f" >/dev/null; cat "$f" >/dev/null; done

results=$WORK/results.txt
: >"$results"
# record LABEL JSON: appends "LABEL samples seconds bytes" from a JSON line.
record() {
  echo "$1 $("$PY" -c 'import json, sys; r = json.loads(sys.argv[1]); print(r["samples"], r["seconds"], r["bytes"])' "$2")" | tee -a "$results" >&2
}
# cat_epochs LABEL DIR: cat every shard EPOCHS times, timed.
cat_epochs() {
  local files=("$2"/shards/*) t0 t1 bytes
  bytes=$(cat "${files[@]}" | wc -c)
  t0=$(date +%s.%N)
  for _ in $(seq "$EPOCHS"); do cat "${files[@]}"; done >/dev/null
  t1=$(date +%s.%N)
  echo "$1 $((n * EPOCHS)) $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') $((bytes * EPOCHS))" | tee -a "$results" >&2
}
# load LABEL DIR SHUFFLE: one warm-up epoch and EPOCHS timed ones, like the
# Python readers (load reports the epochs after the first apart); LABEL-e1
# is a process that reads one epoch, buffer faults and shard opens included.
load() {
  record "$1" "$("$WH" load --tensor-warehouse "$2" --batch "$BATCH" --epochs $((EPOCHS + 1)) --shuffle "$3" --json --quiet |
    "$PY" -c 'import json, sys; r = json.load(sys.stdin); print(json.dumps({"samples": r["later_epochs_samples"], "seconds": r["later_epochs_seconds"], "bytes": r["later_epochs_bytes"]}))')"
  record "$1-e1" "$("$WH" load --tensor-warehouse "$2" --batch "$BATCH" --epochs 1 --shuffle "$3" --json --quiet)"
}

for round in $(seq "$ROUNDS"); do
  echo "== round $round of $ROUNDS" >&2
  for dtype in u8 f16; do
    d=${dir[$dtype]}
    cat_epochs "cat-$dtype" "$d"
    load "go-load-none-$dtype" "$d" none
    load "go-load-global-$dtype" "$d" global
    record "numpy-global-$dtype" "$("$PY" bench/read_python.py numpy --tensor-warehouse "$d" --batch "$BATCH" --epochs "$EPOCHS")"
    for w in 0 1 2; do
      record "torch-w$w-$dtype" "$("$PY" bench/read_python.py torch --tensor-warehouse "$d" --batch "$BATCH" --epochs "$EPOCHS" --workers "$w")"
    done
    # A mixture of the warehouse with itself (weights 1:1): what mixing costs on top (reading.md "Mixtures").
    record "torch-mix-w2-$dtype" "$("$PY" bench/read_python.py torch --mix "$d=1" --mix "$d=1" --batch "$BATCH" --epochs "$EPOCHS" --workers 2)"
  done
  for w in 1 2; do
    record "ffcv-w$w" "$("$PY" bench/read_ffcv.py read --beton "$beton" --batch "$BATCH" --epochs "$EPOCHS" --workers "$w")"
  done
done

echo
echo "$n frames, ${SIZE}x$SIZE, batch $BATCH, $EPOCHS epochs per measurement, medians of $ROUNDS rounds ($(nproc) CPUs)"
"$PY" - "$results" <<'PYEOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label, samples, secs, nbytes = line.split()
    runs[label].append((int(samples) / float(secs), int(nbytes) / float(secs) / 1e9))
med = {k: (statistics.median(s for s, _ in v), statistics.median(g for _, g in v)) for k, v in runs.items()}
print(f"{'reader':<22} {'samples/s':>10} {'GB/s':>7}")
for k, (sps, gbs) in med.items():
    print(f"{k:<22} {sps:>10.0f} {gbs:>7.2f}")
print()
def ratio(a, b, what, col=0):
    if a in med and b in med:
        print(f"{a} / {b} ({what}): {med[a][col] / med[b][col]:.2f}x")
for d in ("u8", "f16"):
    ratio(f"go-load-none-{d}", f"cat-{d}", "GB/s", 1)
    ratio(f"go-load-global-{d}", f"cat-{d}", "GB/s", 1)
    ratio(f"go-load-none-{d}-e1", f"cat-{d}", "GB/s", 1)
    ratio(f"go-load-global-{d}-e1", f"cat-{d}", "GB/s", 1)
    ratio(f"numpy-global-{d}", f"cat-{d}", "GB/s", 1)
for w in (0, 1, 2):
    ratio(f"torch-w{w}-u8", "ffcv-w1", "samples/s")
ratio("torch-w2-u8", "ffcv-w2", "samples/s")
ratio("torch-mix-w2-u8", "torch-w2-u8", "samples/s")
PYEOF
