#!/usr/bin/env bash
# The torch loader feeding a GPU, against a JPEG-decoding DataLoader (bench/read_gpu.py
# says what is measured). Needs CUDA, torch, numpy and OpenCV in $PY (torchvision too
# with MODEL), and the warehouse-etl binary (BIN, else built with go).
#
#   bash bench/read_gpu.sh                                  # 4800 frames, 384, 3 rounds
#   BIN=./warehouse-etl FRAMES_FROM=frames/ MODEL=resnet50 bash bench/read_gpu.sh
#   COMPACT=1 BENCH_ARGS="--unchecked --workers" bash bench/read_gpu.sh   # compact_images, checks' cost
#   BENCH_ARGS="--device cpu --threads 0 --workers 2 --rounds 1" bash bench/read_gpu.sh   # dry run
#
# Frames: FRAMES_FROM (a capture run: images/*.jpg and labels/*.json) repeated into
# runs of 100 frames up to SAMPLES (hard links; labels renumbered), else
# bench/gen_dataset.py with ImageMagick (the frames of bench/run.sh and bench/read.sh:
# 1920x1080 JPEG q90). The warehouse: u8, SIZE x SIZE letterbox, built with
# --workers $(nproc). Everything under WORK; the frames are kept and reused by the next
# run (remove WORK/data to make them again, for another SAMPLES say).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

WORK=${WORK:-/tmp/warehouse-gpu-bench}
SAMPLES=${SAMPLES:-4800}
SIZE=${SIZE:-384}
PY=${PY:-python3}
BIN=${BIN:-}
FRAMES_FROM=${FRAMES_FROM:-}
MODEL=${MODEL:-}
COMPACT=${COMPACT:-}        # 1: the warehouse stores compact_images (out/u8c)
BENCH_ARGS=${BENCH_ARGS:-}
# The package as pip installs it: its compiled part built (bench/python_package.sh).
export PYTHONPATH=$(bash bench/python_package.sh "$PY" "$WORK/python")

mkdir -p "$WORK"
if [ -z "$BIN" ]; then
  BIN=$WORK/warehouse-etl
  go build -o "$BIN" ./cmd/warehouse-etl
fi
data=$WORK/data
if [ ! -d "$data" ]; then
  if [ -n "$FRAMES_FROM" ]; then
    "$PY" - "$FRAMES_FROM" "$data" "$SAMPLES" <<'EOF'
import glob, json, os, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
frames = sorted(glob.glob(os.path.join(src, "images", "*.jpg")))
for i in range(n):
    run, k = divmod(i, 100)
    f = frames[i % len(frames)]
    d = os.path.join(dst, f"run_{run + 1}")
    os.makedirs(os.path.join(d, "images"), exist_ok=True)
    os.makedirs(os.path.join(d, "labels"), exist_ok=True)
    name = f"frame_{k:05d}"
    os.link(f, os.path.join(d, "images", name + ".jpg"))
    with open(os.path.join(src, "labels", os.path.basename(f)[:-4] + ".json")) as fh:
        label = json.load(fh)
    label.update(frame_id=k, sim_time=k * 0.05, unix_time=1700001000.0 + k * 0.05, image=f"images/{name}.jpg")
    with open(os.path.join(d, "labels", name + ".json"), "w") as fh:
        json.dump(label, fh)
EOF
  else
    "$PY" bench/gen_dataset.py --root "$data" --format jpeg --runs $(((SAMPLES + 99) / 100)) --frames 100
  fi
fi
name=u8${COMPACT:+c}
compact=false
[ -n "$COMPACT" ] && compact=true
capture_config "$WORK/$name.jsonc" "$data" "$SIZE" u8 "$compact" "$WORK/out/$name"
start=$EPOCHREALTIME
"$BIN" build --config "$WORK/$name.jsonc" --workers "$(nproc)" >/dev/null
awk -v a="$start" -v b="$EPOCHREALTIME" -v n="$SAMPLES" -v w="$(nproc)" \
  'BEGIN { printf "build: %d frames, %d workers, %.1f s\n", n, w, b - a }' >&2
# shellcheck disable=SC2086
"$PY" bench/read_gpu.py --tensor-warehouse "$WORK/out/$name" --jpeg-root "$data" --size "$SIZE" --check \
  ${MODEL:+--model "$MODEL"} $BENCH_ARGS
