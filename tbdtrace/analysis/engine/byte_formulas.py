"""Bytes one framework op moves to and from device memory, from its recorded inputs: the
memory side of a roofline (FLOPs: :mod:`tbdtrace.analysis.engine.flop_formulas`).

The model is each operand read once and each result written once (the compulsory
traffic, as TraceLens's perf model counts GEMMs): no cache reuse or re-reads are added,
and no workspace. Element sizes come from each input's recorded dtype
(``ops.input_dtypes``); a result takes the first tensor input's. So the figure is a
lower bound on real traffic, and an op's arithmetic intensity (FLOPs / bytes) an upper
bound. Per family (shapes as recorded in ``ops.input_shapes``; numel = product of dims):

* GEMM: mm [M,K]x[K,N]: M*K + K*N + M*N elements; addmm/_addmm_activation add the bias;
  bmm: B*(M*K + K*N + M*N), baddbmm/addbmm add their input; mv: M*K + K + M (addmv adds
  the vector added); matmul: numel(a) + numel(b) + numel(result, batch dims broadcast);
  linear: numel(x) + numel(W) + numel(bias) + prod(x[:-1]) * N.
* Convolution forward (not transposed): numel(input) + numel(weight) + numel(output)
  (+ bias), output = N * Cout * prod(output spatial) (flop_formulas' output size);
  transposed convolutions are not counted. convolution_backward: grad_output, input and
  weight read, and the gradients ``output_mask`` asks for written (grad_input as the
  input, grad_weight as the weight; grad_bias Cout).
* Attention forward: q, k, v read, the output [.., Lq, Dv] written; backward: grad_out,
  q, k, v and out read, dq, dk, dv written (the logsumexp and RNG state not counted).
* Elementwise (:data:`ELEMENTWISE`): every tensor input read, the result (the broadcast
  of the inputs' shapes) written; an in-place op (name ending ``_``) writes its first
  input.
* Normalization forward (batch/layer/group norm): the input read and the output written,
  plus the affine parameters (and batch norm's running statistics) read; backward: the
  output gradient and the input read, the input gradient written, plus the parameters.
* Softmax and log-softmax: forward reads the input and writes the output; backward
  reads the output gradient and the output and writes the input gradient.
* Reductions (sum, mean, amax, amin, max, min, norm, var, std over dims): the input read;
  the (smaller) result not counted.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tbdtrace.analysis.engine import flop_formulas as ff

# Bytes per element of a profiler dtype string (``Input type``).
DTYPE_BYTES = {
    "double": 8,
    "float": 4,
    "c10::BFloat16": 2,
    "c10::Half": 2,
    "c10::Float8_e4m3fn": 1,
    "c10::Float8_e5m2": 1,
    "c10::Float8_e4m3fnuz": 1,
    "c10::Float8_e5m2fnuz": 1,
    "long int": 8,
    "int": 4,
    "short int": 2,
    "signed char": 1,
    "unsigned char": 1,
    "bool": 1,
}

_UNARY = (
    "relu",
    "gelu",
    "silu",
    "sigmoid",
    "tanh",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "neg",
    "abs",
    "leaky_relu",
    "hardtanh",
    "clamp",
    "clamp_min",
    "clamp_max",
    "reciprocal",
    "pow",
    "dropout",
    "native_dropout",
    "erf",
    "sin",
    "cos",
    "copy",
    "fill",
    "zero",
)
_BINARY = (
    "add",
    "sub",
    "mul",
    "div",
    "maximum",
    "minimum",
    "where",
    "addcmul",
    "addcdiv",
    "threshold_backward",
    "gelu_backward",
    "silu_backward",
    "sigmoid_backward",
    "tanh_backward",
    "leaky_relu_backward",
    "lerp",
    "eq",
    "ne",
    "lt",
    "gt",
    "le",
    "ge",
)
ELEMENTWISE = frozenset(f"aten::{n}{suffix}" for n in (*_UNARY, *_BINARY) for suffix in ("", "_"))
NORMALIZATION = {
    "aten::native_batch_norm": "batch",
    "aten::batch_norm": "batch",
    "aten::_batch_norm_impl_index": "batch",
    "aten::cudnn_batch_norm": "batch",
    "aten::native_layer_norm": "layer",
    "aten::layer_norm": "layer",
    "aten::native_group_norm": "group",
    "aten::group_norm": "group",
}
NORMALIZATION_BACKWARD = frozenset(
    (
        "aten::native_batch_norm_backward",
        "aten::cudnn_batch_norm_backward",
        "aten::native_layer_norm_backward",
        "aten::native_group_norm_backward",
    )
)
SOFTMAX = frozenset(("aten::_softmax", "aten::softmax", "aten::_log_softmax", "aten::log_softmax"))
SOFTMAX_BACKWARD = frozenset(("aten::_softmax_backward_data", "aten::_log_softmax_backward_data"))
REDUCTION = frozenset(
    f"aten::{n}" for n in ("sum", "mean", "amax", "amin", "max", "min", "norm", "var", "std")
)


def family(name: str) -> str | None:
    """The byte model's family of an op (gemm, conv, attention, elementwise,
    normalization, softmax, reduction), None for an op it does not count."""
    fam = ff.family(name)
    if fam is not None:
        return "gemm" if fam == "matmul" else fam
    if name in ELEMENTWISE:
        return "elementwise"
    if name in NORMALIZATION or name in NORMALIZATION_BACKWARD:
        return "normalization"
    if name in SOFTMAX or name in SOFTMAX_BACKWARD:
        return "softmax"
    if name in REDUCTION:
        return "reduction"
    return None


def _numel(s: list[int]) -> int:
    return math.prod(s) if s else 0


def _broadcast(shapes: list[list[int]]) -> list[int]:
    out: list[int] = []
    for s in shapes:
        a, b = out[::-1], s[::-1]
        out = [
            max(x, y)
            for x, y in zip(a + [1] * (len(b) - len(a)), b + [1] * (len(a) - len(b)), strict=True)
        ][::-1]
    return out


def op_bytes(name: str, shapes: str | None, dtypes: str | None, concrete: str | None) -> int | None:
    """Bytes the op moves under the model above, None when it is not counted or its
    recorded inputs do not give the count (no shapes, an unknown dtype)."""
    fam = family(name)
    if fam is None or not shapes or not dtypes:
        return None
    try:
        raw = json.loads(shapes)
        types = json.loads(dtypes)
        s = [x if isinstance(x, list) and all(isinstance(v, int) for v in x) else None for x in raw]
        sizes = [DTYPE_BYTES.get(t) if isinstance(t, str) else None for t in types]
        tensors = [(sh, sz) for sh, sz in zip(s, sizes, strict=False) if sh and sz]
        if not tensors:
            return None
        elem = tensors[0][1]
        reads = sum(_numel(sh) * sz for sh, sz in tensors)
        cl = json.loads(concrete) if concrete else []
        n = _elements(name, fam, [x or [] for x in s], tensors, cl)
        if n is None:
            return None
        extra_reads, writes = n
        return reads + (extra_reads + writes) * elem if extra_reads >= 0 else None
    except (IndexError, TypeError, ValueError, KeyError, ZeroDivisionError):
        return None


def _elements(
    name: str, fam: str, s: list[list[int]], tensors: list[tuple[list[int], int]], cl: list[Any]
) -> tuple[int, int] | None:
    """(elements read beyond the recorded tensor inputs, elements written), in the
    result's element size; None when not countable."""
    if fam == "gemm":
        if name in ("aten::mm", "aten::_scaled_mm", "aten::_int_mm"):
            return 0, s[0][0] * s[1][1]
        if name in ("aten::addmm", "aten::_addmm_activation"):
            return 0, s[1][0] * s[2][1]
        if name == "aten::bmm":
            return 0, s[0][0] * s[0][1] * s[1][2]
        if name in ("aten::baddbmm",):
            return 0, s[1][0] * s[1][1] * s[2][2]
        if name == "aten::addbmm":
            return 0, s[1][1] * s[2][2]
        if name in ("aten::mv", "aten::addmv"):
            m = s[0 if name == "aten::mv" else 1]
            return 0, m[0]
        if name == "aten::linear":
            return 0, _numel(s[0][:-1]) * s[1][0]
        if name == "aten::matmul":
            a, b = s[0], s[1]
            if len(a) < 2 or len(b) < 2:
                return None
            return 0, _numel(_broadcast([a[:-2], b[:-2]])) * a[-2] * b[-1]
    if fam == "conv":
        return _conv(name, s, cl)
    if fam == "attention":
        q = s[0] if not name.endswith("_backward") else s[1]
        if name.endswith("_backward"):
            # recorded: grad_out, q, k, v, out, ...; written: dq, dk, dv
            return 0, _numel(s[1]) + _numel(s[2]) + _numel(s[3])
        return 0, _numel(q[:-1]) * s[2][-1]  # output [.., Lq, Dv]
    if fam == "elementwise":
        if name.endswith("_"):
            return 0, _numel(s[0])
        return 0, _numel(_broadcast([sh for sh, _ in tensors]))
    if fam == "normalization":
        x = next(sh for sh, _ in tensors)
        backward = name in NORMALIZATION_BACKWARD
        return 0, _numel(x) if not backward else _numel(s[1] or x)
    if fam == "softmax":
        return 0, _numel(tensors[0][0])
    if fam == "reduction":
        return 0, 0
    return None


def _conv(name: str, s: list[list[int]], cl: list[Any]) -> tuple[int, int] | None:
    if name in ("aten::convolution_backward", "aten::cudnn_convolution_backward"):
        x, w = s[1], s[2]  # s[0]: grad_output, read as a recorded input
        mask = cl[-1] if cl else None
        want = ff._value(mask) if isinstance(mask, str) else mask
        if not isinstance(want, list) or len(want) != 3:
            want = [True, True, True]
        cout = w[0]
        return 0, _numel(x) * bool(want[0]) + _numel(w) * bool(want[1]) + cout * bool(want[2])
    flops = ff.op_flops(name, json.dumps(s), json.dumps(cl))
    transposed = "transpose" in name or (
        name in ("aten::convolution", "aten::_convolution") and len(cl) > 6 and str(cl[6]) == "True"
    )
    if flops is None or transposed:
        return None
    w = s[1]
    return 0, flops // (2 * _numel(w)) * w[0]  # N * prod(out spatial) * Cout
