"""The ``ranks`` report section: cross-rank comparison of a trace with 2+ ranks."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from tbdtrace.analysis.engine import across_ranks
from tbdtrace.analysis.engine.context import AnalysisContext
from tbdtrace.analysis.passes import ranks
from tbdtrace.report.fmt import fmt_bytes, fmt_ns, fmt_pct
from tbdtrace.report.section_api import ReportOptions, Section, titled
from tbdtrace.report.textui import Console, Table

_KEYS = (
    "steps",
    "step_time_median_ns",
    "compute_ns",
    "communication_ns",
    "idle_ns",
    "utilization",
    "overlap",
    "memory_peak_bytes",
)
_LABELS = ("Steps", "Step med", "Compute", "Comm", "Idle", "Util", "Overlap", "Mem peak")


def _cell(key: str, v: Any) -> str:
    if v is None:
        return "-"
    if key.endswith("_ns"):
        return fmt_ns(v)
    if key.endswith("_bytes"):
        return fmt_bytes(v)
    if key in ("utilization", "overlap"):
        return fmt_pct(v)
    return f"{v:,.0f}" if isinstance(v, float) else f"{v:,}"


def _gbps(v: float | None) -> str:
    if v is None:
        return "-"
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if v >= scale:
            return f"{v / scale:.2f} {unit}"
    return f"{v:.0f} B/s"


def _render(con: Console, data: dict[str, Any] | None, opts: ReportOptions) -> None:
    if not data:
        return
    rows = data["per_rank"]
    t = Table(title=titled(f"Ranks ({len(rows)} ranks)", opts))
    t.add_column("Rank", justify="right")
    for label in _LABELS:
        t.add_column(label, justify="right")
    for r in rows:
        t.add_row(str(r["rank"]), *(_cell(k, r[k]) for k in _KEYS))
    for stat in ("min", "median", "max", "spread"):
        t.add_row(stat, *(_cell(k, (data["across_ranks"].get(k) or {}).get(stat)) for k in _KEYS))
    con.print(t)
    for note in data["notes"]:
        con.print(f"Note: {note}")
    _render_steps(con, data, opts)
    _render_collectives(con, data.get("collectives"))


def _render_steps(con: Console, data: dict[str, Any], opts: ReportOptions) -> None:
    steps = data["steps"]
    if not steps:
        con.print("Stragglers: no step seen on two or more ranks.")
        return
    rule = data["straggler_rule"]
    t = Table(
        title="Stragglers per step (work = step time outside collective kernels; lead = the "
        "slowest rank's work - the median rank's)",
    )
    for c in (
        "Step",
        "Ranks",
        "Step med",
        "Step skew",
        "Slowest",
        "Lead",
        "Lead/noise",
        "Straggler",
    ):
        t.add_column(c, justify="right")
    for s in steps:
        z = s["lead_over_noise"]
        t.add_row(
            str(s["step"]),
            str(s["ranks"]),
            fmt_ns(s["step_time_median_ns"]),
            fmt_ns(s["step_skew_ns"]),
            str(s["slowest_rank"]),
            fmt_ns(s["lead_ns"]),
            "-" if z is None else f"{z:,.1f}",
            "yes" if s["straggler"] else "",
        )
    con.print(t)
    con.print(
        f"Stragglers: {rule['flagged']} of {rule['steps']} steps flagged. A step's slowest "
        f"rank is a straggler when its lead exceeds {fmt_ns(rule['threshold_ns'])} = "
        f"max({rule['noise_multiple']:g} x the run's noise {fmt_ns(rule['noise_ns'])}, "
        f"{rule['floor_share']:.0%} of the median step time "
        f"({fmt_ns(rule['step_time_median_ns'])})); noise = 1.4826 x the median |lead over "
        f"the step's median rank| over {rule['leads']} rank-steps."
    )
    if rule["caveat"]:
        con.print(f"Note: {rule['caveat']}.")


def _render_collectives(con: Console, c: dict[str, Any] | None) -> None:
    if c is None:
        con.print("Collectives: none in this trace (no NCCL/RCCL kernels).")
        return
    how = "sequence number" if c["method"] == "sequence_number" else "order of occurrence"
    skew = c["arrival_skew_ns"] or {}
    con.print(
        f"Collectives: {c['matched']:,} matched across ranks by {how} "
        f"({c['unmatched_rows']:,} kernel rows seen on one rank only); arrival skew "
        f"min {fmt_ns(skew.get('min'))}, median {fmt_ns(skew.get('median'))}, "
        f"max {fmt_ns(skew.get('max'))}"
    )
    t = Table(title="Collectives per op (medians over collectives)")
    for h in ("Op", "Count", "Size", "Arrival skew", "Alg bw", "Bus bw"):
        t.add_column(h, justify="right" if h != "Op" else "left")
    for o in c["per_op"]:
        t.add_row(
            o["op"],
            f"{o['count']:,}",
            fmt_bytes(o["size_bytes_median"]),
            fmt_ns(o["arrival_skew_ns_median"]),
            _gbps(o["algbw_bytes_per_s_median"]),
            _gbps(o["busbw_bytes_per_s_median"]),
        )
    con.print(t)
    t = Table(title="Collectives per rank")
    for h in ("Rank", "Collectives", "Waited", "Excess (median)", "Slow link"):
        t.add_column(h, justify="right")
    for r in c["per_rank"]:
        t.add_row(
            str(r["rank"]),
            f"{r['collectives']:,}",
            fmt_ns(r["wait_ns"]),
            fmt_ns(r["excess_ns"]),
            "suspect" if r["slow_link"] else "",
        )
    con.print(t)


def ranks_section(trace: AnalysisContext, opts: ReportOptions) -> dict[str, Any] | None:
    """Null for a trace with fewer than two ranks."""
    if len(across_ranks.rank_list(trace)) < 2:
        return None  # before per_rank's unions: a second of a 10M-kernel report, for nothing
    rows = ranks.per_rank(trace)
    if len(rows) < 2:
        return None
    return from_parts(rows, ranks.step_rows(trace), ranks.match_collectives(trace))


def from_parts(
    rows: list[dict[str, Any]], step_rows: pa.Table, matched: ranks.Matched | None
) -> dict[str, Any]:
    """The section from the ranks' parts: :func:`ranks.per_rank` rows, :func:`ranks.step_rows`
    and the matched collectives, whether computed in one trace or rank by rank
    (tbdtrace/scaleout/rankwork.py)."""
    cfg = ranks.RanksConfig()
    notes = []
    if across_ranks.disjoint(rows):
        notes.append(
            "the ranks' device time spans do not overlap: the files are not one job, or "
            "their clocks differ; cross-rank skews and matches are not meaningful"
        )
    steps, rule = ranks.judge_stragglers(step_rows, cfg)
    return {
        "notes": notes,
        "config": {
            "straggler_noise_multiple": cfg.straggler_noise_multiple,
            "straggler_floor_share": cfg.straggler_floor_share,
            "slow_link_threshold": cfg.slow_link_threshold,
        },
        "per_rank": rows,
        "across_ranks": across_ranks.spread_with_range(rows, _KEYS),
        "steps": steps,
        "straggler_rule": rule,
        "collectives": ranks.collectives(matched, cfg),
    }


# The sections this module declares; tbdtrace.report.contents lists them in report order.
RANKS = Section("ranks", ranks_section, _render)
