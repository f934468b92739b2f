#!/usr/bin/env bash
# GPU check of the native CUPTI collector, for a machine with an NVIDIA GPU (<= 8 minutes).
#
# Builds tbdtrace._native + libtbdtrace_inject.so, trains ResNet-50 (batch 32, 20 steps, an
# NVTX range per step) three times: plain (throughput), under `tbdtrace capture --backend
# cupti` (throughput + trace), and under torch.profiler (kernel count and total kernel time
# to compare with). Then checks the trace: kernel, memcpy, runtime, NVTX and memory rows
# present; every kernel has a runtime launch with its correlation id; durations positive;
# devices listed; kernel count and time within 10% of torch.profiler over the same steps.
# Writes $OUT/results.json, $OUT/trace (the small trace; or $OUT/spools if pyarrow is
# missing here) and logs. Exit code 0 only when every check passes.
#
#   OUT=/tmp/gpu_check PY=python3 scripts/gpu_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu_check}
PY=${PY:-python3}
STEPS=${STEPS:-20}
mkdir -p "$OUT"
log() { echo "[gpu_check $(date +%H:%M:%S)] $*" | tee -a "$OUT/log.txt"; }
t0=$(date +%s)

log "python: $($PY -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)' 2>&1)"
nvidia-smi -L >> "$OUT/log.txt" 2>&1 || true

log "build"
if ! timeout 240 $PY setup.py -q build_ext --inplace > "$OUT/build.log" 2>&1; then
  tail -40 "$OUT/build.log"; log "FAIL: build"; exit 1
fi
$PY -c "from tbdtrace import _native as n; print('cupti', n.cupti_version(), n.cupti_library_path())" | tee -a "$OUT/log.txt"

cat > "$OUT/train.py" <<'PYEOF'
"""ResNet-50 training steps with an NVTX range per step; --profile wraps them in torch.profiler."""
import json, sys, time
import torch, torchvision

steps, out, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
torch.backends.cudnn.benchmark = False  # same kernels in every run
dev = torch.device("cuda")
model = torchvision.models.resnet50().to(dev)
opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
x = torch.randn(32, 3, 224, 224, device=dev)
y = torch.randint(0, 1000, (32,), device=dev)
lossf = torch.nn.CrossEntropyLoss()

def step(i):
    torch.cuda.nvtx.range_push(f"step {i}")
    with torch.autograd.profiler.record_function(f"step {i}"):
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(x), y)
        loss.backward()
        opt.step()
        loss.item()  # sync: the step's GPU work ends inside the range
    torch.cuda.nvtx.range_pop()

for i in range(3):  # warm-up outside the measured steps (allocator, cuBLAS handles)
    step(-1 - i)
torch.cuda.synchronize()
prof = None
if mode == "profile":
    from torch.profiler import ProfilerActivity, profile
    prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    prof.__enter__()
t = time.perf_counter()
for i in range(steps):
    step(i)
torch.cuda.synchronize()
dt = time.perf_counter() - t
res = {"mode": mode, "steps": steps, "seconds": dt, "images_per_s": 32 * steps / dt}
if prof is not None:
    prof.__exit__(None, None, None)
    prof.export_chrome_trace(out + ".torch_trace.json")
json.dump(res, open(out, "w"))
PYEOF

run() {  # name, timeout, command...
  local name=$1 lim=$2; shift 2
  log "run $name"
  if ! timeout "$lim" "$@" > "$OUT/$name.log" 2>&1; then tail -30 "$OUT/$name.log"; log "FAIL: $name"; return 1; fi
}
ok=1
run plain 150 $PY "$OUT/train.py" "$STEPS" "$OUT/plain.json" plain || ok=0
if $PY -c "import pyarrow" 2>/dev/null; then
  rm -rf "$OUT/trace"
  run capture 200 $PY -m tbdtrace capture --backend cupti --out "$OUT/trace" -- \
      $PY "$OUT/train.py" "$STEPS" "$OUT/capture.json" capture || ok=0
else
  # No pyarrow on this image: run the injection directly and keep the spools for later.
  log "pyarrow missing: keeping raw spools in $OUT/spools"
  mkdir -p "$OUT/spools"
  run capture 200 env CUDA_INJECTION64_PATH="$PWD/tbdtrace/libtbdtrace_inject.so" \
      NVTX_INJECTION64_PATH="$($PY -c 'from tbdtrace import _native as n; print(n.cupti_library_path())')" \
      TBDTRACE_SPOOL_DIR="$OUT/spools" $PY "$OUT/train.py" "$STEPS" "$OUT/capture.json" capture || ok=0
fi
run profile 200 $PY "$OUT/train.py" "$STEPS" "$OUT/profile.json" profile || ok=0

log "check"
$PY - "$OUT" "$STEPS" "$ok" <<'PYEOF' | tee -a "$OUT/log.txt"
import json, os, struct, sys, zlib
import numpy as np
out, steps, ran = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
res = {"ran_all": ran, "checks": {}}
def check(name, cond, detail=None):
    res["checks"][name] = {"ok": bool(cond), "detail": detail}
