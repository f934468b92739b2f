"""Cross-rank analysis: per-rank figures, stragglers per step, collective skew and
bandwidth, communication/computation overlap (docs/METRICS.md "ranks").

Every figure is per rank or per collective, never summed across ranks. Collectives are
matched across ranks by (process group, sequence number) when every row has a sequence
number, else by their order of occurrence per (rank, process group, op); ``method`` says
which. Times are the devices' (collective kernels).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace.analysis.engine import intervals, outputs
from tbdtrace.analysis.engine.across_ranks import rank_list
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.analysis.passes.categories import CAT_INDEX, kernel_codes
from tbdtrace.arrow_ints import int_column

COMM = CAT_INDEX["communication"]

# nccl-tests' bus bandwidth factor per op (doc/PERFORMANCE.md), n = ranks in the group.
BUSBW_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_to_all": lambda n: (n - 1) / n,
    "broadcast": lambda n: 1.0,
    "send": lambda n: 1.0,
    "recv": lambda n: 1.0,
}


@dataclass(frozen=True)
class RanksConfig:
    # A step's slowest rank is a straggler when its lead over the median rank exceeds
    # both this many times the run's noise (1.4826 x the median |lead| over every rank of
    # every step: the leads' robust standard deviation about the median rank) ...
    straggler_noise_multiple: float = 5.0
    # ... and this share of the run's median step time (the floor, for a quiet run).
    straggler_floor_share: float = 0.02
    # A rank is a slow-link suspect when its collectives' median excess time (own end
    # minus the last rank's arrival, over the median rank's) exceeds this share of the
    # median collective time.
    slow_link_threshold: float = 0.10


def _np(tbl: pa.Table, col: str, fill: int = -1) -> np.ndarray:
    if col not in tbl.column_names:
        return np.full(tbl.num_rows, fill, np.int64)
    return int_column(tbl, col, fill)


def per_rank(ctx: Source) -> list[dict[str, Any]]:
    """One row per rank: steps, step_time_median_ns, span_ns, compute_ns (union of
    non-communication kernels), communication_ns (union of communication kernels),
    busy_ns (union of all device work), idle_ns = span - busy, utilization = busy / span,
    start_ns / end_ns (first start, last end of its device work),
    overlap (share of communication time under compute, HTA's definition),
    memory_peak_bytes (allocator total, Kineto [memory] events)."""
    ctx = of(ctx)
    ranks = rank_list(ctx)
    split = _kernel_split(ctx)
    kern = None if split is None else _by_rank(split[2], split[0], split[1], split[3])
    dev = _device_work(ctx)
    st = ctx.table("steps", ["start_ns", "end_ns", "rank"]) if ctx.has("steps") else None
    mem = _memory_peaks(ctx)
    rows = []
    for r in ranks:
        row: dict[str, Any] = {"rank": r}
        if st is not None:
            m = _np(st, "rank") == r
            d = _np(st, "end_ns")[m] - _np(st, "start_ns")[m]
            row["steps"] = int(m.sum())
            row["step_time_median_ns"] = int(np.median(d)) if len(d) else None
        else:
            row["steps"], row["step_time_median_ns"] = 0, None
        if kern is not None and r in kern:
            ks, ke, comm = kern[r]
            cs, ce = ks[~comm], ke[~comm]
            xs, xe = ks[comm], ke[comm]
            row["compute_ns"] = intervals.union_length(cs, ce)
            row["communication_ns"] = intervals.union_length(xs, xe)
            over = intervals.overlap_length(xs, xe, cs, ce)
            row["overlap"] = over / row["communication_ns"] if row["communication_ns"] else None
        else:
            row.update(compute_ns=0, communication_ns=0, overlap=None)
        s, e = dev.get(r, (np.zeros(0, np.int64), np.zeros(0, np.int64)))
        span = intervals.span(s, e)
        busy = intervals.union_length(s, e)
        row["start_ns"] = int(s.min()) if len(s) else None
        row["end_ns"] = int(e.max()) if len(e) else None
        row.update(span_ns=span, busy_ns=busy, idle_ns=span - busy)
        row["utilization"] = busy / span if span else None
        row["memory_peak_bytes"] = mem.get(r)
        rows.append(row)
    return rows


def _kernel_split(
    ctx: AnalysisContext,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Kernels' (start, end, rank, is communication), None without kernels."""
    if not ctx.has("kernels") or not ctx.num_rows("kernels"):
        return None
    k = ctx.table("kernels", ["start_ns", "end_ns", "rank"])
    comm = kernel_codes(ctx).code == COMM
    return _np(k, "start_ns"), _np(k, "end_ns"), _np(k, "rank"), comm


def _by_rank(rank: np.ndarray, *cols: np.ndarray) -> dict[int, tuple[np.ndarray, ...]]:
    """``cols`` split by rank (one stable sort, not a mask per rank)."""
    order = np.argsort(rank, kind="stable")
    rs = rank[order]
    keys, first = np.unique(rs, return_index=True)
    bounds = [*first.tolist(), len(rs)]
    return {
        int(k): tuple(c[order[bounds[i] : bounds[i + 1]]] for c in cols)
        for i, k in enumerate(keys.tolist())
    }


def _device_work(ctx: AnalysisContext) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    parts: dict[int, list[tuple[np.ndarray, ...]]] = {}
    for t in ("kernels", "memcpy", "memset"):
        if not ctx.has(t) or not ctx.num_rows(t):
            continue
        tbl = ctx.table(t, ["start_ns", "end_ns", "rank"])
        s, e, r = _np(tbl, "start_ns"), _np(tbl, "end_ns"), _np(tbl, "rank")
        for x, cols in _by_rank(r, s, e).items():
            parts.setdefault(x, []).append(cols)
    return {
        r: (np.concatenate([a for a, _ in p]), np.concatenate([b for _, b in p]))
        for r, p in parts.items()
    }


def _memory_peaks(ctx: AnalysisContext) -> dict[int, int]:
    if not ctx.has("memory") or not ctx.num_rows("memory"):
        return {}
    tbl = ctx.table("memory")
    if "total_allocated_bytes" not in tbl.column_names:
        return {}
    v, r = _np(tbl, "total_allocated_bytes"), _np(tbl, "rank")
    return {int(x): int(v[r == x].max()) for x in np.unique(r) if (v[r == x] >= 0).any()}


@dataclass
class Matched:
    """Collectives matched across ranks: one entry per collective instance."""

    method: str  # "sequence_number" or "order"
    unmatched: int  # rows whose collective was seen on one rank only
    rows: list[dict[str, Any]]  # per collective: key, op, ranks, starts/ends per rank


def match_collectives(ctx: Source) -> Matched | None:
    """Collective kernels grouped into collective instances across ranks."""
    ctx = of(ctx)
    if not ctx.has("collectives") or not ctx.num_rows("collectives"):
        return None
    return match_collective_rows(ctx.table("collectives", list(COLLECTIVE_COLUMNS)))


# The collectives columns :func:`match_collective_rows` reads (a rank's share of the
# cross-rank reduce, tbdtrace/scaleout/rankwork.py).
COLLECTIVE_COLUMNS = (
    "rank",
    "start_ns",
    "end_ns",
    "op",
    "process_group",
    "sequence_number",
    "in_bytes",
    "out_bytes",
    "group_size",
)


def match_collective_rows(t: pa.Table) -> Matched | None:
    """:func:`match_collectives` over collectives rows of any number of ranks (a column
    absent from ``t`` counts as null in every row)."""
    if not t.num_rows:
        return None
    n = t.num_rows
    rank, s, e = _np(t, "rank"), _np(t, "start_ns"), _np(t, "end_ns")
    op = t.column("op").to_pylist()
    pg = t.column("process_group").to_pylist() if "process_group" in t.column_names else [None] * n
    seq = t.column("sequence_number") if "sequence_number" in t.column_names else None
    size = np.maximum(_np(t, "in_bytes"), _np(t, "out_bytes"))
    gsize = _np(t, "group_size")
    by_seq = seq is not None and seq.null_count == 0
    order = np.lexsort((s, rank))
    ordinal: dict[tuple[Any, ...], int] = {}
    groups: dict[tuple[Any, ...], dict[int, list[int]]] = {}
    seqs = seq.to_pylist() if by_seq and seq is not None else None
    for i in order.tolist():
        if seqs is not None:
            key: tuple[Any, ...] = (pg[i], seqs[i])
        else:
            ok = (int(rank[i]), pg[i], op[i])
            ordinal[ok] = ordinal.get(ok, -1) + 1
            key = (pg[i], op[i], ordinal[ok])
        groups.setdefault(key, {}).setdefault(int(rank[i]), []).append(i)
    rows, unmatched = [], 0
    for key, per in groups.items():
        if len(per) < 2:
            unmatched += sum(len(v) for v in per.values())
            continue
        rs = sorted(per)
        first = [per[r][0] for r in rs]
        starts = np.array([s[per[r]].min() for r in rs], np.int64)
        ends = np.array([e[per[r]].max() for r in rs], np.int64)
        sz = [int(size[i]) for i in first if size[i] >= 0]
        gs = [int(gsize[i]) for i in first if gsize[i] > 0]
        rows.append(
            {
                "key": key,
                "op": op[first[0]],
                "process_group": pg[first[0]],
                "ranks": rs,
                "starts": starts,
                "ends": ends,
                "size_bytes": int(np.median(sz)) if sz else None,
                "group_size": max(gs) if gs else len(rs),
            }
        )
    rows.sort(key=lambda c: int(c["starts"].min()))
    return Matched("sequence_number" if by_seq else "order", unmatched, rows)


def collective_stats(c: dict[str, Any]) -> dict[str, Any]:
    """Figures of one matched collective: arrival skew, per-rank wait, transfer time
    (last end - last arrival), algorithm and bus bandwidth (nccl-tests)."""
    last = int(c["starts"].max())
    transfer = int(c["ends"].max()) - last
    n = c["group_size"]
    algbw = (
        c["size_bytes"] / transfer * 1e9 if c["size_bytes"] is not None and transfer > 0 else None
    )
    f = BUSBW_FACTORS.get(c["op"])
    return {
        "arrival_skew_ns": last - int(c["starts"].min()),
        "wait_ns": (last - c["starts"]).tolist(),
        "transfer_ns": transfer,
        "excess_ns": (c["ends"] - last).tolist(),
        "algbw_bytes_per_s": algbw,
        "busbw_bytes_per_s": algbw * f(n) if algbw is not None and f is not None else None,
    }


def run(ctx: Source, config: RanksConfig | None = None) -> pa.Table:
    """The per-rank table (:func:`per_rank`) as Arrow."""
    ctx = of(ctx)
    return pa.Table.from_pylist(per_rank(ctx), schema=outputs.RANKS.arrow_schema())


def steps(ctx: Source, config: RanksConfig) -> list[dict[str, Any]]:
    """Per step number seen on 2+ ranks: the slowest rank by work time (step time minus
    the time its collective kernels ran during the step: a rank that arrives late makes
    the others wait inside the collective, which this leaves out), its lead over the
    median rank, the run's noise and threshold it was judged against
    (:func:`judge_stragglers`), whether it is a straggler, and step_skew_ns (max - min
    step time)."""
    ctx = of(ctx)
    return stragglers(step_rows(ctx), config)


STEP_ROWS = pa.schema(
    [
        ("step", pa.int64()),
        ("rank", pa.int64()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("in_comm_ns", pa.int64()),
    ]
)


def step_rows(ctx: Source) -> pa.Table:
    """One row per step of a rank (rows without a rank left out): step, rank, start_ns,
    end_ns, in_comm_ns (ns of the step covered by the rank's collective kernels). A
    rank's rows need only that rank's tables, so ranks can be computed apart."""
    ctx = of(ctx)
    if not ctx.has("steps") or not ctx.num_rows("steps"):
        return STEP_ROWS.empty_table()
    st = ctx.table("steps", ["step", "start_ns", "end_ns", "rank"])
    num, s, e, r = (_np(st, c) for c in ("step", "start_ns", "end_ns", "rank"))
    m = r >= 0
    num, s, e, r = num[m], s[m], e[m], r[m]
    comm = _comm_intervals(ctx)
    in_comm = [_covered(comm.get(rk), a, b) for rk, a, b in zip(r.tolist(), s, e, strict=True)]
    return pa.table([num, r, s, e, np.array(in_comm, np.int64).reshape(-1)], schema=STEP_ROWS)


# MAD x 1.4826 estimates a normal distribution's standard deviation.
MAD_TO_SIGMA = 1.4826
# Fewer rank-steps than this: the rule says its noise comes from few values.
FEW_LEADS = 6


def stragglers(rows: pa.Table, config: RanksConfig) -> list[dict[str, Any]]:
    """:func:`steps` from :func:`step_rows` of any number of ranks."""
    return judge_stragglers(rows, config)[0]


def judge_stragglers(
    rows: pa.Table, config: RanksConfig
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Per step seen on 2+ ranks (:func:`steps`' rows), and the rule they were judged by:
    a rank's lead in a step is its work time minus the step's median rank's; the run's
    noise is ``MAD_TO_SIGMA`` x the median |lead| over every rank of every such step; the
    step's slowest rank is a straggler when its lead exceeds ``threshold_ns`` =
    max(``straggler_noise_multiple`` x noise, ``straggler_floor_share`` x the median step
    time over those rows). The rule is None without such steps."""
    if not rows.num_rows:
        return [], None
    num, r, s, e, c = (_np(rows, x) for x in STEP_ROWS.names)
    per_step = []
    for n in np.unique(num).tolist():
        m = num == n
        if len(np.unique(r[m])) < 2:
            continue
        dur = e[m] - s[m]
        work = dur - c[m]
        per_step.append((int(n), r[m].tolist(), dur, work, float(np.median(work))))
    if not per_step:
        return [], None
    leads = np.concatenate([w - med for *_, w, med in per_step])
    noise = MAD_TO_SIGMA * float(np.median(np.abs(leads)))
    step_med = float(np.median(np.concatenate([d for _, _, d, _, _ in per_step])))
    floor = config.straggler_floor_share * step_med
    threshold = max(config.straggler_noise_multiple * noise, floor)
    out: list[dict[str, Any]] = []
    for n, ranks, dur, work, med in per_step:
        i = int(np.argmax(work))
        lead = float(work[i] - med)
        out.append(
            {
                "step": n,
                "ranks": len(ranks),
                "step_time_median_ns": float(np.median(dur)),
                "step_skew_ns": int(dur.max() - dur.min()),
                "work_median_ns": med,
                "slowest_rank": int(ranks[i]),
                "slowest_work_ns": int(work[i]),
                "lead_ns": lead,
                "noise_ns": noise,
                "threshold_ns": threshold,
                "lead_over_noise": lead / noise if noise > 0 else None,
                "ranks_over_threshold": int(((work - med) > threshold).sum()),
                "straggler": bool(lead > threshold),
            }
        )
    rule: dict[str, Any] = {
        "noise_ns": noise,
        "noise_multiple": config.straggler_noise_multiple,
        "floor_ns": floor,
        "floor_share": config.straggler_floor_share,
        "step_time_median_ns": step_med,
        "threshold_ns": threshold,
        "leads": len(leads),
        "steps": len(per_step),
        "flagged": sum(x["straggler"] for x in out),
        "caveat": None,
    }
    if len(leads) < FEW_LEADS:
        rule["caveat"] = (
            f"the noise comes from {len(leads)} rank-steps, the slowest among them: a slow "
            "step stands out only when under half of them are slow (with 2 ranks, from 3 "
            "steps on)"
        )
    return out, rule


def _comm_intervals(ctx: AnalysisContext) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per rank: merged intervals of its collective kernels (the collectives table, else
    kernels of category communication)."""
    if ctx.has("collectives") and ctx.num_rows("collectives"):
        t = ctx.table("collectives", ["start_ns", "end_ns", "rank"])
        s, e, r = _np(t, "start_ns"), _np(t, "end_ns"), _np(t, "rank")
    else:
        k = _kernel_split(ctx)
        if k is None:
            return {}
        s, e, r = k[0][k[3]], k[1][k[3]], k[2][k[3]]
    return {int(x): intervals.merge(s[r == x], e[r == x]) for x in np.unique(r)}


def _covered(iv: tuple[np.ndarray, np.ndarray] | None, lo: int, hi: int) -> int:
    """Length of [lo, hi) covered by the merged intervals ``iv``."""
    if iv is None or not len(iv[0]):
        return 0
    return int((np.clip(iv[1], lo, hi) - np.clip(iv[0], lo, hi)).sum())


def collectives(matched: Matched | None, config: RanksConfig) -> dict[str, Any] | None:
    """Summary of matched collectives: counts and method; arrival skew min/median/max;
    per rank its total wait and median excess (own end - last arrival, over the median
    rank's), slow-link suspects; per op count, median size and bandwidths."""
    if matched is None:
        return None
    stats = [collective_stats(c) for c in matched.rows]
    ranks = sorted({r for c in matched.rows for r in c["ranks"]})
    wait: dict[int, int] = {r: 0 for r in ranks}
    rel: dict[int, list[int]] = {r: [] for r in ranks}
    for c, x in zip(matched.rows, stats, strict=True):
        med = float(np.median(x["excess_ns"]))
        for rk, w, ex in zip(c["ranks"], x["wait_ns"], x["excess_ns"], strict=True):
            wait[rk] += w
            rel[rk].append(ex - med)
    transfer = float(np.median([x["transfer_ns"] for x in stats])) if stats else 0.0
    per_rank = []
    for rk in ranks:
        ex = float(np.median(rel[rk])) if rel[rk] else None
        per_rank.append(
            {
                "rank": rk,
                "collectives": len(rel[rk]),
                "wait_ns": wait[rk],
                "excess_ns": ex,
                "slow_link": ex is not None and ex > config.slow_link_threshold * transfer,
            }
        )
    skews = [x["arrival_skew_ns"] for x in stats]
    by_op: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for c, x in zip(matched.rows, stats, strict=True):
        by_op.setdefault(c["op"], []).append((c, x))
    ops = []
    for op, items in sorted(by_op.items()):
        alg = [x["algbw_bytes_per_s"] for _, x in items if x["algbw_bytes_per_s"] is not None]
        bus = [x["busbw_bytes_per_s"] for _, x in items if x["busbw_bytes_per_s"] is not None]
        sizes = [c["size_bytes"] for c, _ in items if c["size_bytes"] is not None]
        ops.append(
            {
                "op": op,
                "count": len(items),
                "size_bytes_median": float(np.median(sizes)) if sizes else None,
                "arrival_skew_ns_median": float(
                    np.median([x["arrival_skew_ns"] for _, x in items])
                ),
                "algbw_bytes_per_s_median": float(np.median(alg)) if alg else None,
                "busbw_bytes_per_s_median": float(np.median(bus)) if bus else None,
            }
        )
    worst = sorted(zip(matched.rows, stats, strict=True), key=lambda cx: -cx[1]["arrival_skew_ns"])[
        :10
    ]
    return {
        "method": matched.method,
        "matched": len(matched.rows),
        "unmatched_rows": matched.unmatched,
        "transfer_ns_median": transfer,
        "arrival_skew_ns": {
            "min": min(skews),
            "median": float(np.median(skews)),
            "max": max(skews),
        }
        if skews
        else None,
        "per_rank": per_rank,
        "per_op": ops,
        "largest_skew": [
            {
                "op": c["op"],
                "process_group": c["process_group"],
                "key": list(c["key"]),
                "first_rank_in": c["ranks"][int(np.argmin(c["starts"]))],
                "last_rank_in": c["ranks"][int(np.argmax(c["starts"]))],
                "start_ns": int(c["starts"].min()),
                **{k: v for k, v in x.items() if k not in ("wait_ns", "excess_ns")},
                "waits": [
                    {"rank": rk, "wait_ns": w}
                    for rk, w in zip(c["ranks"], x["wait_ns"], strict=True)
                ],
            }
            for c, x in worst
        ],
    }
