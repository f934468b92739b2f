"""Report section ``flops``: FLOPs, achieved FLOP/s, peak, efficiency, coverage and MFU per
rank and precision (the flops pass; docs/METRICS.md, "FLOPs")."""

from __future__ import annotations

from typing import Any

from tbdtrace.analysis.engine.context import AnalysisContext
from tbdtrace.analysis.passes import flops, kernel_flops
from tbdtrace.report.fmt import clip, fmt_ns, fmt_pct
from tbdtrace.report.section_api import ReportOptions, Section, table_records
from tbdtrace.report.textui import Console, Table


def _rate(v: float | None) -> str:
    if v is None:
        return "-"
    for p, s in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= p:
            return f"{v / p:.2f} {s}"
    return f"{v:.2f} "


def _count(v: int | None) -> str:
    return "-" if v is None else _rate(float(v)).strip()


def _render(con: Console, data: dict[str, Any], opts: ReportOptions) -> None:
    rows = data["rows"]
    if data.get("note"):
        con.print(f"FLOPs: {data['note']}")
    if not rows:
        return
    thr = data["coverage_threshold"]
    t = Table(title="FLOPs by precision (window per rank below)", title_justify="left")
    for c in ("Rank", "Precision", "FLOPs", "FLOP/s wall", "FLOP/s busy", "Peak", "Eff wall"):
        t.add_column(c, justify="right", no_wrap=True)
    t.add_column("Eff busy", justify="right", no_wrap=True)
    t.add_column("Coverage", justify="left", no_wrap=True)
    t.add_column("MFU", justify="right", no_wrap=True)
    for r in rows:
        cov = r["coverage"]
        note = "" if cov is None or cov >= thr else f" < {fmt_pct(thr)}: partial"
        t.add_row(
            "-" if r["rank"] is None else str(r["rank"]),
            r["precision"] or "none",
            _count(r["flops"]),
            _rate(r["achieved_flops_per_s_wall"]),
            _rate(r["achieved_flops_per_s_busy"]),
            _rate(r["peak_flops_per_s"]),
            fmt_pct(r["efficiency_wall"]),
            fmt_pct(r["efficiency_busy"]),
            ("-" if cov is None else fmt_pct(cov)) + note,
            fmt_pct(r["mfu"]),
        )
    con.print(t)
    if data.get("recorder"):
        con.print(
            "  PyTorch ops were recorded at dispatch during this capture (capture "
            "--torch-flops: about 5-10 us of host time per op, in every time here)"
        )
    seen: set[Any] = set()
    for r in rows:
        who = "" if r["rank"] is None else f"rank {r['rank']} "
        first = r["rank"] not in seen
        if first:
            seen.add(r["rank"])
            con.print(
                f"  {who}({r['devices']}): window {fmt_ns(r['window_ns'])}, "
                f"{r['window_source']}; busy {fmt_ns(r['busy_ns'])}; coverage = counted share "
                f"of gemm/conv/attention kernel time ({fmt_ns(r['counted_kernel_ns'])} of "
                f"{fmt_ns(r['flop_kernel_ns'])})"
            )
        p = r["precision"] or "none"
        con.print(f"    {who}{p} FLOPs: {r['flops_source']}")
        if r["precision"] is not None:
            con.print(f"    {who}{p} peak: {r['peak_source']}")
        if first and r["model_flops_source"] and r["precision"] is not None:
            con.print(
                f"    {who}MFU ({p}, the precision with the most FLOPs): "
                f"{r['model_flops_per_sample']:.4g} FLOPs/sample ({r['model_flops_source']}) "
                + (
                    f"x {r['samples']:,} samples / window / {p} peak"
                    if r["samples"]
                    else "- no MFU: the measured steps record no samples"
                )
            )
    _render_kernels(con, data.get("kernels") or [], opts)


def _render_kernels(con: Console, rows: list[dict[str, Any]], opts: ReportOptions) -> None:
    shown = rows if opts.top is None else rows[: opts.top]
    if not shown:
        return
    t = Table(
        title="FLOP/s by kernel (kernels whose op launched no other kernel)",
        title_justify="left",
    )
    for c in ("Rank", "Precision", "Kernels", "Total", "FLOPs", "FLOP/s", "Of peak"):
        t.add_column(c, justify="right", no_wrap=True)
    t.add_column("Name", no_wrap=True)
    room = max(40, con.width - 90)
    for r in shown:
        name = r["name"] or "-"
        t.add_row(
            "-" if r["rank"] is None else str(r["rank"]),
            r["precision"],
            f"{r['kernels']:,}",
            fmt_ns(r["total_ns"]),
            _count(r["flops"]),
            _rate(r["achieved_flops_per_s"]),
            fmt_pct(r["efficiency"]),
            clip(name, room, blank=""),
        )
    con.print(t)


def flops_section(trace: AnalysisContext, opts: ReportOptions) -> dict[str, Any]:
    cfg = flops.FlopsConfig(model_flops_per_sample=opts.model_flops_per_sample)
    kt = kernel_flops.run(trace, cfg)
    if opts.top_json is not None:
        kt = kt.slice(0, opts.top_json)
    extra = trace.meta.get("extra") or {}
    rows = flops.run(trace, cfg)
    note = None
    counted = rows.column("flops").null_count < rows.num_rows
    if trace.meta.get("source") == "cupti" and not extra.get("torch_flops") and not counted:
        # The recorder is off by default (its host cost); counters are a separate run mode.
        note = (
            "none counted: this GPU capture has no FLOP source (capture --backend cupti "
            "records PyTorch op FLOPs only with --torch-flops, hardware counts with "
            "--counters flops)"
        )
    return {
        "coverage_threshold": cfg.coverage_threshold,
        "kernels": table_records(kt),
        # capture --backend cupti's dispatch-level recorder ran (its overhead is in the times)
        "recorder": bool(extra.get("torch_flops")),
        "rows": table_records(rows),
        "note": note,
    }


# The sections this module declares; tbdtrace.report.contents lists them in report order.
FLOPS = Section("flops", flops_section, _render)
