"""The HTML page's curated tables: what a reader looks for first, in words and units.

Each table is a view of one table of the report document (:data:`TABLES`): its rows are
that table's rows, in its order, its cells that table's values; only the columns are
chosen, named for people and formatted (times as ms or s, sizes in binary units, ratios
as %). Times of day (``start_ns``) are shown relative to the trace start
(:func:`trace_start_ns`). The raw keys and values stay in the JSON, CSV and workbook
outputs; the page keeps each raw value on its cell (``data-v``) for sorting and checks.

Columns that no row of the trace knows (a launching op, a module or a source line on a
trace without them) are left out and named in a note, so a table shows what is known.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Row = dict[str, Any]


@dataclass(frozen=True)
class Col:
    key: str  # the source row's field
    label: str  # the heading on the page
    unit: str  # text | count | ns | at | bytes | bytes_per_s | flops_per_s | ratio | number
    optional: bool = False  # left out (and named in a note) when no row has a value


@dataclass(frozen=True)
class PageTable:
    key: str  # the table's anchor on the page: id="t-<key>"
    title: str
    source: str  # the document's table the rows come from (CSV name: section.key)
    cols: tuple[Col, ...]
    rows: Callable[[dict[str, Any]], list[Row] | None]  # None: the document lacks it
    note: str = ""  # what the table is, in one line
    missing: str = ""  # what to do when some optional columns are unknown
    # other tables of the document this one shows in full (left out further down)
    covers: tuple[str, ...] = ()


def _path(doc: dict[str, Any], dotted: str) -> Any:
    v: Any = doc
    for k in dotted.split("."):
        v = v.get(k) if isinstance(v, dict) else None
    return v


def _records(doc: dict[str, Any], dotted: str) -> list[Row] | None:
    v = _path(doc, dotted)
    if not isinstance(v, list) or not all(isinstance(r, dict) for r in v):
        return None
    return v


def _from(dotted: str) -> Callable[[dict[str, Any]], list[Row] | None]:
    return lambda doc: _records(doc, dotted)


def device(r: Row) -> str:
    """``rank 1 cuda:0`` (no rank part for a trace of one unnamed rank)."""
    who = "" if r.get("rank") is None else f"rank {r['rank']} "
    dev = r.get("device_type") or "device"
    return f"{who}{dev}:{r.get('device_id')}" if r.get("device_id") is not None else who + dev


def _collectives(doc: dict[str, Any]) -> list[Row] | None:
    """The communication kernels of the kernel hotspots, each with its skew across ranks
    (``collective_skew.summary``, by name) where the trace has several ranks."""
    kernels = _records(doc, "hotspots.kernels")
    if kernels is None:
        return None
    skew = {r.get("name"): r for r in _records(doc, "collective_skew.summary") or []}
    out = []
    for k in kernels:
        if k.get("category") != "communication":
            continue
        s = skew.get(k.get("name"), {})
        out.append(
            {
                **k,
                "skew_median_ns": s.get("skew_median_ns"),
                "skew_max_ns": s.get("skew_max_ns"),
                "most_often_last_rank": s.get("most_often_last_rank"),
            }
        )
    return out


def _with_device(dotted: str) -> Callable[[dict[str, Any]], list[Row] | None]:
    def rows(doc: dict[str, Any]) -> list[Row] | None:
        recs = _records(doc, dotted)
        return None if recs is None else [{**r, "device": device(r)} for r in recs]

    return rows


KERNELS = PageTable(
    "kernels",
    "Kernels",
    "hotspots.kernels",
    (
        Col("name", "kernel", "text"),
        Col("category", "category", "text"),
        Col("op", "launching op", "text", optional=True),
        Col("module", "module", "text", optional=True),
        Col("source", "source line", "text", optional=True),
        Col("count", "launches", "count"),
        Col("total_ns", "total time", "ns"),
        Col("mean_ns", "mean", "ns"),
        Col("max_ns", "max", "ns"),
        Col("share", "share of kernel time", "ratio"),
    ),
    _from("hotspots.kernels"),
    "device kernels by total time, each with the op that launched it",
    "a launching op needs the framework's ops in the trace; a source line needs Python "
    "stacks (capture --with-stack)",
    covers=("kernels",),  # the kernels pass's rows, with their attribution beside them
)
OPS_ROOFLINE = PageTable(
    "ops",
    "Ops",
    "roofline.ops",
    (
        Col("op", "op", "text"),
        Col("input_shapes", "shapes", "text"),
        Col("precision", "precision", "text"),
        Col("count", "calls", "count"),
        Col("kernel_ns", "kernel time", "ns"),
        Col("achieved_flops_per_s", "FLOP/s", "flops_per_s"),
        Col("achieved_bytes_per_s", "bytes/s", "bytes_per_s"),
        Col("intensity_flop_per_byte", "FLOP per byte", "number"),
        Col("bound", "bound", "text"),
        Col("roof_share", "of its roof", "ratio"),
    ),
    _from("roofline.ops"),
    "ops by shape and precision: achieved FLOP/s and bytes/s of their kernels, and the "
    "roof that bounds them",
)
OPS_HOTSPOTS = PageTable(
    "ops",
    "Ops",
    "hotspots.ops",
    (
        Col("op", "op", "text"),
        Col("kernel_count", "kernels", "count"),
        Col("distinct_kernels", "distinct kernels", "count"),
        Col("total_ns", "kernel time", "ns"),
        Col("mean_ns", "mean per kernel", "ns"),
        Col("share", "share of kernel time", "ratio"),
        Col("top_kernel", "top kernel", "text"),
    ),
    _from("hotspots.ops"),
    "launching ops by the kernel time they launched; shapes, FLOP/s, bytes/s and bound "
    "come with report --roofline",
)
COPIES = PageTable(
    "copies",
    "Copies",
    "memcpy",
    (
        Col("device", "device", "text"),
        Col("copy_kind", "direction", "text"),
        Col("count", "copies", "count"),
        Col("bytes", "size", "bytes"),
        Col("total_ns", "time", "ns"),
        Col("bandwidth_bytes_per_s", "bandwidth", "bytes_per_s"),
        Col("peak_fraction", "of peak", "ratio", optional=True),
    ),
    _with_device("memcpy"),
    "memory copies per device and direction",
    "a copy's peak needs the link's bandwidth, which the trace does not give",
)
COLLECTIVES = PageTable(
    "collectives",
    "Collectives",
    "hotspots.kernels",
    (
        Col("name", "collective kernel", "text"),
        Col("op", "launching op", "text", optional=True),
        Col("count", "launches", "count"),
        Col("total_ns", "total time", "ns"),
        Col("share", "share of kernel time", "ratio"),
        Col("skew_median_ns", "start skew, median", "ns", optional=True),
        Col("skew_max_ns", "start skew, max", "ns", optional=True),
        Col("most_often_last_rank", "most often last", "count", optional=True),
    ),
    _collectives,
    "communication kernels (category communication), with their start skew across ranks",
    "the skew across ranks needs a trace of two ranks or more",
)
IDLE = PageTable(
    "idle",
    "Idle causes",
    "idle.devices",
    (
        Col("device", "device", "text"),
        Col("span_ns", "window", "ns"),
        Col("busy_ns", "busy", "ns"),
        Col("idle_ns", "idle", "ns"),
        Col("host_bound_data_ns", "waiting for data", "ns", optional=True),
        Col("host_bound_other_ns", "host-bound, other", "ns", optional=True),
        Col("host_bound_ns", "host-bound", "ns"),
        Col("queued_ns", "queued", "ns"),
        Col("sync_wait_ns", "waiting on a sync", "ns"),
        Col("gap_count", "gaps", "count"),
        Col("short_kernel_count", "short kernels", "count"),
    ),
    _with_device("idle.devices"),
    "why each device sat idle: nothing launched (host-bound, split by the training "
    "thread's data wait), work queued behind other work, or a synchronization",
    "the data-wait split needs the training thread's data loading in the trace",
)
STEPS = PageTable(
    "steps",
    "Steps",
    "steps.steps",
    (
        Col("rank", "rank", "count", optional=True),
        Col("step", "step", "count"),
        Col("start_ns", "start", "at"),
        Col("duration_ns", "duration", "ns"),
        Col("data_wait_ns", "data wait", "ns", optional=True),
        Col("samples", "samples", "count", optional=True),
        Col("throughput_per_s", "samples/s", "number", optional=True),
        Col("warmup", "warm-up", "text"),
        Col("source", "marked by", "text"),
    ),
    _from("steps.steps"),
    "every recorded step; start relative to the trace start",
    "the data wait needs the training thread's data loading in the trace; samples need "
    "the harness's steps file",
)


def _owned(dotted: str) -> Callable[[dict[str, Any]], list[Row] | None]:
    """Rows of a memory-peak table with ``owner``: the name, or what a row without one is."""

    def rows(doc: dict[str, Any]) -> list[Row] | None:
        recs = _records(doc, dotted)
        if recs is None:
            return None
        return [{**r, "owner": owner(r)} for r in recs]

    return rows


def owner(r: Row) -> str:
    if r.get("pre_existing"):
        return "(allocated before the trace)"
    return str(r["name"]) if r.get("name") is not None else "(not attributed)"


def _peak_table(by: str) -> PageTable:
    return PageTable(
        f"memory_by_{by}",
        f"Memory peak by {by}",
        f"memory.advice.peak_by_{by}",
        (
            Col("owner", by, "text"),
            Col("blocks", "blocks live", "count"),
            Col("bytes", "size", "bytes"),
            Col("share", "share of the peak", "ratio"),
        ),
        _owned(f"memory.advice.peak_by_{by}"),
        f"what was live at the memory peak, by the {by} that allocated it"
        + (" (the outermost op on the allocating thread)" if by == "op" else ""),
    )


MEMORY_BY_OP = _peak_table("op")
MEMORY_BY_MODULE = _peak_table("module")


def tables(doc: dict[str, Any]) -> list[PageTable]:
    """The curated tables of ``doc``, in page order (ops from the roofline when the
    document has it, else from the kernel hotspots)."""
    roof = _path(doc, "roofline.included")
    ops = OPS_ROOFLINE if roof and _records(doc, "roofline.ops") else OPS_HOTSPOTS
    return [KERNELS, ops, COPIES, COLLECTIVES, IDLE, STEPS, MEMORY_BY_OP, MEMORY_BY_MODULE]


def shown_cols(t: PageTable, rows: list[Row]) -> tuple[list[Col], list[Col]]:
    """(columns shown, optional columns left out because no row has a value)."""
    shown, left = [], []
    for c in t.cols:
        if c.optional and all(r.get(c.key) is None for r in rows):
            left.append(c)
        else:
            shown.append(c)
    return shown, left


def trace_start_ns(doc: dict[str, Any]) -> int | None:
    """The trace start the page's times count from: the earliest phase start of any rank
    (``phases``, whole trace; a ``pre-trace`` phase included), else the earliest window
    start; None when the document has neither."""
    starts = [r.get("start_ns") for r in _records(doc, "phases") or []]
    starts += [r.get("start_ns") for r in _records(doc, "window.ranks") or []]
    ints = [s for s in starts if isinstance(s, int) and not isinstance(s, bool)]
    return min(ints) if ints else None


def short_shapes(s: str) -> str:
    """An op's input shapes without the trailing empty ones (scalars and None inputs):
    ``[[8,3],[3,4],[],[]]`` as ``[[8,3],[3,4]]``; the cell's title keeps them all."""
    while s.endswith(",[]]"):
        s = s[: -len(",[]]")] + "]"
    return s


def fmt_at(v: int, t0: int | None) -> str:
    """A time of day as seconds from the trace start (``12.345678 s``; the absolute ns
    when the start is unknown)."""
    return f"{v:,} ns" if t0 is None else f"{(v - t0) / 1e9:.6f} s"


def fmt_rate(v: float, unit: str) -> str:
    """FLOP/s with decimal prefixes (``12.3 TFLOP/s``), bytes/s with binary ones
    (``1.50 GiB/s``)."""
    if unit == "bytes_per_s":
        binary = (("TiB/s", 2.0**40), ("GiB/s", 2.0**30), ("MiB/s", 2.0**20))
        for name, scale in binary:
            if abs(v) >= scale:
                return f"{v / scale:.2f} {name}"
        return f"{v / 1024:.2f} KiB/s"
    for name, scale in (("PFLOP/s", 1e15), ("TFLOP/s", 1e12), ("GFLOP/s", 1e9)):
        if abs(v) >= scale:
            return f"{v / scale:.1f} {name}"
    return f"{v / 1e6:.1f} MFLOP/s"
