#!/usr/bin/env bash
# Reuse benchmark (issue 24): what a nightly rebuild costs when 1% of the frames are new.
#
#   bash bench/reuse.sh                          # 10,000 1080p JPEG frames (20 runs x 500)
#   RUNS=4 FRAMES=500 REPEATS=3 bash bench/reuse.sh   # 2,000 frames, as measured under load
#   BASE_BIN=/tmp/old/warehouse-etl bash bench/reuse.sh # also times an older binary's reuse rebuild,
#                                                       # interleaved, and checks it wrote the same bytes
#
# Needs Go and Debian's /usr/bin/python3 with python3-opencv and python3-numpy.
#
# What it does, all under BENCH_DIR (on disk by default: the versions are GBs):
#   1. makes RUNS runs x FRAMES frames of 1920x1080 q90 JPEG (OpenCV, below: a panned
#      smooth scene, two moving boxes, sensor noise; bench/gen_dataset.py's ImageMagick
#      scenes take minutes per run) and builds them from scratch at SIZExSIZE u8 (the
#      clean build, timed once);
#   2. adds a run of 1% more frames (run_RUNS, RUNS*FRAMES/100 frames);
#   3. REPEATS times, interleaved, each on a hard-linked copy of the output root as the
#      clean build left it (so every rebuild finds the same old version):
#        reuse     WAREHOUSE_CLEAR=1 build              (copies the unchanged samples)
#        no-reuse  WAREHOUSE_CLEAR=1 build --no-reuse   (decodes everything)
#        cp        cp -r of the unchanged samples' bytes (the old version's shards)
#   4. checks that the reuse and no-reuse rebuilds wrote the same shards and samples.jsonl,
#      and prints the medians and the ratios the issue sets targets for:
#        reuse / clean build  <= 0.05     reuse / cp  <= 2
set -euo pipefail
cd "$(dirname "$0")/.."

BENCH_DIR=${BENCH_DIR:-/tmp/warehouse-etl-reuse-bench}
RUNS=${RUNS:-20}
FRAMES=${FRAMES:-500}
REPEATS=${REPEATS:-3}
SIZE=${SIZE:-384}
WORKERS=${WORKERS:-0}
BASE_BIN=${BASE_BIN:-}
PY=/usr/bin/python3

for tool in go bc "$PY"; do
  command -v "$tool" >/dev/null || { echo "bench: $tool not found" >&2; exit 1; }
done
"$PY" -c 'import cv2, numpy' || { echo "bench: $PY cannot import cv2/numpy (apt-get install python3-opencv python3-numpy)" >&2; exit 1; }
mkdir -p "$BENCH_DIR"/{bin,data,cfg,runs}
data=$BENCH_DIR/data/jpeg
added=$(( RUNS * FRAMES / 100 ))
[ "$added" -ge 1 ] || added=1

echo "== binary" >&2
go build -o "$BENCH_DIR/bin/warehouse-etl" ./cmd/warehouse-etl
bin=$BENCH_DIR/bin/warehouse-etl

gen=$BENCH_DIR/gen_frames.py
cat >"$gen" <<'PYEOF'
#!/usr/bin/python3
"""gen_fast.py ROOT RUN FRAMES: capture run ROOT/run_RUN of FRAMES 1920x1080 q90 (OpenCV default 4:2:0)
JPEG frames (OpenCV): a smooth random scene panned per frame, two moving boxes, Gaussian
sensor noise (sigma 3), and their labels. Deterministic per (RUN, frame); skips frames
that exist."""
import json, os, sys
import cv2, numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
root, run, frames = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
W, H = 1920, 1080
d = os.path.join(root, f"run_{run}")
os.makedirs(os.path.join(d, "images"), exist_ok=True)
os.makedirs(os.path.join(d, "labels"), exist_ok=True)
rng = np.random.default_rng(run)
scene = cv2.resize(rng.integers(0, 256, (34, 60, 3), dtype=np.uint8), (W + 480, H + 270), interpolation=cv2.INTER_CUBIC)
def objects(f):
    t = f / 100.0
    r = H // 10
    cx, cy = int(W * (0.15 + 0.7 * (t % 1))), int(H * (0.3 + 0.2 * (t % 1)))
    rw, rh = W // 8, H // 7
    x0, y0 = int(W * (0.8 - 0.6 * (t % 1))), int(H * 0.6)
    return [(max(0, cx - r), max(0, cy - r), min(W, cx + r), min(H, cy + r)), (x0, y0, x0 + rw, y0 + rh)]
