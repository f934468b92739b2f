"""A trace seen through a window: the same tables, holding only the window's rows.

Every pass reads a :class:`WindowedTrace` as it reads a trace directory, so each pass
covers the window without knowing it. Which rows are kept is decided once per table
(``tbdtrace.passes.window`` states the rule); columns are read from the underlying
trace, filtered, and kept here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace import schema
from tbdtrace.arrow_ints import int_column
from tbdtrace.tablefile import combine as _combine
from tbdtrace.trace import Trace

if TYPE_CHECKING:
    from tbdtrace.passes.window import Window

# Host ranges: kept when they overlap the window (context for attribution).
_RANGES = ("ops", "markers")
_EVENTS = ("kernels", "memcpy", "memset")  # device work: placed by its launch


class WindowedTrace(Trace):
    """``base`` restricted to ``window``; ``window`` and ``base`` stay reachable."""

    def __init__(self, base: Trace, window: Window):
        super().__init__(base.path, base.meta)
        self.base = base
        self.window = window
        # Per table: None (every row), (first, end) for one run of rows (a window that
        # cuts a time-ordered table's ends: no index array), or the kept row indices.
        self._kept: dict[str, tuple[int, int] | npt.NDArray[np.int64] | None] = {}

    def __repr__(self) -> str:
        return f"WindowedTrace({self.base!r}, {self.window.label()!r})"

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

    def prefetch_tables(self, wanted: Iterable[tuple[str, Iterable[str]]]) -> None:
        wanted = [(name, list(cols)) for name, cols in wanted]
        for name, _ in wanted:
            self._kept_of(name)  # decided here, before the reading threads ask for it
        super().prefetch_tables(wanted)

    def read_columns(self, name: str, columns: Iterable[str]) -> list[pa.Array]:
        self._kept_of(name)  # decided here, before the reading threads ask for it
        return super().read_columns(name, columns)

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
            self._kept[name] = self._select(name)
        return self._kept[name]

    def _select(self, name: str) -> tuple[int, int] | npt.NDArray[np.int64] | None:
        from tbdtrace.passes import window as w

        decl = schema.table(name)
        n = self.base.num_rows(name)
        if decl.time_column is None or n == 0:
            return None
        keys, lo, hi = self.window.bounds()
        one = w.one_rank_key(self.base, name)  # read from the column's min and max
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
            rank = w.row_rank_keys(self.base, name)
            idx = np.searchsorted(keys, rank)
            hit = idx < keys.size
            hit[hit] = keys[idx[hit]] == rank[hit]
            safe = np.where(hit, idx, 0)
            dlo, dhi = self.window.default
            rlo = np.where(hit, lo[safe] if keys.size else dlo, dlo)
            rhi = np.where(hit, hi[safe] if keys.size else dhi, dhi)
        if name in _RANGES:
            s = w.row_times(self.base, name)
            e = self.base.table(name, ["end_ns"], cache=False).column(0)
            end = np.asarray(e.to_numpy(), dtype=np.int64)
            # [s, e) overlaps [lo, hi); a mark (e == s) when lo <= s < hi.
            keep = (s < rhi) & ((end > rlo) | ((end == s) & (s >= rlo)))
        elif name == "host_samples":
            keep = _samples_covering(w.row_times(self.base, name), rlo, rhi)
        elif name in _EVENTS:
            keep = self._events(name, rlo, rhi)
            if not self.window.keeps_pre_trace:
                keep &= ~w.pre_trace_rows(self.base, name)
        else:
            t = w.row_times(self.base, name)
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
        return np.flatnonzero(keep)

    def _events(
        self, name: str, rlo: npt.NDArray[np.int64], rhi: npt.NDArray[np.int64]
    ) -> npt.NDArray[np.bool_]:
        """Device work by placement time. A launch call has its kernel's rank, so when
        every row starts in its window and every runtime call is kept, every placement is
        inside too, and the join to the runtime calls is skipped (the common case of a
        trace whose steps span it). The base keeps the join: the view takes its runtime
        matches and launch times from it (``shared_arrays.runtime_match``), and the
        whole-trace sections place kernels with it too."""
        from tbdtrace.passes import window as w

        own = int_column(self.base.table(name, ["start_ns"]), "start_ns")
        keep = (own >= rlo) & (own < rhi)
        if keep.all() and self._kept_of("runtime") is None:
            return keep
        t = w.row_times(self.base, name)
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
            tbl = tbl.take(pa.array(kept))
        out = {}
        for c in cols:
            col = tbl.column(c)
            arr = _combine(col)
            if decl.name == "steps" and c == "warmup":
                # Inside a window, the window's steps are the steps measured.
                arr = pa.array(np.zeros(len(arr), dtype=bool))
            out[(decl.name, c)] = arr
        return out


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
