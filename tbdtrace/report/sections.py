"""The foundation sections: summary, devices, kernels."""

from __future__ import annotations

from typing import Any

from tbdtrace.passes import kernels, summary
from tbdtrace.report.build import ReportOptions, section, table_records
from tbdtrace.report.fmt import fmt_bytes, fmt_ns, fmt_pct
from tbdtrace.report.textui import Console, Table
from tbdtrace.trace import Trace

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


def _render_summary(con: Console, data: dict[str, Any], opts: ReportOptions) -> None:
    t = Table(title="Summary", show_header=False, title_justify="left")
    t.add_column("what")
    t.add_column("value", justify="right")
    t.add_row("kernels", f"{data['kernel_count']:,}")
    t.add_row("kernel time (sum)", fmt_ns(data["kernel_time_ns"]))
    t.add_row("memcpy", f"{data['memcpy_count']:,} ({fmt_bytes(data['memcpy_bytes'])})")
    t.add_row("memset", f"{data['memset_count']:,}")
    t.add_row("span (sum over devices)", fmt_ns(data["span_ns"]))
    t.add_row("busy (sum over devices)", fmt_ns(data["gpu_busy_ns"]))
    t.add_row("utilization", fmt_pct(data["gpu_utilization"]))
    con.print(t)


@section("summary", _render_summary)
def summary_section(trace: Trace, opts: ReportOptions) -> dict[str, Any]:
    return summary.summarize(summary.run(trace))


def _render_devices(con: Console, data: list[dict[str, Any]], opts: ReportOptions) -> None:
    if not data:  # the cpu_activity section says what the trace holds instead
        return
    t = Table(title="Devices", title_justify="left")
    for c in ("Rank", "Device", "Kernels", "Kernel time", "Span", "Busy", "Util", "Compute util"):
        t.add_column(c, justify="right", no_wrap=True)
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


@section("devices", _render_devices)
def devices_section(trace: Trace, opts: ReportOptions) -> list[dict[str, Any]]:
    rows = table_records(summary.run(trace))
    keep = ("rank", "device_type", *_DEVICE_KEYS, "memcpy_count", "memcpy_bytes", "memset_count")
    return [{k: r[k] for k in keep} for r in rows]


def _render_kernels(con: Console, data: list[dict[str, Any]], opts: ReportOptions) -> None:
    if not data:
        return
    shown = data if opts.top is None else data[: opts.top]
    title = "Top kernels" + (f" ({len(shown)} of {len(data)})" if len(shown) < len(data) else "")
    t = Table(title=title, title_justify="left")
    for c in ("Time %", "Total", "Instances", "Avg", "Med", "Min", "Max", "StdDev"):
        t.add_column(c, justify="right", no_wrap=True)
    t.add_column("Name", no_wrap=True)
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
            _clip(k["name"], room),
        )
    con.print(t)


@section("kernels", _render_kernels)
def kernels_section(trace: Trace, opts: ReportOptions) -> list[dict[str, Any]]:
    tbl = kernels.run(trace)
    if opts.top_json is not None:
        tbl = tbl.slice(0, opts.top_json)
    return table_records(tbl)


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


import tbdtrace.report.cpu_section  # noqa: E402, F401 - registers "cpu_activity"
import tbdtrace.report.passes_sections  # noqa: E402, F401 - registers the time-side passes
from tbdtrace.report import memory_section  # noqa: E402, F401 - registers "memory"
