"""The HTML page's step timeline: an SVG drawn here (no matplotlib), zoomed and panned in
the browser by the page's script (:data:`tbdtrace.report.html_page.SCRIPT`).

One lane per (rank, device, stream), one ``<rect>`` per event of the
``step_timeline.events`` table: ``x`` its ``offset_ns`` and ``width`` its
``duration_ns``, both in microseconds of the inner ``<svg>``'s coordinates, so zooming
is a change of that ``<svg>``'s ``viewBox`` (the bars keep their table's values; a bar
narrower than a pixel still shows as one, by its outline). Each bar says its category,
kind, start and duration in its tooltip. The axis ticks are drawn for the whole step
here and redrawn by the script for each zoom, in ms from the step's start.

Controls: the mouse wheel zooms around the pointer, dragging pans, a double click (or
the reset button) shows the whole step again.
"""

from __future__ import annotations

import html
import math
from typing import Any

LANE_PX = 18
LABEL_PX = 190
PLOT_PX = 960
TOP_PX = 6
AXIS_PX = 30


def _e(s: Any) -> str:
    return html.escape(str(s), quote=True)


def _lane(e: dict[str, Any]) -> tuple[int, str, int, int]:
    def num(k: str) -> int:
        v = e.get(k)
        return -1 if v is None else int(v)

    return num("rank"), str(e.get("device_type") or "?"), num("device_id"), num("stream_id")


def nice_ticks(lo: float, hi: float, n: int = 8) -> list[float]:
    """Round tick positions covering [lo, hi] (1, 2 or 5 times a power of ten apart);
    the page's script uses the same rule."""
    span = hi - lo
    if span <= 0:
        return [lo]
    raw = span / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step) * step
    return [first + i * step for i in range(int((hi - first) / step) + 1)]


def render(st: dict[str, Any], prefix: str, color_of: Any) -> str:
    """The timeline of the ``step_timeline`` section ``st`` as an interactive SVG."""
    events = st.get("events") or []
    windows = st.get("windows") or []
    lanes = sorted({_lane(e) for e in events})
    lane_of = {k: i for i, k in enumerate(lanes)}
    dur_ns = max((w["end_ns"] - w["start_ns"] for w in windows), default=0)
    dur_ns = dur_ns or max((e["offset_ns"] + e["duration_ns"] for e in events), default=1)
    dur_us = dur_ns / 1e3
    h = len(lanes) * LANE_PX
    width = LABEL_PX + PLOT_PX + 10
    height = TOP_PX + h + AXIS_PX
    labels = "".join(
        f'<text x="{LABEL_PX - 6}" y="{TOP_PX + i * LANE_PX + 13}" text-anchor="end">'
        f"{_e(('' if r < 0 else f'rank {r} ') + f'{t}:{d} stream {s}')}</text>"
        for i, (r, t, d, s) in enumerate(lanes)
    )
    by_cat: dict[str, list[str]] = {}
    for e in events:
        cat = str(e.get("category") or "other")
        y = lane_of[_lane(e)] * LANE_PX + 2
        tip = (
            f"{cat} ({e.get('kind') or 'event'}): {e['duration_ns'] / 1e3:,.3f} us "
            f"at {e['offset_ns'] / 1e6:,.3f} ms"
        )
        by_cat.setdefault(cat, []).append(
            f'<rect x="{e["offset_ns"] / 1e3!r}" y="{y}" width="{e["duration_ns"] / 1e3!r}" '
            f'height="{LANE_PX - 4}"><title>{_e(tip)}</title></rect>'
        )
    cats = {c: color_of(c) for c in sorted(by_cat)}
    bars = "".join(
        f'<g id="{prefix}-tbd-data-{i}" data-category="{_e(c)}" fill="{cats[c]}" '
        f'stroke="{cats[c]}">{"".join(by_cat[c])}</g>'
        for i, c in enumerate(cats)
    )
    ticks = "".join(
        f'<g transform="translate({PLOT_PX * t / dur_us if dur_us else 0:.2f},0)">'
        f'<line y2="5" stroke="#556"/><text y="17" text-anchor="middle">{t / 1e3:g}</text></g>'
        for t in nice_ticks(0.0, dur_us)
    )
    shown = (
        f"; the {len(events):,} longest of {st.get('event_count'):,} events"
        if st.get("event_count") and len(events) < st["event_count"]
        else ""
    )
    legend = "".join(
        f'<span class="key"><i style="background:{c}"></i>{_e(k)}</span>' for k, c in cats.items()
    )
    title = f"Step {st.get('step')} (median measured step), {dur_ns / 1e6:.1f} ms{shown}"
    return (
        f'<div class="timeline" data-dur-us="{dur_us!r}">'
        f'<div class="tl-head"><b>{_e(title)}</b> <button type="button" class="tl-reset">'
        'whole step</button> <span class="note">wheel: zoom, drag: pan, double click: '
        f"whole step</span></div>"
        f'<svg class="tl" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'font-size="10" role="img">'
        f"<g>{labels}</g>"
        f'<rect x="{LABEL_PX}" y="{TOP_PX}" width="{PLOT_PX}" height="{h}" fill="#fafbfc" '
        'stroke="#d8dee6"/>'
        f'<svg class="tl-data" x="{LABEL_PX}" y="{TOP_PX}" width="{PLOT_PX}" height="{h}" '
        f'viewBox="0 0 {dur_us!r} {h}" preserveAspectRatio="none">'
        f"{bars}</svg>"
        f'<g class="tl-axis" transform="translate({LABEL_PX},{TOP_PX + h})" '
        f'data-width="{PLOT_PX}">{ticks}</g>'
        f'<text class="tl-unit" x="{LABEL_PX + PLOT_PX}" y="{height - 1}" text-anchor="end">'
        "ms from the step's start</text></svg>"
        f'<div class="legend">{legend}</div></div>'
    )
