#!/usr/bin/env bash
# Short fuzzing run for CI: every fuzz target of every package for
# FUZZ_SECONDS (default 3) with bench/fuzz.sh, the same campaign the long
# runs use, so a target that stops compiling, panics, or makes its decoder
# allocate past its bound (internal/fuzzmem) fails the build. A failing
# input is left in <pkg>/testdata/fuzz/<Target>/ and named in the table;
# the full output of each target is kept in $FUZZ_LOG (default
# out/fuzz-ci). Measured on the 2-core CI machine: docs/fuzzing.md, "In CI".
set -euo pipefail
cd "$(dirname "$0")/.."
export FUZZ_LOG="${FUZZ_LOG:-$PWD/out/fuzz-ci}"
rm -rf "$FUZZ_LOG"
exec bench/fuzz.sh "${FUZZ_SECONDS:-3}"
