"""Report sections of the time-side passes: steps, utilization, categories, hotspots,
idle, memcpy, fp32. Each JSON key holds its pass's result (see docs/METRICS.md)."""

from __future__ import annotations

from typing import Any

from tbdtrace.analysis.engine import across_ranks, summaries
from tbdtrace.analysis.engine.context import AnalysisContext
from tbdtrace.analysis.passes import (
    categories,
    fp32,
    hotspots,
    idle,
    memcpy,
    steps,
    utilization,
)
from tbdtrace.report.fmt import clip, fmt_bytes, fmt_ns, fmt_pct, tail
from tbdtrace.report.section_api import ReportOptions, Section, table_records, titled
from tbdtrace.report.textui import Console, Table


def _table(title: str, cols: tuple[str, ...], left: tuple[str, ...] = ()) -> Table:
    t = Table(title=title)
    for c in cols:
        t.add_column(c, justify="left" if c in left else "right")
    return t


def _rate(v: float | None, unit: str = "/s") -> str:
    if v is None:
        return "-"
    for p, s in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= p:
            return f"{v / p:.2f} {s}{unit}"
    return f"{v:.2f} {unit}"


def _dev(r: dict[str, Any]) -> str:
    rank = "" if r.get("rank") is None else f"r{r['rank']} "
    return f"{rank}{r.get('device_type') or '?'}:{r.get('device_id')}"


def _render_steps(con: Console, data: dict[str, Any], opts: ReportOptions) -> None:
    ranks = data.get("ranks") or [data["summary"]]
    for s in ranks:
        _steps_line(con, s, opts)
    spread = data.get("across_ranks")
    if spread and spread.get("step_median_ns"):
        m = spread["step_median_ns"]
        con.print(
            f"Median step across {len(ranks)} ranks: min {fmt_ns(m['min'])}, median "
            f"{fmt_ns(m['median'])}, max {fmt_ns(m['max'])}"
        )


def _steps_line(con: Console, s: dict[str, Any], opts: ReportOptions) -> None:
    if not s["step_count"]:
        return
    who = f"rank {s['rank']} " if s.get("rank") is not None else ""
    con.print(
        f"Steps {who}({opts.covers or 'whole trace'}): {s['step_count']} "
        f"({s['warmup_count']} warm-up), measured "
        f"{fmt_ns(s['measured_ns'])}, median step {fmt_ns(s['step_median_ns'])}; "
        f"{_throughput(s)}{_data_wait(s)}"
    )
    if s.get("uneven_steps_warning"):
        con.print(f"  warning: {s['uneven_steps_warning']}")


def _throughput(s: dict[str, Any]) -> str:
    """The throughput (samples / time), the per-step rates labelled beside it."""
    if s.get("throughput_per_s") is None:
        return "throughput - (the steps record no samples)"
    return (
        f"throughput {_rate(s['throughput_per_s'], 'samples/s')} (samples / measured "
        f"time; per-step rates: median {_rate(s['step_rate_median_per_s'], 'samples/s')}, "
        f"mean {_rate(s['step_rate_mean_per_s'], 'samples/s')})"
    )


def _data_wait(s: dict[str, Any]) -> str:
    """ "; waiting for data ..." when the trace records data waits (else nothing: unknown)."""
    if s.get("data_wait_ns") is None:
        return ""
    return (
        f"; waiting for data {fmt_ns(s['data_wait_ns'])} "
        f"({100 * (s.get('data_wait_share') or 0):.1f}% of the measured time, median "
        f"{fmt_ns(s['data_wait_median_ns'])} a step)"
    )


def steps_section(trace: AnalysisContext, opts: ReportOptions) -> dict[str, Any]:
    tbl = steps.run(trace)
    rows = tbl if opts.top_json is None else tbl.slice(0, opts.top_json)
    ranks = summaries.steps_by_rank(tbl)
    keys = ("step_median_ns", "step_mean_ns", "measured_ns", "throughput_per_s")
    return {
        # Over every rank's steps only for a single rank: never summed across ranks.
        "summary": summaries.step_summary(tbl) if len(ranks) <= 1 else None,
        "ranks": ranks,
        "across_ranks": across_ranks.spread(ranks, keys),
        "steps": table_records(rows),
    }


