"""Which framework op, annotation range and module launched each kernel.

Rules (docs/METRICS.md, "Attribution"), all vectorized:

1. kernel -> the runtime call with the same (rank, correlation_id): its thread (pid, tid)
   and start time are the launch point. CPU-backend kernels (no runtime call) launch
   from their own thread at their own start, and an ops row that is the kernel itself
   (same thread, start and end) is skipped, so the op is the enclosing one.
2. op = the innermost ``ops`` row on the launch thread containing the launch time
   (innermost = latest-starting containing range), skipping Python-function frames and
   ``nn.Module`` ranges; when that finds nothing, the op whose (rank, external_id)
   equals the kernel's external_id.
3. module = the innermost ``ops`` row named ``nn.Module: ...`` containing the launch.
4. marker = the innermost ``markers`` range (NVTX, record_function) on the launch thread
   containing the launch time, ignoring ``ProfilerStep#N`` ranges (those are steps).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace.analysis.engine import shared_arrays
from tbdtrace.analysis.engine.cache import Entry
from tbdtrace.analysis.engine.grouping import one_rank_key
from tbdtrace.analysis.engine.intervals import (
    by_start_then_longer,
    by_start_then_longer_rows,
    innermost,
    native_fn,
)
from tbdtrace.analysis.engine.joins import NULL_ID, join_ids, join_pairs
from tbdtrace.arrow_ints import int_column

if TYPE_CHECKING:
    from tbdtrace.analysis.engine.context import AnalysisContext


I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Attribution:
    """Per kernel row: codes into the label lists (-1 = not attributed)."""

    op: I64
    op_labels: list[str]
    module: I64
    module_labels: list[str]
    marker: I64
    marker_labels: list[str]


# (pid, tid) -> row indices, ascending (int32 when there are fewer than 2**31 rows)
Groups = dict[tuple[int, int], npt.NDArray[np.integer[Any]]]


def thread_groups(pid: I64, tid: I64) -> Groups:
    """Rows grouped by thread (pid, tid), each group's indices in ascending order.

    Linear: pid and tid pack exactly into one int64 (always, for OS ids), hashed by
    Arrow's dictionary_encode and grouped by a counting sort; other ids go through
    np.unique."""
    if pid.size == 0:
        return {}
    got = _thread_rows(lambda: pid, lambda: tid)
    if got is None:
        uniq, inv = np.unique(np.stack([pid, tid], axis=1), axis=0, return_inverse=True)
        got = _groups(
            [(int(a), int(b)) for a, b in uniq], pa.array(inv.reshape(-1).astype(np.int32))
        )
    return got


_PACK_ROWS = 1 << 20  # rows packed at a time (the temporaries of one block only)


def _thread_rows(
    pid_of: Callable[[], I64], tid_of: Callable[[], npt.NDArray[np.integer[Any]]]
) -> Groups | None:
    """The rows per thread (:func:`thread_groups`) of the ids ``pid_of()`` and
    ``tid_of()`` packed into one int64 a block at a time, the process ids before the
    thread ids are asked for (a caller that reads them for this drops one before
    reading the other: 29M ops, 0.45 GB less); None when they do not pack."""
    pid = pid_of()
    n = pid.size
    if n == 0 or pid.min() < -1 or pid.max() >= 1 << 30:
        return None
    if pid.strides == (0,):
        # One process (a broadcast of the file's constant): the thread ids are coded as
        # they are, no packed copy (29M ops: 0.22 GB less at the grouping's peak). The
        # same keys in the same order as packing them with the one pid gives.
        one = int(pid[0])
        del pid
        tid = tid_of()
        if tid.size != n or tid.min() < -1 or tid.max() >= (1 << 32) - 1:
            return None
        return _key_groups(tid, lambda t: (one, t))
    packed = np.empty(n, dtype=np.int64)
    for lo in range(0, n, _PACK_ROWS):
        part = packed[lo : lo + _PACK_ROWS]
        np.add(pid[lo : lo + _PACK_ROWS], 1, out=part)
        part <<= 32
    del pid
    tid = tid_of()
    if tid.size != n or tid.min() < -1 or tid.max() >= (1 << 32) - 1:
        return None
    for lo in range(0, n, _PACK_ROWS):
        packed[lo : lo + _PACK_ROWS] |= tid[lo : lo + _PACK_ROWS] + 1
    del tid
    return _key_groups(packed, lambda k: ((k >> 32) - 1, (k & 0xFFFFFFFF) - 1))


def _key_groups(
    key: npt.NDArray[np.integer[Any]], thread: Callable[[int], tuple[int, int]]
) -> Groups:
    """Rows per distinct value of ``key`` (keys in order of first appearance, each one's
    rows ascending), named ``thread(value)``. Compiled where the extension has it
    (``_native.group_rows``: one pass to code the keys, one to place the rows, without
    the GIL; the 1M-kernel file's three groupings ~0.1 s less than a hash and a sort
    per block); else Arrow's dictionary encoding and :func:`_groups`. One value (a
    broadcast): its rows, no pass."""
    if key.strides == (0,) and key.size:
        rows: npt.NDArray[np.integer[Any]] = np.arange(key.size, dtype=_row_type(key.size))
        return {thread(int(key[0])): rows}
    native = _native_fn("group_rows")
    if native is not None and key.size < 2**31 - 1 and key.dtype in (np.int32, np.int64):
        uniq, order, ends = native(np.ascontiguousarray(key))
        del key
        starts = [0, *ends[:-1].tolist()]
        return {
            thread(u): order[a:b]
            for u, a, b in zip(uniq.tolist(), starts, ends.tolist(), strict=True)
        }
    enc = pc.dictionary_encode(pa.array(key))
    del key
    return _groups([thread(k) for k in enc.dictionary.to_pylist()], enc.indices)


# Looked up through this name at each use (tests turn the compiled paths off here).
_native_fn = native_fn


_SORT_ROWS = 1 << 22  # rows sorted at a time by _groups


def _groups(keys: list[tuple[int, int]], code: pa.Array) -> Groups:
    """Rows per key of ``keys`` (``code``: per row, its key's index), ascending.

    A stable counting sort of the codes (Arrow's), a block of rows at a time, each
    block's rows placed after the earlier blocks' rows of their key: only the int32
    result is row-sized (29M ops: the groups kept for the report, 112 MB), not also a
    uint64 order of every row (0.22 GB) beside it."""
    c = code.to_numpy()
    n = c.size
    counts = np.bincount(c, minlength=len(keys))
    bounds = np.concatenate([[0], np.cumsum(counts)])
    order = np.empty(n, dtype=np.int32 if n < 2**31 else np.int64)
    at = bounds[:-1].copy()  # per key, where its next rows go
    for lo in range(0, n, _SORT_ROWS):
        part = code.slice(lo, _SORT_ROWS)
        o = pc.array_sort_indices(part).to_numpy()  # stable counting sort (uint64)
        pc_ = c[lo : lo + o.size]
        got = np.bincount(pc_, minlength=len(keys))
        if (got == o.size).any():  # one key in the block: its rows in order
            k = int(np.argmax(got))
            order[at[k] : at[k] + o.size] = np.arange(lo, lo + o.size)
        else:
            sk = pc_[o]
            # Position of each sorted row: its key's next slot plus its rank among the
            # block's rows of that key.
            first = np.cumsum(got) - got
            dest = np.arange(o.size, dtype=np.int64)
            dest += (at - first)[sk]
            order[dest] = o + lo
        at += got
    return {k: order[bounds[i] : bounds[i + 1]] for i, k in enumerate(keys)}


THREAD_GROUPS: Entry[Groups] = Entry(
    "attribution.thread_groups",
    "rows of a range table (ops, markers) per (pid, tid), by start then longer first",
)


def range_groups(ctx: AnalysisContext, table: str) -> Groups:
    """:func:`thread_groups` of a range table (ops, markers), once per trace; each
    thread's rows in (start, end descending) order, ties in table order (the order
    :func:`innermost` searches in place)."""

    def compute() -> Groups:
        # The ids are read for this grouping only, one after the other: the groups are
        # what is kept (29M ops: 112 MB of int32 rows, not 0.34 GB of Arrow ids).
        if ctx.num_rows(table) == 0:
            return {}
        got = _thread_rows(
            lambda: shared_arrays.ints(ctx, table, "pid", keep=False),
            lambda: shared_arrays.ids_once(ctx, table, "tid"),
        )
        if got is None:  # ids that do not pack: read again, grouped by np.unique
            groups = thread_groups(
                shared_arrays.ints(ctx, table, "pid", keep=False),
                shared_arrays.ints(ctx, table, "tid", keep=False),
            )
        else:
            groups = got
        s = shared_arrays.ints(ctx, table, "start_ns")
        e = shared_arrays.ints(ctx, table, "end_ns")
        native = _native_fn("order_by_start_then_longer")
        compiled = native is not None and s.dtype == np.int64 and e.dtype == np.int64
        for rows in groups.values():
            if compiled and rows.dtype == np.int32:
                # Checked and reordered in place by the extension, without the GIL (the
                # 1M-kernel file's ops and markers: ~25 ms less than numpy's gathers).
                native(s, e, rows)
                continue
            # Reordered in place, in the one array of every group's rows: one thread's
            # rows held twice at most, and only while it is reordered (a copy kept in its
            # place would leave the whole array held too: 29M ops, 112 MB).
            ordered = by_start_then_longer_rows(s, e, rows)
            if ordered is not rows:
                rows[...] = ordered
        return groups

    return ctx.cache.get(THREAD_GROUPS, compute, table)


def on_threads(
    ctx: AnalysisContext, table: str, keep: np.ndarray, queries: Groups, q_t: I64
) -> I64:
    """Per query, the innermost row of ``table`` (rows where ``keep``) on the query's
    thread containing its time ``q_t``; -1 if none. ``queries`` groups the queries by
    thread (:func:`thread_groups`)."""
    out, run = search_on_threads(ctx, table, keep, queries, q_t)
    if run is not None:
        run()
    return out


def search_on_threads(
    ctx: AnalysisContext, table: str, keep: np.ndarray, queries: Groups, q_t: I64
) -> tuple[I64, Callable[[], None] | None]:
    """:func:`on_threads` as (its result, a call that fills it in): the call is the
    compiled search alone, which touches no Python object but its arrays and runs
    without the GIL, so it can run on another thread (None: nothing left to do, the
    result is complete)."""
    # Row numbers of ``table``: int32 below 2^31 rows (10M queries: 38 MB, not 76)
    out: I64 = np.full(q_t.size, -1, dtype=_row_type(ctx.num_rows(table)))
    ranges = range_groups(ctx, table)
    s, e = shared_arrays.ints(ctx, table, "start_ns"), shared_arrays.ints(ctx, table, "end_ns")
    if not keep.any():  # nothing to find (no nn.Module ranges: the module search)
        return out, None
    call = _compiled_search(s, e, keep, ranges, queries, q_t, out)
    if call is not None:
        return out, call
    for th, qsel in queries.items():
        rows = ranges.get(th)
        if rows is None:
            continue
        kept = keep[rows]
        if not kept.all():
            rows = rows[kept]
        if rows.size == 0:
            continue
        # The thread's ranges read in place, in the order range_groups keeps them (a
        # subset of rows in that order is in that order too). The query times too where
        # the thread has every query (ascending, distinct: all of them, in order).
        hit = innermost(s, e, q_t if qsel.size == q_t.size else q_t[qsel], rows, ordered=True)
        # The hits placed a block at a time: the masks and gathers of one block only
        # (10M queries on one thread: ~0.2 GB of temporaries otherwise).
        for lo in range(0, hit.size, _PLACE_ROWS):
            h = hit[lo : lo + _PLACE_ROWS]
            good = h >= 0
            out[qsel[lo : lo + _PLACE_ROWS][good]] = rows[h[good]]
    return out, None


_PLACE_ROWS = 1 << 20  # search results placed at a time (on_threads)


def _compiled_search(
    s: I64,
    e: I64,
    keep: np.ndarray,
    ranges: Groups,
    queries: Groups,
    q_t: I64,
    out: npt.NDArray[np.integer[Any]],
) -> Callable[[], None] | None:
    """:func:`on_threads`'s searches of every thread as one compiled call
    (``_native.innermost_groups``, without the GIL) that writes the hits into ``out``:
    the rows not kept are passed over in place (no kept rows' copy per thread) and
    queries continue from the position of the one before (galloping), not a binary
    search over every row each. None where the extension lacks it or the arrays are not
    of its types (int64 times, int32 rows)."""
    native = _native_fn("innermost_groups")
    if native is None or s.dtype != np.int64 or e.dtype != np.int64:
        return None
    pairs = []
    for th, qsel in queries.items():
        rows = ranges.get(th)
        if rows is None or rows.size == 0 or qsel.size == 0:
            continue
        if rows.dtype != np.int32 or qsel.dtype not in (np.int32, np.int64):
            return None
        pairs.append((rows, qsel))
    if len({q.dtype for _, q in pairs}) > 1:
        pairs = [(r, q.astype(np.int64)) for r, q in pairs]
    mask = np.ascontiguousarray(keep, dtype=np.bool_)
    times = np.ascontiguousarray(q_t, dtype=np.int64)

    def run() -> None:
        if pairs:
            native(s, e, mask, pairs, times, out)

    return run


def outermost(ctx: AnalysisContext, has: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Rows of ``ops`` where ``has`` that no other ``has`` row of their thread contains
    (the op flops count once, the roofline's counted ops, the memory peak's owners)."""
    out = has.copy()
    if np.count_nonzero(has) < 2:
        return out
    s, e = shared_arrays.ints(ctx, "ops", "start_ns"), shared_arrays.ints(ctx, "ops", "end_ns")
    # Each thread's ``has`` rows, ascending, from the ops' thread groups (no ids read).
    for grp in range_groups(ctx, "ops").values():
        g = grp[has[grp]]
        if g.size < 2:
            continue
        # A thread's rows in table order are already by (start, longer first) in a
        # stored table: the sort is skipped then (the same order; lexsort is stable).
        sg, eg = s[g], e[g]
        order = g if by_start_then_longer(sg, eg) else g[np.lexsort((-eg, sg))]
        ends = e[order]
        prev_max = np.maximum.accumulate(ends)[:-1]
        inside = np.zeros(order.size, dtype=bool)
        inside[1:] = prev_max >= ends[1:]
        out[order[inside]] = False
    return out


ATTRIBUTION: Entry[Attribution] = Entry(
    "attribution.attribute", "every kernel's op, module and marker"
)


def attribute(ctx: AnalysisContext) -> Attribution:
    """Attribute every kernel of ``trace`` to ops, modules and markers (computed once
    per trace)."""
    return ctx.cache.get(ATTRIBUTION, lambda: _attribute(ctx))


def _attribute(ctx: AnalysisContext) -> Attribution:
    n = ctx.num_rows("kernels")
    # "Not attributed" for every kernel: a read-only view of one value, no memory.
    none = np.broadcast_to(np.int64(-1), (n,))
    n_ops = ctx.num_rows("ops")

    def join() -> npt.NDArray[np.integer[Any]]:
        k_ids = _kernel_external_ids(ctx) if n_ops else None
        return none if k_ids is None else _row_numbers(_by_external_id(ctx, k_ids), n_ops)

    # The join by external id first, where the searches run one after the other; where
    # the op search runs on a second thread (_beside), this thread joins meanwhile.
    by_ext: Any = join if n and _beside(n_ops) else join()
    if n_ops and n:
        # The ops' thread groups, searched below, made next: their thread ids are read
        # and coded while little else is held, in the room the external ids just left
        # (29M ops: 0.3 GB lower peak).
        range_groups(ctx, "ops")
    o_codes, o_labels = shared_arrays.codes(ctx, "ops", "name")
    m_codes, m_labels = shared_arrays.codes(ctx, "markers", "name")
    if n_ops == 0 and ctx.num_rows("markers") == 0:
        # No host ranges to search: the launch threads are not looked up (a native
        # capture without ops: 10M kernels, ~0.1 GB of tids and runtime matches).
        op, module, marker = _codes(_joined(by_ext), o_codes, len(o_labels)), none, none
    else:
        points = launch_points(ctx)
        if points is None:
            op, module, marker = _codes(_joined(by_ext), o_codes, len(o_labels)), none, none
        else:
            # The join handed over (``_on_launch_threads`` frees it once used)
            held = [by_ext]
            del by_ext
            op, module, marker = _on_launch_threads(
                ctx, points, held, (o_codes, o_labels), (m_codes, len(m_labels))
            )
        # The launch points and the join are freed before the attribution is kept
        # (10M kernels: 0.3 GB less at this pass's peak).
        del points
    return Attribution(
        op=op,
        op_labels=_labels(o_labels),
        module=module,
        module_labels=_labels(o_labels),
        marker=marker,
        marker_labels=_labels(m_labels),
    )


def _joined(by_ext: Any) -> npt.NDArray[np.integer[Any]]:
    """The join by external id (:func:`_attribute`), made now if it was deferred."""
    got: npt.NDArray[np.integer[Any]] = by_ext() if callable(by_ext) else by_ext
    return got


def _beside(n_ops: int) -> bool:
    """Does the op search run on a second thread (BESIDE_ROWS ops, the compiled search)?"""
    return BESIDE_ROWS[0] <= n_ops <= BESIDE_ROWS[1] and _native_fn("innermost_groups") is not None


def _row_type(rows: int) -> type[np.integer[Any]]:
    """The dtype of row numbers of a table of ``rows`` rows (-1: none): int32 below 2^31
    rows, half the bytes (10M kernels: 38 MB per array of a kernel's op row, not 76)."""
    return np.int32 if rows < 2**31 else np.int64


def _row_numbers(idx: I64, rows: int) -> npt.NDArray[np.integer[Any]]:
    """``idx``, row numbers of a table of ``rows`` rows, as :func:`_row_type`."""
    return idx.astype(_row_type(rows), copy=False)


def _codes(idx: npt.NDArray[np.integer[Any]], c: I64, labels: int) -> I64:
    """Per row of ``idx``, the code ``c`` of the row it names (one of ``labels`` labels);
    -1 where it names none. Nothing attributed (``idx`` a broadcast -1) or no codes: a
    broadcast -1, no memory. Kept by the attribution as :func:`code_type` of ``labels``."""
    if idx.strides == (0,) and (idx.size == 0 or idx[0] < 0):
        return np.broadcast_to(np.int64(-1), idx.shape)
    if not c.size:
        return np.broadcast_to(np.int64(-1), idx.shape)
    # The codes and a last -1, which row -1 reads: one gather of the narrow type, no
    # masks or wide temporaries.
    lut = np.empty(c.size + 1, dtype=code_type(labels))
    lut[:-1] = c
    lut[-1] = -1
    out: I64 = lut[idx]
    return out


def code_type(labels: int) -> type[np.integer[Any]]:
    """The dtype of codes into ``labels`` labels, -1 for none: int16 below 2^15 - 1 labels
    (op, module and marker names: 10M kernels, 19 MB per array, not 38), else int32, int64
    past 2^31 - 1."""
    if labels < 2**15 - 1:
        return np.int16
    return np.int32 if labels < 2**31 - 1 else np.int64


def _kernel_external_ids(ctx: AnalysisContext) -> I64 | None:
    """The kernels' external ids (``NULL_ID`` for a null), None when every row is null.
    Read for the join with the ops only, not kept (10M kernels: 76 MB)."""
    known = ctx.constant("kernels", "external_id")
    if known is not None:
        return (
            None if known[0] is None else shared_arrays.ints(ctx, "kernels", "external_id", NULL_ID)
        )
    t = ctx.table("kernels", ["external_id"], cache=False)
    if t.num_rows == 0 or t.column(0).null_count == t.num_rows:
        return None
    return int_column(t, "external_id", NULL_ID)


def _by_external_id(ctx: AnalysisContext, k_ids: I64) -> I64:
    """Per kernel, the ops row with its (rank, external_id), -1 where none (``k_ids``:
    the kernels' external ids). The ops' ids are read for this join only, and freed when
    it returns (29M ops: 0.3 GiB of Arrow columns and 0.45 GiB of int64). Where the
    kernels and the ops are each of one rank (by the files' statistics, or the columns'
    minimum and maximum), the ids alone are joined: no rank column is read."""
    k_one, o_one = one_rank_key(ctx, "kernels"), one_rank_key(ctx, "ops")
    if k_one is not None and o_one is not None:
        if k_one != o_one:
            return np.full(ctx.num_rows("kernels"), -1, dtype=np.int64)
        return join_ids(
            k_ids,
            int_column(ctx.table("ops", ["external_id"], cache=False), "external_id", NULL_ID),
        )
    ops = ctx.table("ops", ["rank", "external_id"], cache=False)
    return join_pairs(
        shared_arrays.ints(ctx, "kernels", "rank"),
        k_ids,
        int_column(ops, "rank"),
        int_column(ops, "external_id", NULL_ID),
    )


Points = tuple[I64, Groups, I64, np.ndarray]


def launch_points(ctx: AnalysisContext) -> Points | None:
    """(kernel rows with a launch point, those rows grouped by launch thread (indices
    into the first array), their launch times, whether each matched a runtime call):
    rule 1 of the module docstring. None when no kernel has one."""
    m = shared_arrays.runtime_match(ctx, "kernels")
    hit = m >= 0
    launched = (
        hit | (shared_arrays.ints(ctx, "kernels", "tid") >= 0)
        if shared_arrays.has_values(ctx, "kernels", "tid")
        else hit
    )
    # Kernel row numbers, int32 below 2^31 rows (10M kernels: 38 MB, not 76)
    tq = np.flatnonzero(launched).astype(_row_type(launched.size), copy=False)
    if tq.size == 0:
        return None
    # The matched calls of the launched kernels (every kernel, every match: no copies)
    mc = m if bool(hit.all()) else np.where(hit, m, 0)
    h = hit
    if tq.size < launched.size:
        mc, h = mc[tq], hit[tq]

    def at_launch(col: str) -> I64:
        # The kernel's own value, replaced in place by its runtime call's where it has
        # one: no full-size copies of both (10M kernels: 0.15 GB less per column). The
        # thread ids are read for this only, not kept (10M runtime calls: 76 MB each);
        # the start times are the launch times other passes read too.
        keep = col == "start_ns"
        r = shared_arrays.ints(ctx, "runtime", col, keep=keep)
        own = shared_arrays.ints(ctx, "kernels", col, keep=keep)
        one = one_launch_value(own, r, h)
        if one is not None:
            return one
        if all_hit:  # every launch from a runtime call: its values, one gather
            got: I64 = r[mc]
            return got
        out: I64 = own[tq]
        out[h] = r[mc[h]] if r.size else -1
        return out

    all_hit = bool(h.all())

    q_t = at_launch("start_ns")
    # The launch threads' process ids are packed before their thread ids are made.
    got = _thread_rows(lambda: at_launch("pid"), lambda: at_launch("tid"))
    groups = thread_groups(at_launch("pid"), at_launch("tid")) if got is None else got
    return tq, groups, q_t, h


def one_launch_value(own: I64, runtime: I64, hit: npt.NDArray[np.bool_]) -> I64 | None:
    """The launch values of ``hit.size`` kernels (``runtime``'s value where ``hit``, else
    the kernel's ``own``) as a read-only broadcast when they are all one value (one
    process: the file's statistics tell, a column of one value is a broadcast); else
    None. No row-sized array (10M kernels: 76 MB)."""
    if runtime.strides != (0,) or not runtime.size:
        return None
    if bool(hit.all()) or (own.strides == (0,) and own.size and own[0] == runtime[0]):
        out: I64 = np.broadcast_to(runtime[0], hit.shape)
        return out
    return None


def _on_launch_threads(
    ctx: AnalysisContext,
    points: Points,
    held: list[Any],
    ops_names: tuple[I64, list[str | None]],
    markers: tuple[I64, int],
) -> tuple[I64, I64, I64]:
    """(op, module, marker) codes per kernel (names of ``ops_names`` and ``markers``),
    searched on the launch thread of the kernels of ``points`` (:func:`launch_points`;
    rules 1-4 of the module docstring); ``held``: the ops rows by external id (or the
    call that joins them, :func:`_joined`), handed over (emptied here, freed once
    used). Each search's row numbers become codes before the next search runs (10M
    kernels: two row-number arrays fewer at the peak)."""
    tq, queries, q_t, h = points
    o_codes, o_labels = ops_names
    is_module = _label_mask(o_codes, o_labels, lambda x: x.startswith("nn.Module:"))
    is_py = shared_arrays.label_mask(ctx, "ops", "category", lambda x: x == "python_function")
    keep = ~is_py & ~is_module
    del is_py
    found, run = search_on_threads(ctx, "ops", keep, queries, q_t)
    # The op search (compiled, without the GIL) on a second thread while this one joins
    # by external id and finds the modules and markers, on a table of BESIDE_ROWS ops; a
    # larger one's searches run one after the other, each one's rows made codes before
    # the next (10M kernels: two row-number arrays and a search's links fewer at the
    # peak), and so do a small one's (a thread costs more than it saves).
    beside = run is not None and _beside(ctx.num_rows("ops"))
    if run is not None:
        if beside:
            worker = Beside(run)
            held.append(_joined(held.pop()))
            module, marker = _modules_and_markers(ctx, points, is_module, ops_names, markers)
            worker.join()
        else:
            run()
    found = _skip_own_op(ctx, tq, found, h, queries, q_t, keep)
    del keep
    # Found on the launch thread, else by external id (rule 2): in the join's own array
    # where it is one of the row type (made for this), else a copy.
    by_ext = _joined(held.pop())
    rt = _row_type(ctx.num_rows("ops"))
    own = by_ext.dtype == rt and by_ext.strides != (0,) and by_ext.flags.writeable
    op_idx = by_ext if own else np.array(by_ext, dtype=rt)
    del by_ext
    got = found >= 0
    op_idx[tq[got]] = found[got]
    del found, got
    op = _codes(op_idx, o_codes, len(o_labels))
    del op_idx
    if not beside:
        module, marker = _modules_and_markers(ctx, points, is_module, ops_names, markers)
    return op, module, marker


# Ops of a table whose op search runs beside the module and marker searches (the
# 1M-kernel file: 2.9M); outside, one search after the other.
BESIDE_ROWS = (1 << 16, 1 << 23)


class Beside:
    """``run()`` on a thread of its own (on the caller's, at once, where no thread can
    start); :meth:`join` waits for it and raises what it raised."""

    def __init__(self, run: Callable[[], None]):
        self.error: BaseException | None = None

        def target() -> None:
            try:
                run()
            except BaseException as e:  # handed to join()
                self.error = e

        self.thread: threading.Thread | None = threading.Thread(
            target=target, name="tbdtrace-search", daemon=True
        )
        try:
            self.thread.start()
        except RuntimeError:  # no new thread (a process at its limit): run here, now
            self.thread = None
            target()

    def join(self) -> None:
        if self.thread is not None:
            self.thread.join()
        if self.error is not None:
            raise self.error


def _modules_and_markers(
    ctx: AnalysisContext,
    points: Points,
    is_module: npt.NDArray[np.bool_],
    ops_names: tuple[I64, list[str | None]],
    markers: tuple[I64, int],
) -> tuple[I64, I64]:
    """(module, marker) codes per kernel: rules 3 and 4 of the module docstring."""
    n = ctx.num_rows("kernels")
    tq, queries, q_t, _ = points
    o_codes, o_labels = ops_names
    m_codes, m_count = markers
    module = _codes(
        _per_kernel(n, tq, on_threads(ctx, "ops", is_module, queries, q_t)), o_codes, len(o_labels)
    )
    is_step = shared_arrays.label_mask(
        ctx, "markers", "name", lambda x: x.startswith("ProfilerStep#")
    )
    is_range = shared_arrays.label_mask(ctx, "markers", "kind", lambda x: x == "range")
    found = on_threads(ctx, "markers", is_range & ~is_step, queries, q_t)
    marker = _codes(_per_kernel(n, tq, found), m_codes, m_count)
    return module, marker


def _per_kernel(
    n: int, tq: npt.NDArray[np.integer[Any]], found: npt.NDArray[np.integer[Any]]
) -> npt.NDArray[np.integer[Any]]:
    """Per kernel of ``n``, the row ``found`` for the kernels ``tq`` (ascending), -1 for
    the others; ``found`` itself when ``tq`` is every kernel (no second array)."""
    if tq.size == n:
        return found
    rows = np.full(n, -1, dtype=found.dtype)
    rows[tq] = found
    return rows


def _skip_own_op(
    ctx: AnalysisContext,
    tq: I64,
    op_idx: I64,
    hit: np.ndarray,
    queries: Groups,
    q_t: I64,
    keep: np.ndarray,
) -> I64:
    """CPU-backend kernels are leaf ops that the ops table may hold too: the op found at
    the kernel's own start can be the kernel itself (same thread, start and end). Its
    launcher is then the enclosing op, found again without those rows."""
    own = ~hit & (op_idx >= 0)
    if not own.any():
        return op_idx
    oc = np.clip(op_idx, 0, None)
    o_s, o_e = (
        shared_arrays.ints(ctx, "ops", "start_ns"),
        shared_arrays.ints(ctx, "ops", "end_ns"),
    )
    ks = shared_arrays.ints(ctx, "kernels", "start_ns")[tq]
    ke = shared_arrays.ints(ctx, "kernels", "end_ns")[tq]
    same = own & (o_s[oc] == ks) & (o_e[oc] == ke)
    if not same.any():
        return op_idx
    keep2 = keep.copy()
    keep2[op_idx[same]] = False
    sub = {th: q[same[q]] for th, q in queries.items()}
    again = on_threads(ctx, "ops", keep2, {th: q for th, q in sub.items() if q.size}, q_t)
    out = op_idx.copy()
    out[same] = again[same]
    return out


def _labels(labels: list[str | None]) -> list[str]:
    return [x if x is not None else "<unknown>" for x in labels]


def _label_mask(codes: I64, labels: list[str | None], pred: Callable[[str], bool]) -> np.ndarray:
    lut = np.array([x is not None and pred(x) for x in labels], dtype=np.bool_)
    return lut[codes] if codes.size else np.zeros(0, dtype=bool)
