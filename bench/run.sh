#!/usr/bin/env bash
# Interleaved benchmark: `warehouse-etl build` (pure Go and -tags turbojpeg)
# against the OpenCV + NumPy reference (bench/reference.py), same inputs,
# same output tensors (SIZExSIZE letterbox, CHW f16; SIZE 640 by default).
#
#   bash bench/run.sh                 # defaults below
#   REPEATS=3 FRAMES=50 bash bench/run.sh
#   SIZE=384 WORKERS=1 RSS_SAMPLES= bash bench/run.sh   # 384x384, one worker, no RSS runs
#
# Needs Go, and from Debian: imagemagick python3-opencv python3-numpy
# libturbojpeg0-dev (the script installs nothing).
#
# What it does:
#   1. makes two datasets of capture runs with ImageMagick (bench/gen_dataset.py):
#      jpeg = 1920x1080 q90 4:2:0, png = 1280x720 RGBA; RUNS runs x FRAMES frames;
#   2. builds the binary twice: `go build` and `go build -tags turbojpeg`;
#   3. REPEATS times, for each format and each worker count in WORKERS, runs
#      reference, pure Go and turbojpeg one after the other (interleaved, so
#      drifting machine load hits all three alike), each with a fresh output;
#   4. checks that both did the same work: the first tensor of each build
#      against the reference's (mean difference in 8-bit levels);
#   5. builds datasets of 200 and 2000 samples (hard links to the jpeg frames)
#      and measures the peak RSS of a 2-worker build of each (median of
#      RSS_REPEATS);
#   6. prints a table of medians (wall-clock and CPU seconds) and ratios, the
#      worker scaling (time at 1 / time at 2) and the RSS growth;
#   7. with one worker on JPEG, also times each build's decoder alone over the
#      same frames at the same DCT scale (bench/decodeonly, interleaved with the
#      builds) and prints build / decode CPU per frame for both builds and
#      jpegdec / libjpeg-turbo.
#
# "Per core": a run with N workers/processes is pinned to N cores with
# taskset (cores 0..N-1), so Go sees GOMAXPROCS=N and the reference's N
# processes get the same cores. Everything lives in BENCH_DIR, a tmpfs by
# default, so the numbers measure CPU work rather than the disk: both sides
# write the same ~2.4 MiB per sample (warehouse-etl also fsyncs, which on
# tmpfs costs nothing).
set -euo pipefail
cd "$(dirname "$0")/.."

BENCH_DIR=${BENCH_DIR:-/dev/shm/warehouse-etl-bench}
RUNS=${RUNS:-3}             # capture runs per dataset
FRAMES=${FRAMES:-100}       # frames per run
REPEATS=${REPEATS:-5}       # interleaved repetitions
WORKERS=${WORKERS:-"1 2"}   # worker / process counts
FORMATS=${FORMATS:-"jpeg png"}
RSS_SAMPLES=${RSS_SAMPLES-"200 2000"}  # empty: no RSS runs
RSS_REPEATS=${RSS_REPEATS:-3}   # peak RSS is the median of these builds
INTERP=${INTERP:-area}      # reference resize: area (antialiased) or linear
SIZE=${SIZE:-640}           # letterbox target: SIZE x SIZE
PY=/usr/bin/python3         # Debian's python sees python3-opencv and python3-numpy

for tool in go convert taskset /usr/bin/time "$PY"; do
  command -v "$tool" >/dev/null || { echo "bench: $tool not found" >&2; exit 1; }
done
"$PY" -c 'import cv2, numpy' || { echo "bench: $PY cannot import cv2/numpy (apt-get install python3-opencv python3-numpy)" >&2; exit 1; }
ncpu=$(nproc)
for w in $WORKERS; do
  [ "$w" -le "$ncpu" ] || { echo "bench: $w workers but only $ncpu CPUs" >&2; exit 1; }
done

mkdir -p "$BENCH_DIR"/{bin,data,cfg,out}
results=$BENCH_DIR/results.txt
: >"$results"

echo "== datasets ($RUNS runs x $FRAMES frames) in $BENCH_DIR/data" >&2
for fmt in $FORMATS; do
  "$PY" bench/gen_dataset.py --root "$BENCH_DIR/data/$fmt" --format "$fmt" --runs "$RUNS" --frames "$FRAMES"
done

echo "== binaries" >&2
go build -o "$BENCH_DIR/bin/warehouse-etl-go" ./cmd/warehouse-etl
go build -tags turbojpeg -o "$BENCH_DIR/bin/warehouse-etl-turbojpeg" ./cmd/warehouse-etl
go build -o "$BENCH_DIR/bin/decodeonly-go" ./bench/decodeonly
go build -tags turbojpeg -o "$BENCH_DIR/bin/decodeonly-turbojpeg" ./bench/decodeonly

# config NAME DATASET: a build config writing to $BENCH_DIR/out/NAME.
config() {
  cat >"$BENCH_DIR/cfg/$1.jsonc" <<EOF
{
  "source": {"kind": "capture", "root": "$2"},
  "target_size": [$SIZE, $SIZE],
  "resize_mode": "letterbox",
  "pad_value": 0,
  "dtype": "f16",
  "max_boxes": 16,
  "output_root": "$BENCH_DIR/out/$1"
}
EOF
}