def _render_util(con: Console, data: dict[str, Any], opts: ReportOptions) -> None:
    rows = [r for r in data["devices"] if r["step"] is None]
    if rows:
        t = _table(
            titled("Utilization over the steps", opts),
            ("Device", "Window", "Compute", "Memory ops", "Busy"),
        )
        for r in rows:
            t.add_row(
                _dev(r),
                fmt_ns(r["window_ns"]),
                fmt_pct(r["compute_utilization"]),
                fmt_pct(r["memory_utilization"]),
                fmt_pct(r["utilization"]),
            )
        con.print(t)
    if data["cpu"]["mean"] is not None:
        con.print(
            f"CPU utilization (all cores, {data['cpu']['samples']} samples): "
            f"{fmt_pct(data['cpu']['mean'])}"
        )


def utilization_section(trace: AnalysisContext, opts: ReportOptions) -> dict[str, Any]:
    return {
        "devices": table_records(utilization.run(trace)),
        "cpu": summaries.cpu_utilization(trace, steps.run(trace)),
    }


def _render_categories(con: Console, data: list[dict[str, Any]], opts: ReportOptions) -> None:
    if not data:
        return
    t = _table(
        titled("Device time by category", opts, pooled=True),
        ("Category", "Time %", "Total", "Count"),
        left=("Category",),
    )
    for r in data:
        t.add_row(
            r["category"], f"{100 * r['share']:.1f}", fmt_ns(r["total_ns"]), f"{r['count']:,}"
        )
    con.print(t)


def categories_section(trace: AnalysisContext, opts: ReportOptions) -> list[dict[str, Any]]:
    return table_records(categories.run(trace))


def _render_hotspots(con: Console, data: dict[str, Any], opts: ReportOptions) -> None:
    ops = data["ops"] if opts.top is None else data["ops"][: opts.top]
    if not ops:
        return
    t = _table(
        titled("Kernel time by launching op", opts, pooled=True),
        ("Time %", "Total", "Kernels", "Distinct", "Op", "Top kernel"),
        left=("Op", "Top kernel"),
    )
    for r in ops:
        t.add_row(
            f"{100 * r['share']:.1f}",
            fmt_ns(r["total_ns"]),
            f"{r['kernel_count']:,}",
            str(r["distinct_kernels"]),
            clip(r["op"], 40),
            clip(r["top_kernel"], 60),
        )
    con.print(t)
    sources = data.get("sources") or []
    if opts.top is not None:
        sources = sources[: opts.top]
    if not sources:
        return
    t = _table(
        titled("Kernel time by user source line", opts, pooled=True),
        ("Time %", "Total", "Kernels", "Source", "Function", "Top kernel"),
        left=("Source", "Function", "Top kernel"),
    )
    for r in sources:
        t.add_row(
            f"{100 * r['share']:.1f}",
            fmt_ns(r["total_ns"]),
            f"{r['kernel_count']:,}",
            tail(r["source"], 40),
            clip(r["function"], 24),
            clip(r["top_kernel"], 50),
        )
    con.print(t)


def hotspots_section(trace: AnalysisContext, opts: ReportOptions) -> dict[str, Any]:
    kt = hotspots.run(trace, hotspots.HotspotsConfig(top=opts.top_json, by="kernel"))
    ot = hotspots.run(trace, hotspots.HotspotsConfig(top=opts.top_json, by="op"))
    out = {"kernels": table_records(kt), "ops": table_records(ot)}
    # per user source line: traces with Python stacks only
    st = hotspots.run(trace, hotspots.HotspotsConfig(top=opts.top_json, by="source"))
    if st.num_rows:
        out["sources"] = table_records(st)
    return out