for f in range(frames):
    img = os.path.join(d, "images", f"frame_{f:05d}.jpg")
    boxes = objects(f)
    if not os.path.exists(img):
        ox, oy = (4 * f) % 480, (2 * f) % 270
        im = scene[oy:oy + H, ox:ox + W].copy()
        (a0, b0, a1, b1), (c0, d0, c1, d1) = boxes
        cv2.circle(im, ((a0 + a1) // 2, (b0 + b1) // 2), H // 10, (40, 50, 210), -1)
        cv2.rectangle(im, (c0, d0), (c1 - 1, d1 - 1), (200, 40, 30), -1)
        noise = np.random.default_rng(run * 1000003 + f).normal(0, 3, im.shape)
        im = np.clip(im + noise, 0, 255).astype(np.uint8)
        ok, buf = cv2.imencode(".jpg", im, [cv2.IMWRITE_JPEG_QUALITY, 90])
        assert ok
        with open(img + ".tmp", "wb") as fh:
            fh.write(buf.tobytes())
        os.replace(img + ".tmp", img)
    lab = os.path.join(d, "labels", f"frame_{f:05d}.json")
    if not os.path.exists(lab):
        with open(lab, "w") as fh:
            json.dump({"frame_id": f, "sim_time": f * 0.05, "unix_time": 1700000000.0 + run * 1000 + f * 0.05,
                       "image": f"images/frame_{f:05d}.jpg", "image_present": True, "camera_active": True,
                       "polyp_labels": [{"bbox_px": list(b), "bbox_norm": [b[0] / W, b[1] / H, b[2] / W, b[3] / H]} for b in boxes]}, fh)
PYEOF
echo "== dataset: $RUNS runs x $FRAMES frames in $data" >&2
rm -rf "$data/run_$RUNS"
for r in $(seq 0 $((RUNS - 1))); do echo "$r"; done | xargs -P "$(nproc)" -I{} "$PY" "$gen" "$data" {} "$FRAMES"

# config OUT: the build config, writing under OUT.
config() {
  cat >"$BENCH_DIR/cfg/reuse.jsonc" <<EOF
{
  "name": "reuse",
  "source": {"kind": "capture", "root": "$data"},
  "target_size": [$SIZE, $SIZE],
  "resize_mode": "letterbox",
  "dtype": "u8",
  "max_boxes": 16,
  "output_root": "$1",
  "workers": $WORKERS
}
EOF
}
# secs COMMAND...: runs it, prints its wall-clock seconds.
secs() {
  local t0 t1
  t0=$(date +%s.%N)
  "$@" >/dev/null 2>"$BENCH_DIR/last.err" || { cat "$BENCH_DIR/last.err" >&2; exit 1; }
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

pristine=$BENCH_DIR/pristine
rm -rf "$pristine" "$BENCH_DIR"/runs/*
config "$pristine"
echo "== clean build of $((RUNS * FRAMES)) frames" >&2
clean=$(secs "$bin" build --config "$BENCH_DIR/cfg/reuse.jsonc" --quiet)
version=$(basename "$(readlink "$pristine/latest")")
unchanged_bytes=$(du -sb "$pristine/$version/shards" | cut -f1)

echo "== adding run_$RUNS: $added frames (1%)" >&2
"$PY" "$gen" "$data" "$RUNS" "$added"

: >"$BENCH_DIR/reuse.txt"; : >"$BENCH_DIR/noreuse.txt"; : >"$BENCH_DIR/cp.txt"; : >"$BENCH_DIR/cpsync.txt"; : >"$BENCH_DIR/reusebase.txt"
kinds="reuse noreuse cp cpsync"
[ -z "$BASE_BIN" ] || kinds="reusebase $kinds"
for i in $(seq "$REPEATS"); do
  for what in $kinds; do
    out=$BENCH_DIR/runs/$what-$i
    rm -rf "$out"
    cp -al "$pristine" "$out"     # hard links: a rebuild replaces files, never edits them
    sync
    case $what in
      reuse)   config "$out"; t=$(WAREHOUSE_CLEAR=1 secs "$bin" build --config "$BENCH_DIR/cfg/reuse.jsonc" --quiet) ;;
      reusebase) config "$out"; t=$(WAREHOUSE_CLEAR=1 secs "$BASE_BIN" build --config "$BENCH_DIR/cfg/reuse.jsonc" --quiet) ;;
      noreuse) config "$out"; t=$(WAREHOUSE_CLEAR=1 secs "$bin" build --config "$BENCH_DIR/cfg/reuse.jsonc" --quiet --no-reuse) ;;
      cp)      t=$(secs cp -r "$pristine/$version/shards" "$out/copy") ;;
      # cp and fsync of the copies: what a build must do too before it publishes.
      cpsync)  t=$(secs sh -c 'cp -r "$1" "$2" && sync "$2"/*' sh "$pristine/$version/shards" "$out/copy") ;;
    esac
    echo "$t" >>"$BENCH_DIR/$what.txt"
    echo "  repeat $i $what: ${t}s" >&2
  done
  # Same bytes with and without reuse.
  for f in samples.jsonl $(cd "$BENCH_DIR/runs/noreuse-$i/$version" && ls shards/*.twh); do
    cmp -s "$BENCH_DIR/runs/reuse-$i/$version/$f" "$BENCH_DIR/runs/noreuse-$i/$version/$f" ||
      { echo "bench: $f differs between the rebuilds with and without reuse" >&2; exit 1; }
    [ -z "$BASE_BIN" ] || cmp -s "$BENCH_DIR/runs/reuse-$i/$version/$f" "$BENCH_DIR/runs/reusebase-$i/$version/$f" ||
      { echo "bench: $f differs between the reuse rebuilds of $bin and $BASE_BIN" >&2; exit 1; }
  done
  reused=$(grep -o '"reused": *[0-9]*' "$BENCH_DIR/runs/reuse-$i/$version/build_report.json" | grep -o '[0-9]*$')
  decoded=$(grep -o '"decoded": *[0-9]*' "$BENCH_DIR/runs/reuse-$i/$version/build_report.json" | grep -o '[0-9]*$')
  rm -rf "$BENCH_DIR/runs/reuse-$i" "$BENCH_DIR/runs/noreuse-$i" "$BENCH_DIR/runs/cp-$i" "$BENCH_DIR/runs/cpsync-$i" "$BENCH_DIR/runs/reusebase-$i"
done

r=$(median <"$BENCH_DIR/reuse.txt"); n=$(median <"$BENCH_DIR/noreuse.txt"); c=$(median <"$BENCH_DIR/cp.txt"); cs=$(median <"$BENCH_DIR/cpsync.txt")
printf '\n%d frames 1920x1080 JPEG -> %dx%d u8, +%d frames (1%%), %d repeats, medians on %d CPUs:\n' \
  $((RUNS * FRAMES)) "$SIZE" "$SIZE" "$added" "$REPEATS" "$(nproc)"
printf '  clean build                 %8.2f s\n' "$clean"
printf '  rebuild, no reuse           %8.2f s\n' "$n"
printf '  rebuild, reuse              %8.2f s   (%s reused, %s decoded)\n' "$r" "$reused" "$decoded"
[ -z "$BASE_BIN" ] || { b=$(median <"$BENCH_DIR/reusebase.txt")
  printf '  rebuild, reuse, BASE_BIN    %8.2f s   (this binary / BASE_BIN %.3f)\n' "$b" "$(echo "$r / $b" | bc -l)"; }
printf '  cp of the unchanged bytes   %8.2f s   (%d MB)\n' "$c" $((unchanged_bytes / 1000000))
printf '  cp + fsync of the copies    %8.2f s\n' "$cs"
printf '  reuse / clean build         %8.3f     (target <= 0.05)\n' "$(echo "$r / $clean" | bc -l)"
printf '  reuse / no reuse            %8.3f\n' "$(echo "$r / $n" | bc -l)"
printf '  reuse / cp                  %8.2f     (target <= 2)\n' "$(echo "$r / $c" | bc -l)"
printf '  reuse / (cp + fsync)        %8.2f\n' "$(echo "$r / $cs" | bc -l)"
