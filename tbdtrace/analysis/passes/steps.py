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
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace.analysis.engine import data_wait, outputs, window
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


def measured(steps: pa.Table) -> pa.Table:
    """The measured (non-warm-up) rows of a :func:`run` table."""
    return steps.filter(pc.invert(steps.column("warmup")))


def windows(ctx: Source, config: StepsConfig | None = None) -> pa.Table:
    """Measured steps as windows: rank, step, start_ns, end_ns."""
    return measured(run(ctx, config)).select(["rank", "step", "start_ns", "end_ns"])


# Above this ratio of the slowest measured step's duration to the fastest's, the summary
# warns that the steps are uneven (per-step rate averages then mislead most).
UNEVEN_STEPS_RATIO = 2.0


def summarize(steps: pa.Table) -> dict[str, Any]:
    """Figures over the measured steps of a :func:`run` table.

    ``throughput_per_s``, the throughput: total samples / total duration of the measured
    steps with samples (what the run did). ``step_rate_median_per_s`` /
    ``step_rate_mean_per_s``: median and mean of the per-step rates (samples / step
    duration); the mean is TBD's figure, biased toward fast steps (a few short steps
    raise it however long the others took), so it is never called the throughput.
    Null where no measured step has samples. ``slowest_to_fastest_step``: the longest
    measured step's duration / the shortest's; ``uneven_steps_warning`` says so when it
    is above :data:`UNEVEN_STEPS_RATIO` (else null).
    """
    m = measured(steps)
    dur = np.asarray(m.column("duration_ns").to_numpy(), dtype=np.int64)
    tp = m.column("throughput_per_s")
    tpv = np.asarray(tp.drop_null().to_numpy(), dtype=np.float64)
    smp = m.column("samples")
    has = ~np.asarray(smp.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    samples = np.asarray(pc.fill_null(smp, 0).to_numpy(), dtype=np.int64)
    with_s_ns = int(dur[has].sum())
    wait = m.column("data_wait_ns")
    waits = np.asarray(wait.drop_null().to_numpy(), dtype=np.int64)
    known = waits.size == m.num_rows and waits.size > 0
    ratio = _slowest_to_fastest(dur)
    return {
        "step_count": steps.num_rows,
        "warmup_count": steps.num_rows - m.num_rows,
        "measured_count": m.num_rows,
        "measured_ns": int(dur.sum()),
        "step_median_ns": float(np.median(dur)) if dur.size else None,
        "step_mean_ns": float(dur.mean()) if dur.size else None,
        "step_min_ns": int(dur.min()) if dur.size else None,
        "step_max_ns": int(dur.max()) if dur.size else None,
        "slowest_to_fastest_step": ratio,
        "uneven_steps_warning": _uneven(dur, ratio),
        "samples": int(samples[has].sum()) if has.any() else None,
        "throughput_per_s": (
            int(samples[has].sum()) * 1e9 / with_s_ns if has.any() and with_s_ns else None
        ),
        "step_rate_median_per_s": float(np.median(tpv)) if tpv.size else None,
        "step_rate_mean_per_s": float(tpv.mean()) if tpv.size else None,
        "data_wait_ns": int(waits.sum()) if known else None,
        "data_wait_median_ns": float(np.median(waits)) if known else None,
        "data_wait_share": int(waits.sum()) / int(dur.sum()) if known and dur.sum() else None,
    }


def _slowest_to_fastest(dur: np.ndarray) -> float | None:
    """The longest duration / the shortest (null for under two steps or a zero-length one)."""
    if dur.size < 2 or int(dur.min()) <= 0:
        return None
    return int(dur.max()) / int(dur.min())


def _uneven(dur: np.ndarray, ratio: float | None) -> str | None:
    if ratio is None or ratio <= UNEVEN_STEPS_RATIO:
        return None
    return (
        f"uneven steps: the slowest measured step took {ratio:.1f}x the fastest "
        f"({int(dur.max()) / 1e6:,.3f} ms vs {int(dur.min()) / 1e6:,.3f} ms); the "
        "throughput is total samples / total time (the mean of per-step rates "
        "overstates it)"
    )


def by_rank(steps: pa.Table) -> list[dict[str, Any]]:
    """:func:`summarize` of each rank's steps (ranks ascending, null first), with ``rank``."""
    rank = int_column(steps, "rank")
    return [
        {"rank": None if r < 0 else int(r), **summarize(steps.filter(pa.array(rank == r)))}
        for r in np.unique(rank)
    ]
