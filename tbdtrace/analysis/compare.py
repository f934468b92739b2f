"""Two traces side by side: throughput, utilization, per-category, per-kernel and per-op
deltas, per measured step.

Times are compared per measured step: each side's total over the window is divided by its
number of measured steps (``step_count``: distinct (rank, step) pairs), so a 3-step run and
a 20-step run of the same job compare step for step. Every delta is B - A; ``ratio`` is
B / A of the per-step figures (of the totals when either side has no measured step), null
when A is 0 or either side is unknown. Kernels and ops are aligned by name. Each side is
a trace or an analysis context (a window of one: ``report/diff_view.py``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace.analysis.engine import categories as vocab
from tbdtrace.analysis.engine import outputs, summaries
from tbdtrace.analysis.engine.context import Source
from tbdtrace.analysis.passes import categories, hotspots, kernels, steps, summary, utilization
from tbdtrace.arrow_ints import int_column

# Declared in analysis/engine/outputs.py.
KERNEL_SCHEMA = outputs.DIFF_KERNELS.arrow_schema()
CATEGORY_SCHEMA = outputs.DIFF_CATEGORIES.arrow_schema()
OP_SCHEMA = outputs.DIFF_OPS.arrow_schema()
_ALL_OPS = hotspots.HotspotsConfig(top=None, by="op")  # every op row, largest first


def _ratio(a: float | None, b: float | None) -> float | None:
    return b / a if a and b is not None else None


def step_count(tr: Source) -> int:
    """Measured steps of ``tr``: distinct (rank, step) pairs among its non-warm-up steps (a
    step recorded by two sources, the harness and the profiler, counts once)."""
    st = steps.run(tr)
    m = st.filter(pc.invert(st.column("warmup")))
    if not m.num_rows:
        return 0
    rank, step = int_column(m, "rank"), int_column(m, "step")
    return int(np.unique(np.stack([rank, step]), axis=1).shape[1])


def _per_step(total: int, n: int) -> float | None:
    return total / n if n else None


def _sides(ta: int, tb: int, na: int, nb: int) -> dict[str, Any]:
    """The per-step columns of one aligned row (see outputs._DIFF_SIDES)."""
    pa_, pb = _per_step(ta, na), _per_step(tb, nb)
    per = pa_ is not None and pb is not None
    return {
        "a_total_ns": ta,
        "b_total_ns": tb,
        "delta_ns": tb - ta,
        "a_per_step_ns": pa_,
        "b_per_step_ns": pb,
        "delta_per_step_ns": pb - pa_ if per else None,  # type: ignore[operator]
        "ratio": _ratio(pa_, pb) if per else _ratio(ta, tb),
    }


def _order(r: dict[str, Any]) -> tuple[float, float]:
    """Largest |change| first (per step where both sides have steps), then the larger."""
    d = r["delta_per_step_ns"]
    return -abs(d if d is not None else r["delta_ns"]), -max(r["a_total_ns"], r["b_total_ns"])


def run(a: Source, b: Source, config: Any = None) -> pa.Table:
    """Per-kernel deltas, one row per kernel name in either trace, largest |change per
    step| first (columns: docs/METRICS.md ``diff``)."""
    na, nb = step_count(a), step_count(b)
    ia = {r["name"]: r for r in kernels.run(a).to_pylist()}
    ib = {r["name"]: r for r in kernels.run(b).to_pylist()}
    cats = {**vocab.name_categories(a), **vocab.name_categories(b)}
    rows = []
    for n in set(ia) | set(ib):
        ra, rb = ia.get(n, {}), ib.get(n, {})
        rows.append(
            {
                "name": n,
                "category": cats.get(n, "other"),
                "a_count": ra.get("count", 0),
                "b_count": rb.get("count", 0),
                **_sides(ra.get("total_ns", 0), rb.get("total_ns", 0), na, nb),
                "a_share": ra.get("share", 0.0),
                "b_share": rb.get("share", 0.0),
            }
        )
    rows.sort(key=lambda r: (*_order(r), r["name"]))
    return pa.Table.from_pylist(rows, schema=KERNEL_SCHEMA)


def by_category(a: Source, b: Source) -> pa.Table:
    """Per-category deltas (categories pass of each trace), in category order."""
    na, nb = step_count(a), step_count(b)
    ca = {r["category"]: r for r in categories.run(a).to_pylist()}
    cb = {r["category"]: r for r in categories.run(b).to_pylist()}
    rows = []
    for c in vocab.CATEGORIES:
        if c not in ca and c not in cb:
            continue
        ra, rb = ca.get(c, {}), cb.get(c, {})
        rows.append(
            {
                "category": c,
                **_sides(ra.get("total_ns", 0), rb.get("total_ns", 0), na, nb),
                "a_share": ra.get("share", 0.0),
                "b_share": rb.get("share", 0.0),
            }
        )
    return pa.Table.from_pylist(rows, schema=CATEGORY_SCHEMA)


def by_op(a: Source, b: Source) -> pa.Table:
    """Per launching op (hotspots.by_op of each trace, aligned by op name), largest
    |change per step| first."""
    na, nb = step_count(a), step_count(b)
    oa = {r["op"]: r for r in hotspots.run(a, _ALL_OPS).to_pylist()}
    ob = {r["op"]: r for r in hotspots.run(b, _ALL_OPS).to_pylist()}
    rows = []
    for op in set(oa) | set(ob):
        ra, rb = oa.get(op, {}), ob.get(op, {})
        rows.append(
            {
                "op": op,
                "a_kernel_count": ra.get("kernel_count", 0),
                "b_kernel_count": rb.get("kernel_count", 0),
                **_sides(ra.get("total_ns", 0), rb.get("total_ns", 0), na, nb),
                "a_share": ra.get("share", 0.0),
                "b_share": rb.get("share", 0.0),
            }
        )
    rows.sort(key=lambda r: (*_order(r), r["op"]))
    return pa.Table.from_pylist(rows, schema=OP_SCHEMA)


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


def headline(tr: Source, memory_peak_bytes: int | None = None) -> dict[str, Any]:
    """The figures compared at the top of a diff: per rank for a one-rank trace, else the
    median over ranks (``ranks`` says how many); kernel figures also per measured step
    (divided by ``measured_rank_steps``, :func:`step_count`: with several ranks, each rank's
    step counts)."""
    st_ranks = summaries.steps_by_rank(steps.run(tr))
    sm_ranks = summaries.device_summary_by_rank(tr, summary.run(tr))
    st, sm = _per_rank(st_ranks), _per_rank(sm_ranks)
    util = utilization.run(tr)
    # A mask, not an expression: filtering by expression loads Arrow's dataset and
    # query engine (~50 ms of imports).
    util = util.filter(pa.compute.is_null(util.column("step")))
    win = sum(util.column("window_ns").to_pylist())
    comp = sum(util.column("compute_busy_ns").to_pylist())
    n = step_count(tr)
    kernel_total = int(sum(summary.run(tr).column("kernel_time_ns").to_pylist()))
    kernel_n = int(sum(summary.run(tr).column("kernel_count").to_pylist()))
    return {
        "framework": tr.meta.get("framework"),
        "workload": tr.meta.get("workload"),
        "source": tr.meta.get("source"),
        "ranks": max(len(st_ranks), len(sm_ranks)),
        "measured_steps": st.get("measured_count", 0),
        "measured_rank_steps": n,
        "step_median_ns": st.get("step_median_ns"),
        "throughput_per_s": st.get("throughput_per_s"),
        "step_rate_median_per_s": st.get("step_rate_median_per_s"),
        "data_wait_median_ns": st.get("data_wait_median_ns"),
        "kernel_count": sm.get("kernel_count", 0),
        "kernel_time_ns": sm.get("kernel_time_ns", 0),
        "kernel_count_per_step": _per_step(kernel_n, n),
        "kernel_time_per_step_ns": _per_step(kernel_total, n),
        "utilization": sm.get("gpu_utilization"),
        "compute_utilization_measured": comp / win if win else None,
        "memory_peak_bytes": memory_peak_bytes,
    }


def compare(
    a: Source,
    b: Source,
    top: int | None = 20,
    memory_peaks: tuple[int | None, int | None] = (None, None),
    thresholds: list[Any] | None = None,
) -> dict[str, Any]:
    """The whole diff as a JSON-ready document: headline, categories, kernels and ops (top
    N each), and with ``thresholds`` (``diff_gate.parse``) the gate's verdict under
    ``gate``. ``memory_peaks``: each trace's peak live device memory (the memory section
    covers the whole trace, so the caller measures it on the traces as opened)."""
    from tbdtrace.analysis import gate as diff_gate

    ha, hb = headline(a, memory_peaks[0]), headline(b, memory_peaks[1])
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
    k, cats, ops = run(a, b), by_category(a, b).to_pylist(), by_op(a, b).to_pylist()
    doc: dict[str, Any] = {
        "a": str(a.path),
        "b": str(b.path),
        "per_step": bool(ha["measured_rank_steps"] and hb["measured_rank_steps"]),
        "headline": head,
        "categories": cats,
        "kernels": (k if top is None else k.slice(0, top)).to_pylist(),
        "ops": ops if top is None else ops[:top],
    }
    if thresholds is not None:
        doc["gate"] = diff_gate.judge(head, cats, ops, thresholds)
    return doc
