#!/usr/bin/env bash
# The Python package as pip installs it, for the read benchmarks: python/ copied to DIR
# and its optional compiled part (warehouse_etl._copycrc: a first read's copy and its
# CRC-32C in one pass) built there, as `pip install ./python` builds it where a C
# compiler and Python's headers are. Prints DIR, for PYTHONPATH; says on stderr whether
# the compiled part runs here (without it the reader copies and checks in two passes).
#
#   export PYTHONPATH=$(bash bench/python_package.sh /usr/bin/python3 /tmp/bench-python)
set -euo pipefail
PY=${1:?usage: bench/python_package.sh PYTHON DIR}
DIR=${2:?usage: bench/python_package.sh PYTHON DIR}
cd "$(dirname "$0")/.."
rm -rf "$DIR"
mkdir -p "$DIR"
tar -C python --exclude=build --exclude='__pycache__' --exclude='*.so' -cf - . | tar -C "$DIR" -xf -
if (cd "$DIR" && "$PY" setup.py -q build_ext --inplace) >"$DIR/build.log" 2>&1; then
  (cd "$DIR" && "$PY" -c 'from warehouse_etl import _crc32c; import sys
print("bench: warehouse_etl._copycrc built;", "copy and check in one pass" if _crc32c.COPY_CRC else "this CPU lacks AVX2+VPCLMULQDQ: two passes", file=sys.stderr)')
else
  echo "bench: warehouse_etl._copycrc did not build (see $DIR/build.log): two passes" >&2
fi
echo "$DIR"
