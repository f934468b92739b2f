#!/usr/bin/env bash
# Diagnosis of a collector crash on a GPU machine: builds the extension with debug info and
# runs the collector's start/stop directly (the probe `capture` runs first), one case per
# process, each under cuda-gdb with a full native backtrace when it crashes.
#   OUT=/tmp/diag PY=python3 scripts/gpu_diag.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu_diag}
PY=${PY:-python3}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONFAULTHANDLER=1
TBDTRACE_CMAKE_ARGS="-DCMAKE_CXX_FLAGS=-g -DCMAKE_BUILD_TYPE=RelWithDebInfo" \
  timeout 240 $PY setup.py -q build_ext --inplace > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
export TBDTRACE_NATIVE_BACKTRACE=1  # a crash prints native frames (csrc/bindings.cpp)
resolve() {  # native frames of a log -> function, file:line (addr2line on tbdtrace's libraries)
  grep -o '/[^ ]*tbdtrace[^ ]*\.so(+0x[0-9a-f]*)' "$1" | head -25 | while IFS= read -r f; do
    lib=${f%%(*}; off=${f##*(+}; off=${off%)}
    echo "$f => $(addr2line -f -C -i -p -e "$lib" "$off" 2>&1 | tr '\n' ' ')"
  done
}
case_py() {  # name, python code
  local name=$1 code=$2
  echo "=== $name"
  timeout 60 $PY -c "$code" > "$OUT/$name.log" 2>&1; echo "rc=$?"; tail -4 "$OUT/$name.log"
  grep -q "native backtrace" "$OUT/$name.log" && resolve "$OUT/$name.log"
}
START='import sys, tempfile; from tbdtrace import _native as n; d = tempfile.mkdtemp(); acts = sys.argv[1:] or ["context"]
print("start", n.start(d + "/p.tbds", ACTS, 65536, 1, 1000), flush=True)
print("stop", n.stop(), flush=True)'
case_py probe_context "${START//ACTS/[\"context\"]}"
case_py probe_kernel "${START//ACTS/[\"kernel\"]}"
case_py probe_with_pyarrow "import numpy, pyarrow, psutil; ${START//ACTS/[\"context\"]}"
case_py start_only 'import tempfile; from tbdtrace import _native as n; d = tempfile.mkdtemp(); print("start", n.start(d + "/p.tbds", ["context"], 65536, 1, 1000), flush=True); import os; os._exit(0)'
case_py cuda_first 'import torch, tempfile; torch.ones(1, device="cuda"); from tbdtrace import _native as n; d = tempfile.mkdtemp(); print("start", n.start(d + "/p.tbds", ["kernel"], 65536, 4, 1000), flush=True); x = torch.randn(64, 64, device="cuda"); (x @ x).sum().item(); print("stop", n.stop(), flush=True)'
echo "=== capture"
timeout 90 $PY -m tbdtrace capture --backend cupti --out "$OUT/trace" -- $PY -c 'import torch; x = torch.randn(256, 256, device="cuda"); print(float((x @ x).sum()))' > "$OUT/capture.log" 2>&1
echo "rc=$?"; tail -12 "$OUT/capture.log"; grep -q "native backtrace" "$OUT/capture.log" && resolve "$OUT/capture.log"
tar -C "$OUT" -czf "$OUT/diag.tar.gz" --exclude=diag.tar.gz . 2>/dev/null
