#!/usr/bin/env bash
# GPU check of the FLOP source of `capture --backend cupti` (the dispatch-level recorder,
# tbdtrace/collector/torch_flops.py): builds the extension, captures a small bf16 training
# program (linear, convolution, attention; forward and backward), reports the flops section
# and checks that recorded ops join the kernels' runtime calls on the launching thread.
#   OUT=/tmp/x PY=python3 scripts/gpu_flops_check.sh
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out/gpu_flops_check}
PY=${PY:-python3}
mkdir -p "$OUT"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
timeout 300 "$PY" setup.py -q build_ext --inplace >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
T="$OUT/trace"
timeout 180 "$PY" -m tbdtrace capture --backend cupti --torch-flops -o "$T" -- "$PY" scripts/gpu_flops_train.py 2>&1 | tail -5
timeout 120 "$PY" -m tbdtrace report "$T" --format json >"$OUT/report.json" || exit 1
timeout 120 "$PY" -m tbdtrace report "$T" | sed -n '/FLOPs by precision/,$p'
"$PY" - "$T" "$OUT/report.json" <<'PY'
import json, sys
import numpy as np
import tbdtrace
from tbdtrace.analysis.engine import context, shared_arrays
from tbdtrace.analysis.engine.attribution import on_threads, thread_groups
tr = tbdtrace.open(sys.argv[1])
ctx = context.of(tr)
ops = tr.table("ops").to_pylist()
rt = tr.table("runtime", ["start_ns", "pid", "tid", "name"])
print("ops rows", len(ops), "runtime rows", rt.num_rows, "kernels", tr.num_rows("kernels"))
print("op tids", sorted({o["tid"] for o in ops})[:5], "runtime tids",
      sorted(set(rt.column("tid").to_pylist()))[:5])
# runtime calls inside a recorded op on the same (pid, tid)
keep = np.ones(len(ops), dtype=bool)
q = thread_groups(shared_arrays.ints(ctx, "runtime", "pid"), shared_arrays.ints(ctx, "runtime", "tid"))
hit = on_threads(ctx, "ops", keep, q, shared_arrays.ints(ctx, "runtime", "start_ns"))
print("runtime calls inside a recorded op:", int((hit >= 0).sum()), "of", rt.num_rows)
print("ops with a runtime call inside:", len(set(hit[hit >= 0].tolist())), "of", len(ops))
doc = json.load(open(sys.argv[2]))
for r in doc["flops"]["rows"]:
    print({k: r[k] for k in ("precision", "flops", "framework_flops", "coverage",
                              "efficiency_busy", "peak_source")})
print("meta torch:", tr.meta.get("extra", {}).get("torch"), tr.meta.get("extra", {}).get("torch_flops"))
ok = any(r["precision"] == "bf16" and (r["coverage"] or 0) > 0.5 for r in doc["flops"]["rows"])
print("CHECK", "PASS" if ok else "FAIL")
PY
