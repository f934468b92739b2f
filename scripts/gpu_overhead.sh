#!/usr/bin/env bash
# The capture-overhead protocol on a GPU machine (scripts/gpu_overhead.py has the protocol
# and the pass rule): builds the native collector when it is missing, then the micro and
# training stages inside BUDGET_S seconds (default 300, after the build). Run it first and
# alone. Writes $OUT/overhead.json and prints the table last, naming the card.
#
#   OUT=/tmp/gpu_overhead PY=python3 scripts/gpu_overhead.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu_overhead}
PY=${PY:-python3}
BUDGET_S=${BUDGET_S:-300}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
if ! $PY -c "import tbdtrace._native" 2>/dev/null || [ ! -f tbdtrace/libtbdtrace_inject.so ]; then
  if ! $PY setup.py -q build_ext --inplace > "$OUT/build.log" 2>&1; then
    echo "gpu_overhead: the native build failed (see $OUT/build.log: $(tail -1 "$OUT/build.log"))"
    exit 1
  fi
fi
exec $PY scripts/gpu_overhead.py all --out "$OUT" --budget-s "$BUDGET_S" --rounds "${ROUNDS:-4}"
