"""Arrays several passes need, computed once per opened trace (``passes/cache.py``).

A report runs a dozen passes over the same rows. At 10M kernels, converting a column,
splitting rows by device, matching kernels to their runtime calls or merging busy
intervals each costs a good fraction of a second and tens of MB, so each is done once
here and shared. Every function is a pure function of the trace; the arrays returned are
shared between passes and must not be modified (they are marked read-only).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace import schema
from tbdtrace.analysis.engine import intervals
from tbdtrace.analysis.engine.cache import Entry, PassCache
from tbdtrace.analysis.engine.grouping import device_keys, dict_codes
from tbdtrace.analysis.engine.joins import NULL_ID, join_pairs, join_sorted
from tbdtrace.arrow_ints import int_column
from tbdtrace.trace import Trace

I64 = npt.NDArray[np.int64]
Rows = slice | I64  # all rows (slice(None)) or row indices in file order
EVENT_TABLES = ("kernels", "memcpy", "memset")
_DEVICE_COLS = ["device_id", "device_type", "rank"]


# What this module keeps per trace (arguments after the entry: the key within it).
INTS: Entry[I64] = Entry("shared_arrays.ints", "(table, column, fill): a column as int64")
CODES: Entry[tuple[I64, list[str | None]]] = Entry(
    "shared_arrays.codes", "(table, column): a string column as codes and labels"
)
DURATIONS: Entry[I64] = Entry("shared_arrays.durations", "(table,): end_ns - start_ns per row")
DEVICE_ROWS: Entry[list[tuple[int, Rows]]] = Entry(
    "shared_arrays.device_rows", "(table,): each device's rows"
)
SPANS: Entry[tuple[I64, I64]] = Entry(
    "shared_arrays.spans", "(table, device key): start_ns and end_ns of the device's rows"
)
TIME_BOUNDS: Entry[tuple[int, int]] = Entry(
    "shared_arrays.time_bounds", "(table, device key or None): first start, last end"
)
DEVICE_SPAN: Entry[tuple[int, int] | None] = Entry(
    "shared_arrays.device_span", "(device key,): first start and last end of its work"
)
MERGED: Entry[tuple[I64, I64]] = Entry(
    "shared_arrays.merged", "(device key, what): merged busy intervals"
)
MERGED_CUM: Entry[tuple[I64, I64, I64]] = Entry(
    "shared_arrays.merged_cum", "(device key, what): merged intervals and cumulative lengths"
)
MERGED_FIRST: Entry[tuple[I64, I64, I64]] = Entry(
    "shared_arrays.merged_first", "(device key,): merged kernel intervals and opening rows"
)
RUNTIME_MATCH: Entry[I64] = Entry(
    "shared_arrays.runtime_match", "(table,): per row, the index of its runtime call"
)
LAUNCH_TIMES: Entry[I64] = Entry(
    "shared_arrays.launch_times", "(table, column): per row, its runtime call's time"
)
BASE_RUNS: Entry[tuple[int, int, int] | None] = Entry(
    "shared_arrays.base_runs",
    "(table,): on a window view, the base's rows first..end of the table and the first "
    "kept runtime row, when the base's runtime matches carry over (else None)",
)


def _ro(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def ints(trace: Trace, table: str, column: str, fill: int = -1, keep: bool = True) -> I64:
    """Column ``column`` of ``table`` as int64, nulls as ``fill``.

    ``keep=False`` for a column read once to derive something that is itself kept (ids
    for a join, launch sizes): neither the column nor this array stays in memory."""
    cache = PassCache.of(trace)
    if not keep and not cache.contains(INTS, table, column, fill):
        return _ro(int_column(trace.table(table, [column], cache=False), column, fill))
    return cache.get(
        INTS,
        lambda: _ro(int_column(trace.table(table, [column]), column, fill)),
        table,
        column,
        fill,
    )


def has_values(trace: Trace, table: str, column: str) -> bool:
    """True when some row of the column is not null."""
    return trace.column(table, column).null_count < trace.num_rows(table)


def codes(trace: Trace, table: str, column: str) -> tuple[I64, list[str | None]]:
    """A dictionary string column as (codes, labels); see ``_util.dict_codes``."""

    def compute() -> tuple[I64, list[str | None]]:
        arr = trace.column(table, column)
        if pa.types.is_dictionary(arr.type) and arr.null_count == 0:
            # The dictionary's own int32 indices, without a copy.
            return arr.indices.to_numpy(), arr.dictionary.to_pylist()
        c, labels = dict_codes(trace.table(table, [column]), column)
        return _ro(c), labels

    return PassCache.of(trace).get(CODES, compute, table, column)


def durations(trace: Trace, table: str, keep: bool = True) -> I64:
    """end_ns - start_ns of every row.

    On a window view that keeps one run of at least half the base's rows, a slice of
    the base's array (the whole trace's sections need that one too). ``keep=False``: not
    kept for later calls (a one-off use), as :func:`launch_times`."""

    def compute() -> I64:
        run = _base_run(trace, table)
        if run is not None and 2 * (run[2] - run[1]) >= run[0].num_rows(table):
            return durations(run[0], table, keep)[run[1] : run[2]]
        return _ro(ints(trace, table, "end_ns") - ints(trace, table, "start_ns"))

    cache = PassCache.of(trace)
    if not keep and not cache.contains(DURATIONS, table):
        return compute()
    return cache.get(DURATIONS, compute, table)


def _base_run(trace: Trace, table: str) -> tuple[Trace, int, int] | None:
    """(base trace, first, end) when ``trace`` is a window view that keeps rows
    first..end-1 of ``table`` of its base, one run; else None."""
    view = _view(trace)
    run = None if view is None else view.row_run(table)
    return None if view is None or run is None else (view.base, *run)


def _view(trace: Trace) -> Any:
    """``trace`` when it is a window view (``passes/_windowed.py``), else None. Known by
    its ``row_run``: importing the class here would close an import circle through
    ``passes/window.py``."""
    return trace if callable(getattr(trace, "row_run", None)) else None


def _carried_matches(trace: Trace, table: str) -> tuple[Trace, int, int, int] | None:
    """(base, first, end, runtime first) when the window view ``trace`` can take its
    runtime matches of ``table`` from its base's (already computed): its rows of
    ``table`` and of ``runtime`` are each one run of the base's, and every runtime call
    that the base matches to those rows is kept. A match is the first equal id, so the
    first match among the base's runtime rows, when kept, is the first among the view's
    too: the view's match is the base's, less the runtime rows cut before the run."""
    view = _view(trace)
    if view is None or not PassCache.of(view.base).contains(RUNTIME_MATCH, table):
        return None

    def compute() -> tuple[int, int, int] | None:
        run, rrun = view.row_run(table), view.row_run("runtime")
        if run is None or rrun is None:
            return None
        m = runtime_match(view.base, table)[run[0] : run[1]]
        hit = m >= 0
        if (hit & ((m < rrun[0]) | (m >= rrun[1]))).any():
            return None  # a matched call is cut: its id may match a later kept call
        return run[0], run[1], rrun[0]

    got = PassCache.of(trace).get(BASE_RUNS, compute, table)
    return None if got is None else (view.base, *got)


def device_rows(trace: Trace, table: str) -> list[tuple[int, Rows]]:
    """(device key, that device's rows in file order) per device of ``table``, by key.

    Keys as ``_util.device_keys``. A table on one device (the common case) yields
    ``slice(None)``, so its columns are used without a copy.
    """

    def compute() -> list[tuple[int, Rows]]:
        if trace.num_rows(table) == 0:
            return []
        known = [trace.constant(table, c) for c in _DEVICE_COLS]
        if all(k is not None for k in known):  # one device, by the file's statistics
            types = schema.table(table).arrow_schema()
            one = pa.table(
                {
                    c: pa.array([k[0]], types.field(c).type)
                    for c, k in zip(_DEVICE_COLS, known, strict=True)
                    if k is not None
                }
            )
            return [(int(device_keys(one)[0]), slice(None))]
        # Not kept in the trace's cache: once split by device these columns are not needed.
        t = trace.table(table, _DEVICE_COLS, cache=False)
        if t.num_rows == 0:
            return []
        if all(_constant(t.column(c)) for c in _DEVICE_COLS):
            return [(int(device_keys(t.slice(0, 1))[0]), slice(None))]
        keys = device_keys(t)
        order = np.argsort(keys, kind="stable")
        sk = keys[order]
        cut = np.flatnonzero(sk[1:] != sk[:-1]) + 1
        bounds = [0, *cut.tolist(), sk.size]
        return [(int(sk[a]), _ro(order[a:b])) for a, b in zip(bounds, bounds[1:], strict=False)]

    return PassCache.of(trace).get(DEVICE_ROWS, compute, table)


def _constant(col: pa.ChunkedArray | pa.Array) -> bool:
    """True when every row holds the same value (or every row is null)."""
    if col.null_count == len(col):
        return True
    if col.null_count:
        return False
    if pa.types.is_dictionary(col.type):
        if isinstance(col, pa.ChunkedArray):
            if col.num_chunks != 1:
                return False
            col = col.chunk(0)
        col = col.indices
    mm = pc.min_max(col)
    return bool(mm["min"].as_py() == mm["max"].as_py())


def _one_rank(trace: Trace, table: str) -> bool:
    """Do every row of ``table`` and every runtime call have the same rank? (As
    ``window.one_rank_key``, which importing here would close an import circle through
    ``passes/_windowed.py``.)"""
    known = trace.constant(table, "rank"), trace.constant("runtime", "rank")
    if known[0] is not None and known[1] is not None:
        return known[0] == known[1]  # the files' statistics: nothing decoded
    kr = trace.table(table, ["rank"], cache=False).column(0)
    rr = trace.table("runtime", ["rank"], cache=False).column(0)
    return _constant(kr) and _constant(rr) and kr[0].as_py() == rr[0].as_py()


def device_keys_of(trace: Trace, tables: tuple[str, ...] = EVENT_TABLES) -> list[int]:
    """Sorted device keys that have rows in any of ``tables``."""
    return sorted({k for t in tables for k, _ in device_rows(trace, t)})


def rows_of(trace: Trace, table: str, key: int) -> Rows | None:
    """Rows of ``table`` on device ``key``; None when it has none."""
    return dict(device_rows(trace, table)).get(key)


def spans(trace: Trace, table: str, key: int) -> tuple[I64, I64]:
    """(start_ns, end_ns) of the rows of ``table`` on device ``key`` (file order)."""

    def compute() -> tuple[I64, I64]:
        rows = rows_of(trace, table, key)
        s, e = ints(trace, table, "start_ns"), ints(trace, table, "end_ns")
        if rows is None:
            return _ro(np.zeros(0, np.int64)), _ro(np.zeros(0, np.int64))
        if isinstance(rows, slice):
            return s, e
        return _ro(s[rows]), _ro(e[rows])

    return PassCache.of(trace).get(SPANS, compute, table, key)


def time_bounds(trace: Trace, table: str, key: int | None = None) -> tuple[int, int]:
    """(first start_ns, last end_ns) of the rows of ``table`` on device ``key`` (every
    row when None; zero-duration rows included); the table must have such rows. Kept:
    several passes ask for the same bounds."""

    def compute() -> tuple[int, int]:
        if key is not None and not isinstance(rows_of(trace, table, key), slice):
            s, e = spans(trace, table, key)
        else:
            s, e = ints(trace, table, "start_ns"), ints(trace, table, "end_ns")
        return int(s.min()), int(e.max())

    return PassCache.of(trace).get(TIME_BOUNDS, compute, table, key)


def device_span(trace: Trace, key: int) -> tuple[int, int] | None:
    """(first start, last end) over the kernel, memcpy and memset rows of device ``key``.

    Zero-duration rows occupy no time and do not extend the span (docs/METRICS.md); a
    device whose rows all have zero duration spans from their first to their last time.
    """

    def compute() -> tuple[int, int] | None:
        ms, me = merged(trace, key, "all")
        if ms.size:
            return int(ms[0]), int(me[-1])
        parts = [spans(trace, t, key) for t in EVENT_TABLES]
        parts = [(s, e) for s, e in parts if s.size]
        if not parts:
            return None
        return int(min(s.min() for s, _ in parts)), int(max(e.max() for _, e in parts))

    return PassCache.of(trace).get(DEVICE_SPAN, compute, key)


def merged(trace: Trace, key: int, what: str) -> tuple[I64, I64]:
    """Merged busy intervals of device ``key``: ``what`` = kernels, memops (memcpy and
    memset) or all (the three)."""

    def compute() -> tuple[I64, I64]:
        if what == "kernels":
            ms, me, _ = merged_kernels_first(trace, key)
        elif what == "memops":
            ms, me = intervals.merge_merged(
                intervals.merge(*spans(trace, "memcpy", key)),
                intervals.merge(*spans(trace, "memset", key)),
            )
        elif what == "all":
            ms, me = intervals.merge_merged(
                merged(trace, key, "kernels"), merged(trace, key, "memops")
            )
        else:
            raise ValueError(f"what must be kernels, memops or all, not {what!r}")
        return _ro(ms), _ro(me)

    return PassCache.of(trace).get(MERGED, compute, key, what)


def merged_with_cum(trace: Trace, key: int, what: str) -> tuple[I64, I64, I64]:
    """``merged(trace, key, what)`` and its ``intervals.cumulative`` lengths, the
    three arguments of ``covered_in_merged`` for repeated window queries."""
    from tbdtrace.analysis.engine.intervals import cumulative

    def compute() -> tuple[I64, I64, I64]:
        ms, me = merged(trace, key, what)
        if what == "all" and ms is merged(trace, key, "kernels")[0]:
            return merged_with_cum(trace, key, "kernels")  # no memops: the same set
        return ms, me, _ro(cumulative(ms, me))

    return PassCache.of(trace).get(MERGED_CUM, compute, key, what)


def merged_kernels_first(trace: Trace, key: int) -> tuple[I64, I64, I64]:
    """``merged(trace, key, "kernels")`` plus, per merged interval, the kernel row (within
    the device's rows) that opens it (``intervals.merge_first``)."""

    def compute() -> tuple[I64, I64, I64]:
        ms, me, first = intervals.merge_first(*spans(trace, "kernels", key))
        return _ro(ms), _ro(me), _ro(first)

    return PassCache.of(trace).get(MERGED_FIRST, compute, key)


def runtime_match(trace: Trace, table: str) -> I64:
    """Per row of ``table``, the index of its runtime call by (rank, correlation_id), -1."""

    def compute() -> I64:
        n = trace.num_rows(table)
        if n == 0 or trace.num_rows("runtime") == 0:
            return _ro(np.full(n, -1, dtype=np.int64))
        carried = _carried_matches(trace, table)
        if carried is not None:
            base, first, end, rfirst = carried
            m = runtime_match(base, table)[first:end]
            return m if rfirst == 0 else _ro(np.where(m >= 0, m - rfirst, -1))
        kc = ints(trace, table, "correlation_id", NULL_ID, keep=False)
        rc = ints(trace, "runtime", "correlation_id", NULL_ID, keep=False)
        if _one_rank(trace, table):
            return _ro(join_sorted(kc, rc))  # one rank: ids alone decide
        return _ro(
            join_pairs(
                ints(trace, table, "rank", keep=False),
                kc,
                ints(trace, "runtime", "rank", keep=False),
                rc,
            )
        )

    return PassCache.of(trace).get(RUNTIME_MATCH, compute, table)


def launch_times(trace: Trace, table: str, column: str = "start_ns", keep: bool = True) -> I64:
    """``column`` (start_ns or end_ns) of each row's runtime call; -1 where none matched.
    ``keep=False``: not kept for later calls (a one-off use)."""

    def compute() -> I64:
        carried = _carried_matches(trace, table)
        if carried is not None:  # the base's launch times of the same calls
            base, first, end, _ = carried
            return launch_times(base, table, column, keep=keep)[first:end]
        m = runtime_match(trace, table)
        hit = m >= 0
        if not hit.any():
            return _ro(np.full(m.size, -1, dtype=np.int64))
        r = ints(trace, "runtime", column)
        if hit.all():
            return _ro(r[m])
        return _ro(np.where(hit, r[np.where(hit, m, 0)], -1))

    cache = PassCache.of(trace)
    if not keep and not cache.contains(LAUNCH_TIMES, table, column):
        return compute()
    return cache.get(LAUNCH_TIMES, compute, table, column)


def label_mask(trace: Trace, table: str, column: str, pred: Any) -> npt.NDArray[np.bool_]:
    """Per row, ``pred(label)`` of a dictionary column (evaluated once per label)."""
    arr = trace.column(table, column)
    if pa.types.is_dictionary(arr.type):
        # Codes of the matching labels looked up in the indices: no code array is made.
        labels = arr.dictionary.to_pylist()
        hit = [i for i, x in enumerate(labels) if x is not None and pred(x)]
        if not hit:
            return np.zeros(len(arr), dtype=np.bool_)
        mask = pc.is_in(arr.indices, value_set=pa.array(hit, arr.indices.type))
        return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)
    c, labels = codes(trace, table, column)
    lut = np.array([x is not None and bool(pred(x)) for x in labels], dtype=np.bool_)
    return lut[c] if c.size else np.zeros(0, dtype=np.bool_)
