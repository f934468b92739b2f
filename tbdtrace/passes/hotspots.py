"""Top kernels (or ops, or categories) by device time, with who launched them.

``run(trace, HotspotsConfig(by="kernel"))`` extends the kernels pass with the category,
the most common launch configuration, and the op / module / annotation range that
launched most of each kernel's time (see :mod:`tbdtrace.passes.attribution`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from tbdtrace.passes import categories, kernels
from tbdtrace.passes._util import dict_codes, int_column, row_codes
from tbdtrace.passes.attribution import attribute
from tbdtrace.trace import Trace

BY = ("kernel", "op", "category")
_KCOLS = ["start_ns", "end_ns", "name", "correlation_id", "external_id", "rank", "pid", "tid",
          "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]


@dataclass(frozen=True)
class HotspotsConfig:
    top: int | None = 20  # rows kept, largest total first; None = all
    by: str = "kernel"  # kernel, op or category


def run(trace: Trace, config: HotspotsConfig | None = None) -> pa.Table:
    """The top rows by total device time.

    by=kernel: the kernels pass columns (name, count, total_ns, mean/median/min/max/std_ns,
    share) plus category; launch (most common "grid=(x,y,z) block=(x,y,z)", null when the
    source has none); op, op_share (the op with most of this kernel's time and that share,
    ratio 0..1; null when none is attributed); module; marker.
    by=op: op ("<unattributed>" for kernels no op claims), kernel_count, distinct_kernels,
    total_ns, mean_ns, share, top_kernel. by=category: the categories pass.
    """
    cfg = config or HotspotsConfig()
    if cfg.by not in BY:
        raise ValueError(f"by must be one of {BY}, not {cfg.by!r}")
    if cfg.by == "category":
        tbl = categories.run(trace)
    else:
        k = trace.table("kernels", _KCOLS)
        tbl = by_kernel(trace, k) if cfg.by == "kernel" else by_op(trace, k)
    return tbl if cfg.top is None else tbl.slice(0, cfg.top)


def kernels_and_ops(trace: Trace, top: int | None = 20) -> tuple[pa.Table, pa.Table]:
    """by=kernel and by=op tables from one attribution pass (what the report shows)."""
    k = trace.table("kernels", _KCOLS)
    frame = _frame(trace, k)
    kt, ot = by_kernel(trace, k, frame), by_op(trace, k, frame)
    return (kt, ot) if top is None else (kt.slice(0, top), ot.slice(0, top))


def _frame(trace: Trace, k: pa.Table) -> tuple[pd.DataFrame, Any]:
    att = attribute(trace, k)
    codes, labels = dict_codes(k, "name")
    df = pd.DataFrame({
        "name": codes, "dur": int_column(k, "end_ns") - int_column(k, "start_ns"),
        "op": att.op, "module": att.module, "marker": att.marker,
    })
    return df, (labels, att)


def by_kernel(trace: Trace, k: pa.Table, frame: Any = None) -> pa.Table:
    base = kernels.by_name(k)
    if base.num_rows == 0:
        return base.append_column("category", pa.array([], pa.string()))
    df, (labels, att) = frame or _frame(trace, k)
    df = df.copy()
    df["launch"] = _launch_codes(k)
    names = [x if x is not None else "<unknown>" for x in labels]
    total = df.groupby("name")["dur"].sum()
    extra: dict[str, dict[str, Any]] = {}
    for col, labs in (("op", att.op_labels), ("module", att.module_labels),
                      ("marker", att.marker_labels), ("launch", _LAUNCH_LABELS)):
        best = _dominant(df, col, total)
        extra[col] = {names[n]: (labs[c], s) for n, (c, s) in best.items()}
    row_names = base.column("name").to_pylist()
    out = base.append_column("category", pa.array(
        [categories.classify(n) for n in row_names], pa.string()))
    out = out.append_column("launch", pa.array(
        [extra["launch"].get(n, (None, None))[0] for n in row_names], pa.string()))
    for col in ("op", "module", "marker"):
        got = [extra[col].get(n, (None, None)) for n in row_names]
        out = out.append_column(col, pa.array([g[0] for g in got], pa.string()))
        if col == "op":
            out = out.append_column("op_share", pa.array([g[1] for g in got], pa.float64()))
    return out


_LAUNCH_LABELS: list[str] = []


def _launch_codes(k: pa.Table) -> np.ndarray:
    """Per row, a code into _LAUNCH_LABELS (rebuilt per call) or -1 without grid/block."""
    cols = [int_column(k, c) for c in _KCOLS[8:]]
    inv, first = row_codes(*cols)
    _LAUNCH_LABELS.clear()
    _LAUNCH_LABELS.extend(
        "grid=({},{},{}) block=({},{},{})".format(*(int(c[i]) for c in cols)) for i in first)
    known = np.all([c >= 0 for c in cols], axis=0) if cols[0].size else np.zeros(0, bool)
    return np.where(known, inv, -1)


def _dominant(df: pd.DataFrame, col: str, total: pd.Series) -> dict[int, tuple[int, float]]:
    """Per kernel name code: (code of ``col`` holding most time, that time / name total)."""
    d = df[df[col] >= 0]
    if d.empty:
        return {}
    g = d.groupby(["name", col], sort=False)["dur"].sum().reset_index()
    g = g.sort_values(["name", "dur", col], ascending=[True, False, True])
    first = g.drop_duplicates("name")
    return {int(n): (int(c), float(t) / float(total[n]) if total[n] else 0.0)
            for n, c, t in zip(first["name"], first[col], first["dur"], strict=True)}


def by_op(trace: Trace, k: pa.Table, frame: Any = None) -> pa.Table:
    schema = pa.schema([("op", pa.string()), ("kernel_count", pa.int64()),
                        ("distinct_kernels", pa.int64()), ("total_ns", pa.int64()),
                        ("mean_ns", pa.float64()), ("share", pa.float64()),
                        ("top_kernel", pa.string())])
    if k.num_rows == 0:
        return schema.empty_table()
    df, (labels, att) = frame or _frame(trace, k)
    g = df.groupby("op")
    agg = g.agg(kernel_count=("dur", "size"), distinct_kernels=("name", "nunique"),
                total_ns=("dur", "sum")).reset_index()
    top = df.groupby(["op", "name"])["dur"].sum().reset_index().sort_values(
        ["op", "dur", "name"], ascending=[True, False, True]).drop_duplicates("op")
    top_name = dict(zip(top["op"], top["name"], strict=True))
    grand = float(df["dur"].sum())
    agg = agg.sort_values(["total_ns", "op"], ascending=[False, True])
    ops = [att.op_labels[o] if o >= 0 else "<unattributed>" for o in agg["op"]]
    return pa.table({
        "op": ops, "kernel_count": agg["kernel_count"].to_numpy(np.int64),
        "distinct_kernels": agg["distinct_kernels"].to_numpy(np.int64),
        "total_ns": agg["total_ns"].to_numpy(np.int64),
        "mean_ns": agg["total_ns"].to_numpy(np.float64) / agg["kernel_count"].to_numpy(),
        "share": agg["total_ns"].to_numpy(np.float64) / grand if grand else 0.0,
        "top_kernel": [labels[top_name[o]] or "<unknown>" for o in agg["op"]],
    }, schema=schema)
