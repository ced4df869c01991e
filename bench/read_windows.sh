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
# WINDOWS=action/ctrl=0:50,signal/joint_pos=-2:1 (read_python.py --windows).
# Prints median samples/s per reader and the ratio with/without windows.
set -euo pipefail
cd "$(dirname "$0")/.."

EPISODES=${EPISODES:-6}
STEPS=${STEPS:-100}
SIZE=${SIZE:-384}
BATCH=${BATCH:-32}
EPOCHS=${EPOCHS:-5}
ROUNDS=${ROUNDS:-3}
THREADS=${THREADS:-0 1 2}
WINDOWS=${WINDOWS:-action/ctrl=0:50,signal/joint_pos=-2:1}
WORK=${WORK:-/tmp/warehouse-windows-bench}
PY=/usr/bin/python3
export PYTHONPATH=$PWD/python

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

results=$WORK/results.txt
: >"$results"
record() {
  echo "$1 $("$PY" -c 'import json, sys; r = json.loads(sys.argv[1]); print(r["samples"], r["seconds"])' "$2")" | tee -a "$results" >&2
}
for round in $(seq "$ROUNDS"); do
  echo "== round $round of $ROUNDS" >&2
  for dtype in u8 f16; do
    for w in $THREADS; do
      record "torch-w$w-$dtype" "$("$PY" bench/read_python.py torch --tensor-warehouse "${dir[$dtype]}" --batch "$BATCH" --epochs "$EPOCHS" --workers "$w")"
      record "torch-w$w-$dtype-windows" "$("$PY" bench/read_python.py torch --tensor-warehouse "${dir[$dtype]}" --batch "$BATCH" --epochs "$EPOCHS" --workers "$w" --windows "$WINDOWS")"
    done
  done
done

echo
echo "$((EPISODES * STEPS)) samples, ${SIZE}x$SIZE, batch $BATCH, $EPOCHS epochs per measurement, windows $WINDOWS, medians of $ROUNDS rounds ($(nproc) CPUs)"
"$PY" - "$results" <<'PYEOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    label, samples, secs = line.split()
    runs[label].append(int(samples) / float(secs))
med = {k: statistics.median(v) for k, v in runs.items()}
print(f"{'reader':<26} {'samples/s':>10}")
for k, v in med.items():
    print(f"{k:<26} {v:>10.0f}")
print()
for k in med:
    if not k.endswith("-windows") and k + "-windows" in med:
        print(f"{k}-windows / {k}: {med[k + '-windows'] / med[k]:.3f}x")
PYEOF
