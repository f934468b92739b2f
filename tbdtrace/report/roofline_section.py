"""The roofline section (opt-in: ``report --roofline``): per op shape and per op family,
achieved FLOP/s and bytes/s against the device's roofs (``passes/roofline.py``)."""

from __future__ import annotations

from typing import Any

from tbdtrace.analysis.engine.context import AnalysisContext
from tbdtrace.analysis.passes import roofline
from tbdtrace.report.fmt import clip, fmt_ns, fmt_pct
from tbdtrace.report.section_api import ReportOptions, Section, table_records, titled
from tbdtrace.report.textui import Console, Table

HOW = "tbdtrace report --roofline (library: ReportOptions(roofline=True))"


def roofline_section(trace: AnalysisContext, opts: ReportOptions) -> dict[str, Any]:
    """``included`` false (and how to turn it on) unless ``opts.roofline``; else the
    ``families`` and ``ops`` tables (ops limited by ``top_json``)."""
    if not opts.roofline:
        return {"included": False, "how": HOW}
    ops = roofline.run(trace)
    if opts.top_json is not None:
        ops = ops.slice(0, opts.top_json)
    return {
        "included": True,
        "families": table_records(roofline.run(trace, roofline.RooflineConfig(by="family"))),
        "ops": table_records(ops),
    }


def _rate(v: float | None, unit: str) -> str:
    return "-" if v is None else f"{v / 1e9:,.1f} G{unit}"


def _render(con: Console, data: dict[str, Any], opts: ReportOptions) -> None:
    if not data.get("included"):
        con.print(f"Roofline: not computed by default; {data['how']} adds it.")
        return
    cols = ("Time", "FLOP/s", "bytes/s", "FLOP/B", "Ridge", "Bound", "Of roof")

    def cells(r: dict[str, Any]) -> list[str]:
        inten, ridge = r["intensity_flop_per_byte"], r["ridge_flop_per_byte"]
        return [
            fmt_ns(r["kernel_ns"]),
            _rate(r["achieved_flops_per_s"], "FLOP/s"),
            _rate(r["achieved_bytes_per_s"], "B/s"),
            "-" if inten is None else f"{inten:,.1f}",
            "-" if ridge is None else f"{ridge:,.1f}",
            r["bound"] or "-",
            fmt_pct(r["roof_share"]),
        ]

    t = Table(title=titled("Roofline by op family", opts))
    for c in ("Rank", "Family", "Precision", *cols):
        t.add_column(c, justify="left" if c in ("Family", "Precision", "Bound") else "right")
    for r in data["families"]:
        rank = "-" if r["rank"] is None else str(r["rank"])
        t.add_row(rank, r["family"], r["precision"] or "-", *cells(r))
    con.print(t)
    o = Table(title=titled("Roofline by op and shape, longest first", opts))
    for c in (*cols, "Op", "Shapes"):
        o.add_column(c, justify="left" if c in ("Op", "Shapes", "Bound") else "right")
    for r in data["ops"][: opts.top or None]:
        o.add_row(*cells(r), r["op"], clip(r["input_shapes"], 50))
    con.print(o)


ROOFLINE = Section("roofline", roofline_section, _render)
