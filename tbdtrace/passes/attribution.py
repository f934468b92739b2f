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

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace import intervals
from tbdtrace.passes import _frame
from tbdtrace.passes._intervals_ext import innermost
from tbdtrace.passes._util import int_column, row_codes
from tbdtrace.trace import Trace

I64 = npt.NDArray[np.int64]
_NULL = -(1 << 62)  # fill for null ids: never equal to a real id


@dataclass(frozen=True)
class Attribution:
    """Per kernel row: codes into the label lists (-1 = not attributed)."""

    op: I64
    op_labels: list[str]
    module: I64
    module_labels: list[str]
    marker: I64
    marker_labels: list[str]


def runtime_match(k: pa.Table, rt: pa.Table) -> I64:
    """Per kernel row of ``k``, the index of its runtime row by (rank, correlation_id), -1."""
    kc, rc = int_column(k, "correlation_id", _NULL), int_column(rt, "correlation_id", _NULL)
    kr, rr = int_column(k, "rank"), int_column(rt, "rank")
    return _join(kr, kc, rr, rc)


def join_sorted(a: I64, b: I64) -> I64:
    """For each id of ``a``, the index of the first equal id in ``b``, -1 if none (ids
    equal to _NULL never match). Linear when ``b`` is already sorted, as correlation ids
    in launch order are; else one stable sort."""
    out = np.full(a.size, -1, dtype=np.int64)
    if a.size == 0 or b.size == 0:
        return out
    if (
        b.size > 1
        and (b[1:] > b[:-1]).all()
        and b[0] != _NULL
        and int(b[-1]) - int(b[0]) < 4 * b.size + 1024
    ):
        # Unique, increasing and dense (CUPTI numbers calls consecutively): a lookup table
        # indexed by id is cheaper than a search per id.
        lut = np.full(int(b[-1]) - int(b[0]) + 1, -1, dtype=np.int64)
        lut[b - b[0]] = np.arange(b.size)
        i = a - b[0]
        ok = (i >= 0) & (i < lut.size) & (a != _NULL)
        out[ok] = lut[i[ok]]
        return out
    if intervals.is_sorted(b):
        order, sk = None, b
    else:
        order = np.argsort(b, kind="stable")
        sk = b[order]
    pos = np.searchsorted(sk, a, side="left")
    np.minimum(pos, sk.size - 1, out=pos)
    ok = (sk[pos] == a) & (a != _NULL)
    out[ok] = pos[ok] if order is None else order[pos[ok]]
    return out


def _join(a_hi: I64, a_lo: I64, b_hi: I64, b_lo: I64) -> I64:
    """For each (a_hi, a_lo), the index of the first equal (b_hi, b_lo) pair, -1 if none."""
    out = np.full(a_lo.size, -1, dtype=np.int64)
    if a_lo.size == 0 or b_lo.size == 0:
        return out
    a_ok, b_ok = a_lo != _NULL, b_lo != _NULL
    lo_all = np.concatenate([a_lo[a_ok], b_lo[b_ok]])
    hi_all = np.concatenate([a_hi, b_hi])
    if (
        (lo_all.size == 0 or (lo_all.min() >= 0 and lo_all.max() < 1 << 42))
        and hi_all.min() >= -1
        and hi_all.max() < (1 << 20) - 1
    ):
        # Both ids fit one int64 key: a single sort and search.
        ak = ((a_hi + 1) << 42) | np.where(a_ok, a_lo, 0)
        bk = np.where(b_ok, ((b_hi + 1) << 42) | np.where(b_ok, b_lo, 0), -1)
        order = np.argsort(bk, kind="stable")
        sk = bk[order]
        pos = np.clip(np.searchsorted(sk, ak, side="left"), 0, sk.size - 1)
        ok = a_ok & (sk[pos] == ak)
        out[ok] = order[pos[ok]]
        return out
    order = np.lexsort((b_lo, b_hi))
    bh, bl = b_hi[order], b_lo[order]
    # General case: binary search on hi, then a vectorized bisection on lo inside each run.
    lo = np.searchsorted(bh, a_hi, side="left")
    hi = np.searchsorted(bh, a_hi, side="right")
    left, right = lo.copy(), hi.copy()
    while True:
        active = left < right
        if not active.any():
            break
        mid = (left + right) // 2
        midc = np.clip(mid, 0, bl.size - 1)
        go_right = active & (bl[midc] < a_lo)
        left = np.where(go_right, mid + 1, left)
        right = np.where(active & ~go_right, mid, right)
    posc = np.clip(left, 0, bl.size - 1)
    ok = (left < hi) & (bl[posc] == a_lo) & a_ok
    out[ok] = order[posc[ok]]
    return out


