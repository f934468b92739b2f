"""One measured step's device activity, event by event: the report's step timeline.

The step shown is the measured step of median duration on the lowest rank (the typical
step, not the fastest or a slow outlier); on every other rank the step with the same
number is taken. Events are the kernels, memory copies and memory sets of that rank that
overlap the step's window, clipped to it. A trace without steps has no step timeline.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace.analysis.engine import outputs, shared_arrays
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.analysis.engine.grouping import decode_device_key
from tbdtrace.analysis.passes import categories
from tbdtrace.analysis.passes import steps as steps_pass
from tbdtrace.arrow_ints import int_column

SCHEMA = outputs.STEP_TIMELINE.arrow_schema()  # declared in analysis/engine/outputs.py


@dataclass(frozen=True)
class StepTimelineConfig:
    # Events kept: beyond this the longest are kept, and the rest only counted.
    max_events: int = 4000
    steps: steps_pass.StepsConfig | None = None


def choose(steps: pa.Table) -> int | None:
    """The step number shown: the median-duration measured step of the lowest rank
    (the earlier of the two middle ones for an even count); None without measured steps."""
    m = steps_pass.measured(steps)
    if m.num_rows == 0:
        return None
    rank = int_column(m, "rank")
    sel = np.flatnonzero(rank == rank.min())
    dur = int_column(m, "duration_ns")[sel]
    order = np.argsort(dur, kind="stable")
    mid = sel[order[(len(order) - 1) // 2]]
    return int(int_column(m, "step")[mid])


def windows(ctx: Source, config: StepTimelineConfig | None = None) -> pa.Table:
    """Windows of the chosen step: rank, step, start_ns, end_ns (one row per rank)."""
    ctx = of(ctx)
    cfg = config or StepTimelineConfig()
    st = steps_pass.run(ctx, cfg.steps)
    n = choose(st)
    if n is None:
        return st.select(["rank", "step", "start_ns", "end_ns"]).slice(0, 0)
    m = steps_pass.measured(st)
    keep = np.flatnonzero(int_column(m, "step") == n)
    return m.take(pa.array(keep)).select(["rank", "step", "start_ns", "end_ns"])


def run(ctx: Source, config: StepTimelineConfig | None = None) -> pa.Table:
    """Events of the chosen step, longest first when more than ``max_events``, else in
    (rank, device, stream, start) order.

    Columns: rank; device_type, device_id, stream_id (where it ran); kind (kernel,
    memcpy, memset); category (tbdtrace.analysis.passes.categories; memcpy/memset for copies and
    sets); offset_ns (start minus the window's start on that rank, clipped at 0, ns);
    duration_ns (the part inside the window, ns).
    """
    ctx = of(ctx)
    return events(ctx, config or StepTimelineConfig())[0]


def events(ctx: Source, cfg: StepTimelineConfig) -> tuple[pa.Table, int]:
    """(:func:`run`'s table, the number of events overlapping the windows before the cut)."""
    ctx = of(ctx)
    win = windows(ctx, cfg)
    if win.num_rows == 0:
        return SCHEMA.empty_table(), 0
    parts = []
    for r, ws, we in zip(
        int_column(win, "rank"),
        int_column(win, "start_ns"),
        int_column(win, "end_ns"),
        strict=True,
    ):
        for table in ("kernels", "memcpy", "memset"):
            for key, idx in _overlapping(ctx, table, int(r), int(ws), int(we)):
                parts.append(_part(ctx, table, key, idx, int(ws), int(we)))
    if not parts:
        return SCHEMA.empty_table(), 0
    out = pa.concat_tables(parts)
    total = out.num_rows
    if total > cfg.max_events:
        order = np.argsort(-out.column("duration_ns").to_numpy(), kind="stable")
        out = out.take(pa.array(order[: cfg.max_events]))
    keys = [
        int_column(out, "offset_ns"),
        int_column(out, "stream_id"),
        int_column(out, "device_id"),
        int_column(out, "rank"),
    ]
    return out.take(pa.array(np.lexsort(keys))), total


def _overlapping(
    ctx: AnalysisContext, table: str, rank: int, ws: int, we: int
) -> list[tuple[int, npt.NDArray[np.int64]]]:
    """(device key, rows) of ``table`` on ``rank``'s devices (every device for rank -1:
    no rank) that overlap [ws, we), from the per-device arrays passes share (_frame)."""
    found = []
    for key, rows in shared_arrays.device_rows(ctx, table):
        key_rank = decode_device_key(key)[0]
        if rank != -1 and (-1 if key_rank is None else key_rank) != rank:
            continue
        s, e = shared_arrays.spans(ctx, table, key)
        hit = np.flatnonzero((s < we) & (e > ws))
        if hit.size:
            found.append((key, hit if isinstance(rows, slice) else rows[hit]))
    return found


def _part(
    ctx: AnalysisContext, table: str, key: int, idx: npt.NDArray[np.int64], ws: int, we: int
) -> pa.Table:
    n = len(idx)
    rank, dtype, dev = decode_device_key(key)
    # The one column no other pass reads: decoded for this call only.
    stream = ctx.table(table, ["stream_id"], cache=False).column(0).take(pa.array(idx))
    s = np.maximum(shared_arrays.ints(ctx, table, "start_ns")[idx], ws)
    e = np.minimum(shared_arrays.ints(ctx, table, "end_ns")[idx], we)
    if table == "kernels":
        codes, labels = shared_arrays.codes(ctx, "kernels", "name")
        lut = np.array([categories.classify(lbl) for lbl in labels] or ["other"])
        cats = pa.array(lut[codes[idx]].tolist(), pa.string())
    else:
        cats = pa.array([table] * n, pa.string())
    return pa.table(
        {
            "rank": pa.array([rank] * n, pa.int32()),
            "device_type": pa.array([dtype] * n, pa.string()),
            "device_id": pa.array([dev] * n, pa.int32()),
            "stream_id": stream.cast(pa.int64()),
            "kind": pa.array(["kernel" if table == "kernels" else table] * n),
            "category": cats,
            "offset_ns": s - ws,
            "duration_ns": e - s,
        },
        schema=SCHEMA,
    )
