"""Plot functions on plain data (lists of dicts as in the report document), returning
matplotlib Figures: the HTML report renders them as inline SVG, a notebook shows them as
they are, and the suite's figures can save them as PNG.

No pyplot: each function builds a ``matplotlib.figure.Figure`` of its own (no global
state, no GUI backend). Every artist that draws data gets a gid starting ``tbd-data``, so
a page can check that each plot drew something. Each figure's title says what it covers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from tbdtrace.report.fmt import clip, fmt_bytes

Rows = Sequence[dict[str, Any]]
_COLORS = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac", "#86bcb6", "#d37295", "#8cd17d", "#499894", "#fabfd2",
)  # fmt: skip
MEMORY_CATEGORIES = (
    "weights",
    "gradients",
    "optimizer_state",
    "inputs",
    "activations",
    "workspace",
    "other",
    "pre_existing",  # allocated before the trace began (allocator totals of imports)
)


def color_of(name: str, order: Sequence[str] = ()) -> str:
    """A fixed colour per category name (its index in ``order`` when listed there)."""
    i = order.index(name) if name in order else sum(map(ord, name))
    return _COLORS[i % len(_COLORS)]


def _fig(rows: int = 1, width: float = 7.5, height: float = 3.0) -> tuple[Figure, list[Any]]:
    fig = Figure(figsize=(width, height * rows), layout="constrained")
    axes = [fig.add_subplot(rows, 1, i + 1) for i in range(rows)]
    return fig, axes


def _data(artist: Any, tag: str) -> None:
    if hasattr(artist, "patches"):  # a BarContainer: one id per bar
        for i, p in enumerate(artist.patches):
            p.set_gid(f"tbd-data-{tag}-{i}")
    else:
        artist.set_gid(f"tbd-data-{tag}")


def dev_label(r: dict[str, Any]) -> str:
    rank = "" if r.get("rank") is None else f"rank {r['rank']} "
    dev = r.get("device_id")
    return f"{rank}{r.get('device_type') or '?'}:{'-' if dev is None else dev}"


def step_times(steps: Rows) -> Figure:
    """Duration of each step (ms) by step number, one line per rank, warm-up steps
    hollow and grey; each step's rate (samples / its duration, samples/s) on a second axis
    when steps carry samples (the run's throughput is samples / total time, in the text)."""
    fig, (ax,) = _fig()
    by_rank: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for s in steps:
        by_rank[s.get("rank")].append(s)
    for i, (rank, rows) in enumerate(
        sorted(by_rank.items(), key=lambda kv: (kv[0] is None, kv[0] or 0))
    ):
        x = [r["step"] for r in rows]
        y = [r["duration_ns"] / 1e6 for r in rows]
        (line,) = ax.plot(
            x,
            y,
            "-o",
            ms=4,
            color=_COLORS[i % len(_COLORS)],
            label=f"rank {rank}" if rank is not None else "step time",
        )
        _data(line, f"steps-{i}")
        warm = [(a, b) for a, b, r in zip(x, y, rows, strict=True) if r.get("warmup")]
        if warm:
            ax.plot(
                *zip(*warm, strict=True),
                "o",
                ms=8,
                mfc="white",
                mec="grey",
                label="warm-up" if i == 0 else None,
            )
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("step time (ms)")
    ax.set_ylim(0, 1.1 * max((s["duration_ns"] / 1e6 for s in steps), default=1) or 1)
    tput = [(r["step"], r["throughput_per_s"]) for r in steps if r.get("throughput_per_s")]
    if tput:
        ax2 = ax.twinx()
        (line,) = ax2.plot(
            *zip(*tput, strict=True), "s--", ms=3, color="#59a14f", label="per-step rate"
        )
        _data(line, "throughput")
        ax2.set_ylabel("per-step rate (samples / step time, samples/s)")
        ax2.set_ylim(bottom=0)
    n_warm = sum(1 for s in steps if s.get("warmup"))
    ax.set_title(
        f"Step time per step ({len(steps)} steps, {n_warm} warm-up)"
        + ("; per-step rates from the steps' samples" if tput else "; no sample counts")
    )
    ax.legend(loc="lower right", fontsize=8)
    return fig


def utilization_per_step(rows: Rows, width: float = 12.0) -> Figure:
    """Per device, per step: compute, memory-op and idle share of the step window."""
    per_dev: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        if r.get("step") is not None:
            per_dev[dev_label(r)].append(r)
    devs = sorted(per_dev)[:8]
    fig, axes = _fig(len(devs), width=width, height=2.4)
    if len(per_dev) > len(devs):
        fig.suptitle(f"the first {len(devs)} of {len(per_dev)} devices", fontsize=8)
    for ax, d in zip(axes, devs, strict=True):
        rs = sorted(per_dev[d], key=lambda r: r["step"])
        x = [str(r["step"]) for r in rs]
        comp = [100 * (r.get("compute_utilization") or 0) for r in rs]
        util = [100 * (r.get("utilization") or 0) for r in rs]
        mem = [u - c for u, c in zip(util, comp, strict=True)]
        idle = [100 - u for u in util]
        bottom = [0.0] * len(x)
        for name, vals, col in (
            ("compute", comp, "#4e79a7"),
            ("memory ops only", mem, "#f28e2b"),
            ("idle", idle, "#d3d3d3"),
        ):
            bars = ax.bar(x, vals, bottom=bottom, color=col, label=name)
            _data(bars, f"util-{name.split()[0]}")
            bottom = [b + v for b, v in zip(bottom, vals, strict=True)]
        ax.set_ylim(0, 100)
        ax.set_ylabel("% of step")
        ax.set_title(f"Device utilization per measured step: {d}")
        ax.legend(loc="lower right", fontsize=8)
    axes[-1].set_xlabel("step")
    return fig


def share_bars(
    labels: Sequence[str],
    total_ns: Sequence[float],
    shares: Sequence[float],
    title: str,
    tag: str,
    colors: Sequence[str] | None = None,
) -> Figure:
    """Horizontal bars of total time (ms), each labelled with its share in %."""
    n = len(labels)
    fig, (ax,) = _fig(height=max(1.6, 0.28 * n + 0.9))
    y = list(range(n))[::-1]
    bars = ax.barh(y, [t / 1e6 for t in total_ns], color=colors or "#4e79a7")
    _data(bars, tag)
    ax.set_yticks(y, [_clip(s, 60) for s in labels], fontsize=8)
    for yi, t, s in zip(y, total_ns, shares, strict=True):
        ax.text(t / 1e6, yi, f" {100 * s:.1f}%", va="center", fontsize=7)
    ax.set_xlabel("total time (ms)")
    fig.suptitle(title, fontsize=11)
    ax.margins(x=0.12)
    return fig


def idle_breakdown(devices: Rows, covers: str = "whole trace") -> Figure:
    """Per device: busy time and idle time split into host-bound, work queued, sync wait
    (the idle table's names and columns)."""
    fig, (ax,) = _fig(height=max(1.8, 0.5 * len(devices) + 1.2))
    split = any(d.get("host_bound_data_ns") is not None for d in devices)
    parts = (
        ("busy", "busy_ns", "#4e79a7"),
        *(
            (
                ("host-bound: waiting for data", "host_bound_data_ns", "#ff9d9a"),
                ("host-bound: other host work", "host_bound_other_ns", "#e15759"),
            )
            if split
            else (("host-bound", "host_bound_ns", "#e15759"),)
        ),
        ("work queued", "queued_ns", "#edc948"),
        ("sync wait", "sync_wait_ns", "#b07aa1"),
    )
    labels = [dev_label(d) for d in devices]
    left = [0.0] * len(devices)
    for name, key, col in parts:
        # A device without data-wait ranges: its whole host-bound time is "other".
        alt = "host_bound_ns" if key == "host_bound_other_ns" else key
        vals = [_first_known(d, key, alt) / 1e6 for d in devices]
        bars = ax.barh(labels, vals, left=left, color=col, label=name)
        _data(bars, f"idle-{key}")
        left = [a + v for a, v in zip(left, vals, strict=True)]
    ax.set_xlabel("time over each device's span (ms)")
    ax.set_title(f"Busy and idle time by cause ({covers})")
    ax.legend(fontsize=8, ncols=4, loc="lower right")
    return fig


def _first_known(d: dict[str, Any], key: str, alt: str) -> float:
    v = d.get(key)
    return float((d.get(alt) if v is None else v) or 0)


def memory_over_time(
    series: Rows, max_devices: int = 8, width: float = 12.0, min_bytes: int = 1 << 20
) -> Figure:
    """Per device: allocated bytes by category (stacked), the reserved level as a line,
    the allocated peak marked. Times in ms from the device's first point. Devices that
    never hold ``min_bytes`` are left out (said in the figure) unless all are."""
    groups: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in series:
        groups[dev_label(r)][r["level"]].append(r)
    peak = {d: max(r["total_bytes"] for lv in g.values() for r in lv) for d, g in groups.items()}
    devs = sorted(groups, key=lambda d: -peak[d])
    small = [d for d in devs if peak[d] < min_bytes]
    if len(small) < len(devs):
        devs = [d for d in devs if peak[d] >= min_bytes]
    else:
        small = []
    devs = devs[:max_devices]
    fig, axes = _fig(len(devs), width=width, height=2.8)
    for ax, d in zip(axes, devs, strict=True):
        levels = groups[d]
        t0 = min(r["ts_ns"] for lv in levels.values() for r in lv)
        alloc = levels.get("allocated") or []
        if alloc:
            x = [(r["ts_ns"] - t0) / 1e6 for r in alloc]
            cats = [c for c in MEMORY_CATEGORIES if any(r.get(f"{c}_bytes") for r in alloc)]
            ys = [[(r.get(f"{c}_bytes") or 0) / 2**20 for r in alloc] for c in cats]
            if ys:
                polys = ax.stackplot(
                    x,
                    ys,
                    labels=cats,
                    step="post",
                    colors=[color_of(c, MEMORY_CATEGORIES) for c in cats],
                )
                for c, p in zip(cats, polys, strict=True):
                    _data(p, f"mem-{c}")
            peak = max(alloc, key=lambda r: r["total_bytes"])
            px = (peak["ts_ns"] - t0) / 1e6
            (mark,) = ax.plot([px], [peak["total_bytes"] / 2**20], "v", color="black", ms=7)
            _data(mark, "mem-peak")
            ax.annotate(
                f"peak {fmt_bytes(peak['total_bytes'])}",
                (px, peak["total_bytes"] / 2**20),
                textcoords="offset points",
                xytext=(4, 4),
                fontsize=8,
            )
        for r_level in ("reserved",):
            res = levels.get(r_level) or []
            if res:
                src = res[0].get("source")
                (line,) = ax.step(
                    [(r["ts_ns"] - t0) / 1e6 for r in res],
                    [r["total_bytes"] / 2**20 for r in res],
                    where="post",
                    color="black",
                    lw=1,
                    label="reserved"
                    + (
                        " (allocator total)"
                        if src == "allocator_total"
                        else " (driver allocations)"
                    ),
                )
                _data(line, "mem-reserved")
        ax.set_ylim(bottom=0)
        ax.set_ylabel("MiB")
        ax.set_title(f"Memory over time: {d} (allocated by category; reserved level)")
        ax.legend(fontsize=7, loc="upper left", ncols=3)
    axes[-1].set_xlabel("time from the device's first memory event (ms)")
    if small:
        fig.suptitle(
            f"left out, never above {fmt_bytes(min_bytes)}: {', '.join(small)}", fontsize=8
        )
    return fig


def flops_efficiency(rows: Rows, covers: str = "") -> Figure:
    """Efficiency (% of peak) per (rank, precision) row of the flops table: two bars per
    row, over busy time and over the window (the table's ``efficiency_busy`` and
    ``efficiency_wall``), each row labelled with its own FLOP coverage ("partial" below the
    section's threshold); a row without a peak is named, with no bar. Rows' ``note``
    (where the FLOPs come from, what they leave out) under the axis."""
    n = len(rows)
    fig, (ax,) = _fig(height=max(1.8, 0.7 * n + 1.2))
    y = list(range(n))
    for key, name, off, col in (
        ("efficiency_busy", "over busy time", -0.3, "#59a14f"),
        ("efficiency_wall", "over the window", 0.02, "#8cd17d"),
    ):
        have = [
            (yi + off, 100 * r[key]) for yi, r in zip(y, rows, strict=True) if r[key] is not None
        ]
        if have:
            bars = ax.barh(
                [a for a, _ in have], [b for _, b in have], height=0.3, color=col, label=name
            )
            _data(bars, f"flops-{key}")
            for a, b in have:
                ax.text(b, a, f" {b:.3g}%", va="center", fontsize=7)
    for yi, r in zip(y, rows, strict=True):
        cov, thr = r.get("coverage"), r.get("coverage_threshold")
        if r["efficiency_busy"] is None and r["efficiency_wall"] is None:
            what = " no peak for this precision: no efficiency"
        elif cov is None:
            what = ""
        else:
            partial = "" if thr is None or cov >= thr else f", partial (< {100 * thr:.0f}%)"
            what = f" FLOPs counted for {100 * cov:.0f}% of its matrix kernels' time{partial}"
        if what:
            ax.text(0, yi + 0.2, what, va="top", fontsize=7, color="#444")
    ax.set_yticks(y, [_clip(str(r["label"]), 40) for r in rows], fontsize=8)
    ax.set_ylim(n - 0.4, -0.6)  # first row on top, room for the last row's coverage line
    notes = list(dict.fromkeys(str(r["note"]) for r in rows if r.get("note")))
    ax.set_xlabel(
        "\n".join(["achieved FLOP/s as % of peak", *(_wrap(n, 90) for n in notes)]), fontsize=8
    )
    ax.set_title(f"FLOP efficiency per precision{f' ({covers})' if covers else ''}")
    ax.margins(x=0.35)
    if any(r["efficiency_busy"] is not None or r["efficiency_wall"] is not None for r in rows):
        ax.legend(fontsize=7, loc="lower right")
    return fig


def rank_steps(steps: Rows) -> Figure:
    """Step time per rank by step number (measured steps), the slowest rank of each step
    marked (the straggler)."""
    fig, (ax,) = _fig()
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    ranks = sorted({int(s["rank"]) for s in steps if s.get("rank") is not None})
    for s in steps:
        if not s.get("warmup") and s.get("rank") is not None:
            by_step[s["step"]].append(s)
    for i, rank in enumerate(ranks):
        rows = sorted(
            (s for s in steps if s.get("rank") == rank and not s.get("warmup")),
            key=lambda s: s["step"],
        )
        (line,) = ax.plot(
            [s["step"] for s in rows],
            [s["duration_ns"] / 1e6 for s in rows],
            "-o",
            ms=3,
            lw=1,
            color=_COLORS[i % len(_COLORS)],
            label=f"rank {rank}",
        )
        _data(line, f"rank-{rank}")
    slow = [
        max(rs, key=lambda s: s["duration_ns"]) for _, rs in sorted(by_step.items()) if len(rs) > 1
    ]
    if slow:
        (mk,) = ax.plot(
            [s["step"] for s in slow],
            [s["duration_ns"] / 1e6 for s in slow],
            "x",
            color="black",
            ms=8,
            label="slowest rank",
        )
        _data(mk, "stragglers")
    ax.set_xlabel("step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("step time (ms)")
    ax.set_title(
        f"Step time per rank ({len(ranks)} ranks, measured steps; x = slowest rank of the step)"
    )
    ax.legend(fontsize=7, ncols=4)
    return fig


def collective_skew(instances: Rows, total: int) -> Figure:
    """Arrival skew (ms) of each collective instance over time, coloured by the rank that
    started it last."""
    fig, (ax,) = _fig()
    t0 = min(r["first_start_ns"] for r in instances)
    by_rank: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for r in instances:
        by_rank[int(r["last_rank"])].append(r)
    for i, (rank, rows) in enumerate(sorted(by_rank.items())):
        pts = ax.scatter(
            [(r["first_start_ns"] - t0) / 1e6 for r in rows],
            [r["skew_ns"] / 1e6 for r in rows],
            s=10,
            color=_COLORS[i % len(_COLORS)],
            label=f"rank {rank} last",
        )
        _data(pts, f"skew-{rank}")
    ax.set_xlabel("time from the first collective (ms)")
    ax.set_ylabel("last start - first start (ms)")
    ax.set_ylim(bottom=0)
    shown = f", the {len(instances):,} largest of {total:,}" if len(instances) < total else ""
    ax.set_title(f"Collective arrival skew across ranks ({total:,} instances{shown})", fontsize=10)
    ax.legend(fontsize=7)
    fig.supxlabel(
        "ranks' clocks as recorded: hosts are only as aligned as their clocks", fontsize=7
    )
    return fig


def step_timeline(
    events: Rows, windows: Rows, step: Any, event_count: int, width: float = 12.0
) -> Figure:
    """One lane per (rank, device, stream); events as bars coloured by category."""
    lanes = sorted({_lane(e) for e in events})
    lane_of = {k: i for i, k in enumerate(lanes)}
    fig, (ax,) = _fig(width=width, height=max(1.6, 0.32 * len(lanes) + 1.3))
    by_cat: dict[str, list[tuple[float, float, int]]] = defaultdict(list)
    for e in events:
        k = _lane(e)
        by_cat[e["category"]].append(
            (e["offset_ns"] / 1e6, max(e["duration_ns"], 1) / 1e6, lane_of[k])
        )
    for cat, items in sorted(by_cat.items()):
        for lane in {it[2] for it in items}:
            coll = ax.broken_barh(
                [(a, b) for a, b, li in items if li == lane],
                (lane - 0.4, 0.8),
                color=color_of(cat),
                label=cat,
            )
            _data(coll, f"tl-{cat}-{lane}")
    handles: dict[str, Any] = {}
    for h, lbl in zip(*ax.get_legend_handles_labels(), strict=True):
        handles.setdefault(lbl, h)
    ax.legend(
        handles.values(),
        handles.keys(),
        fontsize=7,
        loc="upper left",
        bbox_to_anchor=(1.0, 1.0),
    )
    ax.set_yticks(
        range(len(lanes)),
        [f"{'' if r < 0 else f'rank {r} '}{t}:{d} stream {s}" for r, t, d, s in lanes],
        fontsize=7,
    )
    ax.invert_yaxis()
    ax.set_xlabel("time from the step's start (ms)")
    dur = max((w["end_ns"] - w["start_ns"] for w in windows), default=0) / 1e6
    ax.set_xlim(0, dur or None)
    shown = (
        f"; the {len(events):,} longest of {event_count:,} events"
        if len(events) < event_count
        else ""
    )
    ax.set_title(f"Step {step} (median measured step), {dur:.1f} ms{shown}")
    return fig


def _lane(e: dict[str, Any]) -> tuple[int, str, int, int]:
    """(rank, device type, device id, stream) of an event, -1 for a missing number."""

    def num(k: str) -> int:
        v = e.get(k)
        return -1 if v is None else int(v)

    return num("rank"), str(e.get("device_type") or "?"), num("device_id"), num("stream_id")


def _wrap(s: str, n: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(s, n))


def _clip(s: str, n: int) -> str:
    """``s`` cut to ``n`` characters, with ``$`` escaped (matplotlib reads $...$ as math)."""
    s = clip(s, n, blank="")
    return s.replace("$", r"\$")


def roofline(ops: Rows) -> Figure | None:
    """Achieved FLOP/s against arithmetic intensity, log-log: one point per op shape with
    both figures, sized by its device time, on the first rank's roofs (the memory roof up
    to the ridge point, then the compute roof). None without such an op."""
    pts = [r for r in ops if r.get("intensity_flop_per_byte") and r.get("achieved_flops_per_s")]
    if not pts:
        return None
    fig, (ax,) = _fig(height=3.6)
    total = max(r["kernel_ns"] for r in pts) or 1
    for fam in sorted({r["family"] for r in pts}):
        rs = [r for r in pts if r["family"] == fam]
        sc = ax.scatter(
            [r["intensity_flop_per_byte"] for r in rs],
            [r["achieved_flops_per_s"] for r in rs],
            s=[12 + 300 * r["kernel_ns"] / total for r in rs],
            alpha=0.6,
            label=fam,
        )
        _data(sc, f"roofline-{fam}")
    pf = next((r["peak_flops_per_s"] for r in pts if r.get("peak_flops_per_s")), None)
    pb = next((r["peak_bytes_per_s"] for r in pts if r.get("peak_bytes_per_s")), None)
    xs = [r["intensity_flop_per_byte"] for r in pts]
    if pf and pb:
        ridge = pf / pb
        lo, hi = min(min(xs), ridge) / 4, max(max(xs), ridge) * 4
        ax.plot([lo, ridge, hi], [lo * pb, pf, pf], color="#444", lw=1, label="roof")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.set_ylabel("achieved FLOP/s")
    ax.set_title("Roofline: op shapes, sized by device time")
    ax.legend(fontsize=8)
    return fig


# The critical path's resources, as the plot stacks them, with their colours.
PATH_PARTS = (
    ("cpu_op", "CPU op", "#4e79a7"),
    ("cpu_runtime", "runtime call", "#a0cbe8"),
    ("cpu_idle", "CPU idle", "#bab0ac"),
    ("launch_delay", "launch delay", "#f28e2b"),
    ("gpu_kernel", "GPU kernel", "#59a14f"),
    ("copy", "copy", "#8cd17d"),
    ("memset", "memset", "#b6992d"),
    ("gpu_gap", "GPU gap", "#edc948"),
    ("sync_wait", "sync wait", "#b07aa1"),
)
PATH_STEPS = 20  # steps drawn; the table holds them all


def critical_path(steps: Rows, covers: str = "measured steps") -> Figure:
    """Each step's critical path by resource (ms), one stacked bar per step (the first
    ``PATH_STEPS``): the ``critical_path.steps`` table's ``<resource>_ns`` columns, which
    add up to the step."""
    rows = steps[:PATH_STEPS]
    fig, (ax,) = _fig(height=max(2.2, 0.35 * len(rows) + 1.8))
    labels = [
        ("" if r.get("rank") is None else f"rank {r['rank']} ")
        + ("span" if r.get("step") is None else f"step {r['step']}")
        for r in rows
    ]
    left = [0.0] * len(rows)
    for key, name, col in PATH_PARTS:
        vals = [(r.get(f"{key}_ns") or 0) / 1e6 for r in rows]
        if not any(vals):
            continue
        bars = ax.barh(labels, vals, left=left, color=col, label=name)
        _data(bars, f"cp-{key}")
        left = [a + v for a, v in zip(left, vals, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("time on the step's critical path (ms)")
    more = f", first {PATH_STEPS} of {len(steps)}" if len(steps) > PATH_STEPS else ""
    ax.set_title(f"Critical path by resource ({covers}{more})")
    fig.legend(fontsize=8, ncols=5, loc="outside lower center")
    return fig
