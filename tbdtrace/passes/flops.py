"""Analytic FLOP counts of matrix-multiply ops from their recorded input shapes.

Formulas (a multiply-add = 2 FLOPs; bias adds are not counted):
  aten::mm        [[M,K],[K,N]]                 2*M*K*N
  aten::addmm     [bias, [M,K], [K,N], ...]     2*M*K*N
  aten::bmm       [[B,M,K],[B,K,N]]             2*B*M*K*N
  aten::baddbmm   [bias, [B,M,K], [B,K,N], ...] 2*B*M*K*N
  aten::matmul    [[...,M,K],[...,K,N]]         2*prod(broadcast batch)*M*K*N (1-D operands
                                                 are treated as a row/column vector)
  aten::linear    [[...,K],[N,K], bias]         2*prod(leading dims)*K*N
Convolutions are not counted: profiler shapes give inputs only, not stride, padding or the
output size that the formula needs. Nested ops would count twice (linear -> matmul ->
mm), so only leaves among the counted ops of a thread contribute (:func:`leaf_mask`).
Only FP32 ops count (input dtype ``float``; :func:`is_fp32`): the efficiency is against the
FP32 peak, and bf16/fp16 work runs on other units.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace.passes._util import dict_codes, int_column

MATMUL_OPS = (
    "aten::mm",
    "aten::addmm",
    "aten::bmm",
    "aten::baddbmm",
    "aten::matmul",
    "aten::linear",
)


def shape_flops(name: str, shapes_json: str | None) -> int | None:
    """FLOPs of one op from its input shapes (JSON list of lists), None when unknown."""
    if not shapes_json:
        return None
    try:
        s: list[Any] = json.loads(shapes_json)
    except (ValueError, TypeError):
        return None
    try:
        return _formula(name, [list(x) if isinstance(x, list) else [] for x in s])
    except (IndexError, TypeError, ValueError):
        return None


def _formula(name: str, s: list[list[int]]) -> int | None:
    if name == "aten::mm" and len(s[0]) == 2 and len(s[1]) == 2:
        return 2 * s[0][0] * s[0][1] * s[1][1]
    if name == "aten::addmm" and len(s[1]) == 2 and len(s[2]) == 2:
        return 2 * s[1][0] * s[1][1] * s[2][1]
    if name == "aten::bmm" and len(s[0]) == 3 and len(s[1]) == 3:
        return 2 * s[0][0] * s[0][1] * s[0][2] * s[1][2]
    if name == "aten::baddbmm" and len(s[1]) == 3 and len(s[2]) == 3:
        return 2 * s[1][0] * s[1][1] * s[1][2] * s[2][2]
    if name == "aten::linear" and s[0] and len(s[1]) == 2:
        return 2 * math.prod(s[0][:-1]) * s[0][-1] * s[1][0]
    if name == "aten::matmul" and s[0] and s[1]:
        a, b = s[0], s[1]
        a2 = [1, *a] if len(a) == 1 else a
        b2 = [*b, 1] if len(b) == 1 else b
        batch = np.broadcast_shapes(tuple(a2[:-2]), tuple(b2[:-2]))
        return 2 * math.prod(batch) * a2[-2] * a2[-1] * b2[-1]
    return None


def is_fp32(dtypes_json: str | None) -> bool:
    """True unless the recorded input dtypes show a non-FP32 first tensor (bf16, fp16, ...).

    Profiler dtype strings: ``float`` is FP32; ``c10::BFloat16``, ``c10::Half``, ``double``
    are not. No dtypes recorded: counted (assumed FP32).
    """
    if not dtypes_json:
        return True
    try:
        d = json.loads(dtypes_json)
    except (ValueError, TypeError):
        return True
    first = next((x for x in d if isinstance(x, str) and x), None)
    return first is None or first == "float"


def leaf_mask(pid: np.ndarray, tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """True for ranges that contain no other range of the set on their thread.

    Assumes ranges on a thread nest properly (true of framework ops): in (start, -end)
    order, a range has a child exactly when the next range on its thread starts before it
    ends.
    """
    n = start.size
    out = np.ones(n, dtype=bool)
    if n < 2:
        return out
    order = np.lexsort((-end, start, tid, pid))
    p, t, s, e = pid[order], tid[order], start[order], end[order]
    same = (p[1:] == p[:-1]) & (t[1:] == t[:-1])
    child = same & (s[1:] < e[:-1]) | same & (s[1:] == s[:-1])
    leaf = np.ones(n, dtype=bool)
    leaf[:-1] = ~child
    out[order] = leaf
    return out


def op_flops(ops: Any) -> tuple[np.ndarray, np.ndarray]:
    """(flops per ops row, 0 where not counted; counted mask) from profiler ``ops.flops``."""
    f = int_column(ops, "flops", -1)
    has = f >= 0
    leaf = np.zeros(f.size, dtype=bool)
    idx = np.flatnonzero(has)
    leaf[idx] = leaf_mask(
        int_column(ops, "pid")[idx],
        int_column(ops, "tid")[idx],
        int_column(ops, "start_ns")[idx],
        int_column(ops, "end_ns")[idx],
    )
    return np.where(leaf, f, 0), leaf


def analytic_flops(ops: Any) -> tuple[np.ndarray, np.ndarray]:
    """(flops per ops row from shapes, counted mask) for the matmul-family ops."""
    n = ops.num_rows
    f = np.zeros(n, dtype=np.int64)
    counted = np.zeros(n, dtype=bool)
    codes, labels = dict_codes(ops, "name")
    lut = np.array([x in MATMUL_OPS for x in labels], dtype=bool)
    idx = np.flatnonzero(lut[codes]) if codes.size else codes
    if idx.size == 0:
        return f, counted
    leaf = leaf_mask(
        int_column(ops, "pid")[idx],
        int_column(ops, "tid")[idx],
        int_column(ops, "start_ns")[idx],
        int_column(ops, "end_ns")[idx],
    )
    idx = idx[leaf]  # one per matmul-family op, not per kernel
    take = pa.array(idx)
    shapes = ops.column("input_shapes").take(take).cast(pa.string()).to_pylist()
    dtypes = ops.column("input_dtypes").take(take).cast(pa.string()).to_pylist()
    for k, i in enumerate(idx.tolist()):
        if not is_fp32(dtypes[k]):
            continue
        v = shape_flops(labels[codes[i]] or "", shapes[k])
        if v is not None:
            f[i], counted[i] = v, True
    return f, counted
