"""The ``memory`` report section: peak, breakdown at the peak, per level and per step."""

from __future__ import annotations

from typing import Any

from tbdtrace.analysis.engine import memory_advice, memory_replay
from tbdtrace.analysis.engine.context import AnalysisContext
from tbdtrace.report.fmt import fmt_bytes, fmt_ns
from tbdtrace.report.section_api import ReportOptions, Section
from tbdtrace.report.textui import Console, Table
from tbdtrace.schema import MEMORY_CATEGORIES


def _device_label(d: dict[str, Any] | None) -> str:
    """``cuda:0, rank 1, pid 7`` (rank and pid when known) of a device key."""
    if not d:
        return "-"
    dev = d["device_type"] or "?"
    if d["device_id"] is not None and d["device_type"] != "cpu":
        dev += f":{d['device_id']}"
    extra = [f"{k} {d[k]}" for k in ("rank", "pid") if d.get(k) is not None]
    return ", ".join([dev, *extra])


# What a reserved figure is, by its source (memory pass: ``reserved_source``).
RESERVED_SOURCES = {
    "driver_allocations": "driver allocations",
    "allocator_total": "allocator total",
}


def _render(con: Console, data: dict[str, Any], opts: ReportOptions) -> None:
    if not data["event_count"] or data["peak_bytes"] is None:
        return
    where = _device_label(data["device"])
    covers = data.get("covers") or "whole trace"
    peak = data["peak_bytes"]
    start = _first_ts(data)
    whole = data.get("whole_trace") or {}
    if data.get("has_categories", True):
        t = Table(title=f"Memory at peak ({data['level']}, {where}, {covers})")
        for c in ("Category", "Bytes", "Share"):
            t.add_column(c, justify="right" if c != "Category" else "left")
        shown = list(MEMORY_CATEGORIES)
        if data["source"] == "allocator_totals":
            shown.append("pre_existing")
        for cat in shown:
            b = data["breakdown_at_peak"][cat]
            t.add_row(cat, fmt_bytes(b), f"{100 * b / peak:.1f}%" if peak else "-")
        t.add_row("[bold]total[/bold]", fmt_bytes(peak), "100.0%" if peak else "-")
        con.print(t)
    else:
        pre = (data["breakdown_at_peak"] or {}).get("pre_existing")
        before = (
            f"; allocated before the trace began: {fmt_bytes(pre)}"
            if data["source"] == "allocator_totals" and pre
            else ""
        )
        con.print(
            f"Memory peak ({data['level']}, {where}, {covers}): {fmt_bytes(peak)}; "
            f"no categories in this trace{before} (PyTorch traces get categories from "
            "tbdtrace.collector.memory or --backend torch)."
        )
    if whole and covers != "whole trace":
        phase = f" in {whole['phase']}" if whole.get("phase") else ""
        con.print(
            f"Whole-trace peak: {fmt_bytes(whole['peak_bytes'])}{phase}"
            f" (at {_at(whole.get('peak_ts_ns'), start)}); live when the window began: "
            f"{fmt_bytes(data.get('window_start_bytes'))}."
        )
    if data["source"] == "allocator_totals":
        con.print(
            "Level: the allocator's own totals (Total Allocated); categories from the "
            "allocations in the trace; pre_existing: allocated before the trace began."
        )
    _render_labels(con, data.get("labels"))
    for lv, p in data["levels"].items():
        src = RESERVED_SOURCES.get(p.get("reserved_source") or "")
        named = f" ({src})" if src else ""
        con.print(
            f"peak {lv}{named}: {fmt_bytes(p['peak_bytes'])} at "
            f"{_at(p['peak_ts_ns'], start)} on {where}, {covers}"
        )
    if (
        data["device"]
        and data["device"].get("device_type") == "cpu"
        and "reserved" not in (data["levels"])
    ):
        con.print("reserved: - (the CPU allocator keeps no reserve)")
    _render_devices(con, data["devices"], covers)
    if data["unmatched_frees"]:
        con.print(
            f"{data['unmatched_frees']:,} frees of blocks allocated before capture were ignored"
        )
    _render_advice(con, data.get("advice"), where, covers, opts)
    steps = data["steps"] if opts.top is None else data["steps"][: opts.top]
    if not steps:
        return
    s = Table(title="Memory per step")
    for c in ("Step", "Start", "Peak", "End", "Activations at peak", "Other at peak"):
        s.add_column(c, justify="right")
    for st in steps:
        if st["peak_bytes"] is None:
            continue
        b = st["breakdown_at_peak"]
        s.add_row(
            str(st["step"]),
            fmt_bytes(st["start_bytes"]),
            fmt_bytes(st["peak_bytes"]),
            fmt_bytes(st["end_bytes"]),
            fmt_bytes(b["activations"]),
            fmt_bytes(b["other"]),
        )
    con.print(s)


