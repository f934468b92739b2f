"""Arrays several passes need, computed once per analysis context (``engine/cache.py``).

A report runs a dozen passes over the same rows. At 10M kernels, converting a column,
splitting rows by device, matching kernels to their runtime calls or merging busy
intervals each costs a good fraction of a second and tens of MB, so each is done once
here and shared. Every function is a pure function of the context's rows; the arrays
returned are shared between passes and must not be modified (they are marked read-only).
A windowed context takes what it can from its whole trace's (``ctx.whole``): slices of
its arrays where the window keeps one run of rows, and its runtime matches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace import schema
from tbdtrace.analysis.engine import intervals
from tbdtrace.analysis.engine.cache import Entry
from tbdtrace.analysis.engine.grouping import (
    decode_device_key,
    device_keys,
    dict_codes,
    one_rank_key,
)
from tbdtrace.analysis.engine.joins import NULL_ID, join_pairs, join_sorted
from tbdtrace.arrow_ints import int_column, int_values
from tbdtrace.tablefile import combine

if TYPE_CHECKING:
    from tbdtrace.analysis.engine.context import AnalysisContext

I64 = npt.NDArray[np.int64]
Rows = slice | I64  # all rows (slice(None)) or row indices in file order
EVENT_TABLES = ("kernels", "memcpy", "memset")
_DEVICE_COLS = ["device_id", "device_type", "rank"]


# What this module keeps per context (arguments after the entry: the key within it).
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
    "(table,): on a windowed context, the whole trace's rows first..end of the table and "
    "the first kept runtime row, when the whole trace's runtime matches carry over (else None)",
)


def _ro(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def ints(ctx: AnalysisContext, table: str, column: str, fill: int = -1, keep: bool = True) -> I64:
    """Column ``column`` of ``table`` as int64, nulls as ``fill``.

    ``keep=False`` for a column read once to derive something that is itself kept (ids
    for a join, launch sizes): neither the column nor this array stays in memory."""
    cache = ctx.cache
    same = _constant_ints(ctx, table, column, fill)
    if same is not None:
        return same
    if not keep and not cache.contains(INTS, table, column, fill):
        return _ro(int_column(ctx.table(table, [column], cache=False), column, fill))
    return cache.get(
        INTS,
        lambda: _ro(int_column(ctx.table(table, [column]), column, fill)),
        table,
        column,
        fill,
    )


def ids_once(ctx: AnalysisContext, table: str, column: str) -> npt.NDArray[np.integer[Any]]:
    """:func:`ints` with ``keep=False`` (nulls as -1) of an id column read once to derive
    something kept (thread ids for the thread groups), as int32 where the file's
    statistics prove the values fit below the largest int32 and none is null: half the
    bytes (29M ops: 112 MB, not 223), made a row group at a time. Values, not their type,
    are what a caller may rely on."""
    if _constant_ints(ctx, table, column, -1) is None and not ctx.cache.contains(
        INTS, table, column, -1
    ):
        got = ctx.narrow_ints(table, column)
        if got is not None:
            return _ro(got)
    return ints(ctx, table, column, keep=False)


def _constant_ints(ctx: AnalysisContext, table: str, column: str, fill: int) -> I64 | None:
    """A column whose every row the file's statistics prove equal (one rank, a GPU
    kernel's null thread id, a process id) as a read-only broadcast of its value: no
    column decoded, no memory (10M kernels: 76 MB per column). None when not known."""
    known = ctx.constant(table, column)
    if known is None or not (known[0] is None or isinstance(known[0], int)):
        return None
    v = fill if known[0] is None else int(known[0])
    out: I64 = np.broadcast_to(np.int64(v), (ctx.num_rows(table),))
    return out


def has_values(ctx: AnalysisContext, table: str, column: str) -> bool:
    """True when some row of the column is not null (from the file's statistics when
    they tell: an all-null column is not decoded)."""
    known = ctx.constant(table, column)
    if known is not None:
        return known[0] is not None
    return ctx.column(table, column).null_count < ctx.num_rows(table)


def codes(ctx: AnalysisContext, table: str, column: str) -> tuple[I64, list[str | None]]:
    """A dictionary string column as (codes, labels); see ``_util.dict_codes``."""

    def compute() -> tuple[I64, list[str | None]]:
        narrow = _narrow_codes(ctx, table, column) if (table, column) in NARROW_CODES else None
        if narrow is not None:
            return narrow
        arr = ctx.column(table, column)
        if pa.types.is_dictionary(arr.type) and arr.null_count == 0:
            # The dictionary's own int32 indices, without a copy.
            return arr.indices.to_numpy(), arr.dictionary.to_pylist()
        c, labels = dict_codes(ctx.table(table, [column]), column)
        return _ro(c), labels

    return ctx.cache.get(CODES, compute, table, column)


# Columns whose codes are made without reading the column for the store: int8/int16
# codes decoded a row group at a time (``ColumnStore.label_codes``) instead of the
# column's int32 indices (29M ops: 56 MB held, not 112, and no whole read). Their
# readers only index by the codes (no arithmetic on them that a narrow type could wrap).
NARROW_CODES = frozenset({("ops", "name")})


def _narrow_codes(
    ctx: AnalysisContext, table: str, column: str
) -> tuple[I64, list[str | None]] | None:
    """:func:`codes` of a column nothing holds, read for them as narrow codes; None
    where the store cannot (then the column is read)."""
    if ctx.holds(table, column):
        return None
    got = ctx.label_codes(table, column)
    if got is None:
        return None
    c, labels = got
    # A null's code is the one after the last label, labelled None (as dict_codes).
    if c.size and ctx.null_free(table, column) is not True and int(c.max()) >= len(labels):
        labels = [*labels, None]
    return _ro(c), labels


def durations(ctx: AnalysisContext, table: str, keep: bool = True) -> I64:
    """end_ns - start_ns of every row.

    On a windowed context that keeps one run of at least half the whole trace's rows, a
    slice of the whole trace's array (the whole trace's sections need that one too).
    ``keep=False``: not kept for later calls (a one-off use), as :func:`launch_times`.
    A table of :data:`KEEP_DURATIONS_ROWS` rows or more: not kept either, computed on
    each call (one subtraction, 10M kernels: ~15 ms): 76 MB less held through a report."""

    def compute() -> I64:
        run = _base_run(ctx, table)
        if run is not None and 2 * (run[2] - run[1]) >= run[0].num_rows(table):
            return durations(run[0], table, keep)[run[1] : run[2]]
        return _ro(ints(ctx, table, "end_ns") - ints(ctx, table, "start_ns"))

    cache = ctx.cache
    if (not keep or ctx.num_rows(table) >= KEEP_DURATIONS_ROWS) and not cache.contains(
        DURATIONS, table
    ):
        return compute()
    return cache.get(DURATIONS, compute, table)


# Durations of a table this big are computed when asked for, not kept (:func:`durations`).
KEEP_DURATIONS_ROWS = 1 << 22


def _base_run(ctx: AnalysisContext, table: str) -> tuple[AnalysisContext, int, int] | None:
    """(whole-trace context, first, end) when ``ctx`` is windowed and holds rows
    first..end-1 of ``table`` of the whole trace, one run; else None."""
    run = None if ctx.window is None else ctx.row_run(table)
    return None if run is None else (ctx.whole, *run)


def _carried_matches(
    ctx: AnalysisContext, table: str
) -> tuple[AnalysisContext, int, int, int] | None:
    """(whole, first, end, runtime first) when the windowed context ``ctx`` can take
    its runtime matches of ``table`` from its whole trace's (already computed): its rows
    of ``table`` and of ``runtime`` are each one run of the whole trace's, and every
    runtime call that the whole trace matches to those rows is kept. A match is the first
    equal id, so the first match among the whole trace's runtime rows, when kept, is the
    first among the window's too: the window's match is the whole trace's, less the
    runtime rows cut before the run."""
    if ctx.window is None or not ctx.whole.cache.contains(RUNTIME_MATCH, table):
        return None

    def compute() -> tuple[int, int, int] | None:
        run, rrun = ctx.row_run(table), ctx.row_run("runtime")
        if run is None or rrun is None:
            return None
        m = runtime_match(ctx.whole, table)[run[0] : run[1]]
        hit = m >= 0
        if (hit & ((m < rrun[0]) | (m >= rrun[1]))).any():
            return None  # a matched call is cut: its id may match a later kept call
        return run[0], run[1], rrun[0]

    got = ctx.cache.get(BASE_RUNS, compute, table)
    return None if got is None else (ctx.whole, *got)


def _picked_matches(ctx: AnalysisContext, table: str) -> I64 | None:
    """The runtime matches of a windowed context whose rows of ``table`` are kept by
    index (not one run) and whose runtime rows are one run, taken from its whole
    trace's (already computed): the whole trace's matches of those rows, less the
    runtime rows cut before the run, when every matched call is kept (the argument of
    :func:`_carried_matches`: a match depends on the row's own ids alone). None
    otherwise. No ids read and joined again (10M kernels: 0.23 GB of ids and join)."""
    if ctx.window is None or not ctx.whole.cache.contains(RUNTIME_MATCH, table):
        return None
    rows, rrun = ctx.kept_rows(table), ctx.row_run("runtime")
    if rows is None or rrun is None or ctx.row_run(table) is not None:
        return None
    m = runtime_match(ctx.whole, table)[rows]
    hit = m >= 0
    if (hit & ((m < rrun[0]) | (m >= rrun[1]))).any():
        return None  # a matched call is cut: its id may match a later kept call
    out: I64 = np.where(hit, m - rrun[0], -1) if rrun[0] else m
    return out


def device_rows(ctx: AnalysisContext, table: str) -> list[tuple[int, Rows]]:
    """(device key, that device's rows in file order) per device of ``table``, by key.

    Keys as ``_util.device_keys``. A table on one device (the common case) yields
    ``slice(None)``, so its columns are used without a copy.
    """

    def compute() -> list[tuple[int, Rows]]:
        if ctx.num_rows(table) == 0:
            return []
        known = [ctx.constant(table, c) for c in _DEVICE_COLS]
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
        # Not kept in the context's cache: once split by device these columns are not needed.
        t = ctx.table(table, _DEVICE_COLS, cache=False)
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

    return ctx.cache.get(DEVICE_ROWS, compute, table)


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


def device_keys_of(ctx: AnalysisContext, tables: tuple[str, ...] = EVENT_TABLES) -> list[int]:
    """Sorted device keys that have rows in any of ``tables``."""
    return sorted({k for t in tables for k, _ in device_rows(ctx, t)})


def devices_by_rank(
    ctx: AnalysisContext, tables: tuple[str, ...] = ("kernels",)
) -> dict[int, list[int]]:
    """Rank key (-1 for none) -> the sorted device keys of that rank with rows in
    ``tables`` (the one grouping of devices by rank the passes use)."""
    by_rank: dict[int, list[int]] = {}
    for key in device_keys_of(ctx, tables):
        rank = decode_device_key(key)[0]
        by_rank.setdefault(-1 if rank is None else rank, []).append(key)
    return by_rank


def rows_of(ctx: AnalysisContext, table: str, key: int) -> Rows | None:
    """Rows of ``table`` on device ``key``; None when it has none."""
    return dict(device_rows(ctx, table)).get(key)


def spans(ctx: AnalysisContext, table: str, key: int) -> tuple[I64, I64]:
    """(start_ns, end_ns) of the rows of ``table`` on device ``key`` (file order)."""

    def compute() -> tuple[I64, I64]:
        rows = rows_of(ctx, table, key)
        s, e = ints(ctx, table, "start_ns"), ints(ctx, table, "end_ns")
        if rows is None:
            return _ro(np.zeros(0, np.int64)), _ro(np.zeros(0, np.int64))
        if isinstance(rows, slice):
            return s, e
        return _ro(s[rows]), _ro(e[rows])

    return ctx.cache.get(SPANS, compute, table, key)


def time_bounds(ctx: AnalysisContext, table: str, key: int | None = None) -> tuple[int, int]:
    """(first start_ns, last end_ns) of the rows of ``table`` on device ``key`` (every
    row when None; zero-duration rows included); the table must have such rows. Kept:
    several passes ask for the same bounds."""

    def compute() -> tuple[int, int]:
        if key is None:
            # A whole trace's table: from the file's statistics when they tell (no null
            # time), without decoding the columns (29M ops: 0.65 CPU s, 223 MB kept).
            lo, hi = ctx.min_max(table, "start_ns"), ctx.min_max(table, "end_ns")
            if lo is not None and hi is not None:
                return lo[0], hi[1]
        if key is not None and not isinstance(rows_of(ctx, table, key), slice):
            s, e = spans(ctx, table, key)
        else:
            s, e = ints(ctx, table, "start_ns"), ints(ctx, table, "end_ns")
        return int(s.min()), int(e.max())

    return ctx.cache.get(TIME_BOUNDS, compute, table, key)


def device_span(ctx: AnalysisContext, key: int) -> tuple[int, int] | None:
    """(first start, last end) over the kernel, memcpy and memset rows of device ``key``.

    Zero-duration rows occupy no time and do not extend the span (docs/METRICS.md); a
    device whose rows all have zero duration spans from their first to their last time.
    """

    def compute() -> tuple[int, int] | None:
        ms, me = merged(ctx, key, "all")
        if ms.size:
            return int(ms[0]), int(me[-1])
        parts = [spans(ctx, t, key) for t in EVENT_TABLES]
        parts = [(s, e) for s, e in parts if s.size]
        if not parts:
            return None
        return int(min(s.min() for s, _ in parts)), int(max(e.max() for _, e in parts))

    return ctx.cache.get(DEVICE_SPAN, compute, key)


def merged(ctx: AnalysisContext, key: int, what: str) -> tuple[I64, I64]:
    """Merged busy intervals of device ``key``: ``what`` = kernels, memops (memcpy and
    memset) or all (the three)."""

    def compute() -> tuple[I64, I64]:
        if what == "kernels":
            ms, me, _ = merged_kernels_first(ctx, key)
        elif what == "memops":
            ms, me = intervals.merge_merged(
                intervals.merge(*spans(ctx, "memcpy", key)),
                intervals.merge(*spans(ctx, "memset", key)),
            )
        elif what == "all":
            ms, me = intervals.merge_merged(merged(ctx, key, "kernels"), merged(ctx, key, "memops"))
        else:
            raise ValueError(f"what must be kernels, memops or all, not {what!r}")
        return _ro(ms), _ro(me)

    return ctx.cache.get(MERGED, compute, key, what)


def merged_with_cum(ctx: AnalysisContext, key: int, what: str) -> tuple[I64, I64, I64]:
    """``merged(ctx, key, what)`` and its ``intervals.cumulative`` lengths, the
    three arguments of ``covered_in_merged`` for repeated window queries."""
    from tbdtrace.analysis.engine.intervals import cumulative

    def compute() -> tuple[I64, I64, I64]:
        ms, me = merged(ctx, key, what)
        if what == "all" and ms is merged(ctx, key, "kernels")[0]:
            return merged_with_cum(ctx, key, "kernels")  # no memops: the same set
        return ms, me, _ro(cumulative(ms, me))

    return ctx.cache.get(MERGED_CUM, compute, key, what)


def merged_kernels_first(ctx: AnalysisContext, key: int) -> tuple[I64, I64, I64]:
    """``merged(ctx, key, "kernels")`` plus, per merged interval, the kernel row (within
    the device's rows) that opens it (``intervals.merge_first``; int32 below 2^31 rows:
    kept per context, one per busy interval, 38 MB instead of 76 at 10M kernels)."""

    def compute() -> tuple[I64, I64, I64]:
        ms, me, first = intervals.merge_first(*spans(ctx, "kernels", key))
        rows: np.ndarray = first.astype(np.int32) if ctx.num_rows("kernels") < 2**31 else first
        return _ro(ms), _ro(me), _ro(rows)

    return ctx.cache.get(MERGED_FIRST, compute, key)


def runtime_match(ctx: AnalysisContext, table: str) -> I64:
    """Per row of ``table``, the index of its runtime call by (rank, correlation_id), -1.
    int32 below 2^31 runtime rows: kept per context, a row index per kernel (10M kernels:
    38 MB instead of 76 in each of the whole trace's and a window's contexts)."""

    def narrow(m: I64) -> I64:
        return _ro(m.astype(np.int32, copy=False) if ctx.num_rows("runtime") < 2**31 else m)

    def compute() -> I64:
        n = ctx.num_rows(table)
        if n == 0 or ctx.num_rows("runtime") == 0:
            return narrow(np.full(n, -1, dtype=np.int64))
        carried = _carried_matches(ctx, table)
        if carried is not None:
            base, first, end, rfirst = carried
            m = runtime_match(base, table)[first:end]
            return m if rfirst == 0 else narrow(np.where(m >= 0, m - rfirst, -1))
        picked = _picked_matches(ctx, table)
        if picked is not None:
            return narrow(picked)
        kc = ints(ctx, table, "correlation_id", NULL_ID, keep=False)
        rc = ints(ctx, "runtime", "correlation_id", NULL_ID, keep=False)
        one = one_rank_key(ctx, table)
        if one is not None and one == one_rank_key(ctx, "runtime"):
            return narrow(join_sorted(kc, rc))  # one rank: ids alone decide
        return narrow(
            join_pairs(
                ints(ctx, table, "rank", keep=False),
                kc,
                ints(ctx, "runtime", "rank", keep=False),
                rc,
            )
        )

    return ctx.cache.get(RUNTIME_MATCH, compute, table)


def launch_times(
    ctx: AnalysisContext, table: str, column: str = "start_ns", keep: bool = True
) -> I64:
    """``column`` (start_ns or end_ns) of each row's runtime call; -1 where none matched.
    ``keep=False``: not kept for later calls (a one-off use)."""

    def compute() -> I64:
        carried = _carried_matches(ctx, table)
        if carried is not None:  # the base's launch times of the same calls
            base, first, end, _ = carried
            return launch_times(base, table, column, keep=keep)[first:end]
        m = runtime_match(ctx, table)
        hit = m >= 0
        if not hit.any():
            return _ro(np.full(m.size, -1, dtype=np.int64))
        r = ints(ctx, "runtime", column)
        if hit.all():
            return _ro(r[m])
        return _ro(np.where(hit, r[np.where(hit, m, 0)], -1))

    cache = ctx.cache
    if not keep and not cache.contains(LAUNCH_TIMES, table, column):
        return compute()
    return cache.get(LAUNCH_TIMES, compute, table, column)


SMALL_CODES: Entry[tuple[npt.NDArray[np.integer[Any]], list[str | None]] | None] = Entry(
    "shared_arrays.small_codes",
    "(table, column): a dictionary column of few labels as int8/int16 codes and labels "
    "(a null: the code after the last label); None when its labels are too many",
)


def label_mask(ctx: AnalysisContext, table: str, column: str, pred: Any) -> npt.NDArray[np.bool_]:
    """Per row, ``pred(label)`` of a dictionary column (evaluated once per label).

    A column nothing else holds (``ops.category``: the masks are all that is read of it)
    is read once, for this, and kept as int8 or int16 codes when its labels are few: a
    quarter or half of its int32 indices (29M ops: 28 MB, not 112)."""
    if ctx.cache.contains(CODES, table, column):  # codes made already: no read
        held, names = codes(ctx, table, column)
        lut = np.array([x is not None and bool(pred(x)) for x in names], dtype=np.bool_)
        return lut[held] if held.size else np.zeros(0, dtype=np.bool_)
    small = None if ctx.holds(table, column) else _small_codes(ctx, table, column)
    if small is not None:
        c, labels = small
        lut = np.array([x is not None and bool(pred(x)) for x in labels] + [False], np.bool_)
        return lut[c] if c.size else np.zeros(0, dtype=np.bool_)
    arr = ctx.column(table, column)
    if pa.types.is_dictionary(arr.type):
        # Codes of the matching labels looked up in the indices: no code array is made.
        labels = arr.dictionary.to_pylist()
        hit = [i for i, x in enumerate(labels) if x is not None and pred(x)]
        if not hit:
            return np.zeros(len(arr), dtype=np.bool_)
        mask = pc.is_in(arr.indices, value_set=pa.array(hit, arr.indices.type))
        return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)
    c, labels = codes(ctx, table, column)
    lut = np.array([x is not None and bool(pred(x)) for x in labels], dtype=np.bool_)
    return lut[c] if c.size else np.zeros(0, dtype=np.bool_)


def _small_codes(
    ctx: AnalysisContext, table: str, column: str
) -> tuple[npt.NDArray[np.integer[Any]], list[str | None]] | None:
    """:data:`SMALL_CODES` of a column (read for them, not kept as a column)."""

    def compute() -> tuple[npt.NDArray[np.integer[Any]], list[str | None]] | None:
        got = ctx.label_codes(table, column)
        if got is not None:  # decoded a row group at a time into the codes
            if len(got[1]) >= 2**15 - 1:
                return None
            return _ro(got[0]), got[1]
        col = ctx.table(table, [column], cache=False).column(0)
        if not pa.types.is_dictionary(col.type):
            return None
        arr = combine(col)
        labels = arr.dictionary.to_pylist()
        if len(labels) >= 2**15 - 1:
            return None
        dt = np.int8 if len(labels) < 2**7 - 1 else np.int16
        # A null takes the code after the last label, whose mask value is False.
        nulls = arr.null_count
        idx = int_values(arr.indices, len(labels)) if nulls else arr.indices.to_numpy()
        return _ro(idx.astype(dt)), labels

    return ctx.cache.get(SMALL_CODES, compute, table, column)