def _render_idle(con: Console, data: dict[str, Any], opts: ReportOptions) -> None:
    if not data["devices"]:
        return
    t = _table(
        titled("Idle time", opts),
        (
            "Device",
            "Idle",
            "Host-bound",
            "  of it: data",
            "  other host",
            "Work queued",
            "Longest queued",
            "Sync wait",
            "Queue delay p50",
            "Queue delay p99",
            "Launch call p50",
            "Launch call p99",
            "Kernels < launch",
        ),
    )
    for r in data["devices"]:
        t.add_row(
            _dev(r),
            fmt_ns(r["idle_ns"]),
            fmt_ns(r["host_bound_ns"]),
            fmt_ns(r.get("host_bound_data_ns")),
            fmt_ns(r.get("host_bound_other_ns")),
            fmt_ns(r["queued_ns"]),
            fmt_ns(r["queued_gap_max_ns"]),
            fmt_ns(r["sync_wait_ns"]),
            fmt_ns(r["queue_delay_p50_ns"]),
            fmt_ns(r["queue_delay_p99_ns"]),
            fmt_ns(r["launch_call_p50_ns"]),
            fmt_ns(r["launch_call_p99_ns"]),
            f"{r['short_kernel_count']:,}",
        )
    con.print(t)


def idle_section(trace: AnalysisContext, opts: ReportOptions) -> dict[str, Any]:
    tbl = idle.run(trace)
    rank = [-1 if r is None else r for r in tbl.column("rank").to_pylist()]
    ranks = [
        {"rank": None if r < 0 else r, **summaries.idle_totals(tbl.filter([x == r for x in rank]))}
        for r in sorted(set(rank))
    ]
    # Totals over a rank's devices; never summed across ranks ("total": the one rank's).
    return {
        "devices": table_records(tbl),
        "ranks": ranks,
        "total": summaries.idle_totals(tbl) if len(ranks) <= 1 else None,
    }


def _render_memcpy(con: Console, data: list[dict[str, Any]], opts: ReportOptions) -> None:
    if not data:
        return
    t = _table(
        titled("Memory copies", opts),
        ("Device", "Kind", "Count", "Bytes", "Time", "Bandwidth", "Of peak"),
    )
    for r in data:
        t.add_row(
            _dev(r),
            r["copy_kind"],
            f"{r['count']:,}",
            fmt_bytes(r["bytes"]),
            fmt_ns(r["total_ns"]),
            _rate(r["bandwidth_bytes_per_s"], "B/s"),
            fmt_pct(r["peak_fraction"]),
        )
    con.print(t)


def memcpy_section(trace: AnalysisContext, opts: ReportOptions) -> list[dict[str, Any]]:
    return table_records(memcpy.run(trace))


def _render_fp32(con: Console, data: list[dict[str, Any]], opts: ReportOptions) -> None:
    for r in data:
        who = ("" if r["rank"] is None else f"rank {r['rank']} ") + f"[{opts.covers}] "
        if r["flops"] is None:
            con.print(f"FP32 {who}({r['devices']}): {r['flops_source']}")
            continue
        achieved = (
            f"FP32 {who}({r['devices']}): "
            f"{_rate(r['achieved_flops_per_s_wall'], 'FLOP/s')} over wall, "
            f"{_rate(r['achieved_flops_per_s_busy'], 'FLOP/s')} over busy"
        )
        if r["peak_flops_per_s"] is None:
            con.print(f"{achieved}; no peak: {r['peak_source']} [FLOPs: {r['flops_source']}]")
            continue
        con.print(
            f"{achieved} = {fmt_pct(r['efficiency_wall'])} / "
            f"{fmt_pct(r['efficiency_busy'])} of peak "
            f"{_rate(r['peak_flops_per_s'], 'FLOP/s')} [FLOPs: {r['flops_source']}]"
        )


def fp32_section(trace: AnalysisContext, opts: ReportOptions) -> list[dict[str, Any]]:
    return table_records(fp32.run(trace))


# The sections this module declares; tbdtrace.report.contents lists them in report order.
STEPS = Section("steps", steps_section, _render_steps)
UTILIZATION = Section("utilization", utilization_section, _render_util)
CATEGORIES = Section("categories", categories_section, _render_categories)
HOTSPOTS = Section("hotspots", hotspots_section, _render_hotspots)
IDLE = Section("idle", idle_section, _render_idle)
MEMCPY = Section("memcpy", memcpy_section, _render_memcpy)
FP32 = Section("fp32", fp32_section, _render_fp32)
