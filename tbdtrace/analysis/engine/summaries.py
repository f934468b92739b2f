"""Reductions of a pass's table (or of the context) to the report's figures: the step
statistics, the idle totals, the collective skew per name, the device summary per rank and
the CPU utilization from host samples. Pure functions of their arguments, shared by the
report sections and diff (``tbdtrace.analysis.compare``), which call the passes' ``run``
for the tables.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace.analysis.engine import intervals, shared_arrays
from tbdtrace.analysis.engine.context import Source, of
from tbdtrace.analysis.engine.grouping import decode_device_key
from tbdtrace.arrow_ints import int_column


def _merged_length(m: tuple[np.ndarray, np.ndarray]) -> int:
    return int((m[1] - m[0]).sum())


def measured_steps(steps: pa.Table) -> pa.Table:
    """The measured (non-warm-up) rows of a steps-pass table."""
    return steps.filter(pc.invert(steps.column("warmup")))


# Above this ratio of the slowest measured step's duration to the fastest's, the summary
# warns that the steps are uneven (per-step rate averages then mislead most).
UNEVEN_STEPS_RATIO = 2.0


def step_summary(steps: pa.Table) -> dict[str, Any]:
    """Figures over the measured steps of a steps-pass table.

    ``throughput_per_s``, the throughput: total samples / total duration of the measured
    steps with samples (what the run did). ``step_rate_median_per_s`` /
    ``step_rate_mean_per_s``: median and mean of the per-step rates (samples / step
    duration); the mean is TBD's figure, biased toward fast steps (a few short steps
    raise it however long the others took), so it is never called the throughput.
    Null where no measured step has samples. ``slowest_to_fastest_step``: the longest
    measured step's duration / the shortest's; ``uneven_steps_warning`` says so when it
    is above :data:`UNEVEN_STEPS_RATIO` (else null).
    """
    m = measured_steps(steps)
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


def steps_by_rank(steps: pa.Table) -> list[dict[str, Any]]:
    """:func:`step_summary` of each rank's steps (ranks ascending, null first), with ``rank``."""
    rank = int_column(steps, "rank")
    return [
        {"rank": None if r < 0 else int(r), **step_summary(steps.filter(pa.array(rank == r)))}
        for r in np.unique(rank)
    ]


def idle_totals(tbl: pa.Table) -> dict[str, Any]:
    """Totals over the idle pass's devices of the ns columns and the gap/short-kernel counts."""
    cols = (
        "span_ns",
        "busy_ns",
        "idle_ns",
        "host_bound_ns",
        "queued_ns",
        "sync_wait_ns",
        "gap_count",
        "launch_count",
        "short_kernel_count",
        "short_kernel_ns",
    )
    return {c: int(pc.sum(tbl.column(c)).as_py() or 0) for c in cols}


def collective_skew_summary(tbl: pa.Table) -> list[dict[str, Any]]:
    """Per collective name of the collective_skew pass's table: instances,
    skew_median_ns, skew_p99_ns, skew_max_ns (ns), and the rank most often last (ties:
    the lowest) with how often (``last_rank_share``)."""
    if tbl.num_rows == 0:
        return []
    out = []
    names = tbl.column("name").to_pylist()
    skew = int_column(tbl, "skew_ns")
    last = int_column(tbl, "last_rank")
    for name in dict.fromkeys(names):
        m = np.array([n == name for n in names])
        s, lr = skew[m], last[m]
        ranks, counts = np.unique(lr, return_counts=True)
        top = int(np.argmax(counts))
        out.append(
            {
                "name": name,
                "instances": int(m.sum()),
                "skew_median_ns": float(np.median(s)),
                "skew_p99_ns": float(np.percentile(s, 99)),
                "skew_max_ns": int(s.max()),
                "most_often_last_rank": int(ranks[top]),
                "last_rank_share": float(counts[top] / m.sum()),
            }
        )
    out.sort(key=lambda r: -r["instances"])
    return out


