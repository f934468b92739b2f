#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU: builds the native collector, then runs the
# tests marked `gpu` (tests/gpu/test_gpu.py; skipped with their reason on a CPU machine)
# inside BUDGET_S seconds (default 300): each test declares its cost and is skipped when it
# no longer fits. Run scripts/gpu_overhead.sh first and alone.
#
# The GPU machine has no package index: the cupti-python oracle's cp312 wheels come from
# wheels/gpu (`make gpu-wheels` on a machine with one; carry wheels/gpu with the run) and are
# installed into $OUT/site when the machine's Python lacks them.
#
# Brings back (in $OUT): junit.xml, gpu_check.txt (pytest's output), logs.tar.gz (every
# command's log) and traces.tar.gz (the traces the tests wrote). Exit code: pytest's.
#
#   OUT=/tmp/gpu_check PY=python3 scripts/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu_check}
PY=${PY:-python3}
BUDGET_S=${BUDGET_S:-300}
mkdir -p "$OUT/work"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
{ nvidia-smi -L; $PY -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'; } > "$OUT/env.txt" 2>&1
if ! $PY -c "import tbdtrace._native" 2>/dev/null || [ ! -f tbdtrace/libtbdtrace_inject.so ]; then
  if ! $PY setup.py -q build_ext --inplace > "$OUT/work/build.log" 2>&1; then
    echo "gpu_check: the native build failed ($(tail -1 "$OUT/work/build.log"))"
    tar -C "$OUT/work" -czf "$OUT/logs.tar.gz" . ; exit 1
  fi
fi
if ! $PY -c "import cupti.cupti" 2>/dev/null; then
  if ls wheels/gpu/cupti_python-*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --target "$OUT/site" wheels/gpu/*.whl > "$OUT/work/wheels.log" 2>&1 \
      && export PYTHONPATH="$PYTHONPATH:$OUT/site"
  else
    echo "gpu_check: no cupti-python and no wheels/gpu (make gpu-wheels): the oracle test will fail"
  fi
fi
TBDTRACE_GPU_OUT="$OUT/work" TBDTRACE_GPU_BUDGET_S="$BUDGET_S" \
  timeout $(( BUDGET_S + 60 )) $PY -m pytest -p no:randomly -p no:cacheprovider -m gpu -rs \
  --junitxml "$OUT/junit.xml" tests/gpu 2>&1 | tee "$OUT/gpu_check.txt"
rc=${PIPESTATUS[0]}
tar -C "$OUT/work" -czf "$OUT/logs.tar.gz" --wildcards --no-wildcards-match-slash --exclude='./*/*' . 2>/dev/null
tar -C "$OUT/work" -czf "$OUT/traces.tar.gz" --exclude='*.log' . 2>/dev/null
rm -rf "$OUT/work" "$OUT/site"
exit $rc
