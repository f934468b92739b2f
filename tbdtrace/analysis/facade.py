"""The one entry point for library users: ``tbdtrace.analyze(trace)``.

::

    import tbdtrace
    a = tbdtrace.analyze("run/trace")        # a trace directory, a profiler file, or a Trace
    a.kernels()                              # pyarrow.Table, one row per kernel name
    a.idle().to_pylist()
    doc = a.report()                         # the report (`report --format json`)
    print(a.report_text())
    dir(a), help(a.utilization)              # every analysis, with its columns
    a                                        # in Jupyter: the trace's source and tables

Each table method runs one pass (``tbdtrace.analysis.passes.<name>.run``) and returns the
table declared in ``tbdtrace/analysis/engine/outputs.py``; its docstring lists the columns
with units. Passes share one analysis context (``engine/context.py``: the trace, the
window, the cache), so asking for several tables computes what they have in common once.
``window`` restricts every table to a part of the run (``"measured"``: the steps after
warm-up, as the report does; ``"all"``: the whole trace, the default here; or a
``tbdtrace.analysis.engine.window.WindowSpec``).
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from tbdtrace.analysis.engine import outputs
from tbdtrace.analysis.passes import (
    categories,
    collective_skew,
    cpu_activity,
    flops,
    fp32,
    hotspots,
    idle,
    kernel_flops,
    kernels,
    memcpy,
    memory,
    memory_series,
    phases,
    ranks,
    step_timeline,
    steps,
    summary,
    utilization,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from tbdtrace.analysis.engine.context import AnalysisContext, Source
    from tbdtrace.analysis.engine.window import WindowSpec
    from tbdtrace.analysis.passes.flops import FlopsConfig
    from tbdtrace.analysis.passes.idle import IdleConfig
    from tbdtrace.analysis.passes.memory import MemoryConfig
    from tbdtrace.analysis.passes.memory_series import MemorySeriesConfig
    from tbdtrace.analysis.passes.ranks import RanksConfig
    from tbdtrace.analysis.passes.step_timeline import StepTimelineConfig
    from tbdtrace.analysis.passes.steps import StepsConfig
    from tbdtrace.report.section_api import ReportOptions
    from tbdtrace.trace import Trace

F = TypeVar("F", bound=Callable[..., Any])


def _columns(out: outputs.Output) -> Callable[[F], F]:
    """Append the declared columns of ``out`` to the method's docstring."""

    def deco(fn: F) -> F:
        cols = "\n".join(f"    {c.name} ({c.type}, {c.unit}): {c.doc}" for c in out.columns)
        fn.__doc__ = f"{(fn.__doc__ or '').rstrip()}\n\nOne row: {out.doc}.\nColumns:\n{cols}\n"
        return fn

    return deco


def _run(mod: ModuleType, ctx: AnalysisContext, config: object) -> pa.Table:
    """Run pass ``mod`` (a module of ``tbdtrace.analysis.passes``) with its config."""
    table: pa.Table = mod.run(ctx, config)
    return table


