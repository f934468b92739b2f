"""Training steps: duration, samples and throughput per step; the measured window.

A step is measured unless it is a warm-up step. Warm-up comes from the ``steps.warmup``
column; where a rank's steps carry no flag at all, ``StepsConfig.warmup_steps`` marks the
first K steps of that rank as warm-up (default 0). Throughput of a step is
samples / duration (samples/s), null when the step has no samples.

A trace without a ``steps`` table (a CUPTI capture of a script that marks its iterations
with NVTX, or an older trace) gets its steps from the ``markers`` table: every range named
``step N`` with an integer N (``step -1``, ``step 12``) is step N of its rank and process,
with source ``nvtx`` (``engine/window.py``, :func:`recorded_steps`). A negative N marks a
warm-up step; where a rank has no negative N, its flags stay unknown so
``StepsConfig.warmup_steps`` applies. Samples are unknown (null).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace.analysis.engine import data_wait, outputs, summaries, window
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.arrow_ints import int_column


@dataclass(frozen=True)
class StepsConfig:
    # Warm-up steps per rank when the trace does not flag any (the first K by step number).
    warmup_steps: int = 0


SCHEMA = outputs.STEPS.arrow_schema()  # declared in analysis/engine/outputs.py


def run(ctx: Source, config: StepsConfig | None = None) -> pa.Table:
    """One row per step, ordered by (rank, start).

    Columns: rank; step; start_ns, end_ns, duration_ns (ns); samples (count, null when
    unknown); throughput_per_s (samples/s, null without samples or for a zero-length
    step); warmup (the effective flag after the config default); source.
    """
    cfg = config or StepsConfig()
    t = window.recorded_steps(of(ctx))  # in (rank, start, step) order
    if t.num_rows == 0:
        return SCHEMA.empty_table()
    rank = int_column(t, "rank")
    start, end = int_column(t, "start_ns"), int_column(t, "end_ns")
    step = int_column(t, "step")
    dur = end - start
    samples = t.column("samples")
    s_f = pc.fill_null(samples, 0).to_numpy().astype(np.float64)
    has = ~np.asarray(samples.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    with np.errstate(divide="ignore", invalid="ignore"):
        tput = np.where(has & (dur > 0), s_f * 1e9 / np.where(dur > 0, dur, 1), np.nan)
    warm = _warmup(t, rank, cfg.warmup_steps)
    return pa.table(
        {
            "rank": t.column("rank"),
            "step": step,
            "start_ns": start,
            "end_ns": end,
            "duration_ns": dur,
            "samples": samples,
            "throughput_per_s": pa.array(tput, mask=np.isnan(tput)),
            "warmup": warm,
            "source": t.column("source").cast(pa.string()),
            "data_wait_ns": _data_wait(of(ctx), rank, start, end),
        },
        schema=SCHEMA,
    )


def _data_wait(
    ctx: AnalysisContext, rank: np.ndarray, start: np.ndarray, end: np.ndarray
) -> pa.Array:
    """Each step's data wait (engine/data_wait.py); nulls when the trace records none."""
    wait = data_wait.per_step(ctx, rank, start, end)
    return pa.nulls(start.size, pa.int64()) if wait is None else pa.array(wait, pa.int64())


def _warmup(t: pa.Table, rank: np.ndarray, k: int) -> np.ndarray:
    flag = t.column("warmup")
    known = ~np.asarray(flag.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    out = np.asarray(pc.fill_null(flag, False).to_numpy(zero_copy_only=False), dtype=bool)
    for r in np.unique(rank):
        sel = rank == r
        if not known[sel].any() and k > 0:
            idx = np.flatnonzero(sel)  # already in start order within the rank
            out[idx[:k]] = True
    return out


def windows(ctx: Source, config: StepsConfig | None = None) -> pa.Table:
    """Measured steps as windows: rank, step, start_ns, end_ns."""
    return summaries.measured_steps(run(ctx, config)).select(["rank", "step", "start_ns", "end_ns"])


# The reductions of this pass's table live in the engine (engine/summaries.py).
measured = summaries.measured_steps
summarize = summaries.step_summary
by_rank = summaries.steps_by_rank
UNEVEN_STEPS_RATIO = summaries.UNEVEN_STEPS_RATIO
