"""FLOPs of TensorFlow's matrix ops, from the graphs the program traced (``--backend tf``).

TensorFlow's profiler records no shapes, so the FLOPs come from where the shapes are:
the ``tf.function`` graphs the program traced (their ``ConcreteFunction`` objects, found
by type while the program runs and kept by ``tf_backend.TfBackend``). For each matrix op
of :data:`MATRIX_OPS` whose input shapes are static, TensorFlow's own registered
statistics (``ops.get_stats_for_node_def(graph, node_def, "flops")``: 2 x multiply-adds, the count
``tf.compat.v1.profiler`` reports) give the op's FLOPs. An executed op is named
``<node name>:<type>`` in the trace; an op that grappler fused into another
(``MatMul`` + ``BiasAdd`` + ``Relu`` runs as one ``_MklNativeFusedMatMul`` named after the
``Relu`` node) gives its FLOPs to the nearest consumer that was executed. A name that two
traced graphs give different counts (the same layer traced at two batch sizes) gets
none: the pass then counts less, never a wrong figure. Ops run eagerly (outside a
``tf.function``) have no graph and get no count.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from typing import Any

# Matrix-math op types whose FLOPs are counted (the figure TBD's FP32 efficiency uses).
MATRIX_OPS = frozenset(
    {
        "MatMul",
        "BatchMatMul",
        "BatchMatMulV2",
        "BatchMatMulV3",
        "Conv2D",
        "Conv2DBackpropInput",
        "Conv2DBackpropFilter",
        "Conv3D",
        "Conv3DBackpropInputV2",
        "Conv3DBackpropFilterV2",
        "DepthwiseConv2dNative",
        "DepthwiseConv2dNativeBackpropInput",
        "DepthwiseConv2dNativeBackpropFilter",
    }
)
MAX_HOPS = 4  # how far a fused op's FLOPs travel to an executed consumer
# TensorFlow dtype name -> the profiler dtype text the FLOP pass reads (ops.input_dtypes).
DTYPES = {
    "float32": "float",
    "float64": "double",
    "bfloat16": "c10::BFloat16",
    "float16": "c10::Half",
}


def concrete_function_type() -> type | None:
    """TensorFlow's ``ConcreteFunction`` class once TensorFlow is imported, else None."""
    mod = sys.modules.get("tensorflow.python.eager.polymorphic_function.concrete_function")
    t = getattr(mod, "ConcreteFunction", None)
    return t if isinstance(t, type) else None


def _unique_graphs(graphs: list[Any]) -> list[Any]:
    seen: dict[int, Any] = {}
    for g in graphs:
        seen.setdefault(id(g), g)
    return list(seen.values())


def _op_flops(graph: Any, op: Any) -> int | None:
    from tensorflow.python.framework import ops as tf_ops
    from tensorflow.python.util import deprecation

    try:
        # The statistics read shapes through a TF1-era helper that warns on first use.
        with deprecation.silence():
            v = tf_ops.get_stats_for_node_def(graph, op.node_def, "flops").value
    except Exception:  # noqa: BLE001 - unknown shapes, no statistics registered
        return None
    return int(v) if v else None


def _dtype(op: Any) -> str | None:
    try:
        return DTYPES.get(op.get_attr("T").name)
    except Exception:  # noqa: BLE001 - no T attribute
        return None


def _executed_target(op: Any, executed: set[str]) -> str | None:
    """The op itself when it ran, else its nearest executed consumer (breadth first)."""
    frontier, seen = [op], {op.name}
    for _ in range(MAX_HOPS + 1):
        hits = sorted({o.name for o in frontier if o.name in executed})
        if hits:
            return hits[0] if len(hits) == 1 else None
        nxt = []
        for o in frontier:
            for t in o.outputs:
                for c in t.consumers():
                    if c.name not in seen:
                        seen.add(c.name)
                        nxt.append(c)
        frontier = nxt
    return None


def counts(executed: set[str], graphs: list[Any]) -> dict[str, tuple[int, str | None]]:
    """Executed node name -> (FLOPs, dtype text) from the traced ``graphs`` (see the
    module docstring); names with conflicting counts are left out."""
    per_graph: list[dict[str, tuple[int, str | None]]] = []
    for g in _unique_graphs(graphs):
        got: dict[str, list[Any]] = defaultdict(lambda: [0, None])
        for op in g.get_operations():
            if op.type not in MATRIX_OPS:
                continue
            n = _op_flops(g, op)
            target = _executed_target(op, executed) if n else None
            if target is None:
                continue
            got[target][0] += n
            got[target][1] = got[target][1] or _dtype(op)
        per_graph.append({k: (v[0], v[1]) for k, v in got.items()})
    out: dict[str, tuple[int, str | None]] = {}
    bad: set[str] = set()
    for d in per_graph:
        for k, v in d.items():
            if k in out and out[k] != v:
                bad.add(k)
            out.setdefault(k, v)
    return {k: v for k, v in out.items() if k not in bad}


def add_flops(ops: dict[str, list[Any]], graphs: list[Any]) -> int:
    """Fill ``ops.flops`` and ``ops.input_dtypes`` of the executed rows that the traced
    ``graphs`` count (``name`` = ``<node>:<type>``); returns the rows filled."""
    names = ops.get("name") or []
    nodes = [str(n).rpartition(":")[0] for n in names]
    got = counts(set(nodes), graphs)
    flops = list(ops.get("flops") or [None] * len(names))
    dtypes = list(ops.get("input_dtypes") or [None] * len(names))
    filled = 0
    for i, node in enumerate(nodes):
        if node in got:
            flops[i], dt = got[node]
            dtypes[i] = f'["{dt}"]' if dt else dtypes[i]
            filled += 1
    ops["flops"], ops["input_dtypes"] = flops, dtypes
    return filled