def device_summary_by_rank(ctx: Source, devices: pa.Table) -> list[dict[str, Any]]:
    """The summary of each rank, from the summary pass's per-device table ``devices``
    (ranks ascending, null first), never summed across ranks.

    Per rank: rank, device_count; kernel_count, kernel_time_ns, memcpy_count,
    memcpy_bytes, memset_count (sums over the rank's devices); span_ns = last end - first
    start over its devices; gpu_busy_ns = length of the union of its devices' busy
    intervals (time some device of the rank was busy); gpu_utilization = busy / span.
    """
    ctx = of(ctx)
    keys: dict[int, list[int]] = {}
    for key in shared_arrays.device_keys_of(ctx):
        rank = decode_device_key(int(key))[0]
        keys.setdefault(-1 if rank is None else rank, []).append(int(key))
    drank = [-1 if r is None else r for r in devices.column("rank").to_pylist()]
    out = []
    for r in sorted(keys):
        mine = devices.filter(pa.array([x == r for x in drank]))
        spans = [s for s in (shared_arrays.device_span(ctx, k) for k in keys[r]) if s is not None]
        span = max(e for _, e in spans) - min(s for s, _ in spans) if spans else 0
        ms = [shared_arrays.merged(ctx, k, "all") for k in keys[r]]
        # One device: its merged intervals are the rank's union already.
        busy = _merged_length(
            ms[0]
            if len(ms) == 1
            else intervals.merge(
                np.concatenate([m[0] for m in ms]), np.concatenate([m[1] for m in ms])
            )
        )
        row: dict[str, Any] = {"rank": None if r < 0 else r, "device_count": len(keys[r])}
        for c in ("kernel_count", "kernel_time_ns", "memcpy_count", "memcpy_bytes", "memset_count"):
            row[c] = int(sum(mine.column(c).to_pylist()))
        row.update(span_ns=span, gpu_busy_ns=busy, gpu_utilization=busy / span if span else None)
        out.append(row)
    return out


def cpu_utilization(ctx: Source, steps: pa.Table, metric: str = "cpu_util") -> dict[str, Any]:
    """CPU utilization from ``host_samples`` (metric cpu_util, index -1 = all cores; with
    ``metric="proc_cpu_cores"``, the captured process tree's CPU use in cores).

    Sample i holds the mean utilization over [ts[i-1], ts[i]]. ``mean``: the
    overlap-weighted mean of the samples over the measured steps (over the sampled time
    when the trace has no steps); ``per_step``: [{step, rank, samples (covering the
    step), mean}]; ratio 0..1. None when no sample covers the window.
    """
    ctx = of(ctx)
    hs = ctx.table("host_samples", ["ts_ns", "metric", "index", "value"])
    if hs.num_rows:
        hs = hs.filter(
            pc.and_(
                pc.equal(hs.column("metric").cast(pa.string()), metric),
                pc.equal(hs.column("index"), -1),
            )
        )
    order = np.argsort(int_column(hs, "ts_ns"), kind="stable")
    ts = int_column(hs, "ts_ns")[order]
    val = np.asarray(hs.column("value").to_numpy(), dtype=np.float64)[order]
    # A cpu_util sample is the mean utilization since the previous sample, so sample i
    # covers [ts[i-1], ts[i]]. A window's utilization is the overlap-weighted mean of
    # the samples covering it: exact for windows shorter than the sampling period too.
    lo, hi, v = ts[:-1], ts[1:], val[1:]
    win = measured_steps(steps).select(["rank", "step", "start_ns", "end_ns"])
    ws, we = int_column(win, "start_ns"), int_column(win, "end_ns")
    if not ws.size and ts.size:
        ws, we = ts[:1], ts[-1:]
    per_step = []
    tot_w = tot_wv = 0.0
    for i, (s, e) in enumerate(zip(ws.tolist(), we.tolist(), strict=True)):
        w = np.clip(np.minimum(hi, e) - np.maximum(lo, s), 0, None).astype(np.float64)
        tot_w += float(w.sum())
        tot_wv += float((w * v).sum())
        if i < win.num_rows:
            per_step.append(
                {
                    "rank": win.column("rank")[i].as_py(),
                    "step": int(win.column("step")[i].as_py()),
                    "samples": int((w > 0).sum()),
                    "mean": float((w * v).sum() / w.sum()) if w.sum() else None,
                }
            )
    covering = int(sum(p["samples"] for p in per_step)) if per_step else int(ts.size)
    return {
        "samples": covering,
        "mean": tot_wv / tot_w if tot_w else None,
        "per_step": per_step if ts.size else [],
    }
