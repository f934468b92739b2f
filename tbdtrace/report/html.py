"""HTML rendering of a report document: one self-contained page (styles, scripts and
plots inline, nothing fetched), with the summary, plots drawn by
:mod:`tbdtrace.report.plots` as inline SVG, and every section as sortable tables.

The page is fed by the report document only (:func:`tbdtrace.report.build`); a section
the renderer does not know is still shown as tables (:mod:`tbdtrace.report.tabular`), and
a plot whose data is missing is left out (a note says which and why).
"""

from __future__ import annotations

import html
import io
import re
import warnings
from collections.abc import Callable
from typing import Any

from tbdtrace.report import html_page, page, tabular
from tbdtrace.report.fmt import clip, fmt_bytes, fmt_ns, fmt_pct

Doc = dict[str, Any]
# Tables with more rows start folded, and rows past MAX_ROWS are left to the CSV and
# JSON outputs (the page stays small and quick to open).
FOLD_ROWS = 60
MAX_ROWS = 500


def figures(doc: Doc, skip: tuple[str, ...] = ()) -> tuple[list[tuple[str, Any]], list[str]]:
    """(plot key, matplotlib Figure) for every plot the document has data for (but those
    in ``skip``), and notes on plots left out because the document's data did not fit."""
    out, notes = [], []
    for key, make in PLOTS:
        if key in skip:
            continue
        try:
            fig = make(doc)
        except (KeyError, TypeError, ValueError, IndexError) as e:
            notes.append(f"{key}: not drawn, the document's data does not fit ({e})")
            continue
        if fig is not None:
            out.append((key, fig))
    return out, notes