def _render_advice(
    con: Console, adv: dict[str, Any] | None, where: str, covers: str, opts: ReportOptions
) -> None:
    """The memory advice: headroom, fragmentation, the peak by op and by module."""
    if not adv or adv.get("peak_bytes") is None:
        return
    total = adv.get("device_memory_bytes")
    if adv.get("headroom_bytes") is not None:
        con.print(
            f"Headroom on {where}: {fmt_bytes(adv['headroom_bytes'])} of "
            f"{fmt_bytes(total)} (device memory minus the {adv['headroom_of']} peak)."
        )
    else:
        con.print(f"Headroom on {where}: unknown (the trace does not give the device's memory).")
    if adv.get("fragmentation_bytes") is not None:
        con.print(
            f"Fragmentation at the allocated peak: {fmt_bytes(adv['fragmentation_bytes'])} "
            f"reserved but not allocated (reserved {fmt_bytes(adv['reserved_at_peak_bytes'])})."
        )
    else:
        con.print("Fragmentation: unknown (no reserved level at the allocated peak).")
    for by, title in (("peak_by_op", "op"), ("peak_by_module", "module")):
        rows = adv.get(by) or []
        if not rows or all(r["name"] is None and not r["pre_existing"] for r in rows):
            con.print(
                f"Memory peak by {title}: not attributed (the allocations carry no thread "
                "inside a recorded op)."
            )
            continue
        t = Table(title=f"Memory peak by {title} ({adv['level']}, {where}, {covers})")
        for c in (title.capitalize(), "Blocks", "Bytes", "Share of peak"):
            t.add_column(c, justify="left" if c == title.capitalize() else "right")
        for r in rows if opts.top is None else rows[: opts.top]:
            name = (
                "(allocated before the trace)"
                if r["pre_existing"]
                else (r["name"] or "(not attributed)")
            )
            share = "-" if r["share"] is None else f"{100 * r['share']:.1f}%"
            t.add_row(name, f"{r['blocks']:,}", fmt_bytes(r["bytes"]), share)
        con.print(t)


def _render_labels(con: Console, labels: dict[str, Any] | None) -> None:
    """How the categories were labelled and, post hoc, what they cannot tell apart."""
    if not labels:
        return
    mode = labels["mode"]
    if mode == "posthoc":
        con.print(
            "Categories labelled post hoc (allocator blocks, step-boundary snapshots of "
            "parameters, gradients and optimizer state, and the trace's phases); they "
            "cannot tell apart:"
        )
        for c in labels["cannot_tell_apart"]:
            con.print(f"  - {c}")
    elif mode == "exact":
        con.print("Categories labelled by the hook tracker (--torch-memory exact).")


def _render_devices(con: Console, devices: list[dict[str, Any]], covers: str) -> None:
    """Peak per device and level (device and host memory never added together)."""
    if len(devices) < 2 and not any(d["allocator_reserved_peak_bytes"] for d in devices):
        return
    t = Table(title=f"Memory peak per device ({covers})")
    cols = ("Device", "Level", "Peak", "Whole-trace peak", "Source", "Reserved peak", "Reserved")
    for c in cols:
        t.add_column(
            c, justify="left" if c in ("Device", "Level", "Source", "Reserved") else "right"
        )
    for d in devices:
        res = d["allocator_reserved_peak_bytes"]
        src = RESERVED_SOURCES.get(d.get("reserved_source") or "", "-")
        t.add_row(
            _device_label(d),
            d["level"] or "-",
            fmt_bytes(d["peak_bytes"]),
            fmt_bytes(d.get("whole_trace_peak_bytes")),
            "allocator total" if d["source"] == "allocator_totals" else "replay of events",
            fmt_bytes(res) if res is not None else "-",
            src,
        )
    con.print(t)


def _at(ts: int | None, start: int | None) -> str:
    return "-" if ts is None or start is None else f"+{fmt_ns(ts - start)}"


def _first_ts(data: dict[str, Any]) -> int | None:
    if data["steps"]:
        return int(data["steps"][0]["start_ns"])
    return data.get("first_ts_ns")


def memory_section(trace: AnalysisContext, opts: ReportOptions) -> dict[str, Any]:
    """The memory pass summary (see :func:`tbdtrace.analysis.engine.memory_replay.summarize`) of
    the report's window: replayed over the whole trace (what was live when the window
    began counts), the headline peak the window's, the whole-trace peak beside it."""
    doc = memory_replay.summarize(trace.whole, window=trace.window)
    doc["advice"] = memory_advice.advice(trace.whole, doc)
    return doc


# The sections this module declares; tbdtrace.report.contents lists them in report order.
MEMORY = Section("memory", memory_section, _render)
