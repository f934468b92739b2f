"""``tbdtrace diff A B``: its document, its flat tables (CSV, JSON sections) and its text.

The command parses and opens; what it prints is made here, as the report's sections are.
"""

from __future__ import annotations

import sys
from typing import Any

from tbdtrace.passes import diff, window
from tbdtrace.report.fmt import clip, fmt_ns
from tbdtrace.report.textui import Console, Table
from tbdtrace.trace import Trace


def document(a: Trace, b: Trace, spec: Any, top: int) -> dict[str, Any]:
    """The comparison of the window ``spec`` of A and of B (``diff.compare``) with the two
    windows under ``"window"``."""
    wa, wb = window.resolve(a, spec), window.resolve(b, spec)
    doc = diff.compare(window.view(a, wa), window.view(b, wb), top=top)
    doc["window"] = {"a": wa.to_json(), "b": wb.to_json()}
    return doc


def tables(doc: dict[str, Any]) -> dict[str, Any]:
    """The document as tables: the headline as one row per figure, beside categories and
    kernels."""
    return {
        "headline": [{"figure": k, **v} for k, v in doc["headline"].items()],
        "categories": doc["categories"],
        "kernels": doc["kernels"],
        "traces": {"a": doc["a"], "b": doc["b"]},
    }


def _fmt(key: str, v: Any) -> str:
    if v is None:
        return "-"
    if key.endswith("_ns"):
        return fmt_ns(v)
    if "utilization" in key:
        return f"{100 * v:.1f}%"
    if isinstance(v, float):
        return f"{v:,.2f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def render_text(doc: dict[str, Any], console: Console | None = None) -> None:
    """Headline, categories and kernels of the comparison, each titled with the window."""
    con = console or Console(width=None if sys.stdout.isatty() else 160)
    con.print(f"A: {doc['a']}\nB: {doc['b']}")
    la, lb = doc["window"]["a"]["label"], doc["window"]["b"]["label"]
    covers = la if la == lb else f"A: {la}, B: {lb}"
    con.print(f"Window: {covers}. Every table below covers it.")
    t = Table(title=f"Headline ({covers})")
    for c in ("Figure", "A", "B", "B - A", "B / A"):
        t.add_column(c, justify="left" if c == "Figure" else "right")
    for k, v in doc["headline"].items():
        t.add_row(
            k,
            _fmt(k, v["a"]),
            _fmt(k, v["b"]),
            _fmt(k, v["delta"]),
            "-" if v["ratio"] is None else f"{v['ratio']:.3f}",
        )
    con.print(t)
    ct = Table(title=f"Device time by category ({covers})")
    for col in ("Category", "A", "B", "B - A", "A %", "B %"):
        ct.add_column(col, justify="left" if col == "Category" else "right")
    for r in doc["categories"]:
        ct.add_row(
            r["category"],
            fmt_ns(r["a_total_ns"]),
            fmt_ns(r["b_total_ns"]),
            fmt_ns(r["delta_ns"]),
            f"{100 * r['a_share']:.1f}",
            f"{100 * r['b_share']:.1f}",
        )
    con.print(ct)
    k = Table(title=f"Kernels, largest change first ({covers})")
    for col in ("B - A", "A", "B", "A n", "B n", "Category", "Name"):
        k.add_column(col, justify="left" if col in ("Category", "Name") else "right")
    for r in doc["kernels"]:
        name = clip(r["name"], 70, blank="")
        k.add_row(
            fmt_ns(r["delta_ns"]),
            fmt_ns(r["a_total_ns"]),
            fmt_ns(r["b_total_ns"]),
            f"{r['a_count']:,}",
            f"{r['b_count']:,}",
            r["category"],
            name,
        )
    con.print(k)
