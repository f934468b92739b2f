"""``tbdtrace diff A B``: its document, its flat tables (CSV, JSON sections), its text, its
Markdown summary (for a CI log) and its HTML page.

The command parses and opens; what it prints is made here, as the report's sections are.
"""

from __future__ import annotations

import html as _html
import sys
from typing import Any

from tbdtrace.analysis import compare as diff
from tbdtrace.analysis.engine import context, memory_replay, window
from tbdtrace.report.fmt import clip, fmt_bytes, fmt_ns
from tbdtrace.report.textui import Console, Table
from tbdtrace.trace import Trace


def document(
    a: Trace, b: Trace, spec: Any, top: int, thresholds: list[Any] | None = None
) -> dict[str, Any]:
    """The comparison of the window ``spec`` of A and of B (``diff.compare``) with the two
    windows under ``"window"`` and, with ``thresholds``, the gate under ``"gate"``."""
    ca, cb = context.of(a), context.of(b)
    wa, wb = window.resolve(ca, spec), window.resolve(cb, spec)
    peaks = (memory_replay.summarize(ca)["peak_bytes"], memory_replay.summarize(cb)["peak_bytes"])
    doc = diff.compare(
        ca.windowed(wa), cb.windowed(wb), top=top, memory_peaks=peaks, thresholds=thresholds
    )
    doc["window"] = {"a": wa.to_json(), "b": wb.to_json()}
    return doc


def tables(doc: dict[str, Any]) -> dict[str, Any]:
    """The document as tables: the headline as one row per figure, beside categories,
    kernels, ops and (with thresholds) the gate's results."""
    out: dict[str, Any] = {
        "headline": [{"figure": k, **v} for k, v in doc["headline"].items()],
        "categories": doc["categories"],
        "kernels": doc["kernels"],
        "ops": doc["ops"],
    }
    if "gate" in doc:
        out["gate"] = doc["gate"]["results"]
    out["traces"] = {"a": doc["a"], "b": doc["b"]}
    return out


def _fmt(key: str, v: Any) -> str:
    if v is None:
        return "-"
    if key.endswith("_ns"):
        return fmt_ns(v)
    if key.endswith("_bytes"):
        return fmt_bytes(v)
    if "utilization" in key:
        return f"{100 * v:.1f}%"
    if isinstance(v, float):
        return f"{v:,.0f}" if key == "steps" and v.is_integer() else f"{v:,.2f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def _unit_fmt(unit: str, v: Any) -> str:
    return _fmt({"ns": "x_ns", "bytes": "x_bytes", "ratio": "utilization"}.get(unit, "x"), v)


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:+.1f}%"


def window_label(doc: dict[str, Any]) -> str:
    """The window both sides cover."""
    la, lb = doc["window"]["a"]["label"], doc["window"]["b"]["label"]
    return la if la == lb else f"A: {la}, B: {lb}"


def covers(doc: dict[str, Any]) -> str:
    """What the tables cover: the window, and whether times are per measured step."""
    per = ", per measured step" if doc["per_step"] else ", totals (no measured steps)"
    return window_label(doc) + per


def _steps_line(doc: dict[str, Any]) -> str:
    n = doc["headline"]["measured_steps"]
    a, b = _fmt("steps", n["a"]), _fmt("steps", n["b"])
    return f"A: {doc['a']} ({a} measured steps)\nB: {doc['b']} ({b} measured steps)"


def render_text(doc: dict[str, Any], console: Console | None = None) -> None:
    """Headline, categories, kernels and ops of the comparison, each titled with what it
    covers; then the gate's results and verdict when thresholds were given."""
    con = console or Console(width=None if sys.stdout.isatty() else 160)
    con.print(_steps_line(doc))
    cov = covers(doc)
    con.print(f"Window: {cov}. Every table below covers it.")
    t = Table(title=f"Headline ({window_label(doc)})")
    for c in ("Figure", "A", "B", "B - A", "B / A"):
        t.add_column(c, justify="left" if c == "Figure" else "right")
    for k, v in doc["headline"].items():
        ratio = "-" if v["ratio"] is None else f"{v['ratio']:.3f}"
        t.add_row(k, _fmt(k, v["a"]), _fmt(k, v["b"]), _fmt(k, v["delta"]), ratio)
    con.print(t)
    per = doc["per_step"]
    a_k, b_k, d_k = (
        ("a_per_step_ns", "b_per_step_ns", "delta_per_step_ns")
        if per
        else (
            "a_total_ns",
            "b_total_ns",
            "delta_ns",
        )
    )
    ct = Table(title=f"Device time by category ({cov})")
    for col in ("Category", "A", "B", "B - A", "B / A", "A %", "B %"):
        ct.add_column(col, justify="left" if col == "Category" else "right")
    for r in doc["categories"]:
        ct.add_row(
            r["category"],
            fmt_ns(r[a_k]),
            fmt_ns(r[b_k]),
            fmt_ns(r[d_k]),
            "-" if r["ratio"] is None else f"{r['ratio']:.3f}",
            f"{100 * r['a_share']:.1f}",
            f"{100 * r['b_share']:.1f}",
        )
    con.print(ct)
    k = Table(title=f"Kernels, largest change first ({cov})")
    for col in ("B - A", "A", "B", "A n", "B n", "Category", "Name"):
        k.add_column(col, justify="left" if col in ("Category", "Name") else "right")
    for r in doc["kernels"]:
        k.add_row(
            fmt_ns(r[d_k]),
            fmt_ns(r[a_k]),
            fmt_ns(r[b_k]),
            f"{r['a_count']:,}",
            f"{r['b_count']:,}",
            r["category"],
            clip(r["name"], 70, blank=""),
        )
    con.print(k)
    o = Table(title=f"Ops (device time they launched), largest change first ({cov})")
    for col in ("B - A", "A", "B", "A kernels", "B kernels", "Op"):
        o.add_column(col, justify="left" if col == "Op" else "right")
    for r in doc["ops"]:
        o.add_row(
            fmt_ns(r[d_k]),
            fmt_ns(r[a_k]),
            fmt_ns(r[b_k]),
            f"{r['a_kernel_count']:,}",
            f"{r['b_kernel_count']:,}",
            clip(r["op"], 70, blank=""),
        )
    con.print(o)
    if "gate" in doc:
        g = Table(title=f"Regression gate ({cov})")
        for col in ("Metric", "A", "B", "Change", "Limit", "Worse when", "Verdict"):
            g.add_column(col, justify="left" if col in ("Metric", "Verdict") else "right")
        for r in doc["gate"]["results"]:
            g.add_row(
                r["metric"],
                _unit_fmt(r["unit"], r["a"]),
                _unit_fmt(r["unit"], r["b"]),
                _change_text(r),
                f"{100 * r['limit']:g}%",
                r["worse"],
                r["status"],
            )
        con.print(g)
        con.print(verdict(doc))


