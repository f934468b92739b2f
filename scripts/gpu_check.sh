#!/usr/bin/env bash
# GPU check of the native CUPTI collector and of tbdtrace on real GPU traces, for a machine
# with an NVIDIA GPU. Each stage has its own time limit and the whole stays inside
# BUDGET_S seconds (default 480): stages that no longer fit are skipped and say so.
#
#  1. build tbdtrace._native + libtbdtrace_inject.so;
#  2. ResNet-50 training (scripts/gpu_train.py: batch BATCH, STEPS measured steps after 3
#     warm-up steps, an NVTX range per step): plain, under `tbdtrace capture --backend
#     cupti` (the defaults; and --torch-flops without PyTorch tensor memory), under torch.profiler, in-process
#     `tbdtrace.capture(backend="cupti")`, plain again (throughput spread);
#  3. report / hotspots on the traces, import of the torch.profiler trace;
#  4. `make demo`'s command (capture of workloads.pytorch.resnet50, auto backend) and the
#     torch backend with --cuda;
#  5. (after the training runs) an FP32 GEMM loop alone (scripts/gpu_gemm.py, 1024^3 x 3:
#     a few kernels) under `capture --counters flops`; the collector's seam tests through the fake CUPTI (tests/native/test_collector_seam.py);
#  6. scripts/gpu_check.py: the checks (also NVML samples, spool errors, overhead goals),
#     written to $OUT/results.json.
# Brings back (in $OUT): results.json, logs.tar.gz (stage logs, reports and the bench
# jobs' own logs, bench/logs/*.log), traces.tar.gz (our traces and the raw
# spools), h200_resnet50_torch_profiler.json.gz. Exit code 0 only when every check passes.
#
#   OUT=/tmp/gpu_check PY=python3 scripts/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu_check}
PY=${PY:-python3}
STEPS=${STEPS:-30}
BATCH=${BATCH:-64}
BUDGET_S=${BUDGET_S:-480}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"  # scripts/gpu_train.py imports tbdtrace
mkdir -p "$OUT"
W="$OUT/work"
mkdir -p "$W"
t0=$(date +%s)
log() { echo "[gpu_check +$(( $(date +%s) - t0 ))s] $*" | tee -a "$W/log.txt"; }
left() { echo $(( BUDGET_S - ($(date +%s) - t0) )); }

run() {  # name, limit_s, command...: skipped when the budget cannot hold limit_s
  local name=$1 lim=$2; shift 2
  local l; l=$(left)
  if (( l < 20 )); then log "skip $name (budget spent)"; return 1; fi
  (( lim > l - 15 )) && lim=$(( l - 15 ))
  log "run $name (limit ${lim}s)"
  local s; s=$(date +%s)
  if ! timeout "$lim" "$@" > "$W/$name.log" 2>&1; then
    tail -25 "$W/$name.log"; log "FAIL: $name after $(( $(date +%s) - s ))s"; return 1
  fi
  log "ok $name in $(( $(date +%s) - s ))s"
}

log "env: $($PY -c 'import sys, torch, numpy, pyarrow, pandas; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "numpy", numpy.__version__, "pyarrow", pyarrow.__version__, "pandas", pandas.__version__, "gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)' 2>&1)"
{ nvidia-smi -L; nvidia-smi --query-gpu=driver_version,clocks.sm,clocks.max.sm --format=csv;
  ls -la /usr/local/cuda/extras/CUPTI/lib64/ /usr/local/cuda/lib64/libcupti* 2>&1 | head;
  $PY -c 'import nvidia, os; print(nvidia.__path__)' ; } >> "$W/env.txt" 2>&1

if ! run build 240 $PY setup.py -q build_ext --inplace; then
  log "FAIL: build; nothing else can run"
  tar -C "$W" -czf "$OUT/logs.tar.gz" . ; exit 1
