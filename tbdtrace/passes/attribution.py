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

from tbdtrace.passes._intervals_ext import innermost
from tbdtrace.passes._util import dict_codes, int_column, row_codes
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
    launch_start_ns: I64  # runtime call start (-1 when no runtime call matched)
    launch_end_ns: I64  # runtime call end (-1 when no runtime call matched)


def runtime_match(k: pa.Table, rt: pa.Table) -> I64:
    """Per kernel row of ``k``, the index of its runtime row by (rank, correlation_id), -1."""
    kc, rc = int_column(k, "correlation_id", _NULL), int_column(rt, "correlation_id", _NULL)
    kr, rr = int_column(k, "rank"), int_column(rt, "rank")
    return _join(kr, kc, rr, rc)


def _join(a_hi: I64, a_lo: I64, b_hi: I64, b_lo: I64) -> I64:
    """For each (a_hi, a_lo), the index of the first equal (b_hi, b_lo) pair, -1 if none."""
    out = np.full(a_lo.size, -1, dtype=np.int64)
    if a_lo.size == 0 or b_lo.size == 0:
        return out
    a_ok, b_ok = a_lo != _NULL, b_lo != _NULL
    lo_all = np.concatenate([a_lo[a_ok], b_lo[b_ok]])
    hi_all = np.concatenate([a_hi, b_hi])
    if (lo_all.size == 0 or (lo_all.min() >= 0 and lo_all.max() < 1 << 42)) and \
            hi_all.min() >= -1 and hi_all.max() < (1 << 20) - 1:
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


def on_threads(r: pa.Table, q_pid: I64, q_tid: I64, q_t: I64, keep: np.ndarray) -> I64:
    """Innermost row of ``r`` (rows where ``keep``) on each query's thread containing q_t."""
    out = np.full(q_t.size, -1, dtype=np.int64)
    rows = np.flatnonzero(keep)
    if rows.size == 0 or q_t.size == 0:
        return out
    rp, rt_ = int_column(r, "pid")[rows], int_column(r, "tid")[rows]
    rs, re_ = int_column(r, "start_ns")[rows], int_column(r, "end_ns")[rows]
    inv, _ = row_codes(np.concatenate([rp, q_pid]), np.concatenate([rt_, q_tid]))
    rcode, qcode = inv[: rows.size], inv[rows.size:]
    r_order, q_order = np.argsort(rcode, kind="stable"), np.argsort(qcode, kind="stable")
    r_sorted, q_sorted = rcode[r_order], qcode[q_order]
    for c in np.unique(qcode):
        rsel = r_order[np.searchsorted(r_sorted, c):np.searchsorted(r_sorted, c, "right")]
        if rsel.size == 0:
            continue
        qsel = q_order[np.searchsorted(q_sorted, c):np.searchsorted(q_sorted, c, "right")]
        hit = innermost(rs[rsel], re_[rsel], q_t[qsel])
        good = hit >= 0
        out[qsel[good]] = rows[rsel[hit[good]]]
    return out


