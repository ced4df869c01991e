#!/usr/bin/env bash
# Read-path benchmark: `warehouse-etl load` sequential, shard-local and
# random (global shuffle) against `cat` of the same shard files, in the same
# run, page cache warm; plus peak RSS.
#
#   bash bench/load.sh                       # ~470 MB warehouse, 3 repeats
#   COPIES=20 SIZE=640 REPEATS=5 bash bench/load.sh
#
# Needs Go only (and /usr/bin/time for the peak RSS column; without it the
# column shows the load command's own VmHWM from /proc/self/status).
#
# What it does:
#   1. makes a dataset of COPIES copies of the demo's capture runs under new
#      run names (19 kept samples per copy) in a temp dir;
#   2. builds it at SIZE x SIZE, f16 (2.46 MB per sample at 640);
#   3. reads every shard twice with cat to warm the page cache, then REPEATS
#      times, interleaved: cat shards/* > /dev/null, load --shuffle none,
#      load --shuffle shard, load --shuffle global (batch BATCH, all
#      samples, one epoch);
#   4. prints per-mode medians: seconds, GB/s of shard bytes (cat) or of
#      tensor bytes handed out (load: images + boxes + masks), samples/s,
#      peak RSS and the load's anonymous-memory peak.
set -euo pipefail
cd "$(dirname "$0")/.."

COPIES=${COPIES:-10}
SIZE=${SIZE:-640}
BATCH=${BATCH:-16}
REPEATS=${REPEATS:-3}
WORK=${WORK:-$(mktemp -d /tmp/warehouse-load-bench.XXXXXX)}
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$WORK"' EXIT   # KEEP=1 leaves the warehouse for a closer look

go build -o "$WORK/warehouse-etl" ./cmd/warehouse-etl
WH="$WORK/warehouse-etl"

mkdir -p "$WORK/data"
for k in $(seq 1 "$COPIES"); do
  for run in testdata/capture/run_*; do
    cp -r "$run" "$WORK/data/$(basename "$run")0$k"
  done
done
cp testdata/capture/escape.png "$WORK/data/" # the escaping label's target, as in the demo

cat > "$WORK/config.jsonc" <<EOF
{
  "source": {"kind": "capture", "root": "data"},
  "target_size": [$SIZE, $SIZE],
  "dtype": "f16",
  "shard_target_mb": 64,
  // The demo runs plant defects in a third of their samples.
  "thresholds": {"invalid": {"max_ratio": 0.6}, "missing": {"max_ratio": 0.3}, "empty": {"max_ratio": 0.5, "action": "warn"}},
  "output_root": "out"
}
EOF
dir=$("$WH" build --config "$WORK/config.jsonc" --quiet)
shards=("$dir"/shards/*.twh)
bytes=$(cat "${shards[@]}" | wc -c)
echo "warehouse: $dir, ${#shards[@]} shards, $((bytes / 1000000)) MB"
cat "${shards[@]}" > /dev/null
cat "${shards[@]}" > /dev/null

have_time=0
[ -x /usr/bin/time ] && have_time=1

# run_timed LABEL CMD...: runs CMD, appends "label seconds rss_kb" to results
# and keeps CMD's stdout in $WORK/stdout.json.
results="$WORK/results"
: > "$results"
run_timed() {
  local label=$1; shift
  local t0 t1 rss=0
  t0=$(date +%s.%N)
  if [ $have_time = 1 ]; then
    /usr/bin/time -v -o "$WORK/time" "$@" > "$WORK/stdout.json"
    rss=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$WORK/time")
  else
    "$@" > "$WORK/stdout.json"
  fi
  t1=$(date +%s.%N)
  echo "$label $(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }') $rss" >> "$results"
}

json_field() { sed -n "s/.*\"$1\": \\([0-9.e+-]*\\).*/\\1/p" "$WORK/stdout.json" | head -1; }

for r in $(seq 1 "$REPEATS"); do
  run_timed cat sh -c "cat \"\$@\" > /dev/null" sh "${shards[@]}"
  echo "cat $bytes 0 0 0" >> "$WORK/detail"
  for mode in none shard global; do
    run_timed "load-$mode" "$WH" load --tensor-warehouse "$dir" --batch "$BATCH" --shuffle "$mode" --json --quiet
    echo "load-$mode $(json_field bytes) $(json_field samples) $(json_field seconds) $(json_field peak_anon_bytes) $(json_field peak_rss_bytes)" >> "$WORK/detail"
  done
done

echo
printf '%-12s %9s %9s %11s %13s %14s\n' mode seconds GB/s samples/s "peak RSS MB" "anon peak MB"
for mode in cat load-none load-shard load-global; do
  # Medians over the repeats. For load, seconds are the command's own
  # timing of the read loop (process start and open excluded); the wall
  # time including them is the "wall" column below.
  paste -d' ' <(grep "^$mode " "$results") <(grep "^$mode " "$WORK/detail") | awk -v mode="$mode" -v bytes="$bytes" '
    { wall[NR] = $2; rss[NR] = $3; b[NR] = $5; s[NR] = $6; secs[NR] = ($7 > 0 ? $7 : $2); anon[NR] = $8; hwm[NR] = $9 }
    function median(a, n,   i, j, t) {
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return a[int((n + 1) / 2)]
    }
    END {
      n = NR
      for (i = 1; i <= n; i++) { gbs[i] = b[i] / 1e9 / secs[i]; sps[i] = s[i] / secs[i]; if (rss[i] == 0) rss[i] = hwm[i] / 1024 }
      printf "%-12s %9.3f %9.2f %11s %13.1f %14s   (wall %.3fs)\n", mode, median(secs, n), median(gbs, n),
        (mode == "cat" ? "-" : sprintf("%.0f", median(sps, n))), median(rss, n) / 1024,
        (mode == "cat" ? "-" : sprintf("%.1f", median(anon, n) / 1e6)), median(wall, n)
    }'
done
echo
echo "load GB/s counts the tensor bytes handed out in batches (images, boxes, masks); cat counts every shard byte."
echo "Peak RSS of load includes the shard pages it mapped and touched (page cache, shared, reclaimable);"
echo "the anonymous peak is what batch buffers and the process itself take."