# timed IMPL FMT WORKERS CMD...: run CMD pinned to WORKERS cores with a fresh
# output, append "IMPL FMT WORKERS wall_s cpu_s peak_rss_kib" to the results
# (cpu = user + system time of the process and its children).
timed() {
  local impl=$1 fmt=$2 w=$3
  shift 3
  local cpus
  cpus=0-$((w - 1))
  /usr/bin/time -f '%e %U %S %M' -o "$BENCH_DIR/time.txt" taskset -c "$cpus" "$@" >/dev/null 2>"$BENCH_DIR/stderr.txt" ||
    { cat "$BENCH_DIR/stderr.txt" >&2; echo "bench: $impl $fmt w=$w failed" >&2; exit 1; }
  read -r secs user sys rss <"$BENCH_DIR/time.txt"
  [ "$record" = 1 ] || return 0
  echo "$impl $fmt $w $secs $(echo "$user $sys" | awk '{printf "%.2f", $1 + $2}') $rss" | tee -a "$results" >&2
}

run_impl() {
  local impl=$1 fmt=$2 w=$3
  case $impl in
    ref) rm -f "$BENCH_DIR/out/ref.bin"
      timed ref "$fmt" "$w" "$PY" bench/reference.py --root "$BENCH_DIR/data/$fmt" \
      --out "$BENCH_DIR/out/ref.bin" --size "$SIZE" --procs "$w" --interp "$INTERP" ;;
    dec-go | dec-turbojpeg)
      # The decoder alone (bench/decodeonly): every frame at the scale the
      # build decodes it, no resize, normalization or write.
      timed "$impl" "$fmt" "$w" "$BENCH_DIR/bin/decodeonly-${impl#dec-}" --size "$SIZE" \
        "$BENCH_DIR"/data/"$fmt"/run_*/images/* ;;
    go | turbojpeg)
      rm -rf "$BENCH_DIR/out/$impl-$fmt"
      config "$impl-$fmt" "$BENCH_DIR/data/$fmt"
      timed "$impl" "$fmt" "$w" "$BENCH_DIR/bin/warehouse-etl-$impl" build \
        --config "$BENCH_DIR/cfg/$impl-$fmt.jsonc" --workers "$w" --quiet ;;
  esac
}

record=1
echo "== interleaved runs: $REPEATS x {$FORMATS} x workers {$WORKERS} x {ref go turbojpeg}" >&2
for rep in $(seq "$REPEATS"); do
  for fmt in $FORMATS; do
    for w in $WORKERS; do
      for impl in ref go turbojpeg; do
        run_impl "$impl" "$fmt" "$w"
      done
      if [ "$fmt" = jpeg ] && [ "$w" = 1 ]; then
        for impl in dec-go dec-turbojpeg; do
          run_impl "$impl" "$fmt" "$w"
        done
      fi
    done
  done
done

# Same work: the first tensor of each build against the reference's.
record=0
echo "== output check (first sample, mean |warehouse - reference| in 8-bit units)" >&2
for fmt in $FORMATS; do
  run_impl ref "$fmt" 2
  for impl in go turbojpeg; do
    run_impl "$impl" "$fmt" 2
    shard=$(ls "$BENCH_DIR"/out/"$impl-$fmt"/latest/shards/*.twh | head -1)
    "$PY" - "$shard" "$BENCH_DIR/out/ref.bin" "$impl" "$fmt" "$SIZE" <<'EOF'
import sys, numpy as np
shard, ref, impl, fmt, size = sys.argv[1:]
n = 3 * int(size) * int(size)
ours = np.fromfile(shard, np.float16, count=n, offset=80).astype(np.float32)
theirs = np.fromfile(ref, np.float16, count=n).astype(np.float32)
print(f"{impl:9s} {fmt}: mean |diff| = {np.abs(ours - theirs).mean() * 255:.2f}")
EOF
  done
done

echo "== peak RSS (jpeg frames, 2 workers)" >&2
for n in $RSS_SAMPLES; do
  "$PY" - "$BENCH_DIR/data/jpeg" "$BENCH_DIR/data/rss-$n" "$n" <<'EOF'
import json, os, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
frames = sorted(os.path.join(src, r, "images", f) for r in os.listdir(src) if r.startswith("run_")
                for f in os.listdir(os.path.join(src, r, "images")))
per_run = 100
for i in range(n):
    run = os.path.join(dst, f"run_{i // per_run + 1}")
    img = os.path.join(run, "images", f"frame_{i % per_run:05d}.jpg")
    if os.path.exists(img):
        continue
    os.makedirs(os.path.dirname(img), exist_ok=True)
    os.makedirs(os.path.join(run, "labels"), exist_ok=True)
    os.link(frames[i % len(frames)], img)
    with open(os.path.join(run, "labels", f"frame_{i % per_run:05d}.json"), "w") as f:
        json.dump({"frame_id": i % per_run, "image": f"images/frame_{i % per_run:05d}.jpg",
                   "polyp_labels": [{"bbox_px": [100, 100, 300, 300]}]}, f)
EOF
done
for rep in $(seq "$RSS_REPEATS"); do
  for impl in go turbojpeg; do
    for n in $RSS_SAMPLES; do
      config "$impl-rss" "$BENCH_DIR/data/rss-$n"
      rm -rf "$BENCH_DIR/out/$impl-rss"
      /usr/bin/time -f '%e %U %S %M' -o "$BENCH_DIR/time.txt" taskset -c 0-$((ncpu > 1 ? 1 : 0)) \
        "$BENCH_DIR/bin/warehouse-etl-$impl" build --config "$BENCH_DIR/cfg/$impl-rss.jsonc" --workers 2 --quiet \
        >/dev/null 2>"$BENCH_DIR/stderr.txt"
      read -r secs user sys rss <"$BENCH_DIR/time.txt"
      echo "rss $impl $n $secs 0 $rss" | tee -a "$results" >&2
      rm -rf "$BENCH_DIR/out/$impl-rss"
    done
  done
done

echo "== summary" >&2
"$PY" - "$results" "$RUNS" "$FRAMES" "$INTERP" "$SIZE" <<'EOF'
import collections, statistics, sys
path, runs, frames, interp, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
n = runs * frames
wall = collections.defaultdict(list)
cpu = collections.defaultdict(list)
rss = {}
for line in open(path):
    f = line.split()
    if f[0] == "rss":
        rss.setdefault((f[1], int(f[2])), []).append(int(f[5]))
        continue
    key = (f[0], f[1], int(f[2]))
    wall[key].append(float(f[3]))
    cpu[key].append(float(f[4]))
mw = {k: statistics.median(v) for k, v in wall.items()}
mc = {k: statistics.median(v) for k, v in cpu.items()}
reps = max((len(v) for v in wall.values()), default=0)
print(f"{n} samples per build, letterbox {size}x{size}, medians of {reps} interleaved runs; reference resize INTER_{interp.upper()}")
print("wall = elapsed seconds; cpu = user+system CPU seconds (robust to other load on the machine)")
print("| input | workers | reference wall / cpu s | pure Go wall / cpu s | turbojpeg wall / cpu s | pure Go vs ref (wall, cpu) | turbojpeg vs ref (wall, cpu) |")
print("|---|---:|---:|---:|---:|---:|---:|")
fmts = sorted({k[1] for k in mw})
ws = sorted({k[2] for k in mw})
for fmt in fmts:
    for w in ws:
        k = {i: (i, fmt, w) for i in ("ref", "go", "turbojpeg")}
        if any(x not in mw for x in k.values()):
            continue
        r, g, t = k["ref"], k["go"], k["turbojpeg"]
        cell = lambda x: f"{mw[x]:.2f} / {mc[x]:.2f}"
        ratio = lambda x: f"{mw[r] / mw[x]:.2f}x, {mc[r] / mc[x]:.2f}x"
        print(f"| {fmt} | {w} | {cell(r)} | {cell(g)} | {cell(t)} | {ratio(g)} | {ratio(t)} |")
# The build against its decoder alone (one core, CPU seconds per frame), and
# the two decoders against each other: jpegdec / libjpeg-turbo.
if ("dec-go", "jpeg", 1) in mc:
    dg, dt = mc[("dec-go", "jpeg", 1)], mc[("dec-turbojpeg", "jpeg", 1)]
    ms = lambda x: 1000 * x / n
    for impl, dec in (("go", dg), ("turbojpeg", dt)):
        if (impl, "jpeg", 1) in mc:
            b = mc[(impl, "jpeg", 1)]
            print(f"build / decode alone, {impl}, jpeg, 1 core: {ms(b):.2f} / {ms(dec):.2f} ms per frame = {b / dec:.2f}x")
    print(f"decode alone, jpegdec / libjpeg-turbo: {ms(dg):.2f} / {ms(dt):.2f} ms per frame = {dg / dt:.2f}x")
if len(ws) > 1:
    lo, hi = ws[0], ws[-1]
    for fmt in fmts:
        parts = [f"{i} {mw[(i, fmt, lo)] / mw[(i, fmt, hi)]:.2f}x"
                 for i in ("ref", "go", "turbojpeg") if (i, fmt, lo) in mw and (i, fmt, hi) in mw]
        print(f"wall-clock scaling {fmt}, {lo} -> {hi} workers: " + ", ".join(parts))
for impl in ("go", "turbojpeg"):
    got = sorted((k[1], statistics.median(v)) for k, v in rss.items() if k[0] == impl)
    if len(got) > 1:
        (n0, r0), (n1, r1) = got[0], got[-1]
        print(f"peak RSS {impl} (median of {len(rss[(impl, n0)])}): {n0} samples {r0 / 1024:.0f} MiB, "
              f"{n1} samples {r1 / 1024:.0f} MiB ({(r1 / r0 - 1) * 100:+.1f}%)")
EOF
