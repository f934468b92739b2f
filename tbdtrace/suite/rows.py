"""One row of the TBD table, computed from a job's trace.

Throughput follows TBD: per measured step (warm-up excluded), samples / step duration;
the row gives the median over those steps. The other figures come from the analysis
passes and report sections (:mod:`tbdtrace.suite.metrics`); a figure no pass provides
for this trace stays empty (null), never estimated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tbdtrace import schema
from tbdtrace.suite import metrics
from tbdtrace.trace import Trace


@dataclass(frozen=True)
class RowColumn:
    name: str
    unit: str  # "text", "count", "samples/s", "ns", "ratio", "bytes", "value"
    doc: str


_MEM = tuple(
    RowColumn(f"{c}_bytes", "bytes", f"{c.replace('_', ' ')} at the measured steps' memory peak")
    for c in schema.MEMORY_CATEGORIES
)

COLUMNS: tuple[RowColumn, ...] = (
    RowColumn("model", "text", "model name (workloads/registry.py)"),
    RowColumn("framework", "text", "pytorch, tensorflow or mxnet"),
    RowColumn("batch_size", "count", "samples per step as run (null: unknown)"),
    RowColumn("size", "text", "workload size: tiny, small or paper"),
    RowColumn("nproc", "count", "data-parallel ranks of the run (batch_size is per rank)"),
    RowColumn("precision", "text", "training precision: fp32, tf32, bf16 or fp16 (mixed)"),
    RowColumn("compiled", "text", "yes: torch.compile / XLA / hybridize was asked for; no"),
    RowColumn(
        "data",
        "text",
        "input pipeline (--data): host = the framework's loader building batches ahead in "
        "workers; device = a pool of batches kept on the device (no input cost in the step)",
    ),
    RowColumn(
        "status",
        "text",
        "ok, failed or unsupported; with --paper also out_of_memory and skipped (error says why)",
    ),
    RowColumn("measured_steps", "count", "steps after warm-up with a duration"),
    RowColumn(
        "throughput_samples_per_s",
        "samples/s",
        "total samples / total duration of the measured steps, from the unprofiled run "
        "when the job had one; with several ranks the sum of the ranks' figures",
    ),
    RowColumn("throughput_min_samples_per_s", "samples/s", "slowest measured step's rate"),
    RowColumn("throughput_max_samples_per_s", "samples/s", "fastest measured step's rate"),
    RowColumn(
        "throughput_per_rank_samples_per_s",
        "samples/s",
        "throughput_samples_per_s / nproc",
    ),
    RowColumn(
        "scaling_efficiency",
        "ratio",
        "throughput with nproc ranks / (nproc x throughput of the same run with one rank); "
        "TBD's scaling figure (null without a one-rank row in the table)",
    ),
    RowColumn("step_time_ns", "ns", "median measured step duration (median over ranks)"),
    RowColumn(
        "profiled_throughput_samples_per_s",
        "samples/s",
        "throughput of the profiled run (null: the job had no profiled run)",
    ),
    RowColumn(
        "profiler_slowdown",
        "ratio",
        "profiled median step time / unprofiled median step time (1.0: no overhead)",
    ),
    RowColumn(
        "gpu_utilization",
        "ratio",
        "GPU compute utilization over the measured steps of the profiled run (0..1; null "
        "without GPU kernels)",
    ),
    RowColumn(
        "cpu_utilization",
        "ratio",
        "CPU time of the workload's process tree over the measured steps / (wall time x "
        "the machine's logical CPUs) (0..1)",
    ),
    RowColumn(
        "cpu_cores_used", "value", "the same CPU time in cores (1.0: one core busy throughout)"
    ),
    RowColumn("fp32_efficiency", "ratio", "achieved FP32 FLOP/s over peak (0..1)"),
    RowColumn(
        "peak_memory_bytes", "bytes", "peak live memory of the measured steps (allocated level)"
    ),
    *_MEM,
    RowColumn(
        "quality_metric",
        "text",
        "held-out quality measure: accuracy, bleu, cer, map50, moment_distance, episode_reward",
    ),
    RowColumn("quality", "value", "the last held-out evaluation (workloads/quality.py)"),
    RowColumn("quality_target", "value", "the workload's quality goal for --to-quality"),
    RowColumn(
        "time_to_quality_ns",
        "ns",
        "wall time from the first step to the evaluation that met the target, evaluations "
        "and capture overhead included (null: not met)",
    ),
    RowColumn("loss_first", "value", "loss of the first step"),
    RowColumn("loss_last", "value", "loss of the last step"),
    RowColumn("backend", "text", "capture backend recorded in the trace"),
    RowColumn("wall_ns", "ns", "wall time of the job's process, start-up included"),
    RowColumn("trace", "text", "the job's trace directory"),
    RowColumn("error", "text", "why the job failed, or which figures a pass could not give"),
)
COLUMN_NAMES = tuple(c.name for c in COLUMNS)


def empty_row(**known: Any) -> dict[str, Any]:
    """A row with every column null except ``known``."""
    row = dict.fromkeys(COLUMN_NAMES)
    unknown = set(known) - set(COLUMN_NAMES)
    if unknown:
        raise KeyError(f"not table columns: {sorted(unknown)}")
    row.update(known)
    return row


@dataclass(frozen=True)
class Steps:
    """The measured steps of a trace, in step order."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    samples: np.ndarray  # float, NaN where unknown
    losses: list[float | None]  # every step's loss, warm-up included
    ranks: np.ndarray  # int64 rank of each measured step, -1 where the trace has none

    @property
    def window(self) -> tuple[int, int] | None:
        """[first measured start, last measured end], or None without measured steps."""
        if not self.start_ns.size:
            return None
        return int(self.start_ns.min()), int(self.end_ns.max())


