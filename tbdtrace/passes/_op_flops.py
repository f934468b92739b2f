"""FLOPs of every ``ops`` row, computed once per trace (the flops pass's op sources).

Per row of the matrix-math ops of :mod:`tbdtrace.passes.flop_formulas`: the framework's
count (``ops.flops``) when present, else the analytic formula; the precision from the
first tensor input dtype (fp32 as tf32 where :func:`tf32_allowed`); and whether the row
is counted: the outermost such row with FLOPs on its thread. Formulas run once per
distinct (name, shapes, dtypes, concrete inputs), not per row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace.passes import _frame
from tbdtrace.passes import flop_formulas as ff
from tbdtrace.passes._util import dict_codes, int_column
from tbdtrace.passes.attribution import thread_groups
from tbdtrace.trace import Trace

I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class OpCounts:
    """Per ops row: FLOPs (-1 = not counted), precision index into ``ff.PRECISIONS``
    (-1 unknown), source index into ``SOURCES`` (1 framework, 2 analytic), and whether
    it is a counted (outermost) op."""

    flops: I64
    precision: I64
    source: I64
    counted: npt.NDArray[np.bool_]


def op_counts(trace: Trace) -> OpCounts:
    """FLOPs of every ops row (computed once per trace)."""
    return trace.memo(("op_flop_counts",), lambda: _op_counts(trace))


_OPS_COLS = ("name", "input_shapes", "input_dtypes", "concrete_inputs")


def _op_counts(trace: Trace) -> OpCounts:
    ops = trace.table("ops", [*_OPS_COLS, "flops"])
    n = ops.num_rows
    flops = np.full(n, -1, dtype=np.int64)
    prec = np.full(n, -1, dtype=np.int64)
    source = np.full(n, -1, dtype=np.int64)
    codes, labels = dict_codes(ops, "name")
    fam = np.array([lbl in ff.NAMES for lbl in labels], dtype=bool)
    idx = np.flatnonzero(fam[codes]) if codes.size else codes
    if idx.size == 0:
        return OpCounts(flops, prec, source, np.zeros(n, dtype=bool))
    sub = ops.take(pa.array(idx))
    cols = [dict_codes(sub, c) for c in _OPS_COLS]
    key = np.stack([c for c, _ in cols], axis=1)
    uniq, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    tf32 = tf32_allowed(trace.meta)
    u_flops = np.full(len(uniq), -1, dtype=np.int64)
    u_prec = np.full(len(uniq), -1, dtype=np.int64)
    for j, (cn, cs, cd, cc) in enumerate(uniq.tolist()):
        name = cols[0][1][cn] or ""
        v = ff.op_flops(name, cols[1][1][cs], cols[3][1][cc])
        u_flops[j] = -1 if v is None else v
        p = ff.precision(cols[2][1][cd])
        if p == "fp32" and tf32.get(ff.family(name) or ""):
            p = "tf32"
        u_prec[j] = ff.PRECISIONS.index(p) if p else -1
    fw = int_column(sub, "flops", -1)
    an = u_flops[inv]
    flops[idx] = np.where(fw >= 0, fw, an)
    source[idx] = np.where(fw >= 0, 1, np.where(an >= 0, 2, -1))
    prec[idx] = u_prec[inv]
    return OpCounts(flops, prec, source, _outermost(trace, flops >= 0))


def _outermost(trace: Trace, has: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
    """Rows of ``has`` not inside another ``has`` row on the same thread."""
    out = has.copy()
    rows = np.flatnonzero(has)
    if rows.size < 2:
        return out
    pid, tid = _frame.ints(trace, "ops", "pid")[rows], _frame.ints(trace, "ops", "tid")[rows]
    s, e = _frame.ints(trace, "ops", "start_ns")[rows], _frame.ints(trace, "ops", "end_ns")[rows]
    for g in thread_groups(pid, tid).values():
        order = g[np.lexsort((-e[g], s[g]))]
        ends = e[order]
        prev_max = np.maximum.accumulate(ends)[:-1]
        inside = np.zeros(order.size, dtype=bool)
        inside[1:] = prev_max >= ends[1:]
        out[rows[order[inside]]] = False
    return out


def tf32_allowed(meta: dict[str, Any]) -> dict[str, bool]:
    """Which fp32 op families ran as TF32, from ``meta.extra.torch.allow_tf32``
    ({"matmul": bool, "cudnn": bool}, recorded by ``capture`` from
    ``torch.backends.cuda.matmul.allow_tf32`` / ``torch.backends.cudnn.allow_tf32`` when the
    program used CUDA). Without it, fp32 stays fp32."""
    t = ((meta.get("extra") or {}).get("torch") or {}).get("allow_tf32") or {}
    return {
        "matmul": bool(t.get("matmul")),
        "conv": bool(t.get("cudnn")),
        "attention": bool(t.get("matmul")),
    }
