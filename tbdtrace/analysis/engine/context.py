"""What a pass reads: a trace, the window its rows are restricted to, and the cache.

Every pass is ``run(ctx, config)`` over an :class:`AnalysisContext`: ``ctx.trace`` is the
trace as stored (``tbdtrace.trace.Trace``), ``ctx.window`` the
:class:`~tbdtrace.analysis.engine.window.Window` the context covers (None: the whole
trace), ``ctx.cache`` the :class:`~tbdtrace.analysis.engine.cache.PassCache` of what the
passes derive from the rows it holds. The context reads like a trace (``table``,
``column``, ``num_rows``, ``meta`` ...), holding only the window's rows, so each pass
covers the window without knowing it.

Which rows a window keeps is decided once per table (``engine/window.py`` states the
rule) by :class:`WindowRows`; its columns are read from the trace, filtered, and kept
there. A trace's whole-trace context keeps its cache on the trace (``Trace.pass_cache``,
opaque to storage), so every pass run on that trace shares it; a windowed context has a
cache of its own, and ``ctx.whole`` is the context of the whole trace (the window's rows
reuse what was computed for it: ``shared_arrays``).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace import schema
from tbdtrace.analysis.engine.cache import PassCache
from tbdtrace.analysis.engine.grouping import one_rank_key, row_rank_keys
from tbdtrace.analysis.engine.window import pre_trace_count, pre_trace_rows, row_times
from tbdtrace.arrow_ints import int_column, int_values
from tbdtrace.tablefile import combine as _combine
from tbdtrace.trace import ColumnStore, Trace

if TYPE_CHECKING:
    from tbdtrace.analysis.engine.window import Window

# Host ranges: kept when they overlap the window (context for attribution).
_RANGES = ("ops", "markers")
_EVENTS = ("kernels", "memcpy", "memset")  # device work: placed by its launch


class AnalysisContext:
    """The rows a pass reads (``trace``, restricted to ``window`` unless it is None) and
    the cache of what passes derive from them. Made by :func:`of` (a whole trace) and
    :meth:`windowed`."""

    def __init__(self, trace: Trace, window: Window | None = None):
        self.trace = trace
        # A whole-trace window other than ``all`` still leaves out the device work launched
        # before the trace began, when there is any (DECISIONS 156).
        keeps_all = window is not None and window.is_all and window.keeps_pre_trace
        if keeps_all or (
            window is not None and window.is_all and not pre_trace_count(AnalysisContext(trace))
        ):
            window = None
        self.window = window
        self._rows: ColumnStore
        self._selection: WindowRows | None = None
        self.whole: AnalysisContext
        if self.window is None:
            if not isinstance(trace.pass_cache, PassCache):
                trace.pass_cache = PassCache()
            self.cache: PassCache = trace.pass_cache
            self.whole = self
            self._rows = trace
        else:
            self.cache = PassCache()
            self.whole = AnalysisContext(trace)
            self._rows = self._selection = WindowRows(self.whole, self.window)

    def __repr__(self) -> str:
        win = "whole trace" if self.window is None else self.window.label()
        return f"AnalysisContext({self.trace!r}, {win!r})"

    def windowed(self, window: Window) -> AnalysisContext:
        """The context of ``window`` on this context's trace (the whole-trace context when
        the window keeps every row)."""
        return AnalysisContext(self.trace, window)

    # -- reading, as from a trace (only the window's rows)

    @property
    def path(self) -> Path:
        return self.trace.path

    @property
    def meta(self) -> dict[str, Any]:
        return self.trace.meta

    def has(self, name: str) -> bool:
        return self._rows.has(name)

    def num_rows(self, name: str) -> int:
        return self._rows.num_rows(name)

    def constant(self, name: str, column: str) -> tuple[Any] | None:
        return self._rows.constant(name, column)

    def min_max(self, name: str, column: str) -> tuple[int, int] | None:
        return self._rows.min_max(name, column)

    def null_free(self, name: str, column: str) -> bool | None:
        return self._rows.null_free(name, column)

    def table(
        self, name: str, columns: Iterable[str] | None = None, cache: bool = True
    ) -> pa.Table:
        return self._rows.table(name, columns, cache)

    def column(self, name: str, column: str) -> pa.Array:
        return self._rows.column(name, column)

    def holds(self, name: str, column: str) -> bool:
        """Is the column read and kept by this context (see ``ColumnStore.holds``)?"""
        return self._rows.holds(name, column)

    def narrow_ints(self, name: str, column: str) -> npt.NDArray[np.int32] | None:
        """An int64 column's values as int32, read for them (``ColumnStore.narrow_ints``)."""
        return self._rows.narrow_ints(name, column)

    def label_codes(
        self, name: str, column: str
    ) -> tuple[npt.NDArray[np.integer[Any]], list[str | None]] | None:
        """A dictionary column's codes and labels, read for them (``ColumnStore.label_codes``)."""
        return self._rows.label_codes(name, column)

    def prefetch(self, name: str, columns: Iterable[str]) -> None:
        self._rows.prefetch(name, columns)

    def prefetch_tables(self, wanted: Iterable[tuple[str, Iterable[str]]]) -> None:
        self._rows.prefetch_tables(wanted)

    def read_columns(self, name: str, columns: Iterable[str]) -> list[pa.Array]:
        return self._rows.read_columns(name, columns)

    def df(self, name: str, columns: Iterable[str] | None = None) -> Any:
        """Table ``name`` as a pandas DataFrame (as :meth:`Trace.df`)."""
        from tbdtrace import _pandas_gate

        _pandas_gate.require()
        return self.table(name, columns).to_pandas()

    # -- where the window's rows sit in the whole trace's

    def kept_rows(self, name: str) -> npt.NDArray[np.int64] | None:
        """Row indices of ``name`` in the whole trace that this context holds (None: all)."""
        return None if self._selection is None else self._selection.kept_rows(name)

    def row_run(self, name: str) -> tuple[int, int] | None:
        """(first, end): this context holds rows first..end-1 of ``name`` of the whole
        trace, one run (every row: (0, rows)); None when the rows are not one run."""
        if self._selection is None:
            return 0, self.trace.num_rows(name)
        return self._selection.row_run(name)


