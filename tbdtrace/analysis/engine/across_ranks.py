"""Figures across ranks: which ranks a trace holds, the spread of per-rank figures, and
whether the ranks' spans overlap at all.

The report's summary, steps and ranks sections and the rank-by-rank reduce
(``tbdtrace.scaleout``) share these; they read rows (one dict per rank) or the trace's
rank columns, never a pass.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow.compute as pc

from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.arrow_ints import int_values


def _ranks_of(ctx: AnalysisContext, table: str) -> np.ndarray:
    if not ctx.has(table) or not ctx.num_rows(table):
        return np.zeros(0, np.int64)
    known = ctx.constant(table, "rank")  # from the file's statistics, when they tell
    if known is not None:
        return np.array([-1 if known[0] is None else known[0]], np.int64)
    # The distinct ranks only (hashed by Arrow), from a column not kept for this.
    col = ctx.table(table, ["rank"], cache=False).column(0)
    return int_values(pc.unique(col), -1)


def rank_list(ctx: Source) -> list[int]:
    """Ranks with kernels or steps (rows without a rank are left out)."""
    ctx = of(ctx)
    found = np.concatenate([_ranks_of(ctx, t) for t in ("kernels", "steps")])
    return sorted(int(r) for r in np.unique(found) if r >= 0)


def disjoint(rows: list[dict[str, Any]]) -> bool:
    """True when some two ranks' device work spans do not overlap in time: the files are
    not one job, or their clocks differ by more than the trace's length."""
    spans = [(r["start_ns"], r["end_ns"]) for r in rows if r.get("start_ns") is not None]
    return len(spans) > 1 and max(s for s, _ in spans) > min(e for _, e in spans)


def spread(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any] | None:
    """{key: {min, median, max}} over ``rows`` (one per rank); None for fewer than two."""
    if len(rows) < 2:
        return None
    out: dict[str, Any] = {}
    for k in keys:
        v = [r[k] for r in rows if r.get(k) is not None]
        out[k] = {"min": min(v), "median": float(np.median(v)), "max": max(v)} if v else None
    return out


def spread_with_range(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, Any]:
    """{key: {min, median, max, spread}} over the ranks' rows (spread = max - min)."""
    out: dict[str, Any] = {}
    for k in keys:
        v = [r[k] for r in rows if r.get(k) is not None]
        out[k] = (
            {"min": min(v), "median": float(np.median(v)), "max": max(v), "spread": max(v) - min(v)}
            if v
            else None
        )
    return out
