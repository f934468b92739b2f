"""The foundation sections: summary, devices, kernels."""

from __future__ import annotations

from typing import Any

from tbdtrace.analysis.engine import across_ranks, summaries
from tbdtrace.analysis.engine.context import AnalysisContext
from tbdtrace.analysis.passes import kernels, summary
from tbdtrace.report.fmt import clip, fmt_bytes, fmt_ns, fmt_pct
from tbdtrace.report.section_api import ReportOptions, Section, table_records, titled
from tbdtrace.report.textui import Console, Table

_DEVICE_KEYS = (
    "device_id",
    "kernel_count",
    "kernel_time_ns",
    "span_ns",
    "busy_ns",
    "compute_busy_ns",
    "utilization",
    "compute_utilization",
)


_SUMMARY_ROWS = (
    ("kernels", "kernel_count"),
    ("kernel time (sum)", "kernel_time_ns"),
    ("memcpy", "memcpy_count"),
    ("memset", "memset_count"),
    ("span", "span_ns"),
    ("busy (any device of the rank)", "gpu_busy_ns"),
    ("utilization", "gpu_utilization"),
)


def _cell(key: str, v: Any, row: dict[str, Any] | None = None) -> str:
    if v is None:
        return "-"
    if key.endswith("_ns"):
        return fmt_ns(v)
    if key == "gpu_utilization":
        return fmt_pct(v)
    if key == "memcpy_count" and row is not None:
        return f"{v:,} ({fmt_bytes(row['memcpy_bytes'])})"
    return f"{v:,.0f}" if isinstance(v, float) else f"{v:,}"


def _render_summary(con: Console, data: dict[str, Any], opts: ReportOptions) -> None:
    ranks = data.get("ranks") or []
    if len(ranks) <= 1:
        t = Table(title=titled("Summary", opts), show_header=False)
        t.add_column("what")
        t.add_column("value", justify="right")
        for label, key in _SUMMARY_ROWS:
            t.add_row(label, _cell(key, data[key], data))
        con.print(t)
        return
    t = Table(title=titled(f"Summary per rank ({len(ranks)} ranks)", opts))
    t.add_column("Rank", justify="right")
    for label, _ in _SUMMARY_ROWS:
        t.add_column(label.split(" (")[0].capitalize(), justify="right")
    for r in ranks:
        t.add_row(str(r["rank"]), *(_cell(k, r[k], r) for _, k in _SUMMARY_ROWS))
    for stat in ("min", "median", "max"):
        t.add_row(
            stat,
            *(_cell(k, (data["across_ranks"].get(k) or {}).get(stat)) for _, k in _SUMMARY_ROWS),
        )
    con.print(t)


_SUMMARY_KEYS = tuple(k for _, k in _SUMMARY_ROWS) + ("memcpy_bytes",)


def summary_section(trace: AnalysisContext, opts: ReportOptions) -> dict[str, Any]:
    """Per rank (never summed across ranks); the figures at the top level are the single
    rank's, null when the trace has several ranks (see ``ranks`` and ``across_ranks``)."""
    ranks = summaries.device_summary_by_rank(trace, summary.run(trace))
    one = ranks[0] if len(ranks) == 1 else {}
    if not ranks:  # no device activity: nothing counted
        one = {k: 0 for k in _SUMMARY_KEYS if k != "gpu_utilization"}
    return {
        **{k: one.get(k) for k in _SUMMARY_KEYS},
        "ranks": ranks,
        "across_ranks": across_ranks.spread(ranks, _SUMMARY_KEYS),
    }


def _render_devices(con: Console, data: list[dict[str, Any]], opts: ReportOptions) -> None:
    if not data:  # the cpu_activity section says what the trace holds instead
        return
    t = Table(title=titled("Devices", opts))
    for c in ("Rank", "Device", "Kernels", "Kernel time", "Span", "Busy", "Util", "Compute util"):
        t.add_column(c, justify="right")
    for d in data:
        t.add_row(
            "-" if d.get("rank") is None else str(d["rank"]),
            f"{d.get('device_type') or '?'}:{d['device_id']}",
            f"{d['kernel_count']:,}",
            fmt_ns(d["kernel_time_ns"]),
            fmt_ns(d["span_ns"]),
            fmt_ns(d["busy_ns"]),
            fmt_pct(d["utilization"]),
            fmt_pct(d["compute_utilization"]),
        )
    con.print(t)


def devices_section(trace: AnalysisContext, opts: ReportOptions) -> list[dict[str, Any]]:
    rows = table_records(summary.run(trace))
    keep = ("rank", "device_type", *_DEVICE_KEYS, "memcpy_count", "memcpy_bytes", "memset_count")
    return [{k: r[k] for k in keep} for r in rows]


def _render_kernels(con: Console, data: list[dict[str, Any]], opts: ReportOptions) -> None:
    if not data:
        return
    shown = data if opts.top is None else data[: opts.top]
    title = "Top kernels" + (f", {len(shown)} of {len(data)}" if len(shown) < len(data) else "")
    t = Table(title=titled(title, opts, pooled=True))
    for c in ("Time %", "Total", "Instances", "Avg", "Med", "Min", "Max", "StdDev"):
        t.add_column(c, justify="right")
    t.add_column("Name")
    room = max(40, con.width - 100)
    for k in shown:
        t.add_row(
            f"{100 * k['share']:.1f}",
            fmt_ns(k["total_ns"]),
            f"{k['count']:,}",
            fmt_ns(k["mean_ns"]),
            fmt_ns(k["median_ns"]),
            fmt_ns(k["min_ns"]),
            fmt_ns(k["max_ns"]),
            fmt_ns(k["std_ns"]),
            clip(k["name"], room, blank=""),
        )
    con.print(t)


def kernels_section(trace: AnalysisContext, opts: ReportOptions) -> list[dict[str, Any]]:
    tbl = kernels.run(trace)
    if opts.top_json is not None:
        tbl = tbl.slice(0, opts.top_json)
    return table_records(tbl)


# The sections this module declares; tbdtrace.report.contents lists them in report order.
SUMMARY = Section("summary", summary_section, _render_summary)
DEVICES = Section("devices", devices_section, _render_devices)
KERNELS = Section("kernels", kernels_section, _render_kernels)
