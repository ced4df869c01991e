#!/usr/bin/env bash
# compact_images benchmark (issue 29, item 3): the same frames built as u8
# SIZE x SIZE letterbox with and without compact_images, read warm and cold
# (every file dropped from the page cache with posix_fadvise DONTNEED before
# each timed epoch) by cat, `warehouse-etl load`, our torch loader and FFCV,
# interleaved, medians of ROUNDS rounds.
#
#   bash bench/read_compact.sh
#   RUNS=2 FRAMES=100 SIZE=384 BATCH=32 EPOCHS=2 ROUNDS=3 bash bench/read_compact.sh
#
# Needs what bench/read.sh needs (Go, imagemagick, and for /usr/bin/python3:
# numpy, torch, ffcv, opencv); the frames are bench/gen_dataset.py's, kept in
# WORK between runs. The FFCV .beton stores 1080p frames at SIZE x SIZE*9/16
# (longer side SIZE, no padding: bench/read_ffcv.py write).
#
# Cold: cat and `load` run in a fresh process after the eviction, one epoch
# each (load's seconds start after Open; --no-verify-samples, as the timed
# epochs of the Python readers, whose warm-up epoch checked every CRC, are
# unchecked; go-load-ra-* is the same with --read-ahead 4); the torch loader and FFCV run a
# warm-up epoch, then evict before each timed epoch (FFCV's mapping of the
# .beton is dropped with MADV_DONTNEED first: see bench/read_compact.py). Warm: the same after reading every file twice.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=bench/lib.sh
source bench/lib.sh

RUNS=${RUNS:-2}
FRAMES=${FRAMES:-100}
SIZE=${SIZE:-384}
BATCH=${BATCH:-32}
EPOCHS=${EPOCHS:-2}
ROUNDS=${ROUNDS:-3}
WORK=${WORK:-/tmp/warehouse-compact-bench}
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
for v in plain compact; do
  compact=false
  [ "$v" = compact ] && compact=true
  capture_config "$WORK/cfg/$v.jsonc" "$WORK/data" "$SIZE" u8 "$compact" "$WORK/out/$v-$SIZE" '"pad_value": 114,'
  echo "== build $v" >&2
  dir[$v]=$("$WH" build --config "$WORK/cfg/$v.jsonc" --quiet)
done
beton=$WORK/out/ffcv-$SIZE.beton
if [ ! -s "$beton" ]; then
  echo "== write $beton" >&2
  "$PY" bench/read_ffcv.py write --root "$WORK/data" --out "$beton.tmp" --size "$SIZE" && mv "$beton.tmp" "$beton"