def on_threads(
    r: tuple[I64, I64, I64, I64], q_pid: I64, q_tid: I64, q_t: I64, keep: np.ndarray
) -> I64:
    """Innermost range of ``r`` = (pid, tid, start_ns, end_ns) arrays (rows where
    ``keep``) on each query's thread (q_pid, q_tid) containing the time q_t; -1 if none."""
    out = np.full(q_t.size, -1, dtype=np.int64)
    rows = np.flatnonzero(keep)
    if rows.size == 0 or q_t.size == 0:
        return out
    rp, rt_, rs, re_ = (a[rows] for a in r)
    rkey, qkey = _thread_keys(rp, rt_, q_pid, q_tid)
    # Group the queries by thread with a hash (dictionary_encode) and a counting sort:
    # linear in the number of queries, which can be every kernel of the trace.
    enc = pc.dictionary_encode(pa.array(qkey))
    qcode = enc.indices.to_numpy()
    threads = enc.dictionary.to_numpy()
    q_order = pc.array_sort_indices(enc.indices).to_numpy()
    bounds = np.concatenate([[0], np.cumsum(np.bincount(qcode, minlength=threads.size))])
    r_order = np.argsort(rkey, kind="stable")
    r_sorted = rkey[r_order]
    for c, th in enumerate(threads.tolist()):
        rsel = r_order[np.searchsorted(r_sorted, th) : np.searchsorted(r_sorted, th, "right")]
        if rsel.size == 0:
            continue
        qsel = q_order[bounds[c] : bounds[c + 1]]
        hit = innermost(rs[rsel], re_[rsel], q_t[qsel])
        good = hit >= 0
        out[qsel[good]] = rows[rsel[hit[good]]]
    return out


def _thread_keys(rp: I64, rt_: I64, qp: I64, qt: I64) -> tuple[I64, I64]:
    """One int64 per (pid, tid) of the ranges and the queries, equal exactly when both are.

    pid and tid pack into one int64 when they fit (always, for OS ids); otherwise dense
    codes of the pairs are used."""
    p_all, t_all = np.concatenate([rp, qp]), np.concatenate([rt_, qt])
    if (
        p_all.size
        and p_all.min() >= -1
        and p_all.max() < (1 << 30)
        and t_all.min() >= -1
        and t_all.max() < (1 << 32) - 1
    ):
        key = ((p_all + 1) << 32) | (t_all + 1)
    else:
        key, _ = row_codes(p_all, t_all)
    return key[: rp.size], key[rp.size :]


def attribute(trace: Trace) -> Attribution:
    """Attribute every kernel of ``trace`` to ops, modules and markers (computed once
    per trace)."""
    return trace.memo(("attribution",), lambda: _attribute(trace))


def _attribute(trace: Trace) -> Attribution:
    n = trace.num_rows("kernels")
    none = np.full(n, -1, dtype=np.int64)
    m = _frame.runtime_match(trace, "kernels")
    hit = m >= 0
    launched = (
        hit | (_frame.ints(trace, "kernels", "tid") >= 0)
        if _frame.has_values(trace, "kernels", "tid")
        else hit
    )
    ops = trace.table("ops", ["rank", "external_id", "name", "category"])
    o_codes, o_labels = _frame.codes(trace, "ops", "name")
    if ops.num_rows and trace.column("kernels", "external_id").null_count < n:
        by_ext = _join(
            _frame.ints(trace, "kernels", "rank"),
            _frame.ints(trace, "kernels", "external_id", _NULL),
            int_column(ops, "rank"),
            int_column(ops, "external_id", _NULL),
        )
    else:
        by_ext = none
    m_codes, m_labels = _frame.codes(trace, "markers", "name")
    tq = np.flatnonzero(launched)
    if tq.size == 0 or (ops.num_rows == 0 and trace.num_rows("markers") == 0):
        op_idx, mod_idx, mark_idx = by_ext, none, none
    else:
        op_idx, mod_idx, mark_idx = _on_launch_threads(trace, tq, m, hit, by_ext, o_codes, o_labels)

    def codes(idx: I64, c: I64) -> I64:
        if idx is none or not c.size:
            return none
        return np.where(idx >= 0, c[np.clip(idx, 0, None)], -1)

    return Attribution(
        op=codes(op_idx, o_codes),
        op_labels=_labels(o_labels),
        module=codes(mod_idx, o_codes),
        module_labels=_labels(o_labels),
        marker=codes(mark_idx, m_codes),
        marker_labels=_labels(m_labels),
    )