fi
$PY -c "from tbdtrace import _native as n; print('cupti', n.cupti_version(), n.cupti_library_path())" >> "$W/log.txt" 2>&1
# Smoke: a tiny CUDA program under the collector first. Every later stage needs it; when it
# fails, the crash is diagnosed (Python stacks from faulthandler in both processes, native
# stacks from cuda-gdb in the capturing parent and in the captured child) and the check
# ends early, leaving device time for a rerun.
SMOKE='import torch; x = torch.randn(512, 512, device="cuda"); print("smoke", sum(float((x @ x).sum()) for _ in range(50)))'
if ! run smoke 60 env PYTHONFAULTHANDLER=1 $PY -m tbdtrace capture --backend cupti --keep-spools "$W/smoke_spools" --out "$W/smoke" -- $PY -c "$SMOKE"; then
  cat "$W/smoke.log" | tail -60
  GDB=$(command -v cuda-gdb || ls /usr/local/cuda/bin/cuda-gdb 2>/dev/null)
  for mode in child parent; do
    [ -n "$GDB" ] || break
    rm -rf "$W/smoke_$mode"
    timeout 120 "$GDB" -q -batch -ex "set pagination off" -ex "set follow-fork-mode $mode" \
      -ex "set detach-on-fork on" -ex run -ex "info threads" -ex "thread apply all bt 40" \
      --args $PY -m tbdtrace capture --backend cupti --out "$W/smoke_$mode" -- $PY -c "$SMOKE" \
      > "$W/smoke_gdb_$mode.log" 2>&1
    grep -n -A40 "SIGSEGV\|SIGABRT\|signal SIG" "$W/smoke_gdb_$mode.log" | head -120
  done
  # The collector alone in the child: the injection library without the PyTorch hooks.
  run smoke_plain 60 env PYTHONFAULTHANDLER=1 $PY -m tbdtrace capture --backend cupti --no-torch-memory --no-torch-flops --out "$W/smoke_plain" -- $PY -c "$SMOKE"
  tail -30 "$W/smoke_plain.log"
  tar -C "$W" -czf "$OUT/logs.tar.gz" --exclude='*.pkl' . ; exit 1
fi
$PY -m tbdtrace report "$W/smoke" --top 5 > "$W/report_smoke.txt" 2>&1; head -40 "$W/report_smoke.txt"

TR="$PY scripts/gpu_train.py"
CAP="$PY -m tbdtrace capture --backend cupti"

run plain 120 $TR plain "$STEPS" "$BATCH" "$OUT/plain.json"
rm -rf "$W/trace" "$W/spools"
run capture 150 $CAP --out "$W/trace" --keep-spools "$W/spools" -- \
    $TR capture "$STEPS" "$BATCH" "$OUT/capture.json"
# The FLOP recorder is off by default (its host cost): this run has it, without memory.
run nomem 150 $CAP --no-torch-memory --torch-flops --out "$W/trace_nomem" -- \
    $TR capture "$STEPS" "$BATCH" "$OUT/nomem.json"
run profile 150 $TR profile "$STEPS" "$BATCH" "$OUT/profile.json"
run inproc 120 $TR inproc "$STEPS" "$BATCH" "$OUT/inproc.json"
run plain2 120 $TR plain "$STEPS" "$BATCH" "$OUT/plain2.json"
# Hardware FLOP counters: an FP32 GEMM loop under --counters flops (kernel replay); the
# collector's seam tests. Before the optional stages: `bench` takes what is left.
# Kernel replay runs every kernel of the process once per counter pass, each pass with its
# own range set-up: the program is the GEMM loop alone (randn x2, ITERS products, one sum),
# small enough to finish in the limit; no PyTorch hooks (memory, FLOP recorder) beside it.
run flops 120 $CAP --no-torch-memory --no-torch-flops --counters flops --out "$W/flops" -- \
    $PY scripts/gpu_gemm.py 1024 1024 1024 3 "$OUT/gemm.json"
run seam 60 $PY -m pytest -q -p no:cacheprovider tests/native/test_collector_seam.py

