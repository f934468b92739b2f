"""The events of one measured step, clipped to its window on each rank: what the
``step_timeline`` pass returns and the report's step timeline shows.

The step shown is the measured step of median duration on the lowest rank (the typical
step, not the fastest or a slow outlier); on every other rank the step with the same
number is taken. Events are the kernels, memory copies and memory sets of that rank that
overlap the step's window, clipped to it. Every function takes the steps pass's table.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace.analysis.engine import categories, outputs, shared_arrays
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.analysis.engine.grouping import decode_device_key
from tbdtrace.analysis.engine.intervals import is_sorted
from tbdtrace.analysis.engine.summaries import measured_steps
from tbdtrace.arrow_ints import int_column

SCHEMA = outputs.STEP_TIMELINE.arrow_schema()  # declared in analysis/engine/outputs.py
# A device's rows out of start order are sorted once for every window's search up to
# this many rows (the sorted copies: 32 bytes a row); a larger one is scanned per window.
_SORTED_ROWS = 1 << 22
I64 = npt.NDArray[np.int64]
# Per (table, device key): running maximum of the ends (None: the rows are scanned), the
# order that sorts the rows by start (None: already sorted), starts, ends in that order.
Reach = tuple[I64 | None, I64 | None, I64, I64]


def choose(steps: pa.Table) -> int | None:
    """The step number shown, from the steps pass's table ``steps``: the median-duration
    measured step of the lowest rank (the earlier of the two middle ones for an even
    count); None without measured steps."""
    m = measured_steps(steps)
    if m.num_rows == 0:
        return None
    rank = int_column(m, "rank")
    sel = np.flatnonzero(rank == rank.min())
    dur = int_column(m, "duration_ns")[sel]
    order = np.argsort(dur, kind="stable")
    mid = sel[order[(len(order) - 1) // 2]]
    return int(int_column(m, "step")[mid])


def windows(steps: pa.Table) -> pa.Table:
    """Windows of the chosen step: rank, step, start_ns, end_ns (one row per rank), from
    the steps pass's table ``steps``."""
    n = choose(steps)
    if n is None:
        return steps.select(["rank", "step", "start_ns", "end_ns"]).slice(0, 0)
    m = measured_steps(steps)
    keep = np.flatnonzero(int_column(m, "step") == n)
    return m.take(pa.array(keep)).select(["rank", "step", "start_ns", "end_ns"])


def events(ctx: Source, steps: pa.Table, max_events: int) -> tuple[pa.Table, int]:
    """(the step_timeline pass's table, the number of events overlapping the windows
    before the cut), for the steps pass's table ``steps``: the longest ``max_events``
    events when there are more."""
    ctx = of(ctx)
    win = windows(steps)
    if win.num_rows == 0:
        return SCHEMA.empty_table(), 0
    parts = []
    # What every part of a table reads, made on its first part: the stream column (the
    # one column no other pass reads: decoded for this call only) and, for kernels, the
    # category of each name.
    columns: dict[str, tuple[pa.ChunkedArray, pa.Array | None]] = {}
    reach: dict[tuple[str, int], Reach] = {}
    for r, ws, we in zip(
        int_column(win, "rank"),
        int_column(win, "start_ns"),
        int_column(win, "end_ns"),
        strict=True,
    ):
        for table in ("kernels", "memcpy", "memset"):
            for key, idx in _overlapping(ctx, table, int(r), int(ws), int(we), reach):
                if table not in columns:
                    columns[table] = _columns(ctx, table)
                parts.append(_part(ctx, table, key, idx, int(ws), int(we), *columns[table]))
    if not parts:
        return SCHEMA.empty_table(), 0
    out = pa.concat_tables(parts)
    total = out.num_rows
    if total > max_events:
        order = np.argsort(-out.column("duration_ns").to_numpy(), kind="stable")
        out = out.take(pa.array(order[:max_events]))
    keys = [
        int_column(out, "offset_ns"),
        int_column(out, "stream_id"),
        int_column(out, "device_id"),
        int_column(out, "rank"),
    ]
    return out.take(pa.array(np.lexsort(keys))), total


