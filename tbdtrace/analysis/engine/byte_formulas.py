"""Bytes one framework op moves to and from device memory, from its recorded inputs: the
memory side of a roofline (FLOPs: :mod:`tbdtrace.analysis.engine.flop_formulas`).

The model is each operand read once and each result written once (the compulsory
traffic, as TraceLens's perf model counts GEMMs): no cache reuse or re-reads are added,
and no workspace. Element sizes come from each input's recorded dtype
(``ops.input_dtypes``; a 0-dim tensor, recorded with shape [], is one element; Scalar
arguments move nothing); GEMM, convolution, attention and softmax results take the
first tensor input's. So the figure is a lower bound on real traffic, and an op's
arithmetic intensity (FLOPs / bytes) an upper bound. An op with a shaped input of a dtype
:data:`DTYPE_BYTES` does not size is not counted. Per family (shapes as recorded in
``ops.input_shapes``; numel = product of dims):

* GEMM: mm [M,K]x[K,N]: M*K + K*N + M*N elements; addmm/_addmm_activation add the bias;
  bmm: B*(M*K + K*N + M*N), baddbmm/addbmm add their input; mv: M*K + K + M (addmv adds
  the vector added); matmul: numel(a) + numel(b) + numel(result, batch dims broadcast);
  linear: numel(x) + numel(W) + numel(bias) + prod(x[:-1]) * N.
* Convolution forward (not transposed): numel(input) + numel(weight) + numel(output)
  (+ bias), output = N * Cout * prod(output spatial) (flop_formulas' output size);
  transposed convolutions are not counted. convolution_backward: one pass per gradient
  ``output_mask`` asks for, as cuDNN runs them (dgrad and wgrad kernels, the bias a
  reduction), each reading grad_output: grad_input reads the weight and writes an
  input-sized tensor, grad_weight reads the input and writes a weight-sized one,
  grad_bias writes Cout.
* Attention forward: q, k, v read, the output [.., Lq, Dv] written (the logsumexp it
  also writes, B*H*Lq floats, not counted); backward: every recorded tensor input read
  (grad_out, q, k, v, out, logsumexp), dq, dk, dv written.
* Elementwise (:data:`ELEMENTWISE`): every tensor input read and the result (the
  broadcast of the inputs' shapes, in their promoted dtype; bool for comparisons)
  written. An in-place op (name ending ``_``) writes its first input; a recorded tensor
  beyond the functional form's arguments is the out= tensor, written and not read;
  copy/fill/zero do not read the tensor they overwrite.
* Normalization forward (batch/layer/group norm): the input, the affine parameters and
  batch norm's running statistics read; the output written, with the saved mean and
  inverse std (float; per channel for batch norm, per row for layer norm, per group for
  group norm) and, for batch norm in training, the updated running statistics.
  Backward: the recorded tensors read (layer norm's bias is not read), the gradients
  ``output_mask`` asks for written (cuDNN's batch norm backward: all three).
* Softmax and log-softmax: forward reads the input and writes the output; backward
  reads the output gradient and the output and writes the input gradient.
* Reductions (sum, mean, amax, amin, max, min, norm, var, std over dims): the input read;
  the (smaller) result not counted.

bench/roofline_vs_tracelens.py compares these counts with TraceLens's perf model op by
op on the public fixtures (bench/README.md).
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
    "long": 8,  # int64 as some builds name it (HTA's sampled_rank and control traces)
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
    """The broadcast of ``shapes``; ValueError when they do not broadcast."""
    out: list[int] = []
    for s in shapes:
        a, b = out[::-1], s[::-1]
        a, b = a + [1] * (len(b) - len(a)), b + [1] * (len(a) - len(b))
        if any(x != y and 1 not in (x, y) for x, y in zip(a, b, strict=True)):
            raise ValueError(f"shapes {shapes} do not broadcast")
        out = [max(x, y) for x, y in zip(a, b, strict=True)][::-1]
    return out


# Arguments of the functional (not in-place, not out=) form of each elementwise op: a
# recorded tensor beyond them is the out= tensor (``neg.out(self, out)``), written and
# not read. Ops not listed are taken as having no out= tensor.
_FUNCTIONAL_ARGS = {
    **dict.fromkeys(("relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "neg"), 1),
    **dict.fromkeys(("abs", "reciprocal", "erf", "sin", "cos", "silu", "zero"), 1),
    **dict.fromkeys(("gelu", "leaky_relu", "clamp_min", "clamp_max", "pow", "fill"), 2),
    **dict.fromkeys(("hardtanh", "clamp", "dropout", "native_dropout", "copy"), 3),
    **dict.fromkeys(("mul", "div", "maximum", "minimum", "eq", "ne", "lt", "gt", "le"), 2),
    **dict.fromkeys(("ge", "silu_backward", "sigmoid_backward", "tanh_backward"), 2),
    **dict.fromkeys(("add", "sub", "where", "threshold_backward", "gelu_backward"), 3),
    **dict.fromkeys(("lerp",), 3),
    **dict.fromkeys(("addcmul", "addcdiv", "leaky_relu_backward"), 4),
}
_COMPARISON = frozenset(f"aten::{n}" for n in ("eq", "ne", "lt", "gt", "le", "ge"))
# Ops whose first input is only written: copy_ and copy read the source, fill_ and fill
# the value, zero_ and zero nothing.
_OVERWRITE = frozenset(f"aten::{n}{x}" for n in ("copy", "fill", "zero") for x in ("", "_"))
_FLOATING = frozenset(("double", "float", "c10::BFloat16", "c10::Half")) | frozenset(
    k for k in DTYPE_BYTES if k.startswith("c10::Float8")
)

# Per tensor input: (argument index, shape, element size, floating). A 0-dim tensor has
# shape [] and one element; arguments without a tensor dtype (Scalar, lists, absent
# optionals) are not in it.
Tensors = list[tuple[int, list[int], int, bool]]


def op_bytes(name: str, shapes: str | None, dtypes: str | None, concrete: str | None) -> int | None:
    """Bytes the op moves under the model above, None when it is not counted or its
    recorded inputs do not give the count (no shapes, a shaped input of a dtype the
    table does not size, shapes that do not broadcast)."""
    fam = family(name)
    if fam is None or not shapes or not dtypes:
        return None
    try:
        raw = json.loads(shapes)
        types = json.loads(dtypes)
        s = [x if isinstance(x, list) and all(isinstance(v, int) for v in x) else None for x in raw]
        tensors: Tensors = []
        for i, sh in enumerate(s):
            t = types[i] if i < len(types) else None
            size = DTYPE_BYTES.get(t) if isinstance(t, str) else None
            if size is None:
                if sh:  # a tensor of a dtype the table does not size
                    return None
                continue
            if sh is not None:
                tensors.append((i, sh, size, t in _FLOATING))
        if not any(sh for _, sh, _, _ in tensors):
            return None
        cl = json.loads(concrete) if concrete else []
        plan = _plan(name, fam, [x or [] for x in s], tensors, cl)
        if plan is None:
            return None
        reads, writes = plan
        read = sum(math.prod(sh) * sz for i, sh, sz, _ in tensors if reads is None or i in reads)
        return read + writes
    except (IndexError, TypeError, ValueError, KeyError, ZeroDivisionError):
        return None


def _plan(
    name: str, fam: str, s: list[list[int]], tensors: Tensors, cl: list[Any]
) -> tuple[set[int] | None, int] | None:
    """(argument indices of the tensor inputs read, None for all; bytes written), None
    when not countable. Results of GEMM, convolution, attention and softmax take the
    element size of the first tensor input with dimensions."""
    first = next(x for x in tensors if x[1])
    if name in CONV_BACKWARD:
        return _conv_backward(name, tensors, cl)
    if fam in ("gemm", "conv", "attention"):
        n = _elements(name, fam, s, cl)
        return None if n is None else (None, n * first[2])
    if fam == "elementwise":
        return _elementwise(name, s, tensors)
    if fam == "normalization":
        return _normalization(name, tensors, cl)
    if fam == "softmax":
        return None, math.prod(first[1]) * first[2]
    return None, 0  # reduction: the (smaller) result not counted


def _elements(name: str, fam: str, s: list[list[int]], cl: list[Any]) -> int | None:
    """Elements a GEMM, convolution or attention op writes; None when not countable."""
    if fam == "gemm":
        if name in ("aten::mm", "aten::_scaled_mm", "aten::_int_mm"):
            return s[0][0] * s[1][1]
        if name in ("aten::addmm", "aten::_addmm_activation"):
            return s[1][0] * s[2][1]
        if name == "aten::bmm":
            return s[0][0] * s[0][1] * s[1][2]
        if name in ("aten::baddbmm",):
            return s[1][0] * s[1][1] * s[2][2]
        if name == "aten::addbmm":
            return s[1][1] * s[2][2]
        if name in ("aten::mv", "aten::addmv"):
            return s[0 if name == "aten::mv" else 1][0]
        if name == "aten::linear":
            return _numel(s[0][:-1]) * s[1][0]
        if name == "aten::matmul":
            a, b = s[0], s[1]
            if len(a) < 2 or len(b) < 2:
                return None
            return _numel(_broadcast([a[:-2], b[:-2]])) * a[-2] * b[-1]
        return None
    if fam == "conv":
        return _conv(name, s, cl)
    if name.endswith("_backward"):
        # recorded: grad_out, q, k, v, out, logsumexp, ...; written: dq, dk, dv
        return _numel(s[1]) + _numel(s[2]) + _numel(s[3])
    return _numel(s[0][:-1]) * s[2][-1]  # output [.., Lq, Dv]


def _result_size(name: str, ins: Tensors) -> int:
    """Element size of an elementwise result: bool for comparisons; otherwise the
    promotion of the inputs (where: of its two values), taken as the largest floating
    size when any input is floating, else the largest size; 0-dim tensors count only
    when no input has dimensions (as in PyTorch's type promotion)."""
    if name in _COMPARISON:
        return 1
    if name == "aten::where" and len(ins) > 1:
        ins = ins[1:]
    dims = [x for x in ins if x[1]] or ins
    floats = [sz for _, _, sz, fl in dims if fl]
    return max(floats or [sz for _, _, sz, _ in dims])


def _elementwise(name: str, s: list[list[int]], tensors: Tensors) -> tuple[set[int], int]:
    """Every tensor input read and the result written, except: an in-place op writes
    its first input; a recorded tensor beyond the functional form's arguments is the
    out= tensor, written and not read; copy/fill/zero do not read their first input."""
    base = name.removeprefix("aten::")
    ins = list(tensors)
    out = ins[0] if base.endswith("_") else None
    n_args = _FUNCTIONAL_ARGS.get(base)
    if out is None and n_args is not None and ins and ins[-1][0] >= n_args:
        out = ins.pop()  # the out= tensor
        if ins and ins[-1][0] >= n_args:
            raise ValueError(f"{name}: more tensors than its forms take")
    if name in _OVERWRITE:
        out = out or ins[0]
        ins = ins[1:]
    reads = {x[0] for x in ins}
    shape = _broadcast([x[1] for x in ins])
    if out is not None:
        return reads, math.prod(out[1]) * out[2]
    return reads, math.prod(shape) * _result_size(name, ins)


CONV_BACKWARD = frozenset(("aten::convolution_backward", "aten::cudnn_convolution_backward"))


def _conv_backward(name: str, tensors: Tensors, cl: list[Any]) -> tuple[set[int], int]:
    """Each gradient ``output_mask`` asks for is its own pass (cuDNN's dgrad and wgrad
    kernels, the bias a reduction), reading grad_output and what it needs: grad_input
    reads the weight and writes an input-sized tensor, grad_weight reads the input and
    writes a weight-sized one, grad_bias writes Cout. convolution_backward records
    (grad_output, input, weight, ..., output_mask at 10); the PyTorch < 2
    cudnn_convolution_backward (input, grad_output, weight, ..., output_mask of two at
    10), without a bias gradient. An unrecorded mask asks for all."""
    by = {i: (math.prod(sh), sz) for i, sh, sz, _ in tensors}
    old = name == "aten::cudnn_convolution_backward"
    (dy, dsz), (x, xsz), (w, wsz) = by[1 if old else 0], by[0 if old else 1], by[2]
    want = _flag(cl, 10)
    n = 2 if old else 3
    if not (isinstance(want, list) and len(want) == n):
        want = [True] * n
    cout = tensors[[i for i, *_ in tensors].index(2)][1][0]
    total = (dy * dsz + w * wsz + x * xsz) * bool(want[0])  # grad_input
    total += (dy * dsz + x * xsz + w * wsz) * bool(want[1])  # grad_weight
    if not old:
        total += (dy * dsz + cout * wsz) * bool(want[2])  # grad_bias
    return set(), total


def _flag(cl: list[Any], i: int) -> Any:
    """Concrete input ``i`` as a value ('True' -> True, '[True, False]' -> a list), None
    when not recorded."""
    v = cl[i] if i < len(cl) else None
    return ff._value(v) if isinstance(v, str) and v else None


def _normalization(name: str, tensors: Tensors, cl: list[Any]) -> tuple[set[int] | None, int]:
    """Forward: every tensor input read (the input, affine parameters, running
    statistics), the output written, plus the saved statistics (mean and inverse std,
    in float; double for double inputs) and, for batch norm in training, the updated
    running statistics. Backward: the recorded tensors read (layer norm's bias is not
    read), the gradients ``output_mask`` asks for written (all three where it is not
    recorded and the weight is)."""
    by = {i: (sh, sz) for i, sh, sz, _ in tensors}
    kind = NORMALIZATION.get(name)
    if kind is not None:
        x, xsz = by[0]
        stat = 8 if xsz == 8 else 4
        writes = math.prod(x) * xsz
        if kind == "batch" and _flag(cl, 5) is True:  # training (position 5 in all four)
            writes += 2 * x[1] * stat + sum(
                math.prod(by[i][0]) * by[i][1] for i in (3, 4) if i in by
            )
        elif kind == "layer":
            norm = _flag(cl, 1)
            k = math.prod(norm) if isinstance(norm, list) and norm else None
            k = k or (math.prod(by[2][0]) if 2 in by else None)
            writes += 2 * (math.prod(x) // k) * stat if k else 0
        elif kind == "group":
            g = _flag(cl, 6 if name == "aten::native_group_norm" else 1)
            writes += 2 * x[0] * g * stat if isinstance(g, int) and g > 0 else 0
        return None, writes
    if name == "aten::cudnn_batch_norm_backward":  # (input, grad_output, weight, ...)
        (x, xsz), w = by[0], by.get(2)
        return None, math.prod(x) * xsz + (2 * math.prod(w[0]) * w[1] if w else 0)
    x, xsz = by[1]  # (grad_output, input, ...)
    w_at, b_at, mask_at = {
        "aten::native_batch_norm_backward": (2, 2, 9),
        "aten::native_layer_norm_backward": (5, 6, 7),
        "aten::native_group_norm_backward": (4, 4, 9),
    }[name]
    mask = _flag(cl, mask_at)
    if not (isinstance(mask, list) and len(mask) == 3):
        mask = [True, w_at in by, b_at in by]
    per_channel = [x[1]] if "layer" not in name else x[-1:]
    w_shape, w_size = by.get(w_at, (per_channel, xsz))
    b_shape, b_size = by.get(b_at, (w_shape, w_size))
    writes = math.prod(x) * xsz * bool(mask[0])
    writes += math.prod(w_shape) * w_size * bool(mask[1]) + math.prod(b_shape) * b_size * bool(
        mask[2]
    )
    reads = {i for i in by if i != 6} if "layer" in name else None
    return reads, writes


def _conv(name: str, s: list[list[int]], cl: list[Any]) -> int | None:
    flops = ff.op_flops(name, json.dumps(s), json.dumps(cl))
    transposed = "transpose" in name or (
        name in ("aten::convolution", "aten::_convolution") and len(cl) > 6 and str(cl[6]) == "True"
    )
    if flops is None or transposed:
        return None
    w = s[1]
    return flops // (2 * _numel(w)) * w[0]  # N * prod(out spatial) * Cout
