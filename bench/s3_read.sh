#!/usr/bin/env bash
# Training from S3: the Python loader (make_loader) reading a warehouse from a local
# versitygw with a cold cache, a warm cache and in byte-range mode, against the same
# loader on the local version directory, interleaved in one run (bench/s3_read.py).
#
#   bash bench/s3_read.sh                       # 2 runs x 100 frames, 384x384 u8, batch 32, 5 rounds
#   RUNS=1 FRAMES=50 ROUNDS=3 bash bench/s3_read.sh
#
# Needs Go, versitygw (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0), and from
# Debian: imagemagick python3-numpy python3-torch python3-boto3 (through /usr/bin/python3).
# Frames and the build are reused from WORK (bench/read.sh's layout, its default WORK).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

RUNS=${RUNS:-2}
FRAMES=${FRAMES:-100}
SIZE=${SIZE:-384}
BATCH=${BATCH:-32}
ROUNDS=${ROUNDS:-5}
THREADS=${THREADS:-2}
SHARD_MB=${SHARD_MB:-16}
WORK=${WORK:-/tmp/warehouse-s3-bench}
PY=/usr/bin/python3

for tool in go convert "$PY"; do
  command -v "$tool" >/dev/null || { echo "bench: $tool not found" >&2; exit 1; }
done
"$PY" -c 'import numpy, torch, boto3' ||
  { echo "bench: $PY cannot import numpy/torch/boto3 (apt-get install python3-numpy python3-torch python3-boto3)" >&2; exit 1; }
# The package as pip installs it: its compiled part built (bench/python_package.sh).
export PYTHONPATH=$(bash bench/python_package.sh "$PY" "$WORK/python")

mkdir -p "$WORK"/{data,out,cfg}
echo "== frames: $RUNS runs x $FRAMES 1080p JPEG in $WORK/data" >&2
"$PY" bench/gen_dataset.py --root "$WORK/data" --format jpeg --runs "$RUNS" --frames "$FRAMES"
go build -o "$WORK/warehouse-etl" ./cmd/warehouse-etl
capture_config "$WORK/cfg/u8.jsonc" "$WORK/data" "$SIZE" u8 false "$WORK/out/u8-$SIZE"
echo "== build u8" >&2
dir=$("$WORK/warehouse-etl" build --config "$WORK/cfg/u8.jsonc" --quiet)
"$PY" bench/s3_read.py --version "$dir" --batch "$BATCH" --rounds "$ROUNDS" --threads "$THREADS" --work "$WORK"