def _change_text(r: dict[str, Any]) -> str:
    if r["change"] is None and r["status"] == "regression":
        return "new"  # from 0 in A
    return _pct(r["change"])


def verdict(doc: dict[str, Any]) -> str:
    """One line: the gate passed, or how many gates failed and the exit status."""
    g = doc["gate"]
    n = len(g["results"])
    if g["passed"]:
        return f"Gate passed: {n} of {n} within their limits."
    bad = [r["metric"] for r in g["results"] if r["status"] != "pass"]
    return (
        f"REGRESSION: {g['failed']} of {n} gates failed ({', '.join(bad)}); "
        f"exit status {g['exit_code']}."
    )


def markdown(doc: dict[str, Any], top: int = 5) -> str:
    """A short Markdown summary for a CI log (GitHub's job summary renders it): the
    verdict, the gate's table, then the largest per-step changes."""
    lines = []
    if "gate" in doc:
        g = doc["gate"]
        mark = "passed" if g["passed"] else "**REGRESSION**"
        lines.append(f"### tbdtrace diff: {mark}")
        lines += ["", verdict(doc), ""]
    else:
        lines += ["### tbdtrace diff", ""]
    n = doc["headline"]["measured_steps"]
    lines.append(
        f"A: `{doc['a']}` ({n['a']} measured steps) · B: `{doc['b']}` ({n['b']} measured "
        f"steps) · {covers(doc)}"
    )
    if "gate" in doc:
        lines += ["", "| metric | A | B | change | limit | verdict |", "|---|--:|--:|--:|--:|---|"]
        for r in doc["gate"]["results"]:
            status = r["status"] if r["status"] == "pass" else f"**{r['status']}**"
            lines.append(
                f"| `{r['metric']}` | {_unit_fmt(r['unit'], r['a'])} | "
                f"{_unit_fmt(r['unit'], r['b'])} | {_change_text(r)} | "
                f"{100 * r['limit']:g}% ({r['worse']} is worse) | {status} |"
            )
    d_k = "delta_per_step_ns" if doc["per_step"] else "delta_ns"
    a_k, b_k = (
        ("a_per_step_ns", "b_per_step_ns") if doc["per_step"] else ("a_total_ns", "b_total_ns")
    )
    for title, rows, key in (("Kernels", doc["kernels"], "name"), ("Ops", doc["ops"], "op")):
        if not rows:
            continue
        per = " per measured step" if doc["per_step"] else ""
        lines += ["", f"{title}, largest change{per} first:", "", "| B - A | A | B | name |"]
        lines.append("|--:|--:|--:|---|")
        for r in rows[:top]:
            name = clip(r[key], 80, blank="").replace("|", "\\|")
            delta = fmt_ns(r[d_k])
            delta = delta if delta.startswith("-") or r[d_k] is None else "+" + delta
            lines.append(f"| {delta} | {fmt_ns(r[a_k])} | {fmt_ns(r[b_k])} | `{name}` |")
    return "\n".join(lines) + "\n"


def render_html(doc: dict[str, Any]) -> str:
    """The diff as one self-contained page: verdict, then each table, sortable."""
    from tbdtrace.report import html, html_page, tabular

    title = f"tbdtrace diff: {doc['a']} vs {doc['b']}"
    head = verdict(doc) if "gate" in doc else ""
    flat = tables(doc)
    body = "".join(
        f'<h2 id="s-{_e(k)}">{_e(k)}</h2>' + "".join(html._table(t) for t in tabular.tables(k, v))
        for k, v in flat.items()
    )
    cls = (
        "" if "gate" not in doc else (' class="pass"' if doc["gate"]["passed"] else ' class="fail"')
    )
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{html_page.CSS}</style>"
        f"<script>{html_page.GUARD}</script></head><body>"
        f'<header><h1>{_e(title)}</h1><div class="meta">{_e(covers(doc))}</div></header>'
        f'<main><p id="verdict"{cls}>{_e(head)}</p>{body}</main>'
        f"<script>{html_page.SCRIPT}</script></body></html>\n"
    )


def _e(s: Any) -> str:
    return _html.escape(str(s), quote=True)