def attribute(trace: Trace, k: pa.Table) -> Attribution:
    """Attribute the kernel rows ``k`` (columns start_ns, correlation_id, external_id,
    rank, pid, tid) to ops, modules and markers of ``trace``."""
    rt = trace.table("runtime", ["start_ns", "end_ns", "pid", "tid", "rank", "correlation_id"])
    m = runtime_match(k, rt)
    hit = m >= 0
    mc = np.clip(m, 0, None)
    r_pid, r_tid = int_column(rt, "pid"), int_column(rt, "tid")
    r_s, r_e = int_column(rt, "start_ns"), int_column(rt, "end_ns")
    q_pid = np.where(hit, r_pid[mc] if rt.num_rows else -1, int_column(k, "pid"))
    q_tid = np.where(hit, r_tid[mc] if rt.num_rows else -1, int_column(k, "tid"))
    q_t = np.where(hit, r_s[mc] if rt.num_rows else -1, int_column(k, "start_ns"))
    launch_s = np.where(hit, r_s[mc] if rt.num_rows else -1, -1)
    launch_e = np.where(hit, r_e[mc] if rt.num_rows else -1, -1)
    launched = hit | (int_column(k, "tid") >= 0)

    ops = trace.table("ops", ["start_ns", "end_ns", "pid", "tid", "rank", "external_id",
                              "name", "category"])
    o_codes, o_labels = dict_codes(ops, "name")
    is_module = _label_mask(o_codes, o_labels, lambda s: s.startswith("nn.Module:"))
    cat = ops.column("category").cast(pa.string())
    is_py = np.asarray(pc.fill_null(pc.equal(cat, "python_function"), False).to_numpy(
        zero_copy_only=False), dtype=bool)
    tq = np.flatnonzero(launched)
    op_idx = np.full(k.num_rows, -1, dtype=np.int64)
    op_idx[tq] = on_threads(ops, q_pid[tq], q_tid[tq], q_t[tq], ~is_py & ~is_module)
    op_idx = _skip_own_op(ops, k, op_idx, hit, q_pid, q_tid, q_t, ~is_py & ~is_module)
    by_ext = _join(int_column(k, "rank"), int_column(k, "external_id", _NULL),
                   int_column(ops, "rank"), int_column(ops, "external_id", _NULL))
    op_idx = np.where(op_idx >= 0, op_idx, by_ext)
    mod_idx = np.full(k.num_rows, -1, dtype=np.int64)
    mod_idx[tq] = on_threads(ops, q_pid[tq], q_tid[tq], q_t[tq], is_module)

    mk = trace.table("markers", ["start_ns", "end_ns", "pid", "tid", "name", "kind"])
    m_codes, m_labels = dict_codes(mk, "name")
    is_step = _label_mask(m_codes, m_labels, lambda s: s.startswith("ProfilerStep#"))
    kind = mk.column("kind").cast(pa.string())
    is_range = np.asarray(pc.fill_null(pc.equal(kind, "range"), False).to_numpy(
        zero_copy_only=False), dtype=bool)
    mark_idx = np.full(k.num_rows, -1, dtype=np.int64)
    mark_idx[tq] = on_threads(mk, q_pid[tq], q_tid[tq], q_t[tq], is_range & ~is_step)

    def codes(idx: I64, c: I64) -> I64:
        return np.where(idx >= 0, c[np.clip(idx, 0, None)] if c.size else -1, -1)

    return Attribution(
        op=codes(op_idx, o_codes), op_labels=_labels(o_labels),
        module=codes(mod_idx, o_codes), module_labels=_labels(o_labels),
        marker=codes(mark_idx, m_codes), marker_labels=_labels(m_labels),
        launch_start_ns=launch_s.astype(np.int64), launch_end_ns=launch_e.astype(np.int64),
    )


def _skip_own_op(ops: pa.Table, k: pa.Table, op_idx: I64, hit: np.ndarray, q_pid: I64,
                 q_tid: I64, q_t: I64, keep: np.ndarray) -> I64:
    """CPU-backend kernels are leaf ops that the ops table may hold too: the op found at
    the kernel's own start can be the kernel itself (same thread, start and end). Its
    launcher is then the enclosing op, found again without those rows."""
    own = ~hit & (op_idx >= 0)
    if not own.any():
        return op_idx
    oc = np.clip(op_idx, 0, None)
    same = own & (int_column(ops, "start_ns")[oc] == int_column(k, "start_ns")) & \
        (int_column(ops, "end_ns")[oc] == int_column(k, "end_ns"))
    if not same.any():
        return op_idx
    keep2 = keep.copy()
    keep2[op_idx[same]] = False
    q = np.flatnonzero(same)
    out = op_idx.copy()
    out[q] = on_threads(ops, q_pid[q], q_tid[q], q_t[q], keep2)
    return out


def _labels(labels: list[str | None]) -> list[str]:
    return [x if x is not None else "<unknown>" for x in labels]


def _label_mask(codes: I64, labels: list[str | None],
                pred: Callable[[str], bool]) -> np.ndarray:
    lut = np.array([x is not None and pred(x) for x in labels], dtype=np.bool_)
    return lut[codes] if codes.size else np.zeros(0, dtype=bool)