Source = AnalysisContext | Trace  # what a pass's ``run`` takes


def of(source: Source) -> AnalysisContext:
    """``source`` when it is a context, else the whole-trace context of the trace ``source``
    (its cache kept on the trace: every pass run on it shares what is computed)."""
    return source if isinstance(source, AnalysisContext) else AnalysisContext(source)


def release_copied(view: AnalysisContext, wanted: Iterable[tuple[str, Iterable[str]]]) -> None:
    """The whole trace of ``view`` (a windowed context) lets go of the columns of
    ``wanted`` that ``view`` holds copies of (its rows of the table kept by index, not
    one run), and of its cache's int64 and code views of them: a report whose window
    leaves out rows (pre-trace kernels, warm-up steps) keeps one copy of each, not two
    (10M kernels: 0.19 GiB). Read again from the trace when asked for."""
    from tbdtrace.analysis.engine import shared_arrays

    sel = view._selection
    if sel is None:
        return
    for name, cols in wanted:
        if not isinstance(sel._kept.get(name), np.ndarray):
            continue  # every row, or one run: the window's columns are the whole's
        for c in cols:
            if view.holds(name, c):
                view.trace.forget(name, c)
                view.whole.cache.forget(
                    (shared_arrays.INTS.name, shared_arrays.CODES.name), name, c
                )


def release_table(ctx: AnalysisContext, name: str, entries: Iterable[str] = ()) -> None:
    """``ctx`` lets go of the columns of table ``name`` it holds, of its cache's values
    of that table (int64 and code views, thread groups ...) and of the cache entries
    named ``entries`` (values derived from that table alone). Read and computed again
    when asked for: the same values."""
    for col in ctx._rows.held_columns(name):
        ctx._rows.forget(name, col)
    ctx.cache.forget_of(name)
    ctx.cache.forget(tuple(entries))


