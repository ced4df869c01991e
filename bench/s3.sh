#!/usr/bin/env bash
# Object store benchmark: publishing a built version to an s3:// output root
# on a localhost S3 server (versitygw, posix backend on this machine's disk)
# against `cp -r` of the same files into a directory on the same disk, and
# reading it back (a reader's checked download) against `cat` of the files,
# in the same run, interleaved.
#
#   bash bench/s3.sh                       # ~470 MB version, 3 repeats
#   COPIES=20 SIZE=640 REPEATS=5 bash bench/s3.sh
#
# Needs Go and versitygw (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0;
# VERSITYGW names another binary). The Python reader's timings from S3 are
# bench/s3_read.sh's.
#
# What it does:
#   1. builds COPIES copies of the demo's capture runs at SIZE x SIZE, f16, into a
#      local output root (the bytes every repeat uploads);
#   2. starts versitygw on 127.0.0.1 over a temp directory;
#   3. REPEATS times: cp -r of the version directory (then sync), the upload of the
#      same version (build with output_root s3://bench/rN on a mirror seeded with the
#      local build: "up to date", then Push; timed by its own "uploaded" log line:
#      every file with the manifest's sha256 as x-amz-checksum-sha256, multipart
#      above 64 MiB, 8 in parallel),
#      cat of the files, and verify --tensor-warehouse s3://bench/rN (the checked
#      download, timed by its own line);
#   4. prints medians: seconds and GB/s of the version's bytes.
set -euo pipefail
cd "$(dirname "$0")/.."

COPIES=${COPIES:-10}
SIZE=${SIZE:-640}
REPEATS=${REPEATS:-3}
WORK=${WORK:-$(mktemp -d /tmp/warehouse-s3-bench.XXXXXX)}
[ "${KEEP:-0}" = 1 ] || trap 'kill "$gw_pid" 2>/dev/null || true; rm -rf "$WORK"' EXIT

VGW=${VERSITYGW:-$(command -v versitygw || echo "$(go env GOPATH)/bin/versitygw")}
[ -x "$VGW" ] || { echo "versitygw not found: go install github.com/versity/versitygw/cmd/versitygw@v1.8.0" >&2; exit 2; }

go build -o "$WORK/warehouse-etl" ./cmd/warehouse-etl
WH="$WORK/warehouse-etl"

mkdir -p "$WORK/data"
for k in $(seq 1 "$COPIES"); do
  for run in testdata/capture/run_*; do
    cp -r "$run" "$WORK/data/$(basename "$run")0$k"
  done
done
cp testdata/capture/escape.png "$WORK/data/"
config() { # config OUTPUT_ROOT
  cat <<EOF
{
  "source": {"kind": "capture", "root": "data"},
  "target_size": [$SIZE, $SIZE],
  "dtype": "f16",
  "shard_target_mb": 64,
  "thresholds": {"invalid": {"max_ratio": 0.6}, "missing": {"max_ratio": 0.3}, "empty": {"max_ratio": 0.5, "action": "warn"}},
  "output_root": "$1"
}
EOF
}
config out > "$WORK/local.jsonc"
dir=$("$WH" build --config "$WORK/local.jsonc" --quiet)
v=$(basename "$dir")
bytes=$(du -sb "$dir" | cut -f1)
echo "version: $dir, $(ls "$dir/shards" | wc -l) shards, $((bytes / 1000000)) MB"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$WORK/gw/bench"
"$VGW" --access benchaccess --secret benchsecret0123 --port "127.0.0.1:$port" posix "$WORK/gw" > "$WORK/gw.log" 2>&1 &
gw_pid=$!
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
export AWS_ACCESS_KEY_ID=benchaccess AWS_SECRET_ACCESS_KEY=benchsecret0123 AWS_REGION=us-east-1 \
  AWS_ENDPOINT_URL="http://127.0.0.1:$port" AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
  WAREHOUSE_ETL_S3_CACHE="$WORK/cache"

results="$WORK/results"
: > "$results"
now() { date +%s.%N; }
for r in $(seq 1 "$REPEATS"); do
  rm -rf "$WORK/cp"; mkdir -p "$WORK/cp"
  t0=$(now); cp -r "$dir" "$WORK/cp/"; sync; t1=$(now)
  echo "cp $(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" >> "$results"
  rm -rf "$WORK/cp"

  # The mirror of s3://bench/rN seeded with the local build: the build is
  # up to date, and Push uploads it.
  mirror="$WORK/mirror$r"
  mkdir -p "$mirror/bench/r$r/root"
  cp -r "$dir" "$mirror/bench/r$r/root/"
  cp -P "$(dirname "$dir")/latest" "$(dirname "$dir")/.$v.config" "$mirror/bench/r$r/root/" 2>/dev/null || true
  config "s3://bench/r$r" > "$WORK/s3.jsonc"
  sync
  WAREHOUSE_ETL_S3_WORK="$mirror" "$WH" build --config "$WORK/s3.jsonc" 2> "$WORK/up.log" > /dev/null
  up=$(sed -n 's/.*msg=uploaded .* seconds=\([0-9.e+-]*\) .*/\1/p' "$WORK/up.log")
  [ -n "$up" ] || { cat "$WORK/up.log"; echo "no upload line" >&2; exit 1; }
  echo "upload $up" >> "$results"
  rm -rf "$mirror"

  t0=$(now); cat "$dir"/* "$dir"/shards/* > /dev/null 2>&1 || true; t1=$(now)
  echo "cat $(awk -v a="$t0" -v b="$t1" 'BEGIN{print b-a}')" >> "$results"
  "$WH" verify --tensor-warehouse "s3://bench/r$r" 2> "$WORK/down.log" > /dev/null
  down=$(sed -n 's/.*downloaded into .* in \([0-9.]*\)s,.*/\1/p' "$WORK/down.log")
  echo "download $down" >> "$results"
  rm -rf "$WORK/gw/bench/r$r"
done

echo
printf '%-10s %9s %9s\n' what seconds GB/s
for what in cp upload cat download; do
  awk -v w="$what" -v bytes="$bytes" '$1 == w { s[++n] = $2 }
    function median(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }; return a[int((n + 1) / 2)] }
    END { m = median(s, n); printf "%-10s %9.3f %9.3f\n", w, m, bytes / 1e9 / m }' "$results"
done | tee "$WORK/table"
awk 'NR==FNR { t[$1] = $2; next } END { printf "\nupload / cp: %.2fx the time; checked download / cat: %.2fx the time\n", t["upload"] / t["cp"], t["download"] / t["cat"] }' "$WORK/table" /dev/null
echo "upload: every file PUT with x-amz-checksum-sha256 (the manifest's sha256, checked by the server),"
echo "8 files in parallel, multipart above 64 MiB; download: every object checked against the manifest."
echo "cp: cp -r and sync to the same disk; cat: the files from page cache."
