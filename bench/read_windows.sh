#!/usr/bin/env bash
# What episode windows cost the torch loader: bench/read.sh's torch readers
# (make_loader, 0/1/2 reader threads, batch 32, global shuffle) over an
# episode warehouse of the same sample size, with and without windows,
# interleaved in one run, page cache warm.
#
#   bash bench/read_windows.sh          # 6 episodes x 100 steps, 384x384, 3 rounds
#   EPISODES=6 STEPS=100 SIZE=384 ROUNDS=5 EPOCHS=5 BATCH=32 bash bench/read_windows.sh
#
# The episodes (bench/episodesgen: a 64x48 camera letterboxed to SIZE x SIZE,
# joint_pos [7], action/ctrl [7], reward, done) give samples of the bytes
# bench/read.sh's frames give (u8 and f16, max_boxes 16). The windows are a
# 50-step action chunk and 3 steps of proprioception:
# WINDOWS=action/ctrl=0:50,signal/joint_pos=-2:1 (read_python.py --windows
# takes the same spec for bench/read.sh-style single runs).
set -euo pipefail
cd "$(dirname "$0")/.."

EPISODES=${EPISODES:-6}
STEPS=${STEPS:-100}
SIZE=${SIZE:-384}
BATCH=${BATCH:-32}
PAIRS=${PAIRS:-15}
THREADS=${THREADS:-0 1 2}
WINDOWS=${WINDOWS:-action/ctrl=0:50,signal/joint_pos=-2:1}
WORK=${WORK:-/tmp/warehouse-windows-bench}
PY=/usr/bin/python3
# The package as pip installs it: its compiled part built (bench/python_package.sh).
export PYTHONPATH=$(bash bench/python_package.sh "$PY" "$WORK/python")

mkdir -p "$WORK"/{out,cfg}
data=$WORK/data-$EPISODES-$STEPS   # kept: rewriting it would make the builds refuse (sources changed)
[ -d "$data" ] || { go run ./bench/episodesgen -out "$data.tmp" -episodes "$EPISODES" -steps "$STEPS" && mv "$data.tmp" "$data"; }
go build -o "$WORK/warehouse-etl" ./cmd/warehouse-etl
declare -A dir
for dtype in u8 f16; do
  cat >"$WORK/cfg/$dtype.jsonc" <<CFG
{
  "source": {"kind": "wshard", "root": "$data", "camera": "signal/cam0/rgb",
             "extras": ["signal/joint_pos", "action/ctrl", "reward", "done"]},
  "target_size": [$SIZE, $SIZE],
  "resize_mode": "letterbox",
  "dtype": "$dtype",
  "max_boxes": 16,
  "shard_target_mb": 64,
  "thresholds": {"empty": {}},
  "output_root": "$WORK/out/$dtype-$SIZE-$EPISODES-$STEPS"
}
CFG
  dir[$dtype]=$("$WORK/warehouse-etl" build --config "$WORK/cfg/$dtype.jsonc" --quiet)
  for f in "${dir[$dtype]}"/shards/*; do cat "$f" >/dev/null; done
done

echo
echo "$((EPISODES * STEPS)) samples, ${SIZE}x$SIZE, batch $BATCH, windows $WINDOWS, $PAIRS alternating epoch pairs per reader ($(nproc) CPUs)"
printf '%-16s %10s %13s %11s %15s %10s\n' reader "samples/s" "with windows" "ratio(med)" "ratio range" "cpu ratio"
for dtype in u8 f16; do
  for w in $THREADS; do
    "$PY" bench/read_windows.py --tensor-warehouse "${dir[$dtype]}" --batch "$BATCH" --pairs "$PAIRS" --workers "$w" \
      --windows "$WINDOWS" --label "torch-w$w-$dtype"
  done
done