class WindowRows(ColumnStore):
    """The rows of ``base`` (a whole-trace context) that ``window`` keeps, table by table."""

    def __init__(self, base: AnalysisContext, window: Window):
        super().__init__()
        self.base = base
        self.window = window
        # Per table: None (every row), (first, end) for one run of rows (a window that
        # cuts a time-ordered table's ends: no index array), or the kept row indices.
        self._kept: dict[str, tuple[int, int] | npt.NDArray[np.int64] | None] = {}
        # A range table's times, read whole to decide its rows: the window's own columns
        # are made from them (:meth:`_kept_of`), so the whole trace does not keep them.
        self._range_times: dict[str, dict[str, pa.Array]] = {}
        # Per table kept as row indices: its longest run of consecutive rows, found once
        # (:func:`_main_run`), not again for each column read.
        self._runs: dict[str, tuple[int, int] | None] = {}

    def has(self, name: str) -> bool:
        return self.base.has(name)

    def num_rows(self, name: str) -> int:
        kept = self._kept_of(name)
        if kept is None:
            return self.base.num_rows(name)
        return kept[1] - kept[0] if isinstance(kept, tuple) else int(kept.size)

    def constant(self, name: str, column: str) -> tuple[Any] | None:
        """The base's constant column (:meth:`Trace.constant`), when the window keeps
        any of its rows: a subset of equal values holds the same value."""
        return self.base.constant(name, column) if self.num_rows(name) else None

    def null_free(self, name: str, column: str) -> bool | None:
        """True when the base has no null in the column (nor has any subset of its rows);
        else unknown."""
        return True if self.base.null_free(name, column) else None

    def prefetch_tables(self, wanted: Iterable[tuple[str, Iterable[str]]]) -> None:
        wanted = [(name, list(cols)) for name, cols in wanted]
        for name, _ in wanted:
            self._kept_of(name)  # decided here, before the reading threads ask for it
        super().prefetch_tables(wanted)

    def read_columns(self, name: str, columns: Iterable[str]) -> list[pa.Array]:
        self._kept_of(name)  # decided here, before the reading threads ask for it
        return super().read_columns(name, columns)

    def narrow_ints(self, name: str, column: str) -> npt.NDArray[np.int32] | None:
        """The base's int32 values (read for them) of the window's rows."""
        if self.holds(name, column) or self.base.holds(name, column):
            return None
        got = self.base.narrow_ints(name, column)
        kept = self._kept_of(name)
        if got is None or kept is None:
            return got
        return got[kept[0] : kept[1]].copy() if isinstance(kept, tuple) else got[kept]

    def label_codes(
        self, name: str, column: str
    ) -> tuple[npt.NDArray[np.integer[Any]], list[str | None]] | None:
        """The base's codes (read for them) of the window's rows."""
        if self.holds(name, column) or self.base.holds(name, column):
            return None
        got = self.base.label_codes(name, column)
        if got is None:
            return None
        c, labels = got
        kept = self._kept_of(name)
        if kept is not None:
            c = c[kept[0] : kept[1]].copy() if isinstance(kept, tuple) else c[kept]
        return c, labels

    def kept_rows(self, name: str) -> npt.NDArray[np.int64] | None:
        """Row indices of ``name`` in the base trace that the window keeps (None: all)."""
        kept = self._kept_of(name)
        if isinstance(kept, tuple):
            return np.arange(kept[0], kept[1], dtype=np.int64)
        return kept

    def row_run(self, name: str) -> tuple[int, int] | None:
        """(first, end): the window keeps rows first..end-1 of ``name`` in the base trace,
        one run (every row: (0, rows)); None when the kept rows are not one run."""
        kept = self._kept_of(name)
        if kept is None:
            return 0, self.base.num_rows(name)
        return kept if isinstance(kept, tuple) else None

    def _kept_of(self, name: str) -> tuple[int, int] | npt.NDArray[np.int64] | None:
        if name not in self._kept:
            kept = self._kept[name] = self._select(name)
            for c, arr in self._range_times.pop(name, {}).items():
                # The window's rows of the times the selection read (as _load makes them)
                if (name, c) not in self._columns:
                    self._columns[(name, c)] = self._rows_of(name, arr, kept)
        return self._kept[name]

    def _rows_of(
        self, name: str, arr: pa.Array, kept: tuple[int, int] | npt.NDArray[np.int64] | None
    ) -> pa.Array:
        if kept is None:
            return arr
        if isinstance(kept, tuple):
            return arr.slice(kept[0], kept[1] - kept[0])
        return _combine(_take_rows(pa.table({"v": arr}), kept, self._run(name, kept)).column(0))

    def _run(self, name: str, kept: npt.NDArray[np.int64]) -> tuple[int, int] | None:
        if name not in self._runs:
            self._runs[name] = _main_run(kept)
        return self._runs[name]

    def _select(self, name: str) -> tuple[int, int] | npt.NDArray[np.int64] | None:
        decl = schema.table(name)
        n = self.base.num_rows(name)
        if decl.time_column is None or n == 0:
            return None
        keys, lo, hi = self.window.bounds()
        one = one_rank_key(self.base, name)  # read from the column's min and max
        rlo: npt.NDArray[np.int64]
        rhi: npt.NDArray[np.int64]
        if "rank" not in decl.column_names and keys.size:
            # Tables without a rank (host samples, profiler overhead): the hull of the
            # ranks' windows.
            rlo, rhi = np.asarray(lo.min()), np.asarray(hi.max())
        elif one is not None:
            # One rank (the common case): one window, compared as a scalar, not as two
            # per-row arrays (10M rows: 160 MB of temporaries per table).
            i = int(np.searchsorted(keys, one))
            hit1 = i < keys.size and keys[i] == one
            dlo, dhi = self.window.default
            rlo = np.asarray(lo[i] if hit1 else dlo, np.int64)
            rhi = np.asarray(hi[i] if hit1 else dhi, np.int64)
        else:
            rank = row_rank_keys(self.base, name)
            idx = np.searchsorted(keys, rank)
            hit = idx < keys.size
            hit[hit] = keys[idx[hit]] == rank[hit]
            safe = np.where(hit, idx, 0)
            dlo, dhi = self.window.default
            rlo = np.where(hit, lo[safe] if keys.size else dlo, dlo)
            rhi = np.where(hit, hi[safe] if keys.size else dhi, dhi)
        if name in _RANGES:
            # Read for this decision and for the window's own columns, not kept by the
            # whole trace (29M ops: 0.45 GB, and one decoding of end_ns instead of two).
            s_arr, e_arr = self.base.read_columns(name, ["start_ns", "end_ns"])
            self._range_times[name] = {"start_ns": s_arr, "end_ns": e_arr}
            s = int_values(s_arr)
            end = int_values(e_arr)
            # [s, e) overlaps [lo, hi); a mark (e == s) when lo <= s < hi.
            keep = (s < rhi) & ((end > rlo) | ((end == s) & (s >= rlo)))
        elif name == "host_samples":
            keep = _samples_covering(row_times(self.base, name), rlo, rhi)
        elif name in _EVENTS:
            keep = self._events(name, rlo, rhi)
            if not self.window.keeps_pre_trace:
                keep &= ~pre_trace_rows(self.base, name)
        else:
            t = row_times(self.base, name)
            keep = (t >= rlo) & (t < rhi)
        if name == "steps":
            keep &= self._selected_steps()
        if keep.all():
            return None
        if keep.any():
            # One run of rows (the window cuts a time-ordered table's ends): kept as its
            # bounds, not as an index array (10M kernels: 80 MB).
            first = int(np.argmax(keep))
            end = keep.size - int(np.argmax(keep[::-1]))
            if keep[first:end].all():
                return first, end
        # Kept for the window's life: int32 below 2^31 rows (all but a few of 10M
        # kernels: 38 MB, not 76).
        rows: np.ndarray = np.flatnonzero(keep)
        return rows.astype(np.int32) if keep.size < 2**31 else rows

    def _events(
        self, name: str, rlo: npt.NDArray[np.int64], rhi: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.bool_]:
        """Device work by placement time. A launch call has its kernel's rank, so when
        every row starts in its window and every runtime call is kept, every placement is
        inside too, and the join to the runtime calls is skipped (the common case of a
        trace whose steps span it). The base keeps the join: the view takes its runtime
        matches and launch times from it (``shared_arrays.runtime_match``), and the
        whole-trace sections place kernels with it too."""
        own = int_column(self.base.table(name, ["start_ns"]), "start_ns")
        keep = (own >= rlo) & (own < rhi)
        if keep.all() and self._kept_of("runtime") is None:
            return keep
        t = row_times(self.base, name)
        return (t >= rlo) & (t < rhi)

    def _selected_steps(self) -> npt.NDArray[np.bool_]:
        """Steps the window selects by what they are (a warm-up step that starts where
        the first measured step starts is not a measured step)."""
        spec = self.window.spec
        t = self.base.table("steps", ["step", "warmup"], cache=False)
        if spec.steps is not None:
            num = np.asarray(t.column("step").to_numpy(), dtype=np.int64)
            return (num >= spec.steps[0]) & (num <= spec.steps[1])
        warm = np.asarray(
            t.column("warmup").fill_null(False).to_numpy(zero_copy_only=False), dtype=bool
        )
        if spec.kind == "measured":
            return ~warm
        if spec.kind == "warmup":
            return warm
        return np.ones(t.num_rows, dtype=bool)

    def _load(self, decl: schema.Table, cols: list[str]) -> dict[tuple[str, str], pa.Array]:
        kept = self._kept_of(decl.name)
        tbl = self.base.table(decl.name, cols, cache=False)
        if isinstance(kept, tuple):
            # One run of rows: a zero-copy view of the base's columns, not a copy of each
            # (10M kernels: ~0.5 GiB).
            tbl = tbl.slice(kept[0], kept[1] - kept[0])
        elif kept is not None:
            tbl = _take_rows(tbl, kept, self._run(decl.name, kept))
        out = {}
        for c in cols:
            col = tbl.column(c)
            arr = _combine(col)
            if decl.name == "steps" and c == "warmup":
                # Inside a window, the window's steps are the steps measured.
                arr = pa.array(np.zeros(len(arr), dtype=bool))
            out[(decl.name, c)] = arr
        return out