class TraceAnalysis:
    """Every analysis of one trace, as methods returning Arrow tables (or the report).

    Made by :func:`tbdtrace.analyze`. ``ctx`` is the analysis context the tables cover
    (the trace, restricted to the window when one was asked for); ``whole`` the trace as
    opened.
    """

    def __init__(self, trace: Trace, window: WindowSpec | str | None = None):
        from tbdtrace.analysis.engine import context
        from tbdtrace.analysis.engine import window as w

        self.whole = trace
        self.window_spec = w.WindowSpec(window) if isinstance(window, str) else window
        self.ctx = context.of(trace)
        if self.window_spec is not None and self.window_spec.kind != "all":
            self.ctx = self.ctx.windowed(w.resolve(self.ctx, self.window_spec))

    def __repr__(self) -> str:
        win = "" if self.window_spec is None else f", window={self.window_spec.name!r}"
        return f"TraceAnalysis({self.whole!r}{win})"

    def _repr_html_(self) -> str:
        """What Jupyter shows: the trace's source and tables (``report.notebook``)."""
        from tbdtrace.report import notebook

        return notebook.trace_html(self.whole)

    # -- the passes (one method per declared output; tests check that none is missing)

    @_columns(outputs.SUMMARY)
    def summary(self) -> pa.Table:
        """Per device: kernel, copy and set counts, busy time and utilization over its span."""
        return _run(summary, self.ctx, None)

    @_columns(outputs.KERNELS)
    def kernels(self) -> pa.Table:
        """Kernel time by name (nsys's columns: count, total, mean, median, min, max, std)."""
        return _run(kernels, self.ctx, None)

    @_columns(outputs.STEPS)
    def steps(self, config: StepsConfig | None = None) -> pa.Table:
        """The training steps with their duration and throughput
        (``tbdtrace.analysis.passes.steps.StepsConfig``)."""
        return _run(steps, self.ctx, config)

    @_columns(outputs.UTILIZATION)
    def utilization(self, config: StepsConfig | None = None) -> pa.Table:
        """Device utilization (compute, memory, any) per measured step and in total."""
        return _run(utilization, self.ctx, config)

    @_columns(outputs.CATEGORIES)
    def categories(self) -> pa.Table:
        """Device time by kind of work (gemm, conv, attention, communication, ...)."""
        return _run(categories, self.ctx, None)

    @_columns(outputs.HOTSPOTS_KERNEL)
    def hotspots(self, top: int | None = 20, by: str = "kernel") -> pa.Table:
        """The top kernels by device time with the op, module and marker they ran for;
        ``by="op"``: per launching op (columns of ``hotspots.by_op`` in docs/METRICS.md);
        ``by="source"``: per user source line (``hotspots.by_source``; empty without
        Python stacks); ``by="category"``: the categories table. ``top=None``: every row."""
        return _run(hotspots, self.ctx, hotspots.HotspotsConfig(top=top, by=by))

    @_columns(outputs.HOTSPOTS_SOURCE)
    def sources(self, top: int | None = 20) -> pa.Table:
        """Kernel time per user source line (file:line, function) on traces with Python
        stacks; empty without them. The same rows as ``hotspots(by="source")``."""
        return _run(hotspots, self.ctx, hotspots.HotspotsConfig(top=top, by="source"))

    @_columns(outputs.IDLE)
    def idle(self, config: IdleConfig | None = None) -> pa.Table:
        """Device idle time split into host-bound, queued and synchronization waits, with
        launch latencies (``tbdtrace.analysis.passes.idle.IdleConfig``)."""
        return _run(idle, self.ctx, config)

    @_columns(outputs.MEMCPY)
    def memcpy(self) -> pa.Table:
        """Memory copies per device and direction: bytes, bandwidth, share of the peak."""
        return _run(memcpy, self.ctx, None)

    @_columns(outputs.FP32)
    def fp32(self, config: StepsConfig | None = None) -> pa.Table:
        """FP32 FLOP/s and efficiency against the device peak, per rank (TBD's metric)."""
        return _run(fp32, self.ctx, config)

    @_columns(outputs.PHASES)
    def phases(self) -> pa.Table:
        """The run's phases per rank (init, warm-up, measured, after) and their work."""
        return _run(phases, self.ctx, None)

    @_columns(outputs.MEMORY)
    def memory(self, config: MemoryConfig | None = None) -> pa.Table:
        """Memory events replayed: live bytes by category after every alloc and free."""
        return _run(memory, self.ctx, config)

    @_columns(outputs.MEMORY_SERIES)
    def memory_series(self, config: MemorySeriesConfig | None = None) -> pa.Table:
        """Memory over time per device by category, thinned for plotting."""
        return _run(memory_series, self.ctx, config)

    @_columns(outputs.STEP_TIMELINE)
    def step_timeline(self, config: StepTimelineConfig | None = None) -> pa.Table:
        """The device events of one step per stream
        (``tbdtrace.analysis.passes.step_timeline.StepTimelineConfig``)."""
        return _run(step_timeline, self.ctx, config)

    @_columns(outputs.COLLECTIVE_SKEW)
    def collective_skew(self) -> pa.Table:
        """How far apart the ranks start each collective."""
        return _run(collective_skew, self.ctx, None)

    @_columns(outputs.CPU_ACTIVITY)
    def cpu_activity(self) -> pa.Table:
        """Host threads' profiled operators: busy time over their span."""
        return _run(cpu_activity, self.ctx, None)

    @_columns(outputs.FLOPS)
    def flops(self, config: FlopsConfig | None = None) -> pa.Table:
        """FLOPs per precision, achieved FLOP/s, efficiency and MFU per rank
        (``tbdtrace.analysis.passes.flops.FlopsConfig``)."""
        return _run(flops, self.ctx, config)

    @_columns(outputs.KERNEL_FLOPS)
    def kernel_flops(self, config: FlopsConfig | None = None) -> pa.Table:
        """FLOPs and efficiency per kernel name and precision."""
        return _run(kernel_flops, self.ctx, config)

    @_columns(outputs.RANKS)
    def ranks(self, config: RanksConfig | None = None) -> pa.Table:
        """Per-rank figures of a multi-rank trace (compute, communication, overlap)."""
        return _run(ranks, self.ctx, config)

    @_columns(outputs.ROOFLINE)
    def roofline(self, by: str = "op") -> pa.Table:
        """Roofline per op shape: FLOPs, bytes moved, achieved FLOP/s and bytes/s,
        intensity, ridge point, compute- or memory-bound and the share of that roof;
        ``by="family"``: per op family (columns of ``roofline.by_family`` in
        docs/METRICS.md)."""
        from tbdtrace.analysis.passes import roofline

        return roofline.by_family(self.ctx) if by == "family" else roofline.run(self.ctx)

    # -- queries, comparison and the report

    def sql(self, query: str) -> pa.Table:
        """A DuckDB SQL query over the trace's tables (read-only, sandboxed; table names
        as in docs/TRACE_FORMAT.md)."""
        from tbdtrace.analysis import sql

        return sql.query(self.ctx, query)

    @_columns(outputs.DIFF_KERNELS)
    def diff(self, other: TraceAnalysis | Source) -> pa.Table:
        """Per-kernel time of this trace (A) against ``other`` (B), largest change first."""
        from tbdtrace.analysis import compare

        b = other.ctx if isinstance(other, TraceAnalysis) else other
        return compare.run(self.ctx, b)

    @_columns(outputs.DIFF_OPS)
    def diff_ops(self, other: TraceAnalysis | Trace) -> pa.Table:
        """Device time per launching op of this trace (A) against ``other`` (B), aligned
        by op name, per measured step, largest change first."""
        from tbdtrace.analysis import compare as diff

        b = other.ctx if isinstance(other, TraceAnalysis) else other
        return diff.by_op(self.ctx, b)

    @_columns(outputs.DIFF_GATE)
    def gate(self, other: TraceAnalysis | Trace, fail_above: str | list[str]) -> pa.Table:
        """The regression gate of ``tbdtrace diff --fail-above`` with this trace as the
        baseline (A): ``fail_above`` as on the command line, e.g.
        ``"step_time=5%,kernel:gemm=10%,memory.peak=3%"`` (metrics:
        ``tbdtrace.analysis.gate.METRICS``; a bad one raises ``GateUsageError``). A row
        per threshold; any ``status`` other than ``pass`` is a failed gate."""
        import pyarrow as pa

        from tbdtrace.analysis import compare as diff
        from tbdtrace.analysis import gate as diff_gate
        from tbdtrace.analysis.passes import categories, memory

        texts = [fail_above] if isinstance(fail_above, str) else list(fail_above)
        limits = diff_gate.parse(texts, categories.CATEGORIES)
        whole_b = other.whole if isinstance(other, TraceAnalysis) else other
        b = other.ctx if isinstance(other, TraceAnalysis) else other
        peaks = (
            memory.summarize(self.whole)["peak_bytes"],
            memory.summarize(whole_b)["peak_bytes"],
        )
        doc = diff.compare(self.ctx, b, top=0, memory_peaks=peaks, thresholds=limits)
        schema = outputs.DIFF_GATE.arrow_schema()
        return pa.Table.from_pylist(doc["gate"]["results"], schema=schema)

    def report(self, options: ReportOptions | None = None) -> dict[str, Any]:
        """The report document (JSON-ready dict; ``tbdtrace report --format json``). The
        report applies its own window (``options.window``, default: the measured steps)
        to the trace as opened."""
        from tbdtrace.report import build

        return build(self.whole, options)

    def report_text(self, options: ReportOptions | None = None, width: int = 160) -> str:
        """The report as text (``tbdtrace report``)."""
        from tbdtrace.report import ReportOptions
        from tbdtrace.report.text import render
        from tbdtrace.report.textui import Console

        opts = options or ReportOptions()
        buf = io.StringIO()
        render(self.report(opts), opts, Console(file=buf, width=width))
        return buf.getvalue()