def load(p):
    try: return json.load(open(p))
    except Exception: return None
plain, cap, prof = (load(f"{out}/{m}.json") for m in ("plain", "capture", "profile"))
res["throughput"] = {"plain_images_per_s": plain and plain["images_per_s"],
                     "capture_images_per_s": cap and cap["images_per_s"],
                     "profiler_images_per_s": prof and prof["images_per_s"]}
if plain and cap:
    res["throughput"]["capture_overhead_pct"] = 100 * (1 - cap["images_per_s"] / plain["images_per_s"])

tables = {}
if os.path.isdir(f"{out}/trace"):
    import tbdtrace
    t = tbdtrace.open(f"{out}/trace")
    for name in ("kernels", "memcpy", "runtime", "markers", "memory", "devices", "memset", "sync"):
        tables[name] = t.table(name).to_pandas()
    res["meta"] = {k: t.meta.get(k) for k in ("clock", "clock_offset_ns", "dropped_records")}
else:  # raw spools: decode with the project's reader if importable
    sys.path.insert(0, os.getcwd())
    try:
        from tbdtrace.collector import spool
        import glob
        for p in glob.glob(f"{out}/spools/*.tbds"):
            sp = spool.read(p)
            for name in sp.tables:
                import pandas as pd
                cols = {k: np.asarray(v.to_pylist() if hasattr(v, "to_pylist") else v)
                        for k, v in spool.columns(sp, name).items()}
                tables[name] = pd.concat([tables.get(name), pd.DataFrame(cols)]) if name in tables else pd.DataFrame(cols)
    except Exception as e:
        res["spool_read_error"] = repr(e)
res["rows"] = {k: int(len(v)) for k, v in tables.items()}
for name in ("kernels", "memcpy", "runtime", "markers", "memory", "devices"):
    check(f"{name}_present", res["rows"].get(name, 0) > 0, res["rows"].get(name, 0))
k, rt = tables.get("kernels"), tables.get("runtime")
if k is not None and rt is not None and len(k):
    launched = set(rt["correlation_id"].tolist())
    missing = int((~k["correlation_id"].isin(launched)).sum())
    check("every_kernel_has_runtime_launch", missing == 0, f"{missing} of {len(k)} without")
    check("kernel_durations_positive", bool(((k["end_ns"] - k["start_ns"]) > 0).all()))
    check("runtime_durations_nonnegative", bool(((rt["end_ns"] - rt["start_ns"]) >= 0).all()))
    m = tables.get("markers")
    steps_m = m[m["name"].astype(str).str.match(r"^step \d+$")] if m is not None else None
    if steps_m is not None and len(steps_m):
        steps_m = steps_m[steps_m["name"].astype(str).str.split().str[1].astype(int) >= 0]
        lo, hi = int(steps_m["start_ns"].min()), int(steps_m["end_ns"].max())
        launch = rt.set_index("correlation_id")["start_ns"]
        ks = k[k["correlation_id"].map(launch).between(lo, hi)]
        ours = {"kernels": int(len(ks)), "kernel_time_ns": int((ks["end_ns"] - ks["start_ns"]).sum()),
                "nvtx_steps": int(len(steps_m))}
        res["ours"] = ours
        check("nvtx_step_ranges", len(steps_m) == steps, len(steps_m))
    devs = tables.get("devices")
    check("devices_listed", devs is not None and len(devs) > 0 and set(k["device_id"]) <= set(devs["device_id"]),
          None if devs is None else devs.to_dict("records"))
tp = f"{out}/profile.json.torch_trace.json"
if os.path.exists(tp) and "ours" in res:
    ev = json.load(open(tp))["traceEvents"]
    corr_cpu = {e["args"]["correlation"]: e["ts"] for e in ev
                if e.get("cat") == "cuda_runtime" and "correlation" in e.get("args", {})}
    stepr = [e for e in ev if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("step ")]
    lo = min(e["ts"] for e in stepr); hi = max(e["ts"] + e["dur"] for e in stepr)
    kk = [e for e in ev if e.get("cat") == "kernel" and lo <= corr_cpu.get(e["args"].get("correlation"), -1) <= hi]
    theirs = {"kernels": len(kk), "kernel_time_ns": int(sum(e["dur"] for e in kk) * 1000)}
    res["torch_profiler"] = theirs
    o = res["ours"]
    check("kernel_count_within_10pct", abs(o["kernels"] - theirs["kernels"]) <= 0.1 * theirs["kernels"], [o["kernels"], theirs["kernels"]])
    check("kernel_time_within_10pct", abs(o["kernel_time_ns"] - theirs["kernel_time_ns"]) <= 0.1 * theirs["kernel_time_ns"], [o["kernel_time_ns"], theirs["kernel_time_ns"]])
res["ok"] = ran and all(c["ok"] for c in res["checks"].values())
json.dump(res, open(f"{out}/results.json", "w"), indent=2, default=str)
print(json.dumps(res, indent=2, default=str))
sys.exit(0 if res["ok"] else 1)
PYEOF
rc=$?
log "done in $(( $(date +%s) - t0 )) s, rc=$rc"
exit $rc