def _records(value: Any, where: str) -> list[dict[str, Any]]:
    """``value`` when it is a list of records (dicts), [] when absent; TypeError else."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(r, dict) for r in value):
        raise TypeError(f"{where} is not a list of records")
    return value


def _section_dict(doc: Doc, key: str) -> dict[str, Any]:
    value = doc.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"{key} is not an object")
    return value


def _steps(doc: Doc) -> Any:
    from tbdtrace.report import plots

    steps = _records(_section_dict(doc, "steps").get("steps"), "steps.steps")
    return plots.step_times(steps) if steps else None


def _util(doc: Doc) -> Any:
    from tbdtrace.report import plots

    devices = _records(_section_dict(doc, "utilization").get("devices"), "utilization.devices")
    rows = [r for r in devices if r.get("step") is not None]
    return plots.utilization_per_step(rows) if rows else None


def _bars(rows: list[dict[str, Any]], label: str, title: str, tag: str, cat: bool = False) -> Any:
    from tbdtrace.report import plots

    if not rows:
        return None
    colors = [plots.color_of(r[label]) for r in rows] if cat else None
    return plots.share_bars(
        [r[label] or "-" for r in rows],
        [r["total_ns"] for r in rows],
        [r["share"] for r in rows],
        title,
        tag,
        colors,
    )


def covers(doc: Doc, key: str) -> str:
    """What section ``key`` covers, as the document's window says (``window.sections``);
    "" when the document does not say."""
    secs = _dict(_dict(doc.get("window")).get("sections"))
    v = secs.get(key)
    return str(v) if v else ""


def _in(doc: Doc, key: str) -> str:
    c = covers(doc, key)
    return f"; {c}" if c else ""


def _categories(doc: Doc) -> Any:
    return _bars(
        _records(doc.get("categories"), "categories"),
        "category",
        f"Device time by category (kernels, copies, sets{_in(doc, 'categories')})",
        "cat",
        True,
    )


def _kernels(doc: Doc) -> Any:
    rows = _records(doc.get("kernels"), "kernels")[:15]
    return _bars(
        rows, "name", f"Top {len(rows)} kernels (share of kernel time{_in(doc, 'kernels')})", "kern"
    )


def _ops(doc: Doc) -> Any:
    rows = _records(_section_dict(doc, "hotspots").get("ops"), "hotspots.ops")[:15]
    return _bars(
        rows,
        "op",
        f"Top {len(rows)} launching ops (share of kernel time{_in(doc, 'hotspots')})",
        "ops",
    )


def _sources(doc: Doc) -> Any:
    rows = _records(_section_dict(doc, "hotspots").get("sources"), "hotspots.sources")[:15]
    title = f"Top {len(rows)} user source lines (share of kernel time{_in(doc, 'hotspots')})"
    return _bars(rows, "source", title, "src")


def _idle(doc: Doc) -> Any:
    from tbdtrace.report import plots

    rows = _records(_section_dict(doc, "idle").get("devices"), "idle.devices")
    return plots.idle_breakdown(rows, covers(doc, "idle") or "whole trace") if rows else None


def _memory(doc: Doc) -> Any:
    from tbdtrace.report import plots

    rows = _records(doc.get("memory_timeline"), "memory_timeline")
    return plots.memory_over_time(rows) if rows else None


def _roofline(doc: Doc) -> Any:
    from tbdtrace.report import plots

    sec = _section_dict(doc, "roofline")
    if not sec.get("included"):
        return None
    return plots.roofline(_records(sec.get("ops"), "roofline.ops"))


def _critical_path(doc: Doc) -> Any:
    from tbdtrace.report import plots

    sec = _section_dict(doc, "critical_path")
    if not sec.get("included"):
        return None
    rows = _records(sec.get("steps"), "critical_path.steps")
    return (
        plots.critical_path(rows, covers(doc, "critical_path") or "whole trace") if rows else None
    )


def flops_rows(doc: Doc) -> list[dict[str, Any]]:
    """Bars of the FLOP efficiency plot, one per (rank, precision) row of the flops
    section's per-precision table (``flops.rows``; never its per-kernel ``flops.kernels``):
    the row's ``efficiency_busy`` and ``efficiency_wall`` as they are, its own ``coverage``
    (never the section's ``coverage_threshold``), its ``flops_source``. A row without a
    precision (no FLOP source) is left out; a row with a precision but no efficiency (no
    peak) is kept with None, and the plot says so. A document of another shape: a list of
    rows, or rows naming their precision ``dtype``. Without a flops section, the ``fp32``
    section's efficiencies stand in."""
    src = doc.get("flops")
    items: list[Any] = []
    threshold = None
    if isinstance(src, list):
        items = src
    elif isinstance(src, dict):
        items = _records(src.get("rows"), "flops.rows")
        t = src.get("coverage_threshold")
        threshold = t if isinstance(t, int | float) else None
    out = []
    for r in items:
        if not isinstance(r, dict):
            continue
        prec = r.get("precision", r.get("dtype"))
        if prec is None:
            continue
        out.append(_flops_bar(r, str(prec), threshold))
    if src is not None:
        return out if any(_has_eff(r) for r in out) else []
    out = [_flops_bar(r, "fp32", None) for r in _records(doc.get("fp32"), "fp32")]
    return out if any(_has_eff(r) for r in out) else []


def _num_or_none(v: Any) -> float | None:
    return v if isinstance(v, int | float) and not isinstance(v, bool) else None


def _has_eff(r: dict[str, Any]) -> bool:
    return r["efficiency_busy"] is not None or r["efficiency_wall"] is not None


def _flops_bar(r: dict[str, Any], prec: str, threshold: float | None) -> dict[str, Any]:
    who = "" if r.get("rank") is None else f"rank {r['rank']} "
    note = r.get("flops_source")
    return {
        "label": f"{who}{prec}",
        "efficiency_busy": _num_or_none(r.get("efficiency_busy")),
        "efficiency_wall": _num_or_none(r.get("efficiency_wall")),
        "coverage": _num_or_none(r.get("coverage")),
        "coverage_threshold": threshold,
        "note": note if isinstance(note, str) else None,
    }


def _flops(doc: Doc) -> Any:
    from tbdtrace.report import plots

    rows = flops_rows(doc)
    return plots.flops_efficiency(rows, covers(doc, "flops")) if rows else None


def _ranks(doc: Doc) -> Any:
    from tbdtrace.report import plots

    steps = _records(_section_dict(doc, "steps").get("steps"), "steps.steps")
    ranks = {s.get("rank") for s in steps if s.get("rank") is not None}
    return plots.rank_steps(steps) if len(ranks) > 1 else None


def _skew(doc: Doc) -> Any:
    from tbdtrace.report import plots

    sk = _section_dict(doc, "collective_skew")
    rows = _records(sk.get("instances"), "collective_skew.instances")
    return plots.collective_skew(rows, sk.get("instance_count") or len(rows)) if rows else None


def _timeline(doc: Doc) -> Any:
    from tbdtrace.report import plots

    st = _section_dict(doc, "step_timeline")
    if not _records(st.get("events"), "step_timeline.events"):
        return None
    return plots.step_timeline(
        st["events"],
        st.get("windows") or [],
        st.get("step"),
        st.get("event_count") or len(st["events"]),
    )


PLOTS: tuple[tuple[str, Callable[[Doc], Any]], ...] = (
    ("steps", _steps),
    ("categories", _categories),
    ("utilization", _util),
    ("step_timeline", _timeline),
    ("memory", _memory),
    ("kernels", _kernels),
    ("ops", _ops),
    ("sources", _sources),
    ("ranks", _ranks),
    ("skew", _skew),
    ("idle", _idle),
    ("flops", _flops),
    ("roofline", _roofline),
    ("critical_path", _critical_path),
)
_WIDE = {"memory", "step_timeline", "utilization"}


def svg(fig: Any, prefix: str) -> str:
    """The figure as an inline ``<svg>`` element; its ids get ``prefix`` so that several
    figures in one page do not share ids."""
    import matplotlib

    buf = io.StringIO()
    # A layout matplotlib cannot fit (a plot with many labels) is drawn as it is; its
    # warning would be a second line on the user's stderr, not news about their trace.
    with (
        matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": prefix}),
        warnings.catch_warnings(),
    ):
        warnings.filterwarnings("ignore", category=UserWarning, module="matplotlib")
        warnings.filterwarnings("ignore", message="constrained_layout not applied")
        fig.savefig(buf, format="svg")
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}-\1"', text)
    text = re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}-\1)", text)
    return re.sub(r'href="#([^"]+)"', rf'href="#{prefix}-\1"', text)