def _overlapping(
    ctx: AnalysisContext,
    table: str,
    rank: int,
    ws: int,
    we: int,
    bounds: dict[tuple[str, int], Reach],
) -> list[tuple[int, npt.NDArray[np.int64]]]:
    """(device key, rows) of ``table`` on ``rank``'s devices (every device for rank -1:
    no rank) that overlap [ws, we), from the per-device arrays passes share (_frame);
    ``bounds`` keeps each device's running maximum of ends (its rows in start order)
    between calls."""
    found = []
    for key, rows in shared_arrays.device_rows(ctx, table):
        key_rank = decode_device_key(key)[0]
        if rank != -1 and (-1 if key_rank is None else key_rank) != rank:
            continue
        s, e = shared_arrays.spans(ctx, table, key)
        if (table, key) not in bounds:
            # Rows in start order (as traces are written): the running maximum of the
            # ends bounds which rows can reach a window, so a window's search reads its
            # own stretch of rows instead of the whole device (533 windows of one step
            # over 10M kernels: 4 s). Rows out of order (kernels of several streams, each
            # in order) are put in start order once, for every window, up to
            # _SORTED_ROWS rows (the copies' memory); beyond, each window scans them.
            in_order, order = is_sorted(s), None
            if not in_order and s.size <= _SORTED_ROWS:
                order = np.argsort(s, kind="stable")
                s, e, in_order = s[order], e[order], True
            bounds[(table, key)] = (np.maximum.accumulate(e) if in_order else None, order, s, e)
        reach, order, s, e = bounds[(table, key)]
        if reach is None:
            hit = np.flatnonzero((s < we) & (e > ws))
        else:
            lo = int(np.searchsorted(reach, ws, side="right"))
            hi = int(np.searchsorted(s, we, side="left"))
            hit = lo + np.flatnonzero(e[lo:hi] > ws) if hi > lo else np.zeros(0, np.int64)
            if order is not None:
                hit = np.sort(order[hit])  # the rows in file order, as a scan finds them
        if hit.size:
            found.append((key, hit if isinstance(rows, slice) else rows[hit]))
    return found


def _columns(ctx: AnalysisContext, table: str) -> tuple[pa.ChunkedArray, pa.Array | None]:
    """``table``'s stream column, and for kernels the category of each name code."""
    stream = ctx.table(table, ["stream_id"], cache=False).column(0)
    if table != "kernels":
        return stream, None
    _, labels = shared_arrays.codes(ctx, "kernels", "name")
    return stream, pa.array([categories.classify(lbl) for lbl in labels] or ["other"], pa.string())


def _part(
    ctx: AnalysisContext,
    table: str,
    key: int,
    idx: npt.NDArray[np.int64],
    ws: int,
    we: int,
    streams: pa.ChunkedArray,
    lut: pa.Array | None,
) -> pa.Table:
    n = len(idx)
    rank, dtype, dev = decode_device_key(key)
    stream = streams.take(pa.array(idx))
    s = np.maximum(shared_arrays.ints(ctx, table, "start_ns")[idx], ws)
    e = np.minimum(shared_arrays.ints(ctx, table, "end_ns")[idx], we)
    if lut is not None:
        codes, _ = shared_arrays.codes(ctx, "kernels", "name")
        cats = lut.take(pa.array(codes[idx]))  # each name's category, no string per row
    else:
        cats = _repeat(table, pa.string(), n)
    return pa.table(
        {
            "rank": _repeat(rank, pa.int32(), n),
            "device_type": _repeat(dtype, pa.string(), n),
            "device_id": _repeat(dev, pa.int32(), n),
            "stream_id": stream.cast(pa.int64()),
            "kind": _repeat("kernel" if table == "kernels" else table, pa.string(), n),
            "category": cats,
            "offset_ns": s - ws,
            "duration_ns": e - s,
        },
        schema=SCHEMA,
    )


def _repeat(value: object, typ: pa.DataType, n: int) -> pa.Array:
    """``n`` rows of ``value`` (None: nulls) of type ``typ``."""
    return pa.repeat(pa.scalar(value, typ), n)
