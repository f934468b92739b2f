"""Top kernels (or ops, or categories) by device time, with who launched them.

``run(trace, HotspotsConfig(by="kernel"))`` extends the kernels pass with the category,
the most common launch configuration, and the op / module / annotation range that
launched most of each kernel's time (see :mod:`tbdtrace.analysis.engine.attribution`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace.analysis.engine import outputs, shared_arrays, source_lines
from tbdtrace.analysis.engine.attribution import ATTRIBUTION, Beside, attribute
from tbdtrace.analysis.engine.cache import Entry
from tbdtrace.analysis.engine.categories import name_categories
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.analysis.engine.grouping import group_sum, row_codes
from tbdtrace.analysis.passes import categories, kernels
from tbdtrace.arrow_ints import int_values

BY = ("kernel", "op", "category", "source")


@dataclass(frozen=True)
class HotspotsConfig:
    top: int | None = 20  # rows kept, largest total first; None = all
    by: str = "kernel"  # kernel, op, category or source


def run(ctx: Source, config: HotspotsConfig | None = None) -> pa.Table:
    """The top rows by total device time.

    by=kernel: the kernels pass columns (name, count, total_ns, mean/median/min/max/std_ns,
    share) plus category; launch (most common "grid=(x,y,z) block=(x,y,z)", null when the
    source has none); op, op_share (the op with most of this kernel's time and that share,
    ratio 0..1; null when none is attributed); module; marker; source, source_share (the
    user source line with most of its time, null without Python stacks).
    by=op: op ("<unattributed>" for kernels no op claims), kernel_count, distinct_kernels,
    total_ns, mean_ns, share, top_kernel. by=category: the categories pass.
    by=source: per user source line (``hotspots.by_source``; empty when the trace has no
    Python stacks, see :func:`has_stacks`).
    """
    ctx = of(ctx)
    cfg = config or HotspotsConfig()
    if cfg.by not in BY:
        raise ValueError(f"by must be one of {BY}, not {cfg.by!r}")
    if cfg.by == "category":
        tbl = categories.run(ctx)
    else:
        tbl = {"kernel": by_kernel, "op": by_op, "source": by_source}[cfg.by](ctx)
    return tbl if cfg.top is None else tbl.slice(0, cfg.top)


def kernels_and_ops(ctx: Source, top: int | None = 20) -> tuple[pa.Table, pa.Table]:
    """by=kernel and by=op tables (what the report shows)."""
    ctx = of(ctx)
    kt, ot = by_kernel(ctx), by_op(ctx)
    return (kt, ot) if top is None else (kt.slice(0, top), ot.slice(0, top))


BY_KERNEL: Entry[pa.Table] = Entry("hotspots.by_kernel", "the by=kernel table")


def by_kernel(ctx: Source) -> pa.Table:
    """The by=kernel table (computed once per trace: the launch codes it groups by are
    not kept, 80 MB per 10M kernels)."""
    ctx = of(ctx)
    return ctx.cache.get(BY_KERNEL, lambda: _by_kernel(ctx))


def _by_kernel(ctx: AnalysisContext) -> pa.Table:
    base = _kernel_stats(ctx)
    if base.num_rows == 0:
        return outputs.HOTSPOTS_KERNEL.empty_table()
    att = attribute(ctx)
    name, labels = shared_arrays.codes(ctx, "kernels", "name")
    dur = shared_arrays.durations(ctx, "kernels")
    names = [x if x is not None else "<unknown>" for x in labels]
    total = np.bincount(name, weights=dur, minlength=len(labels))
    launch, launch_label = _launch_codes(ctx)
    src = source_lines.attribute(ctx)
    # The launch configuration is the most common one by instances (each row weighs 1:
    # no weight); op, module and marker are the ones holding most of the kernel's time.
    count = np.bincount(name, minlength=len(labels))
    extra: dict[str, dict[str, Any]] = {}
    for col, codes, labs, weight, tot in (
        ("op", att.op, att.op_labels.__getitem__, dur, total),
        ("module", att.module, att.module_labels.__getitem__, dur, total),
        ("marker", att.marker, att.marker_labels.__getitem__, dur, total),
        ("source", src.code, lambda c: src.sources[c][0], dur, total),
        ("launch", launch, launch_label, None, count),
    ):
        best = _dominant(name, codes, weight, tot)
        extra[col] = {names[n]: (labs(c), sh) for n, (c, sh) in best.items()}
    row_names = base.column("name").to_pylist()
    cat = name_categories(ctx)
    out = base.append_column(
        "category", pa.array([cat.get(n, "other") for n in row_names], pa.string())
    )
    out = out.append_column(
        "launch",
        pa.array([extra["launch"].get(n, (None, None))[0] for n in row_names], pa.string()),
    )
    for col in ("op", "module", "marker"):
        got = [extra[col].get(n, (None, None)) for n in row_names]
        out = out.append_column(col, pa.array([g[0] for g in got], pa.string()))
        if col == "op":
            out = out.append_column("op_share", pa.array([g[1] for g in got], pa.float64()))
    got = [extra["source"].get(n, (None, None)) for n in row_names]
    out = out.append_column("source", pa.array([g[0] for g in got], pa.string()))
    return out.append_column("source_share", pa.array([g[1] for g in got], pa.float64()))


# Kernels whose per-name statistics are computed on a second thread while this one
# attributes them (the 1M-kernel file: ~0.07 s of partitions and reductions, which run
# without the GIL); a table of more is done one after the other (its durations are not
# kept, KEEP_DURATIONS_ROWS, and its statistics' temporaries would add to the
# attribution's peak), and so is a small one (a thread costs more than it saves).
STATS_BESIDE_ROWS = (1 << 16, shared_arrays.KEEP_DURATIONS_ROWS - 1)


def _kernel_stats(ctx: AnalysisContext) -> pa.Table:
    """``kernels.run(ctx)``, and the attribution made meanwhile where the table's size
    allows (:data:`STATS_BESIDE_ROWS`): the statistics are a function of the name codes
    and durations alone, read here, so the other thread touches no shared state."""
    n = ctx.num_rows("kernels")
    lo, hi = STATS_BESIDE_ROWS
    if not lo <= n <= hi or ctx.cache.contains(kernels.STATS) or ctx.cache.contains(ATTRIBUTION):
        return kernels.run(ctx)
    codes, labels = shared_arrays.codes(ctx, "kernels", "name")
    dur = shared_arrays.durations(ctx, "kernels")
    got: list[pa.Table] = []
    worker = Beside(lambda: got.append(kernels.stats(codes, labels, dur)))
    try:
        if dur.size:
            attribute(ctx)
    finally:
        worker.join()
    return ctx.cache.get(kernels.STATS, lambda: got[0])


def has_stacks(ctx: Source) -> bool:
    """Does the trace (window) hold Python stacks (``python_function`` rows)?"""
    return source_lines.attribute(of(ctx)).has_stacks


def _launch_codes(ctx: AnalysisContext) -> tuple[np.ndarray, Any]:
    """Per kernel row, a launch-configuration code (-1 without grid/block) and a function
    from code to its "grid=(x,y,z) block=(x,y,z)" label.

    The six sizes pack exactly into one int64 code when their ranges allow (always, for
    real launches), so no grouping pass is needed; else rows are coded with a hash
    (``row_codes``). Codes order as the sizes do, compared from block_z down to grid_x.
    Not kept: :func:`by_kernel` reads them once."""
    n = ctx.num_rows("kernels")
    if n == 0:
        return np.full(n, -1, dtype=np.int64), _label_of([])
    # A size that is the same on every row (block_z, grid_z: often 1) is known from the
    # file's statistics: not decoded, and not packed (it adds the same to every code).
    fields: list[tuple[str, int | None]] = []
    for c in _LAUNCH_COLS:
        k = ctx.constant("kernels", c)
        if k is not None and (k[0] is None or k[0] < 0):  # no row has this size
            return np.full(n, -1, dtype=np.int64), _label_of([])
        fields.append((c, None if k is None else int(k[0])))
    varying = [c for c, k in fields if k is None]
    # The others are read two at a time (decoded side by side) and packed as they come:
    # no more than two of them are ever held.
    packed = np.zeros(n, dtype=np.int64)
    tmp = np.empty(n, dtype=np.int64)
    known = np.ones(n, dtype=bool)
    bits: dict[str, int] = {}
    shift = 0
    for i in range(0, len(varying), 2):
        for name, col in zip(
            varying[i : i + 2], ctx.read_columns("kernels", varying[i : i + 2]), strict=True
        ):
            if col.null_count == n:
                return np.full(n, -1, dtype=np.int64), _label_of([])
            v = _stored_values(col)
            del col
            top = max(int(v.max()), 0)
            if shift + top.bit_length() > 62:
                del v, packed, tmp
                return _hashed_launch_codes(ctx, n)
            if int(v.min()) < 0:
                neg = v < 0
                known &= ~neg
                v = np.where(neg, 0, v)
            np.left_shift(v, shift, out=tmp, dtype=np.int64)
            packed |= tmp
            bits[name] = top.bit_length()
            shift += bits[name]
            del v
    del tmp
    packed[~known] = -1
    return packed, _label_of([(bits.get(c, 0), k) for c, k in fields])


def _hashed_launch_codes(ctx: AnalysisContext, n: int) -> tuple[np.ndarray, Any]:
    """:func:`_launch_codes` for sizes too wide to pack in 62 bits: rows coded by a hash
    of the six sizes (``row_codes``)."""
    known = np.ones(n, dtype=bool)
    cols: list[np.ndarray] = []
    for col in ctx.read_columns("kernels", _LAUNCH_COLS):
        v = _stored_values(col).astype(np.int64)
        neg = v < 0
        known &= ~neg
        cols.append(np.where(neg, 0, v))
    inv, first = row_codes(*cols)
    rows = [[int(c[i]) for c in cols] for i in first]
    return np.where(known, inv, -1), lambda code: _fmt(rows[code])


def _stored_values(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """An integer column's values in their stored width (int32 launch sizes stay int32,
    half the bytes of int64), nulls as -1."""
    if isinstance(col, pa.ChunkedArray) and col.num_chunks == 1:
        col = col.chunk(0)
    if isinstance(col, pa.Array) and col.null_count == 0 and pa.types.is_signed_integer(col.type):
        dt = np.dtype(f"i{col.type.bit_width // 8}")
        return np.frombuffer(
            col.buffers()[1], dtype=dt, count=len(col), offset=col.offset * dt.itemsize
        )
    return int_values(col, -1)


def _label_of(fields: list[tuple[int, int | None]]) -> Any:
    """Label of a packed code: per size, (its bits in the code, or its one value)."""

    def label(code: int) -> str:
        vals, shift = [], 0
        for b, const in fields:
            if const is not None:
                vals.append(const)
                continue
            vals.append((code >> shift) & ((1 << b) - 1))
            shift += b
        return _fmt(vals)

    return label


def _fmt(v: list[int]) -> str:
    return "grid=({},{},{}) block=({},{},{})".format(*v)


_LAUNCH_COLS = ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z")


def _dominant(
    name: np.ndarray, codes: np.ndarray, dur: np.ndarray | None, total: np.ndarray
) -> dict[int, tuple[int, float]]:
    """Per kernel name code: (the code of ``codes`` holding most of that name's weight
    ``dur`` (time, or None: 1 per instance), that weight / the name's ``total``). Ties go to the
    smaller code; rows with code -1 are skipped."""
    if not (codes >= 0).any():
        return {}
    # All rows grouped (no filtered copies of the columns), then the -1 groups dropped.
    n, c, d, _ = group_sum(name, codes, dur)
    keep = c >= 0
    n, c, d = n[keep], c[keep], d[keep]
    order = np.lexsort((c, -d, n))
    n, c, d = n[order], c[order], d[order]
    first = np.flatnonzero(np.concatenate([[True], n[1:] != n[:-1]]))
    return {
        int(n[i]): (int(c[i]), float(d[i]) / float(total[n[i]]) if total[n[i]] else 0.0)
        for i in first
    }


def by_op(ctx: Source) -> pa.Table:
    ctx = of(ctx)
    schema = outputs.HOTSPOTS_OP.arrow_schema()
    if ctx.num_rows("kernels") == 0:
        return schema.empty_table()
    att = attribute(ctx)
    cols = _per_launcher(ctx, att.op)
    ops_u = cols.pop("code")
    return pa.table(
        {"op": [att.op_labels[o] if o >= 0 else "<unattributed>" for o in ops_u], **cols},
        schema=schema,
    )


def by_source(ctx: Source) -> pa.Table:
    """Kernel time per user source line (the ``hotspots.by_source`` output); empty when
    the trace has no Python stacks."""
    ctx = of(ctx)
    schema = outputs.HOTSPOTS_SOURCE.arrow_schema()
    src = source_lines.attribute(ctx)
    if ctx.num_rows("kernels") == 0 or not src.has_stacks:
        return schema.empty_table()
    cols = _per_launcher(ctx, src.code)
    codes = cols.pop("code").tolist()
    none = ("<unattributed>", None, None)
    rows = [src.sources[c] if c >= 0 else none for c in codes]
    return pa.table(
        {
            "source": [r[0] for r in rows],
            "function": [r[1] for r in rows],
            "line_kind": [r[2] for r in rows],
            **cols,
        },
        schema=schema,
    )


def _per_launcher(ctx: AnalysisContext, launcher: np.ndarray) -> dict[str, Any]:
    """Kernel time per launcher code (an op, a source line; -1: unattributed), largest
    first: code, kernel_count, distinct_kernels, total_ns, mean_ns, share, top_kernel."""
    name, labels = shared_arrays.codes(ctx, "kernels", "name")
    dur = shared_arrays.durations(ctx, "kernels")
    # One hash grouping over (launcher, name) (-1: unattributed); the rest is over its rows.
    op, nm, d, cnt = group_sum(launcher, name, dur)
    order = np.lexsort((nm, -d, op))  # per launcher: largest time first, ties by name code
    op, nm, d, cnt = op[order], nm[order], d[order], cnt[order]
    first = np.flatnonzero(np.concatenate([[True], op[1:] != op[:-1]]))
    counts = np.add.reduceat(cnt, first)
    totals = np.add.reduceat(d, first)
    distinct = np.diff(np.append(first, op.size))
    ops_u = op[first]
    rank = np.lexsort((ops_u, -totals))
    grand = float(dur.sum())
    return {
        "code": ops_u[rank],
        "kernel_count": counts[rank].astype(np.int64),
        "distinct_kernels": distinct[rank].astype(np.int64),
        "total_ns": totals[rank].astype(np.int64),
        "mean_ns": totals[rank] / counts[rank],
        "share": totals[rank] / grand if grand else np.zeros(rank.size),
        "top_kernel": [labels[i] or "<unknown>" for i in nm[first][rank]],
    }
