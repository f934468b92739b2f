"""Host time the PyTorch memory labelling adds to a training step, on CPU.

For each tiny PyTorch workload, fresh processes run the workload's own training loop
(``--size tiny --device cpu --data device --no-eval``, one OpenMP thread) in three modes,
in alternation (the order rotates every round):

* ``none``: no memory labelling;
* ``posthoc`` (``--torch-memory posthoc``, the default): the step-boundary snapshots
  (:class:`tbdtrace.collector.memory.torch_snapshots.SnapshotRecorder`, started before
  the model is built, as under ``capture``), the only Python post hoc adds to a step;
* ``exact`` (``--torch-memory exact``): the hook tracker
  (:class:`tbdtrace.collector.memory.torch_classify.TorchMemoryTracker`).

No profiler runs: its cost is the same in every mode, and the allocator history that
``capture --backend cupti`` records is native (measured on a GPU by
``scripts/gpu_overhead.sh``). Per step the training thread's CPU time
(``time.thread_time_ns`` around the step function) is taken; per workload and mode the
median over the measured steps of all rounds. Reported: the median step, the added time
per step against ``none`` (with the spread of ``none`` itself between rounds, the noise
floor of that difference), and for post hoc the thread time spent inside its optimizer
post-hook, measured by the hook itself (the exact figure that the difference of medians
can only estimate): on a step without a snapshot, on a snapshot step, on the first step
(with the read of the modules built since start), and per step over a 1,000-step run
(10 snapshots).

    .venv/bin/python bench/torch_memory_overhead.py [--rounds 3] [--steps 6]
        [--workload resnet50 ...] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORKLOADS = (
    "resnet50",
    "inception_v3",
    "transformer",
    "seq2seq",
    "wgan",
    "a3c",
    "deepspeech2",
    "faster_rcnn",
)
MODES = ("none", "posthoc", "exact")
WARMUP = 2  # the first step pays one-time costs (posthoc's module read among them)


def child(workload: str, mode: str, steps: int) -> None:
    """Run one workload in this process; print one JSON line of figures."""
    from workloads import harness

    times: list[int] = []
    plain_train = harness.train

    def timed_train(model: str, framework: str, args: Any, step_fn: Any, *a: Any, **k: Any) -> Any:
        def step(i: int) -> float:
            t0 = time.thread_time_ns()
            loss = step_fn(i)
            times.append(time.thread_time_ns() - t0)
            return float(loss)

        return plain_train(model, framework, args, step, *a, **k)

    harness.train = timed_train  # type: ignore[assignment]
    rec: Any = None
    if mode == "posthoc":
        from tbdtrace.collector.memory.torch_snapshots import SnapshotRecorder

        rec = SnapshotRecorder()
    elif mode == "exact":
        from tbdtrace.collector.memory.torch_classify import TorchMemoryTracker

        rec = TorchMemoryTracker()
    if rec is not None:
        rec.start()
    argv = ["--size", "tiny", "--device", "cpu", "--data", "device", "--no-eval", "--seed", "0"]
    argv += ["--steps", str(steps), "--warmup", str(WARMUP)]
    importlib.import_module(f"workloads.pytorch.{workload}").main(argv)
    if rec is not None:
        rec.stop()
    out: dict[str, Any] = {"step_thread_ns": times[WARMUP:], "first_step_thread_ns": times[0]}
    if mode == "posthoc":
        out.update(rec.stats())
    print("BENCH " + json.dumps(out))


def run_once(workload: str, mode: str, steps: int) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for k in [k for k in env if k.startswith("TBDTRACE_")]:
        env.pop(k)
    cmd = [sys.executable, __file__, "--child", workload, mode, str(steps)]
    cp = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600, cwd=ROOT)
    line = [ln for ln in cp.stdout.splitlines() if ln.startswith("BENCH ")]
    if cp.returncode or not line:
        raise SystemExit(f"{workload} {mode}: exit {cp.returncode}: {cp.stderr[-800:]}")
    return dict(json.loads(line[-1][6:]))


def measure(workload: str, rounds: int, steps: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    for r in range(rounds):
        for m in MODES[r % 3 :] + MODES[: r % 3]:
            runs[m].append(run_once(workload, m, steps))
    med = {m: statistics.median([t for x in runs[m] for t in x["step_thread_ns"]]) for m in MODES}
    none_rounds = [statistics.median(x["step_thread_ns"]) for x in runs["none"]]
    post = runs["posthoc"]
    plain = statistics.median(x["hook_plain_median_thread_ns"] for x in post)
    snap = statistics.median(x["hook_snapshot_median_thread_ns"] for x in post)
    first = statistics.median(x["hook_first_thread_ns"] for x in post)
    # Over a 1,000-step run: 10 snapshots (1st, 2nd, 4th, ..., 512th step), the first
    # with its module read; the other 990 calls only count.
    amortized = (first + 9 * snap + 990 * plain) / 1000
    return {
        "workload": workload,
        "median_step_ms": {m: med[m] / 1e6 for m in MODES},
        "added_ms": {m: (med[m] - med["none"]) / 1e6 for m in ("posthoc", "exact")},
        "none_spread_ms": (max(none_rounds) - min(none_rounds)) / 1e6,
        "posthoc_hook_plain_ms": plain / 1e6,
        "posthoc_hook_snapshot_ms": snap / 1e6,
        "posthoc_hook_first_ms": first / 1e6,
        "posthoc_amortized_ms_per_step_1000": amortized / 1e6,
    }


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=6, help="measured steps per run")
    ap.add_argument("--workload", action="append", choices=WORKLOADS)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ns = ap.parse_args()
    rows = []
    for w in ns.workload or WORKLOADS:
        rows.append(measure(w, ns.rounds, ns.steps))
        r = rows[-1]
        print(
            f"{w}: step {r['median_step_ms']['none']:.1f} ms; posthoc "
            f"{r['added_ms']['posthoc']:+.2f} ms (hook {r['posthoc_hook_plain_ms']:.4f} ms, "
            f"snapshot {r['posthoc_hook_snapshot_ms']:.3f} ms, first "
            f"{r['posthoc_hook_first_ms']:.1f} ms), exact {r['added_ms']['exact']:+.2f} ms; "
            f"none spread {r['none_spread_ms']:.2f} ms",
            flush=True,
        )
    print()
    print(
        "| workload (tiny, CPU) | step, none (ms) | posthoc hook, no snapshot (ms) | "
        "posthoc snapshot (ms) | posthoc first step: modules + snapshot (ms) | "
        "posthoc per step over 1,000 steps (ms) | posthoc: added, medians (ms) | "
        "exact: added, medians (ms) | none: spread between rounds (ms) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['workload']} | {r['median_step_ms']['none']:.1f} | "
            f"{r['posthoc_hook_plain_ms']:.4f} | {r['posthoc_hook_snapshot_ms']:.3f} | "
            f"{r['posthoc_hook_first_ms']:.1f} | "
            f"{r['posthoc_amortized_ms_per_step_1000']:.4f} | "
            f"{r['added_ms']['posthoc']:+.2f} | {r['added_ms']['exact']:+.2f} | "
            f"{r['none_spread_ms']:.2f} |"
        )
    if ns.json:
        ns.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
