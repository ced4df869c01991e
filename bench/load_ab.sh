#!/usr/bin/env bash
# Go `load` of one or more binaries (or flag sets), alternated, cold, first
# epoch and warm: per round and warehouse, `cat` of the shards cold, then each
# variant with the shards evicted from the page cache (bench/evict.py) before
# its one-epoch process (cold), each with the shards cached before its
# one-epoch process (first: every sample checked on this first read, from the
# page cache), then each warm (EPOCHS epochs a process, the ones after the
# first timed). KINDS picks and orders them (default "cold first warm").
# `cat` runs cold (its "cold" rows) and then warm (its "first" rows) in each
# round. Prints every run and the medians, samples/s.
#
#   ROUNDS=5 bash bench/load_ab.sh WAREHOUSE... -- old=/tmp/wh-old new=/tmp/wh-new "ra8=/tmp/wh-new --read-ahead 8"
#
# A variant is NAME=BINARY [LOAD FLAGS...].
#
# WAREHOUSE: output roots or version directories (bench/read.sh's /tmp/readbig/out/u8-384).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3} EPOCHS=${EPOCHS:-4} BATCH=${BATCH:-32} SHUFFLE=${SHUFFLE:-global} KINDS=${KINDS:-cold first warm}
PY=${PY:-/usr/bin/python3}
dirs=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do dirs+=("$1"); shift; done
[ $# -gt 0 ] && shift
[ ${#dirs[@]} -gt 0 ] && [ $# -gt 0 ] || { sed -n 2,16p "$0"; exit 2; }
log=$(mktemp)
rate() { "$PY" -c 'import json, sys; r = json.load(sys.stdin); k = sys.argv[1]
print(round(r["samples"] / r["seconds"]) if k != "warm" else round(r["later_epochs_samples"] / r["later_epochs_seconds"]),
      (r.get("shards") or {}).get("cold_samples", "-"))' "$1"; }
for round in $(seq "$ROUNDS"); do
  for d in "${dirs[@]}"; do
    v=$(realpath "$d/latest" 2>/dev/null || realpath "$d")
    n=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["samples"])' "$v/manifest.json")
    "$PY" bench/evict.py "$v"
    t0=$(date +%s.%N); cat "$v"/shards/* >/dev/null; t1=$(date +%s.%N)
    echo "$round $(basename "$d") cold cat $("$PY" -c "print(round($n / ($t1 - $t0)))") -" | tee -a "$log"
    t0=$(date +%s.%N); cat "$v"/shards/* >/dev/null; t1=$(date +%s.%N)
    echo "$round $(basename "$d") first cat $("$PY" -c "print(round($n / ($t1 - $t0)))") -" | tee -a "$log"
    # Odd rounds run the variants in the order given, even rounds reversed:
    # the first run after `cat` is favoured (a cold run by 5-15% here,
    # whichever binary it is).
    order=("$@")
    if [ $((round % 2)) = 0 ]; then
      order=()
      for ((j = $#; j >= 1; j--)); do order+=("${!j}"); done
    fi
    for kind in $KINDS; do
      for variant in "${order[@]}"; do
        name=${variant%%=*} cmd=${variant#*=}
        bin=${cmd%% *} flags=${cmd#"${cmd%% *}"}
        case $kind in
          cold) "$PY" bench/evict.py "$v"; epochs=1 ;;
          first) cat "$v"/shards/* >/dev/null; epochs=1 ;;
          *) cat "$v"/shards/* >/dev/null; epochs=$EPOCHS ;;
        esac
        # shellcheck disable=SC2086 # flags: load's flags of this variant
        echo "$round $(basename "$d") $kind $name $("$bin" load --tensor-warehouse "$v" --batch "$BATCH" --epochs $epochs \
          --shuffle "$SHUFFLE" --json --quiet $flags | rate $kind)" | tee -a "$log"
      done
    done
  done
done
echo "medians, samples/s:"
"$PY" - "$log" <<'PYEOF'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, d, kind, name, rate, cold = line.split()
    runs[(d, kind, name)].append(int(rate))
for (d, kind, name), v in sorted(runs.items()):
    print(f"{d:20s} {kind:5s} {name:12s} {statistics.median(v):8.0f}  {v}")
PYEOF
rm -f "$log"