fi
n=$(ls "$WORK"/data/run_*/images/*.jpg | wc -l)

results=$WORK/results.txt
: >"$results"
evict() { "$PY" bench/read_compact.py evict "$@"; }
warm() { for f in "$@"; do cat "$f" >/dev/null; cat "$f" >/dev/null; done; }
record() {
  echo "$1 $("$PY" -c 'import json, sys; r = json.loads(sys.argv[1]); print(r["samples"], r["seconds"], r["bytes"])' "$2")" | tee -a "$results" >&2
}
# cat_epochs LABEL MODE DIR: cat every shard, EPOCHS times, evicted first when MODE is cold.
cat_epochs() {
  local files=("$3"/shards/*) bytes secs=0 t0 t1
  bytes=$(cat "${files[@]}" | wc -c)
  for _ in $(seq "$EPOCHS"); do
    [ "$2" = cold ] && evict "${files[@]}"
    t0=$(date +%s.%N); cat "${files[@]}" >/dev/null; t1=$(date +%s.%N)
    secs=$(awk -v s="$secs" -v a="$t0" -v b="$t1" 'BEGIN { print s + b - a }')
  done
  echo "$1 $((n * EPOCHS)) $secs $((bytes * EPOCHS))" | tee -a "$results" >&2
}
# go_load LABEL MODE DIR [FLAGS]: EPOCHS one-epoch loads (global shuffle), each a fresh process.
go_load() {
  local s=0 secs=0 b=0 line
  for _ in $(seq "$EPOCHS"); do
    [ "$2" = cold ] && evict "$3/shards"
    line=$("$WH" load --tensor-warehouse "$3" --batch "$BATCH" --epochs 1 --shuffle global --no-verify-samples --json --quiet "${@:4}" |
      "$PY" -c 'import json, sys; r = json.load(sys.stdin); print(r["samples"], r["seconds"], r["bytes"])')
    read -r ls lsec lb <<<"$line"
    s=$((s + ls)); b=$((b + lb)); secs=$(awk -v a="$secs" -v c="$lsec" 'BEGIN { print a + c }')
  done
  echo "$1 $s $secs $b" | tee -a "$results" >&2
}

for round in $(seq "$ROUNDS"); do
  echo "== round $round of $ROUNDS" >&2
  for mode in cold warm; do
    for v in plain compact; do
      d=${dir[$v]}
      [ "$mode" = warm ] && warm "$d"/shards/*
      cat_epochs "cat-$v-$mode" "$mode" "$d"
      go_load "go-load-$v-$mode" "$mode" "$d"
      go_load "go-load-ra-$v-$mode" "$mode" "$d" --read-ahead 4   # with read-ahead
      cold=""; [ "$mode" = cold ] && cold=--cold
      record "torch-w1-$v-$mode" "$("$PY" bench/read_compact.py torch --tensor-warehouse "$d" --batch "$BATCH" --epochs "$EPOCHS" --workers 1 $cold)"
    done
    [ "$mode" = warm ] && warm "$beton"
    cold=""; [ "$mode" = cold ] && cold=--cold
    record "ffcv-w1-$mode" "$("$PY" bench/read_compact.py ffcv --beton "$beton" --batch "$BATCH" --epochs "$EPOCHS" --workers 1 $cold)"
  done
done

echo
echo "$n frames, ${SIZE}x$SIZE u8 letterbox (pad 114), batch $BATCH, $EPOCHS epochs per measurement, medians of $ROUNDS rounds ($(nproc) CPUs)"
du -b "${dir[plain]}/shards" "${dir[compact]}/shards" "$beton" | awk '{ printf "%-70s %8.1f MB\n", $2, $1 / 1e6 }'
"$PY" - "$results" <<'PYEOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    if len(line.split()) != 4:  # a reader that failed: its output is above
        continue
    label, samples, secs, nbytes = line.split()
    runs[label].append((int(samples) / float(secs), int(nbytes) / float(secs) / 1e9))
med = {k: (statistics.median(s for s, _ in v), statistics.median(g for _, g in v)) for k, v in runs.items()}
print(f"{'reader':<24} {'samples/s':>10} {'GB/s':>7}")
for k, (sps, gbs) in med.items():
    print(f"{k:<24} {sps:>10.0f} {gbs:>7.2f}")
print()
def ratio(a, b, what, col=0):
    if a in med and b in med:
        print(f"{a} / {b} ({what}): {med[a][col] / med[b][col]:.2f}x")
for m in ("cold", "warm"):
    ratio(f"go-load-compact-{m}", f"go-load-plain-{m}", "samples/s")
    ratio(f"torch-w1-compact-{m}", f"torch-w1-plain-{m}", "samples/s")
    ratio(f"torch-w1-compact-{m}", f"ffcv-w1-{m}", "samples/s")
    ratio(f"torch-w1-plain-{m}", f"ffcv-w1-{m}", "samples/s")
    ratio(f"go-load-compact-{m}", f"cat-compact-{m}", "samples/s")
    ratio(f"go-load-plain-{m}", f"cat-plain-{m}", "samples/s")
    ratio(f"go-load-ra-plain-{m}", f"cat-plain-{m}", "samples/s")
    ratio(f"go-load-ra-compact-{m}", f"cat-compact-{m}", "samples/s")
    ratio(f"go-load-ra-plain-{m}", f"go-load-plain-{m}", "samples/s")
    ratio(f"go-load-ra-compact-{m}", f"go-load-compact-{m}", "samples/s")
PYEOF
