"""Two traces side by side: throughput, utilization, per-category and per-kernel deltas.

Every delta is B - A; ``ratio`` is B / A (null when A is 0 or either side is unknown).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace.passes import categories, kernels, outputs, steps, summary, utilization
from tbdtrace.trace import Trace

KERNEL_SCHEMA = outputs.DIFF_KERNELS.arrow_schema()  # declared in passes/outputs.py
CATEGORY_SCHEMA = outputs.DIFF_CATEGORIES.arrow_schema()  # declared in passes/outputs.py


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a and b is not None else None


def run(a: Trace, b: Trace, config: Any = None) -> pa.Table:
    """Per-kernel deltas, one row per kernel name in either trace, largest |delta| first.

    Columns: name, category; a_count, b_count; a_total_ns, b_total_ns, delta_ns (ns);
    ratio (B/A); a_share, b_share (share of each trace's kernel time, ratio 0..1).
    """
    ka, kb = kernels.run(a).to_pylist(), kernels.run(b).to_pylist()
    ia, ib = {r["name"]: r for r in ka}, {r["name"]: r for r in kb}
    cats = {**categories.name_categories(a), **categories.name_categories(b)}
    rows = []
    for n in set(ia) | set(ib):
        ra, rb = ia.get(n, {}), ib.get(n, {})
        ta, tb = ra.get("total_ns", 0), rb.get("total_ns", 0)
        rows.append(
            {
                "name": n,
                "category": cats.get(n, "other"),
                "a_count": ra.get("count", 0),
                "b_count": rb.get("count", 0),
                "a_total_ns": ta,
                "b_total_ns": tb,
                "delta_ns": tb - ta,
                "ratio": _ratio(ta, tb),
                "a_share": ra.get("share", 0.0),
                "b_share": rb.get("share", 0.0),
            }
        )
    rows.sort(key=lambda r: (-abs(r["delta_ns"]), r["name"]))
    return pa.Table.from_pylist(rows, schema=KERNEL_SCHEMA)


def by_category(a: Trace, b: Trace) -> pa.Table:
    """Per-category deltas (categories pass of each trace), in category order."""
    ca = {r["category"]: r for r in categories.run(a).to_pylist()}
    cb = {r["category"]: r for r in categories.run(b).to_pylist()}
    rows = []
    for c in categories.CATEGORIES:
        if c not in ca and c not in cb:
            continue
        ta, tb = ca.get(c, {}).get("total_ns", 0), cb.get(c, {}).get("total_ns", 0)
        rows.append(
            {
                "category": c,
                "a_total_ns": ta,
                "b_total_ns": tb,
                "delta_ns": tb - ta,
                "ratio": _ratio(ta, tb),
                "a_share": ca.get(c, {}).get("share", 0.0),
                "b_share": cb.get(c, {}).get("share", 0.0),
            }
        )
    return pa.Table.from_pylist(rows, schema=CATEGORY_SCHEMA)


def _per_rank(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The one rank's figures; with several ranks the median over ranks of each (never
    their sum); empty without ranks."""
    if len(rows) <= 1:
        return rows[0] if rows else {}
    out: dict[str, Any] = {}
    for k in rows[0]:
        v = [r[k] for r in rows if isinstance(r.get(k), int | float)]
        out[k] = float(np.median(v)) if v else None
    return out


def headline(tr: Trace) -> dict[str, Any]:
    """The figures compared at the top of a diff: per rank for a one-rank trace, else the
    median over ranks (``ranks`` says how many)."""
    st_ranks = steps.by_rank(steps.run(tr))
    sm_ranks = summary.by_rank(tr)
    st, sm = _per_rank(st_ranks), _per_rank(sm_ranks)
    util = utilization.run(tr)
    # A mask, not an expression: filtering by expression loads Arrow's dataset and
    # query engine (~50 ms of imports).
    util = util.filter(pa.compute.is_null(util.column("step")))
    win = sum(util.column("window_ns").to_pylist())
    comp = sum(util.column("compute_busy_ns").to_pylist())
    return {
        "framework": tr.meta.get("framework"),
        "workload": tr.meta.get("workload"),
        "source": tr.meta.get("source"),
        "ranks": max(len(st_ranks), len(sm_ranks)),
        "measured_steps": st.get("measured_count", 0),
        "step_median_ns": st.get("step_median_ns"),
        "throughput_per_s": st.get("throughput_per_s"),
        "throughput_median_per_s": st.get("throughput_median_per_s"),
        "kernel_count": sm.get("kernel_count", 0),
        "kernel_time_ns": sm.get("kernel_time_ns", 0),
        "utilization": sm.get("gpu_utilization"),
        "compute_utilization_measured": comp / win if win else None,
    }


def compare(a: Trace, b: Trace, top: int | None = 20) -> dict[str, Any]:
    """The whole diff as a JSON-ready document: headline, categories, kernels (top N)."""
    ha, hb = headline(a), headline(b)
    head = {}
    for key in ha:
        va, vb = ha[key], hb[key]
        num = isinstance(va, int | float) and isinstance(vb, int | float)
        head[key] = {
            "a": va,
            "b": vb,
            "delta": vb - va if num else None,
            "ratio": _ratio(va, vb) if num else None,
        }
    k = run(a, b)
    return {
        "a": str(a.path),
        "b": str(b.path),
        "headline": head,
        "categories": by_category(a, b).to_pylist(),
        "kernels": (k if top is None else k.slice(0, top)).to_pylist(),
    }