def _main_run(kept: npt.NDArray[np.int64]) -> tuple[int, int] | None:
    """(a, b): ``kept[a:b]`` is the longest run of consecutive rows, when it holds at
    least half of ``kept`` and ``kept`` has over 1024 rows; else None."""
    if kept.size <= 1024:
        return None
    cut = np.flatnonzero(np.diff(kept) != 1) + 1
    starts, ends = np.r_[0, cut], np.r_[cut, kept.size]
    j = int(np.argmax(ends - starts))
    a, b = int(starts[j]), int(ends[j])
    return (a, b) if 2 * (b - a) >= kept.size else None


def _take_rows(tbl: pa.Table, kept: npt.NDArray[np.int64], run: tuple[int, int] | None) -> pa.Table:
    """``tbl.take(kept)`` for ascending row numbers, ``run`` their :func:`_main_run`. A
    window keeps one long run of rows and a few outside it (ranges that began before the
    window and reach into it): the run is sliced (copied once when the chunks are
    combined), only the others gathered; the same rows in the same order."""
    if run is not None:
        a, b = run
        parts = [tbl.take(pa.array(kept[:a]))] if a else []
        parts.append(tbl.slice(int(kept[a]), b - a))
        if b < kept.size:
            parts.append(tbl.take(pa.array(kept[b:])))
        return pa.concat_tables(parts)
    return tbl.take(pa.array(kept))


def _samples_covering(
    t: npt.NDArray[np.int64], lo: npt.NDArray[np.int64], hi: npt.NDArray[np.int64]
) -> npt.NDArray[np.bool_]:
    """Host samples inside [lo, hi), plus the last one before it and the first one after:
    a sample holds the mean since the previous sample, so those two bound the sampled time
    that covers the window's edges."""
    if not t.size:
        return np.zeros(0, dtype=bool)
    a, b = int(lo.min()), int(hi.max())
    before, after = t[t < a], t[t >= b]
    first = int(before.max()) if before.size else a
    last = int(after.min()) if after.size else b
    return (t >= first) & (t <= last)
