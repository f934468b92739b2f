"""Cost of the dispatch-level FLOP recorder (tbdtrace/collector/torch_flops.py) on CPU.

Runs a workload in a child process plainly and under the capture bootstrap with only the
FLOP recorder on (``TBDTRACE_TORCH_FLOPS_SPOOL``; no profiler, no memory tracking), in
alternation, and compares the workloads' own measured throughput (samples/s over the
measured steps, as the harness prints it). Prints the median of each and the ratio, then
the cost per op on the host: a loop of small CPU ops plainly, under an empty
TorchDispatchMode and under the recorder (best of 3).

    .venv/bin/python bench/torch_flops_overhead.py [--runs 3] [--workload resnet50 ...]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tbdtrace.collector.child_protocol import BOOTSTRAP_DIR  # noqa: E402
from tbdtrace.collector.torch_flops import SPOOL_ENV  # noqa: E402

ARGS = ["--size", "tiny", "--device", "cpu", "--seed", "0"]


def run_once(workload: str, steps: int, recorder: bool) -> tuple[float, int]:
    """(samples/s, ops recorded) of one run."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    env.pop("TBDTRACE_TORCH_MEMORY_SPOOL", None)
    with tempfile.TemporaryDirectory(prefix="tbdtrace-bench-") as d:
        if recorder:
            env.update(
                PYTHONPATH=os.pathsep.join([str(BOOTSTRAP_DIR), str(ROOT)]),
                TBDTRACE_PACKAGE_ROOT=str(ROOT),
                **{SPOOL_ENV: d},
            )
        cmd = [sys.executable, "-m", f"workloads.pytorch.{workload}", *ARGS]
        cmd += ["--steps", str(steps), "--warmup", "1"]
        cp = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
        if cp.returncode:
            raise SystemExit(f"{workload}: exit {cp.returncode}: {cp.stderr[-500:]}")
        m = re.search(r"samples_per_s=([0-9.]+)", cp.stdout + cp.stderr)
        if m is None:
            raise SystemExit(f"{workload}: no samples_per_s in its output")
        n = 0
        if recorder:
            import tbdtrace

            (part,) = Path(d).glob("torchops-*")
            n = tbdtrace.open(part).num_rows("ops")
        return float(m.group(1)), n


def per_op_us(n: int = 20000) -> dict[str, float]:
    """Host time per small op (8x8 add, CPU): plain, empty dispatch mode, recorder."""
    import time

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    from tbdtrace.collector.torch_flops import Recorder

    class Empty(TorchDispatchMode):  # type: ignore[misc]
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            return func(*args, **(kwargs or {}))

    x = torch.randn(8, 8)

    def loop() -> float:
        best = float("inf")
        for _ in range(3):
            t = time.perf_counter()
            for _ in range(n):
                x.add(x)
            best = min(best, (time.perf_counter() - t) / n * 1e6)
        return best

    out = {"plain": loop()}
    with Empty():
        out["empty dispatch mode"] = loop()
    rec = Recorder()
    rec.start()
    out["recorder"] = loop()
    rec.stop()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", nargs="+", default=["resnet50", "transformer"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    print("| workload (tiny, CPU) | plain samples/s | with recorder | ratio | ops recorded/run |")
    print("|---|---|---|---|---|")
    for w in a.workload:
        plain, rec, ops = [], [], 0
        for _ in range(a.runs):
            plain.append(run_once(w, a.steps, False)[0])
            r, ops = run_once(w, a.steps, True)
            rec.append(r)
        p, q = statistics.median(plain), statistics.median(rec)
        print(f"| {w} | {p:.3f} | {q:.3f} | {q / p:.3f} | {ops:,} |")
    print()
    print("| host time per small op (CPU) | us |")
    print("|---|---|")
    for k, v in per_op_us().items():
        print(f"| {k} | {v:.1f} |")


if __name__ == "__main__":
    main()