def _on_launch_threads(
    trace: Trace,
    tq: I64,
    m: I64,
    hit: np.ndarray,
    by_ext: I64,
    o_codes: I64,
    o_labels: list[str | None],
) -> tuple[I64, I64, I64]:
    """(op, module, marker) row per kernel, searched on the launch thread of kernels
    ``tq`` (rules 1-4 of the module docstring)."""
    n = hit.size
    mc = np.where(hit, m, 0)[tq]
    h = hit[tq]

    def at_launch(col: str, own: I64) -> I64:
        r = _frame.ints(trace, "runtime", col)
        return np.where(h, r[mc] if r.size else -1, own[tq])

    q_pid = at_launch("pid", _frame.ints(trace, "kernels", "pid"))
    q_tid = at_launch("tid", _frame.ints(trace, "kernels", "tid"))
    q_t = at_launch("start_ns", _frame.ints(trace, "kernels", "start_ns"))
    o = _ranges(trace, "ops")
    is_module = _label_mask(o_codes, o_labels, lambda x: x.startswith("nn.Module:"))
    is_py = _frame.label_mask(trace, "ops", "category", lambda x: x == "python_function")
    keep = ~is_py & ~is_module
    op_idx = np.full(n, -1, dtype=np.int64)
    op_idx[tq] = on_threads(o, q_pid, q_tid, q_t, keep)
    op_idx[tq] = _skip_own_op(trace, o, tq, op_idx[tq], h, q_pid, q_tid, q_t, keep)
    op_idx = np.where(op_idx >= 0, op_idx, by_ext)
    mod_idx = np.full(n, -1, dtype=np.int64)
    mod_idx[tq] = on_threads(o, q_pid, q_tid, q_t, is_module)
    mk = _ranges(trace, "markers")
    is_step = _frame.label_mask(trace, "markers", "name", lambda x: x.startswith("ProfilerStep#"))
    is_range = _frame.label_mask(trace, "markers", "kind", lambda x: x == "range")
    mark_idx = np.full(n, -1, dtype=np.int64)
    mark_idx[tq] = on_threads(mk, q_pid, q_tid, q_t, is_range & ~is_step)
    return op_idx, mod_idx, mark_idx


def _ranges(trace: Trace, table: str) -> tuple[I64, I64, I64, I64]:
    return tuple(
        _frame.ints(trace, table, c)  # type: ignore[return-value]
        for c in ("pid", "tid", "start_ns", "end_ns")
    )


def _skip_own_op(
    trace: Trace,
    o: tuple[I64, I64, I64, I64],
    tq: I64,
    op_idx: I64,
    hit: np.ndarray,
    q_pid: I64,
    q_tid: I64,
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
    ks, ke = (
        _frame.ints(trace, "kernels", "start_ns")[tq],
        _frame.ints(trace, "kernels", "end_ns")[tq],
    )
    same = own & (o[2][oc] == ks) & (o[3][oc] == ke)
    if not same.any():
        return op_idx
    keep2 = keep.copy()
    keep2[op_idx[same]] = False
    q = np.flatnonzero(same)
    out = op_idx.copy()
    out[q] = on_threads(o, q_pid[q], q_tid[q], q_t[q], keep2)
    return out


def _labels(labels: list[str | None]) -> list[str]:
    return [x if x is not None else "<unknown>" for x in labels]


def _label_mask(codes: I64, labels: list[str | None], pred: Callable[[str], bool]) -> np.ndarray:
    lut = np.array([x is not None and pred(x) for x in labels], dtype=np.bool_)
    return lut[codes] if codes.size else np.zeros(0, dtype=bool)
