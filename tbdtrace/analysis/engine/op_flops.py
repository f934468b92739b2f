"""FLOPs of every ``ops`` row, computed once per trace (the flops pass's op sources).

Per row of the matrix-math ops of :mod:`tbdtrace.analysis.engine.flop_formulas`: the framework's
count (``ops.flops``) when present, else the analytic formula; the precision from the
first tensor input dtype (fp32 as tf32 where :func:`tf32_allowed`); and whether the row
is counted: the outermost such row with FLOPs on its thread. Formulas run once per
distinct (name, shapes, dtypes, concrete inputs), not per row.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace import schema
from tbdtrace.analysis.engine import flop_formulas as ff
from tbdtrace.analysis.engine import shared_arrays
from tbdtrace.analysis.engine.attribution import on_threads, outermost, thread_groups
from tbdtrace.analysis.engine.cache import Entry
from tbdtrace.analysis.engine.grouping import dict_codes, unique_rows
from tbdtrace.arrow_ints import int_column
from tbdtrace.tablefile import null_array

if TYPE_CHECKING:
    from tbdtrace.analysis.engine.context import AnalysisContext


I64 = npt.NDArray[np.int64]
I8 = npt.NDArray[np.int8]


@dataclass(frozen=True)
class OpCounts:
    """The ops rows with FLOPs (``rows``, ascending: the matrix-math rows whose count is
    known) with their ``flops`` and source index into ``SOURCES`` (1 framework, 2
    analytic); per ops row, the precision index into ``ff.PRECISIONS`` (-1 unknown) and
    whether it is a counted (outermost) op. Only matrix-math ops have FLOPs, so they are
    held for those rows alone (29M ops: not 234 MB of int64 -1s); the indices are int8."""

    rows: I64
    flops: I64
    source: I8
    precision: I8
    counted: npt.NDArray[np.bool_]

    def flops_of(self, rows: I64) -> I64:
        """FLOPs of ops ``rows``; -1 where a row has none."""
        rows = np.asarray(rows, dtype=np.int64)
        if self.rows.size == 0:
            return np.full(rows.size, -1, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.rows, rows), self.rows.size - 1)
        return np.where(self.rows[pos] == rows, self.flops[pos], -1)

    def has_flops(self) -> npt.NDArray[np.bool_]:
        """Per ops row, whether it has FLOPs."""
        out = np.zeros(self.counted.size, dtype=bool)
        out[self.rows] = True
        return out


OP_COUNTS: Entry[OpCounts] = Entry(
    "op_flops.counts", "the ops rows' FLOPs, precisions, counted rows"
)


def op_counts(ctx: AnalysisContext) -> OpCounts:
    """The ops rows' FLOPs, precisions and counted rows (computed once per trace)."""
    return ctx.cache.get(OP_COUNTS, lambda: _op_counts(ctx))


_OPS_COLS = ("name", "input_shapes", "input_dtypes", "concrete_inputs")


def _op_counts(ctx: AnalysisContext) -> OpCounts:
    n = ctx.num_rows("ops")
    prec = np.full(n, -1, dtype=np.int8)
    codes, labels = shared_arrays.codes(ctx, "ops", "name")
    fam = np.array([lbl in ff.NAMES for lbl in labels], dtype=bool)
    sel = fam[codes] if codes.size else np.zeros(0, dtype=bool)
    if codes.size:
        sel |= _counted_foreign(ctx)
    idx = np.flatnonzero(sel)
    if idx.size == 0:
        none = np.zeros(0, dtype=np.int64)
        return OpCounts(none, none, np.zeros(0, dtype=np.int8), prec, np.zeros(n, dtype=bool))
    # The inputs' text columns and the framework counts of the matrix-math rows only,
    # read for this once-per-trace table and not kept: nothing else on a report's path
    # reads them (29M ops: 0.7 GiB of whole columns).
    # A column at a time, each cut to those rows before the next is read (29M ops: one
    # column of 0.1-0.2 GiB held at once, not all five).
    take = pa.array(idx)
    sub = pa.table({c: _rows_of(ctx, c, take) for c in (*_OPS_COLS, "flops")})
    cols = [dict_codes(sub, c) for c in _OPS_COLS]
    uniq, inv = unique_rows(*(c for c, _ in cols))
    tf32 = tf32_allowed(ctx.meta)
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
    if (an < 0).any():
        an = _without_concrete_inputs(ctx, idx, cols[0], cols[1][0], cols[1][1], an)
    prec[idx] = u_prec[inv]
    flops = np.where(fw >= 0, fw, an)
    has = flops >= 0
    source = np.where(fw[has] >= 0, 1, 2).astype(np.int8)
    rows = idx[has]
    mask = np.zeros(n, dtype=bool)
    mask[rows] = True
    return OpCounts(rows, flops[has], source, prec, outermost(ctx, mask))


def _rows_of(ctx: AnalysisContext, column: str, take: pa.Array) -> pa.Array:
    """Rows ``take`` of an ops column. A column every row of which is null (by the file's
    statistics: a trace without recorded shapes or counts) is made as those rows of
    nulls, not read whole first (29M ops: 0.1-0.2 GiB per column)."""
    known = ctx.constant("ops", column)
    if known is not None and known[0] is None:
        return null_array(len(take), schema.table("ops").column(column).type)
    if not ctx.holds("ops", column) and ctx.cache.contains(shared_arrays.CODES, "ops", column):
        # Codes kept instead of the column (shared_arrays.NARROW_CODES): those rows made
        # from them, the same dictionary and indices, not the column read whole again.
        codes, labels = shared_arrays.codes(ctx, "ops", column)
        typ = schema.table("ops").column(column).type
        nulls = bool(labels) and labels[-1] is None
        values = labels[:-1] if nulls else labels
        sub = codes[take.to_numpy()]
        idx = pa.array(
            sub.astype(np.int32), mask=(sub == len(values)) if nulls else None, type=pa.int32()
        )
        return pa.DictionaryArray.from_arrays(idx, pa.array(values, typ.value_type))
    return ctx.table("ops", [column], cache=False).column(0).take(take)