def analyze(
    trace: Trace | str | os.PathLike[str], window: WindowSpec | str | None = None
) -> TraceAnalysis:
    """Every analysis of ``trace``: a :class:`tbdtrace.Trace`, a trace directory, or a
    profiler file (Kineto JSON, ...) imported in memory. ``window``: ``None`` or ``"all"``
    for the whole trace, ``"measured"`` for the steps after warm-up, ``"warmup"``,
    ``"init"``, ``"after"``, ``"steps"``, or a ``WindowSpec``."""
    from tbdtrace.trace import Trace

    if not isinstance(trace, Trace):
        trace = _open(Path(trace))
    return TraceAnalysis(trace, window)


def _open(path: Path) -> Trace:
    from tbdtrace import trace as trace_io

    if path.is_dir():
        return trace_io.open(path)
    from tbdtrace import importers

    tables, meta = importers.import_files([path])
    return trace_io.from_tables(tables, meta, path)


def render_markdown() -> str:
    """docs/API.md, generated from :class:`TraceAnalysis`."""
    import inspect

    out = [
        "# Library API: `tbdtrace.analyze`",
        "",
        "<!-- Generated by `make docs` (python -m tbdtrace.analysis.facade docs/API.md) from",
        "tbdtrace/analysis/facade.py; do not edit by hand. -->",
        "",
        *(inspect.getdoc(sys.modules[__name__]) or "").split("\n"),
        "",
        "A `Trace` is storage only (DECISIONS engine.2): its report, notebook summary and",
        "every analysis are here (`tbdtrace.analyze(trace).report()`, `_repr_html_`).",
        "",
        "## Methods of `TraceAnalysis`",
    ]
    for name, fn in inspect.getmembers(TraceAnalysis, inspect.isfunction):
        if name.startswith("_"):
            continue
        sig = str(inspect.signature(fn)).replace("self, ", "").replace("(self)", "()")
        sig = sig.replace("'", "")
        out += ["", f"### `{name}{sig}`", "", "```text", inspect.getdoc(fn) or "", "```"]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python -m tbdtrace.analysis.facade docs/API.md", file=sys.stderr)
        sys.exit(2)
    Path(sys.argv[1]).write_text(render_markdown())