def render(doc: Doc) -> str:
    """The whole page for ``doc`` (a report document): the headline cards, the curated
    tables (:mod:`tbdtrace.report.page`), the plots, then every other table of the
    document with its columns named for people."""
    # the step timeline is the page's own SVG, zoomed in the browser (timeline_svg.py)
    figs, notes = figures(doc, skip=("step_timeline",))
    drawn = dict(figs)
    parts = []
    for key, _ in PLOTS:
        if key == "step_timeline":
            parts.append(_timeline_page(doc, notes))
        elif key in drawn:
            parts.append(_plot(key, drawn[key]))
    t0 = page.trace_start_ns(doc)
    curated = page.tables(doc)
    top = "".join(_curated(t, doc, t0) for t in curated)
    done = {t.source for t in curated} | {c for t in curated for c in t.covers} | SERIES
    tabs = "".join(_section(k, v, done, t0) for k, v in doc.items())
    tr = _dict(doc.get("trace"))
    title = f"tbdtrace report: {tr.get('path', '')}"
    bits = ", ".join(
        f"{k}={tr[k]}" for k in ("source", "backend", "framework", "workload") if tr.get(k)
    )
    nav = "".join(
        f'<a href="#t-{t.key}">{_e(t.title)}</a>' for t in curated if t.rows(doc) is not None
    )
    more = "".join(f'<a href="#s-{_e(k)}">{_e(human(k))}</a>' for k in doc)
    note = "".join(f'<p class="note">{_e(n)}</p>' for n in notes)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)}</title><style>{html_page.CSS}</style>"
        f"<script>{html_page.GUARD}</script></head><body>"
        f'<header><h1>{_e(title)}</h1><div class="meta">{_e(bits)}</div></header>'
        f'<nav>{nav}<a href="#plots">Plots</a><span class="more">{more}</span></nav>'
        f"<main>{_cards(doc)}{top}"
        f'<h2 id="plots">Plots</h2>{note}<div class="plots">{"".join(parts)}</div>'
        f'<h2 id="more">More tables</h2>{tabs}</main>'
        f"<script>{html_page.SCRIPT}</script></body></html>\n"
    )


# Tables drawn by a plot, row by row: the plot shows them, the CSV and JSON hold them.
SERIES = {"memory_timeline", "step_timeline.events", "step_timeline.windows"}