def measured_steps(tr: Trace) -> Steps:
    """Steps not flagged warm-up, from the harness records when the trace has them.

    A capture may see each step twice (harness record and NVTX range); the harness
    source, which carries the samples, is preferred.
    """
    tbl = tr.table(
        "steps", ["step", "start_ns", "end_ns", "samples", "warmup", "loss", "source", "rank"]
    ).to_pydict()
    rows = list(
        zip(
            tbl["step"],
            tbl["start_ns"],
            tbl["end_ns"],
            tbl["samples"],
            tbl["warmup"],
            tbl["loss"],
            tbl["source"],
            tbl["rank"],
            strict=True,
        )
    )
    if any(r[6] == "harness" for r in rows):
        rows = [r for r in rows if r[6] == "harness"]
    rows.sort(key=lambda r: (r[1], r[0]))
    losses = [r[5] for r in rows]
    meas = [r for r in rows if not r[4] and r[2] > r[1]]
    return Steps(
        np.array([r[1] for r in meas], dtype=np.int64),
        np.array([r[2] for r in meas], dtype=np.int64),
        np.array([np.nan if r[3] is None else r[3] for r in meas], dtype=float),
        losses,
        np.array([-1 if r[7] is None else r[7] for r in meas], dtype=np.int64),
    )


def throughput(steps: Steps) -> tuple[float | None, int | None]:
    """(samples/s, median step ns) over measured steps; None when unknown.

    Per rank, total samples / total duration of its measured steps with samples (what
    the run did, not an average of per-step rates, which fast steps bias upward);
    summed over ranks (each rank trains on its own batches)."""
    if not steps.start_ns.size:
        return None, None
    totals, durs = [], []
    for r in np.unique(steps.ranks):
        mine = steps.ranks == r
        dur = steps.end_ns[mine] - steps.start_ns[mine]
        has = np.isfinite(steps.samples[mine])
        t = int(dur[has].sum())
        totals.append(float(steps.samples[mine][has].sum()) * 1e9 / t if t else None)
        durs.append(float(np.median(dur)))
    total = None if any(x is None for x in totals) else float(sum(totals))  # type: ignore[arg-type]
    return total, int(np.median(durs))


def add_scaling(rows: list[dict[str, Any]]) -> None:
    """Fill ``throughput_per_rank_samples_per_s`` and ``scaling_efficiency`` in place: each
    row against the one-rank row of the same run (model, framework, batch, size,
    precision, compilation, input pipeline)."""

    def key(r: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(r.get(c) for c in SCALING_KEY)

    one = {
        key(r): r["throughput_samples_per_s"]
        for r in rows
        if r.get("nproc") == 1 and r.get("status") == "ok" and r.get("throughput_samples_per_s")
    }
    for r in rows:
        rate, n = r.get("throughput_samples_per_s"), r.get("nproc")
        if rate is None or not n:
            continue
        r["throughput_per_rank_samples_per_s"] = rate / n
        base = one.get(key(r))
        if base:
            r["scaling_efficiency"] = rate / (n * base)


# What makes two rows the same run at different rank counts.
SCALING_KEY = ("model", "framework", "batch_size", "size", "precision", "compiled", "data")


def rates(steps: Steps) -> np.ndarray:
    """samples/s of each measured step with known samples."""
    rate = steps.samples / ((steps.end_ns - steps.start_ns) / 1e9)
    return rate[np.isfinite(rate)]


def protocol(unprofiled: dict[str, Any], profiled: dict[str, Any] | None) -> dict[str, Any]:
    """The row of a job run twice (docs/WORKLOADS.md, "Protocol"): throughput, its spread,
    step time and CPU utilization from the unprofiled run's cells; the analysis figures
    (GPU utilization, FLOPs, memory) from the profiled run's; the profiled throughput
    and the profiler's slowdown beside them. ``profiled`` None: one unprofiled run."""
    row = dict(profiled if profiled is not None else unprofiled)
    row.update(profiled_throughput_samples_per_s=None, profiler_slowdown=None)
    for c in (
        "measured_steps",
        "throughput_samples_per_s",
        "throughput_min_samples_per_s",
        "throughput_max_samples_per_s",
        "step_time_ns",
        "cpu_utilization",
        "cpu_cores_used",
    ):
        row[c] = unprofiled.get(c)
    if profiled is not None:
        row["profiled_throughput_samples_per_s"] = profiled.get("throughput_samples_per_s")
        slow, fast = profiled.get("step_time_ns"), unprofiled.get("step_time_ns")
        row["profiler_slowdown"] = slow / fast if slow and fast else None
    return row


def compute(tr: Trace) -> tuple[dict[str, Any], list[str]]:
    """The trace-derived cells of a row, and notes on figures that could not be computed."""
    steps = measured_steps(tr)
    rate, step_ns = throughput(steps)
    each = rates(steps)
    cells: dict[str, Any] = {
        "measured_steps": int(steps.start_ns.size),
        "throughput_samples_per_s": rate,
        "throughput_min_samples_per_s": float(each.min()) if each.size else None,
        "throughput_max_samples_per_s": float(each.max()) if each.size else None,
        "step_time_ns": step_ns,
        "loss_first": steps.losses[0] if steps.losses else None,
        "loss_last": steps.losses[-1] if steps.losses else None,
        "backend": tr.meta.get("backend"),
    }
    notes: list[str] = []
    if not steps.losses:
        notes.append("trace has no steps")
    for fn in metrics.PROVIDERS:
        try:
            got = fn(tr, steps.window)
            notes += got.pop(metrics.NOTES, [])
            cells.update(got)
        except Exception as e:  # a pass failing on one trace must not sink the table
            notes.append(f"{fn.__name__}: {type(e).__name__}: {e}")
    return cells, notes