# Op categories of other frameworks whose ``ops.flops`` count only matrix math (the
# TensorFlow backend fills it for MatMul/Conv ops from the traced graphs: tf_flops).
FOREIGN_COUNTED = ("tf_op",)


def _counted_foreign(ctx: AnalysisContext) -> npt.NDArray[np.bool_]:
    """Rows of :data:`FOREIGN_COUNTED` categories that carry a framework FLOP count."""
    cat = shared_arrays.label_mask(ctx, "ops", "category", lambda x: x in FOREIGN_COUNTED)
    if not cat.any():
        return cat
    return cat & (shared_arrays.ints(ctx, "ops", "flops", -1) >= 0)


def _without_concrete_inputs(
    ctx: AnalysisContext,
    idx: I64,
    names: tuple[I64, list[str | None]],
    shape_codes: I64,
    shape_labels: list[str | None],
    an: I64,
) -> I64:
    """Convolutions of traces without ``Concrete Inputs`` (PyTorch < 2): a plain forward
    convolution's output shape is the grad_output its autograd node (``...Convolution
    Backward``, same rank and sequence number) received; the old
    ``aten::cudnn_convolution_backward`` computes one gradient per ``..._backward_input``
    / ``..._backward_weight`` child it ran. Fills ``an`` (per row of ``idx``) where it
    is -1 and these give the count."""
    an = an.copy()
    codes, labels = names
    plain = np.array([x in ff.PLAIN_CONV for x in labels], dtype=bool)[codes] & (an < 0)
    if plain.any():
        _forward_from_nodes(ctx, idx, plain, shape_codes, shape_labels, an)
    old = np.array([x == ff.OLD_CUDNN_BACKWARD for x in labels], dtype=bool)[codes] & (an < 0)
    if old.any():
        _old_backward_from_children(ctx, idx, old, shape_codes, shape_labels, an)
    return an


def _forward_from_nodes(
    ctx: AnalysisContext, idx: I64, plain: Any, shape_codes: I64, shape_labels: list[Any], an: I64
) -> None:
    node = shared_arrays.label_mask(ctx, "ops", "name", lambda x: "ConvolutionBackward" in x)
    node_rows = np.flatnonzero(node)
    if node_rows.size == 0:
        return
    rank, seq = (
        shared_arrays.ints(ctx, "ops", "rank", keep=False),
        shared_arrays.ints(ctx, "ops", "sequence_number", keep=False),
    )
    nkey = (rank[node_rows] + 1) * (1 << 40) + seq[node_rows]
    order = np.argsort(nkey, kind="stable")
    nkey, node_rows = nkey[order], node_rows[order]
    rows = idx[plain]
    fkey = (rank[rows] + 1) * (1 << 40) + seq[rows]
    pos = np.clip(np.searchsorted(nkey, fkey), 0, nkey.size - 1)
    hit = (nkey[pos] == fkey) & (seq[rows] >= 0)
    shapes = ctx.column("ops", "input_shapes")
    got = np.full(rows.size, -1, dtype=np.int64)
    cache: dict[tuple[int, Any], int] = {}
    sc = shape_codes[plain]
    for i in np.flatnonzero(hit).tolist():
        out_text = shapes[int(node_rows[pos[i]])].as_py()
        k = (int(sc[i]), out_text)
        if k not in cache:
            try:
                out = json.loads(out_text or "")[0]
            except (ValueError, IndexError, TypeError):
                out = []
            v = ff.conv_from_output(shape_labels[sc[i]], out) if isinstance(out, list) else None
            cache[k] = -1 if v is None else v
        got[i] = cache[k]
    sub = an[plain]
    an[plain] = np.where(sub < 0, got, sub)


def _old_backward_from_children(
    ctx: AnalysisContext, idx: I64, old: Any, shape_codes: I64, shape_labels: list[Any], an: I64
) -> None:
    parents = idx[old]
    keep = np.zeros(ctx.num_rows("ops"), dtype=bool)
    keep[parents] = True
    kids = shared_arrays.label_mask(
        ctx,
        "ops",
        "name",
        lambda x: x in (f"{ff.OLD_CUDNN_BACKWARD}_input", f"{ff.OLD_CUDNN_BACKWARD}_weight"),
    )
    krows = np.flatnonzero(kids)
    if krows.size == 0:
        return
    q = thread_groups(
        shared_arrays.ints(ctx, "ops", "pid", keep=False)[krows],
        shared_arrays.ints(ctx, "ops", "tid", keep=False)[krows],
    )
    parent = on_threads(ctx, "ops", keep, q, shared_arrays.ints(ctx, "ops", "start_ns")[krows])
    grads = np.bincount(parent[parent >= 0], minlength=keep.size)[parents]
    sc = shape_codes[old]
    one = np.array(
        [ff.old_cudnn_backward_one(shape_labels[c]) or -1 for c in sc.tolist()], dtype=np.int64
    )
    an[old] = np.where((one >= 0) & (grads > 0), one * grads, -1)


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
