#!/usr/bin/env bash
# bench/fuzz.sh [seconds] [package-pattern ...]: the fuzzing campaign.
#
# Runs every fuzz target of every package in turn for `seconds` each
# (default 60) and prints one row per target: executions per second, new
# corpus entries, the most bytes one input made the code allocate (from
# internal/fuzzmem) and the outcome. Targets are discovered with
# `go test -list '^Fuzz'`, so a new target is included without editing this
# file. Packages default to ./...; pass patterns to narrow the run.
#
# Environment:
#   FUZZ_PARALLEL  fuzzing workers per target (default: nproc)
#   FUZZ_MINIMIZE  -fuzzminimizetime (default 5000x): go test minimizes every
#                  new interesting input, with a loop quadratic in its length;
#                  on inputs of a few KB (a manifest, a container, an AVI) that
#                  takes the default 60 s each and stalls every worker
#                  (docs/fuzzing.md, "Why targets stalled"). A crash is still
#                  minimized within this budget.
#   FUZZ_ONLY      an extended regex: only targets whose "<pkg>.<Target>" name
#                  matches (e.g. 'warehouse\.FuzzOpen$|roverd/avi\.')
#   FUZZ_LOG       directory for each target's full output (default: a temp dir,
#                  kept and named at the end when a target failed)
#
# A crash leaves its input in <pkg>/testdata/fuzz/<Target>/ as go test writes
# it; minimise it (go test -run=<Target>/<file> -v), check it in and fix the
# bug with a regression test (docs/fuzzing.md). Exit status is non-zero when
# any target failed.
set -uo pipefail
cd "$(dirname "$0")/.."

secs="${1:-60}"
shift || true
pkgs=("$@")
[ ${#pkgs[@]} -gt 0 ] || pkgs=(./...)
parallel="${FUZZ_PARALLEL:-$(nproc)}"
minimize="${FUZZ_MINIMIZE:-5000x}"
log="${FUZZ_LOG:-$(mktemp -d)}"
mkdir -p "$log"
log=$(cd "$log" && pwd) # absolute: each target runs in its package's directory
export FUZZMEM_DIR="$log/mem"
mkdir -p "$FUZZMEM_DIR"

failed=0
start=$(date +%s)
printf '%-48s %10s %8s %12s %8s %s\n' target execs/s new worst-alloc build+run outcome
for pkg in $(go list "${pkgs[@]}"); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  # A package whose tests no longer compile fails here, not silently.
  if ! listed=$(cd "$dir" && go test -list '^Fuzz' . 2>&1); then
    printf '%-48s %10s %8s %12s %8s %s\n' "${pkg#warehouse-etl/}" - - - - "FAIL (go test -list: $(grep -m1 -v '^#' <<<"$listed" | cut -c1-100))"
    failed=1
    continue
  fi
  targets=$(grep '^Fuzz' <<<"$listed" || true)
  for t in $targets; do
    name="${pkg#warehouse-etl/}.$t"
    if [ -n "${FUZZ_ONLY:-}" ] && ! grep -qE "$FUZZ_ONLY" <<<"$name"; then continue; fi
    out="$log/${name//\//_}.log"
    t0=$(date +%s)
    (cd "$dir" && go test -run='^$' -fuzz="^${t}\$" -fuzztime="${secs}s" -fuzzminimizetime="$minimize" -parallel="$parallel" . >"$out" 2>&1)
    rc=$?
    retried=
    # go test's fuzzing engine sometimes ends a run with only "context
    # deadline exceeded" (a worker still busy when -fuzztime runs out, no
    # failing input): run that target once more rather than fail on it.
    if [ $rc -ne 0 ] && grep -q 'context deadline exceeded' "$out" && ! grep -q 'Failing input written' "$out"; then
      cp "$out" "$out.first"
      (cd "$dir" && go test -run='^$' -fuzz="^${t}\$" -fuzztime="${secs}s" -fuzzminimizetime="$minimize" -parallel="$parallel" . >"$out" 2>&1)
      rc=$?
      retried=" (rerun after the engine's 'context deadline exceeded')"
    fi
    t1=$(date +%s)
    # The last progress line: "fuzz: elapsed: 20s, execs: 123456 (6172/sec), new interesting: 3 (total: 12)".
    last=$(grep -E '^fuzz: elapsed: [0-9]+s, execs: [0-9]+' "$out" | tail -1)
    elapsed=$(sed -E 's/^fuzz: elapsed: ([0-9]+)s.*/\1/' <<<"$last")
    execs=$(sed -E 's/.*execs: ([0-9]+).*/\1/' <<<"$last")
    # Executions per second over the fuzzing phase: the first progress line
    # after "fuzzing" starts may still include baseline coverage time, so
    # this is the overall figure go test itself reports at the end.
    rate=0
    if [ -n "$last" ] && [ "${elapsed:-0}" -gt 0 ]; then rate=$((execs / elapsed)); fi
    new=$(sed -nE 's/.*new interesting: ([0-9]+).*/\1/p' <<<"$last")
    # internal/fuzzmem: each worker process writes the most bytes one input
    # allocated to $FUZZMEM_DIR/<Target>.<pid>.
    worst=$(cat "$FUZZMEM_DIR/$t".* 2>/dev/null | sort -n | tail -1)
    rm -f "$FUZZMEM_DIR/$t".*
    outcome=ok
    if [ $rc -ne 0 ]; then
      outcome="FAIL ($(grep -m1 -E 'Failing input written to|panic:|--- FAIL' "$out" | tr -s ' ' | cut -c1-120))"
      failed=1
    fi
    printf '%-48s %10s %8s %12s %7ss %s\n' "$name" "$rate" "${new:-0}" "${worst:--}" $((t1 - t0)) "$outcome$retried"
  done
done
echo "total $(( $(date +%s) - start ))s; logs in $log"
exit $failed