def _curated(t: page.PageTable, doc: Doc, t0: int | None) -> str:
    """One curated table: people's headings and units, the raw value on each cell."""
    rows = t.rows(doc)
    head = f'<h2 id="t-{t.key}">{_e(t.title)}</h2><p class="what">{_e(t.note)}</p>'
    if rows is None:  # a document without that table (a rank-by-rank report)
        return ""
    if not rows:
        return f"{head}<p>(no rows in this window)</p>"
    cols, left = page.shown_cols(t, rows)
    shown = rows[:MAX_ROWS]
    ths = "".join(f'<th data-unit="{c.unit}">{_e(c.label)}</th>' for c in cols)
    body = "".join(
        "<tr>" + "".join(_curated_cell(c, r.get(c.key), t0) for c in cols) + "</tr>" for r in shown
    )
    out = (
        f'{head}<div class="scroll"><table class="sortable curated" data-table="{t.key}" '
        f'data-source="{_e(t.source)}" data-rows="{len(rows)}"><thead><tr>{ths}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )
    if left:
        names = ", ".join(c.label for c in left)
        out += f'<p class="note">Not in this trace: {_e(names)} ({_e(t.missing)}).</p>'
    if len(shown) < len(rows):
        out += (
            f'<p class="note">The first {len(shown):,} of {len(rows):,} rows; all of them in '
            "<code>tbdtrace report --format csv</code>, <code>json</code> or "
            "<code>xlsx</code>.</p>"
        )
    return out


def _curated_cell(c: page.Col, v: Any, t0: int | None) -> str:
    if v is None:
        return '<td data-v="">-</td>'
    if c.unit == "text" or isinstance(v, bool) or not isinstance(v, int | float):
        s = str(v)
        shown = page.short_shapes(s) if c.key == "input_shapes" else s
        return f'<td class="s" title="{_e(s)}">{_e(clip(shown, 64, blank=""))}</td>'
    return f'<td class="n" data-v="{v!r}">{_e(_unit(c.unit, v, t0))}</td>'


def _unit(unit: str, v: float, t0: int | None) -> str:
    if unit == "ns":
        return fmt_ns(v)
    if unit == "at":
        return page.fmt_at(int(v), t0)
    if unit == "bytes":
        return fmt_bytes(v)
    if unit in ("bytes_per_s", "flops_per_s"):
        return page.fmt_rate(v, unit)
    if unit == "ratio":
        return fmt_pct(v)
    if unit == "count":
        return f"{int(v):,}" if float(v).is_integer() else f"{v:,}"
    return f"{v:,.4g}" if abs(v) < 1e6 else f"{v:,.0f}"


def human(name: str) -> str:
    """A raw key or column as people read it: units left to the values (``_ns``,
    ``_bytes``), ``_per_s`` as ``/s``, underscores as spaces, dots as ``:``."""
    parts = []
    for p in name.split("."):
        p = re.sub(r"_(ns|bytes)$", "", p)
        p = p.replace("_per_s", "/s").replace("_", " ")
        parts.append(p)
    return ": ".join(parts)


def _timeline_page(doc: Doc, notes: list[str]) -> str:
    """The interactive step timeline, "" without events (a note when they do not fit)."""
    from tbdtrace.report import plots, timeline_svg

    try:
        st = _section_dict(doc, "step_timeline")
        if not _records(st.get("events"), "step_timeline.events"):
            return ""
        body = timeline_svg.render(st, "p-step_timeline", plots.color_of)
    except (KeyError, TypeError, ValueError) as e:
        notes.append(f"step_timeline: not drawn, the document's data does not fit ({e})")
        return ""
    return f'<figure class="plot wide" data-plot="step_timeline">{body}</figure>'


def _plot(key: str, fig: Any) -> str:
    wide = " wide" if key in _WIDE else ""
    return f'<figure class="plot{wide}" data-plot="{key}">{svg(fig, f"p-{key}")}</figure>'


def _cards(doc: Doc) -> str:
    s = _dict(doc.get("summary"))
    st = _dict(_dict(doc.get("steps")).get("summary"))
    mem = _dict(doc.get("memory"))
    # The memory card is the window's peak; the whole trace's stands beside it, with the
    # phase it fell in, when the window is not the whole trace.
    whole = _dict(mem.get("whole_trace"))
    adv = _dict(mem.get("advice"))
    in_phase = f" (in {whole['phase']})" if whole.get("phase") else ""
    cards = [
        ("kernels", f"{s['kernel_count']:,}" if s.get("kernel_count") is not None else None),
        (
            "kernel time (sum)",
            fmt_ns(s.get("kernel_time_ns")) if s.get("kernel_time_ns") is not None else None,
        ),
        (
            "device utilization",
            fmt_pct(s.get("gpu_utilization")) if s.get("gpu_utilization") is not None else None,
        ),
        (
            "median step",
            fmt_ns(st.get("step_median_ns")) if st.get("step_median_ns") is not None else None,
        ),
        (
            "throughput (samples / time)",
            f"{st['throughput_per_s']:,.1f} samples/s" if st.get("throughput_per_s") else None,
        ),
        (
            f"peak memory ({mem.get('level')}, {mem.get('covers') or 'whole trace'})",
            fmt_bytes(mem["peak_bytes"]) if mem.get("peak_bytes") else None,
        ),
        (
            f"headroom (device memory - {adv.get('headroom_of') or 'reserved'} peak)",
            fmt_bytes(adv["headroom_bytes"])
            if adv.get("headroom_bytes") is not None
            else ("unknown" if adv else None),
        ),
        (
            "fragmentation at peak (reserved - allocated)",
            fmt_bytes(adv["fragmentation_bytes"])
            if adv.get("fragmentation_bytes") is not None
            else None,
        ),
        (
            f"whole-trace peak memory{in_phase}",
            fmt_bytes(whole["peak_bytes"])
            if whole.get("peak_bytes") and mem.get("covers") not in (None, "whole trace")
            else None,
        ),
    ]
    return (
        '<div class="cards">'
        + "".join(
            f'<div class="card"><div class="v">{_e(v)}</div><div class="k">{_e(k)}</div></div>'
            for k, v in cards
            if v is not None
        )
        + "</div>"
    )


def _section(key: str, data: Any, done: set[str], t0: int | None) -> str:
    """Section ``key``'s tables (those not shown above: curated, or drawn by a plot)."""
    tabs = tabular.tables(key, data)
    body = "".join(_table(t, t0) for t in tabs if t.name not in done)
    above = [t.name for t in tabs if t.name in done]
    if above:
        body += f'<p class="note">Shown above: {_e(", ".join(human(n) for n in above))}.</p>'
    return f'<h3 id="s-{_e(key)}">{_e(human(key))}</h3>{body or "<p>(empty)</p>"}'


def _table(t: tabular.Tab, t0: int | None = None) -> str:
    title = human(t.name)
    if not t.columns:
        return f"<h4>{_e(title)}</h4><p>(no rows)</p>"
    if len(t.rows) == 1:  # one record: field / value, easier to read than one wide row
        rows = "".join(
            f"<tr><td>{_e(human(c))}</td>{_cell(c, v, t0)}</tr>"
            for c, v in zip(t.columns, t.rows[0], strict=True)
        )
        return f'<h4>{_e(title)}</h4><table data-table="{_e(t.name)}"><tbody>{rows}</tbody></table>'
    head = "".join(f"<th>{_e(human(c))}</th>" for c in t.columns)
    shown = t.rows[:MAX_ROWS]
    body = "".join(
        "<tr>" + "".join(_cell(c, v, t0) for c, v in zip(t.columns, r, strict=True)) + "</tr>"
        for r in shown
    )
    table = (
        f'<table class="sortable" data-table="{_e(t.name)}"><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>"
    )
    cut = len(shown) < len(t.rows)
    if len(shown) > FOLD_ROWS:
        what = (
            f"the first {len(shown):,} of {len(t.rows):,} rows" if cut else f"{len(shown):,} rows"
        )
        table = f"<details><summary>{what}</summary>{table}</details>"
    if cut:
        table += (
            f'<p class="note">{len(t.rows) - len(shown):,} more rows in '
            "<code>tbdtrace report --format csv</code> or <code>--format json</code>.</p>"
        )
    return f"<h4>{_e(title)} ({len(t.rows):,} rows)</h4>{table}"


_ABSOLUTE = re.compile(r"(^|[._])(ts|start|end|peak_ts|first_ts|first_start|last_start)_ns$")
_RATIO = re.compile(r"share|utilization|efficiency|fraction|coverage")


def _cell(col: str, v: Any, t0: int | None = None) -> str:
    if v is None:
        return '<td data-v="">-</td>'
    if isinstance(v, bool) or not isinstance(v, int | float):
        s = str(v)
        shown = clip(s, 120, blank="")
        return f'<td class="s" title="{_e(s)}">{_e(shown)}</td>'
    return f'<td class="n" data-v="{v!r}">{_e(_num(col, v, t0))}</td>'


def _num(col: str, v: float, t0: int | None = None) -> str:
    base = col.rsplit(".", 1)[-1]
    if base.endswith("_ns") and _ABSOLUTE.search(base):
        return page.fmt_at(int(v), t0)
    if base.endswith("_ns"):
        return fmt_ns(v)
    if base.endswith("_bytes") or base == "bytes":
        return fmt_bytes(v)
    if base.endswith("_bytes_per_s"):
        return page.fmt_rate(v, "bytes_per_s")
    if base.endswith("flops_per_s"):
        return page.fmt_rate(v, "flops_per_s")
    if _RATIO.search(base) and isinstance(v, float) and abs(v) <= 10:
        return fmt_pct(v)
    if isinstance(v, float):
        return f"{v:,.4g}" if abs(v) < 1e6 else f"{v:,.0f}"
    return f"{v:,}"


def _dict(x: Any) -> dict[str, Any]:
    return x if isinstance(x, dict) else {}


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)