# Analysis commands on the real traces (report JSON for the checks, text for people).
$PY -m tbdtrace report "$W/trace" --format json > "$OUT/report.json" 2> "$W/report.log"
$PY -m tbdtrace report "$W/trace" --top 15 > "$W/report.txt" 2>&1
$PY -m tbdtrace hotspots "$W/trace" --top 15 --by op > "$W/hotspots.txt" 2>&1
$PY -m tbdtrace info "$W/trace" > "$W/info.txt" 2>&1
if [ -f "$OUT/inproc.json.trace/meta.json" ]; then
  cp -r "$OUT/inproc.json.trace" "$W/inproc_trace"
  $PY -m tbdtrace report "$OUT/inproc.json.trace" --format json > "$OUT/report_inproc.json" 2> "$W/report_inproc.log"
fi
if [ -f "$OUT/profile.json.torch_trace.json" ]; then
  run kineto_import 90 $PY -m tbdtrace import "$OUT/profile.json.torch_trace.json" --out "$W/kineto"
  $PY -m tbdtrace report "$W/kineto" --format json > "$OUT/report_kineto.json" 2> "$W/report_kineto.log"
  $PY -m tbdtrace report "$W/kineto" --top 15 > "$W/report_kineto.txt" 2>&1
fi

# make demo's command on a GPU (auto backend), and the torch backend with CUDA.
run demo 120 $PY -m tbdtrace capture --out "$W/demo" -- $PY -m workloads.pytorch.resnet50 --size small --steps 3 --warmup 1 \
  && { $PY -m tbdtrace report "$W/demo" --top 15 > "$W/report_demo.txt" 2>&1;
       $PY -m tbdtrace report "$W/demo" --format json > "$OUT/report_demo.json" 2>> "$W/report_demo.txt"; }
run torchcap 150 $PY -m tbdtrace capture --backend torch --cuda --out "$W/torchcap" -- $PY -m workloads.pytorch.resnet50 --size small --steps 3 --warmup 1 \
  && { $PY -m tbdtrace report "$W/torchcap" --top 15 > "$W/report_torchcap.txt" 2>&1;
       $PY -m tbdtrace report "$W/torchcap" --format json > "$OUT/report_torchcap.json" 2>> "$W/report_torchcap.txt"; }

# The TBD table on the GPU, if time is left.
if (( $(left) > 150 )); then
  # Each job's stdout+stderr is in bench/logs/<job>.log, kept in logs.tar.gz.
  run bench $(( $(left) - 40 )) $PY -m tbdtrace bench --frameworks pytorch --size small --steps 5 \
      --timeout 45 --out "$W/bench"
fi


ln -sfn "$W/trace" "$OUT/trace"; ln -sfn "$W/kineto" "$OUT/kineto"; ln -sfn "$W/demo" "$OUT/demo"
ln -sfn "$W/torchcap" "$OUT/torchcap"; ln -sfn "$W/flops" "$OUT/flops"
log "check"
$PY scripts/gpu_check.py "$OUT" "$STEPS" > "$W/check.txt" 2>&1
rc=$?
tail -60 "$W/check.txt"
rm -f "$OUT/trace" "$OUT/kineto" "$OUT/demo" "$OUT/torchcap" "$OUT/flops"
log "done in $(( $(date +%s) - t0 ))s, rc=$rc"
cp "$OUT"/*.json "$W/" 2>/dev/null
tar -C "$W" -czf "$OUT/logs.tar.gz" --exclude=trace --exclude=trace_nomem --exclude=spools --exclude=kineto \
    --exclude=demo --exclude=torchcap --exclude=flops --exclude=inproc_trace --exclude='*.pkl' \
    --exclude='*.torch_trace.json' --no-wildcards-match-slash --exclude='./bench/*-*' .
tar -C "$W" -czf "$OUT/traces.tar.gz" trace spools demo inproc_trace trace_nomem flops 2>/dev/null
cp "$OUT/capture.json.history.pkl" "$W/" 2>/dev/null
gzip -c "$OUT/capture.json.history.pkl" > "$OUT/history.pkl.gz" 2>/dev/null
# Only these come back: results, logs, traces, the torch.profiler trace, the raw history.
find "$OUT" -mindepth 1 -maxdepth 1 ! -name results.json ! -name logs.tar.gz ! -name traces.tar.gz \
    ! -name h200_resnet50_torch_profiler.json.gz ! -name history.pkl.gz ! -name report.json -exec rm -rf {} +
exit $rc
