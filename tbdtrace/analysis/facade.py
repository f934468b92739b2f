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
Every table covers the same window as ``tbdtrace report`` by default: the measured steps
(the steps after warm-up, per rank; the whole trace when it has no steps). ``window``
chooses another (``"steps"``, ``"warmup"``, ``"init"``, ``"after"``, ``"all"`` for the whole
trace, or a ``tbdtrace.analysis.engine.window.WindowSpec``) and ``steps`` a range of step
numbers (``"3:7"`` or ``(3, 7)``, inclusive), as ``--window`` and ``--steps`` do::

    tbdtrace.analyze("run/trace", steps="3:7").report()   # = tbdtrace report --steps 3:7
    tbdtrace.analyze("run/trace", window="all").kernels() # every kernel of the trace
"""

from __future__ import annotations

import dataclasses
import io
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tbdtrace.analysis.engine import outputs
from tbdtrace.analysis.passes import (
    categories,
    collective_skew,
    cpu_activity,
    critical_path,
    flops,
    fp32,
    hotspots,
    idle,
    kernel_flops,
    kernels,
    memcpy,
    memory,
    memory_advice,
    memory_series,
    phases,
    ranks,
    roofline,
    step_timeline,
    steps,
    summary,
    utilization,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from tbdtrace.analysis.engine.context import AnalysisContext, Source
    from tbdtrace.analysis.engine.window import WindowSpec
    from tbdtrace.analysis.passes.critical_path import CriticalPathConfig
    from tbdtrace.analysis.passes.flops import FlopsConfig
    from tbdtrace.analysis.passes.hotspots import HotspotsConfig
    from tbdtrace.analysis.passes.idle import IdleConfig
    from tbdtrace.analysis.passes.memory import MemoryConfig
    from tbdtrace.analysis.passes.memory_advice import MemoryAdviceConfig
    from tbdtrace.analysis.passes.memory_series import MemorySeriesConfig
    from tbdtrace.analysis.passes.ranks import RanksConfig
    from tbdtrace.analysis.passes.roofline import RooflineConfig
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


Steps = str | tuple[int, int]


def window_spec(window: WindowSpec | str | None = None, steps: Steps | None = None) -> WindowSpec:
    """The window of ``window`` and ``steps`` as the command line reads ``--window`` and
    ``--steps``: ``None`` is the measured steps; ``steps`` (``"A:B"``, ``"A:"``, ``":B"``,
    ``"A"`` or a pair of step numbers, inclusive) overrides the kind. A bad value raises
    ValueError with a message for people."""
    from tbdtrace.analysis.engine.window import WindowSpec, parse_steps

    rng = parse_steps(steps) if isinstance(steps, str) else steps
    if isinstance(window, WindowSpec):
        return window if rng is None else dataclasses.replace(window, steps=rng)
    return WindowSpec(window or "measured", rng)


class TraceAnalysis:
    """Every analysis of one trace, as methods returning Arrow tables (or the report).

    Made by :func:`tbdtrace.analyze`. ``ctx`` is the analysis context the tables cover
    (the trace restricted to the window, the measured steps unless another was asked
    for; the whole trace for ``window="all"``); ``whole`` the trace as opened;
    ``window_spec`` the window asked for.
    """

    def __init__(
        self, trace: Trace, window: WindowSpec | str | None = None, steps: Steps | None = None
    ):
        from tbdtrace.analysis.engine import context
        from tbdtrace.analysis.engine import window as w

        self.whole = trace
        self.window_spec = window_spec(window, steps)
        self.ctx = context.of(trace)
        if self.window_spec.kind != "all" or self.window_spec.steps is not None:
            self.ctx = self.ctx.windowed(w.resolve(self.ctx, self.window_spec))

    def __repr__(self) -> str:
        return f"TraceAnalysis({self.whole!r}, window={self.window_spec.name!r})"

    def _other(self, other: TraceAnalysis | Source) -> AnalysisContext | Trace:
        """The other side of a comparison: a ``TraceAnalysis`` as it is, a trace in this
        analysis's window (as ``tbdtrace diff`` windows both sides alike)."""
        from tbdtrace.analysis.engine.context import AnalysisContext

        if isinstance(other, TraceAnalysis):
            return other.ctx
        if isinstance(other, AnalysisContext):
            return other
        return TraceAnalysis(other, self.window_spec).ctx

    def _repr_html_(self) -> str:
        """What Jupyter shows: the trace's source and tables (``report.notebook``)."""
        from tbdtrace.report import notebook

        return notebook.trace_html(self.whole)

    # -- the passes (one method per declared output; tests check that none is missing)

    @_columns(outputs.SUMMARY)
    def summary(self) -> pa.Table:
        """Per device: kernel, copy and set counts, busy time and utilization over its span."""
        return summary.run(self.ctx)

    @_columns(outputs.KERNELS)
    def kernels(self) -> pa.Table:
        """Kernel time by name (nsys's columns: count, total, mean, median, min, max, std)."""
        return kernels.run(self.ctx)

    @_columns(outputs.STEPS)
    def steps(self, config: StepsConfig | None = None) -> pa.Table:
        """The training steps with their duration and throughput
        (``tbdtrace.analysis.passes.steps.StepsConfig``)."""
        return steps.run(self.ctx, config)

    @_columns(outputs.UTILIZATION)
    def utilization(self, config: StepsConfig | None = None) -> pa.Table:
        """Device utilization (compute, memory, any) per measured step and in total."""
        return utilization.run(self.ctx, config)

    @_columns(outputs.CATEGORIES)
    def categories(self) -> pa.Table:
        """Device time by kind of work (gemm, conv, attention, communication, ...)."""
        return categories.run(self.ctx)

    @_columns(outputs.HOTSPOTS_KERNEL)
    def hotspots(self, config: HotspotsConfig | None = None) -> pa.Table:
        """The top kernels by device time with the op, module and marker they ran for
        (``tbdtrace.analysis.passes.hotspots.HotspotsConfig``: ``top`` rows, 20 by default,
        ``None`` for every row; ``by="op"``: per launching op, columns of
        ``hotspots.by_op`` in docs/METRICS.md; ``by="source"``: per user source line,
        ``hotspots.by_source``, empty without Python stacks; ``by="category"``: the
        categories table)."""
        return hotspots.run(self.ctx, config)

    @_columns(outputs.HOTSPOTS_SOURCE)
    def sources(self, top: int | None = 20) -> pa.Table:
        """Kernel time per user source line (file:line, function) on traces with Python
        stacks; empty without them. The same rows as ``hotspots(by="source")``."""
        return hotspots.run(self.ctx, hotspots.HotspotsConfig(top=top, by="source"))

    @_columns(outputs.IDLE)
    def idle(self, config: IdleConfig | None = None) -> pa.Table:
        """Device idle time split into host-bound, queued and synchronization waits, with
        launch latencies (``tbdtrace.analysis.passes.idle.IdleConfig``)."""
        return idle.run(self.ctx, config)

    @_columns(outputs.MEMCPY)
    def memcpy(self) -> pa.Table:
        """Memory copies per device and direction: bytes, bandwidth, share of the peak."""
        return memcpy.run(self.ctx)

    @_columns(outputs.FP32)
    def fp32(self, config: StepsConfig | None = None) -> pa.Table:
        """FP32 FLOP/s and efficiency against the device peak, per rank (TBD's metric)."""
        return fp32.run(self.ctx, config)

    @_columns(outputs.PHASES)
    def phases(self) -> pa.Table:
        """The run's phases per rank (init, warm-up, measured, after) and their work."""
        return phases.run(self.ctx)

    @_columns(outputs.MEMORY)
    def memory(self, config: MemoryConfig | None = None) -> pa.Table:
        """Memory events replayed: live bytes by category after every alloc and free."""
        return memory.run(self.ctx, config)

    @_columns(outputs.MEMORY_ADVICE)
    def memory_advice(self, config: MemoryAdviceConfig | None = None) -> pa.Table:
        """The memory peak by the op (or module: ``MemoryAdviceConfig(by="module")``) that
        allocated what was live at it; the report's ``memory.advice`` tables."""
        return memory_advice.run(self.ctx, config)

    @_columns(outputs.MEMORY_SERIES)
    def memory_series(self, config: MemorySeriesConfig | None = None) -> pa.Table:
        """Memory over time per device by category, thinned for plotting."""
        return memory_series.run(self.ctx, config)

    @_columns(outputs.STEP_TIMELINE)
    def step_timeline(self, config: StepTimelineConfig | None = None) -> pa.Table:
        """The device events of one step per stream
        (``tbdtrace.analysis.passes.step_timeline.StepTimelineConfig``)."""
        return step_timeline.run(self.ctx, config)

    @_columns(outputs.COLLECTIVE_SKEW)
    def collective_skew(self) -> pa.Table:
        """How far apart the ranks start each collective."""
        return collective_skew.run(self.ctx)

    @_columns(outputs.CPU_ACTIVITY)
    def cpu_activity(self) -> pa.Table:
        """Host threads' profiled operators: busy time over their span."""
        return cpu_activity.run(self.ctx)

    @_columns(outputs.FLOPS)
    def flops(self, config: FlopsConfig | None = None) -> pa.Table:
        """FLOPs per precision, achieved FLOP/s, efficiency and MFU per rank
        (``tbdtrace.analysis.passes.flops.FlopsConfig``)."""
        return flops.run(self.ctx, config)

    @_columns(outputs.KERNEL_FLOPS)
    def kernel_flops(self, config: FlopsConfig | None = None) -> pa.Table:
        """FLOPs and efficiency per kernel name and precision."""
        return kernel_flops.run(self.ctx, config)

    @_columns(outputs.RANKS)
    def ranks(self, config: RanksConfig | None = None) -> pa.Table:
        """Per-rank figures of a multi-rank trace (compute, communication, overlap)."""
        return ranks.run(self.ctx, config)

    @_columns(outputs.ROOFLINE)
    def roofline(self, config: RooflineConfig | None = None) -> pa.Table:
        """Roofline per op shape: FLOPs, bytes moved, achieved FLOP/s and bytes/s,
        intensity, ridge point, compute- or memory-bound and the share of that roof
        (``tbdtrace.analysis.passes.roofline.RooflineConfig``: ``by="family"``, per op
        family, columns of ``roofline.by_family`` in docs/METRICS.md)."""
        return roofline.run(self.ctx, config)

    @_columns(outputs.CRITICAL_PATH)
    def critical_path(self, config: CriticalPathConfig | None = None) -> pa.Table:
        """Each step's critical path: the chain of dependent host ops, runtime calls,
        launches, kernels, copies and syncs that set its length, one row per segment
        (contiguous, adding up to the step's length;
        ``tbdtrace.analysis.passes.critical_path.CriticalPathConfig``: ``by="resource"``,
        per step and resource, columns of ``critical_path.by_resource``; ``by="op"``,
        the ops on the paths, columns of ``critical_path.by_op``)."""
        return critical_path.run(self.ctx, config)

    # -- queries, comparison and the report

    def sql(self, query: str) -> pa.Table:
        """A DuckDB SQL query over the whole trace's tables, as ``tbdtrace sql`` runs it
        (read-only, sandboxed; table names as in docs/TRACE_FORMAT.md); the window does
        not apply: select by ``step`` or time in the query."""
        from tbdtrace.analysis import sql

        return sql.query(self.whole, query)

    @_columns(outputs.DIFF_KERNELS)
    def diff(self, other: TraceAnalysis | Source) -> pa.Table:
        """Per-kernel time of this trace (A) against ``other`` (B), largest change first;
        a trace ``other`` is read in this analysis's window."""
        from tbdtrace.analysis import compare

        return compare.run(self.ctx, self._other(other))

    @_columns(outputs.DIFF_OPS)
    def diff_ops(self, other: TraceAnalysis | Trace) -> pa.Table:
        """Device time per launching op of this trace (A) against ``other`` (B), aligned
        by op name, per measured step, largest change first."""
        from tbdtrace.analysis import compare as diff

        return diff.by_op(self.ctx, self._other(other))

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
        from tbdtrace.analysis.engine import categories as vocab
        from tbdtrace.analysis.engine import memory_replay

        texts = [fail_above] if isinstance(fail_above, str) else list(fail_above)
        limits = diff_gate.parse(texts, vocab.CATEGORIES)
        whole_b = other.whole if isinstance(other, TraceAnalysis) else other
        b = self._other(other)
        peaks = (
            memory_replay.summarize(self.whole)["peak_bytes"],
            memory_replay.summarize(whole_b)["peak_bytes"],
        )
        doc = diff.compare(self.ctx, b, top=0, memory_peaks=peaks, thresholds=limits)
        schema = outputs.DIFF_GATE.arrow_schema()
        return pa.Table.from_pylist(doc["gate"]["results"], schema=schema)

    def report(
        self,
        options: ReportOptions | None = None,
        *,
        window: WindowSpec | str | None = None,
        steps: Steps | None = None,
    ) -> dict[str, Any]:
        """The report document (JSON-ready dict; ``tbdtrace report --format json``), over
        ``window``/``steps`` as ``--window``/``--steps`` read them; without either, over
        ``options.window`` when set, else this analysis's window (by default the measured
        steps, as the command's)."""
        from tbdtrace.report import build

        return build(self.whole, self._report_options(options, window, steps))

    def report_text(
        self,
        options: ReportOptions | None = None,
        width: int = 160,
        *,
        window: WindowSpec | str | None = None,
        steps: Steps | None = None,
    ) -> str:
        """The report as text (``tbdtrace report``), over the window :meth:`report` reads."""
        from tbdtrace.report import build
        from tbdtrace.report.text import render
        from tbdtrace.report.textui import Console

        opts = self._report_options(options, window, steps)
        buf = io.StringIO()
        render(build(self.whole, opts), opts, Console(file=buf, width=width))
        return buf.getvalue()

    def _report_options(
        self, options: ReportOptions | None, window: WindowSpec | str | None, steps: Steps | None
    ) -> ReportOptions:
        from tbdtrace.report import ReportOptions

        opts = options or ReportOptions()
        if window is not None or steps is not None:
            return dataclasses.replace(opts, window=window_spec(window, steps))
        if opts.window is None:
            return dataclasses.replace(opts, window=self.window_spec)
        return opts


def analyze(
    trace: Trace | str | os.PathLike[str],
    window: WindowSpec | str | None = None,
    steps: Steps | None = None,
) -> TraceAnalysis:
    """Every analysis of ``trace``: a :class:`tbdtrace.Trace`, a trace directory, or a
    profiler file (Kineto JSON, ...) imported in memory, over the window ``tbdtrace
    report`` covers by default: the measured steps (the whole trace when it has no
    steps). ``window``: ``"measured"`` (``None``), ``"steps"``, ``"warmup"``, ``"init"``,
    ``"after"``, ``"all"`` (the whole trace) or a ``WindowSpec``; ``steps``: the steps
    numbered A to B, inclusive (``"A:B"``, ``"A:"``, ``":B"`` or ``(A, B)``), as
    ``--steps``."""
    from tbdtrace.trace import Trace

    if not isinstance(trace, Trace):
        trace = _open(Path(trace))
    return TraceAnalysis(trace, window, steps)


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
        "A `Trace` is storage only (DECISIONS 178): its report, notebook summary and",
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
