"""FLOPs of one framework op from its recorded inputs, and the precision it ran in.

A multiply-add is 2 FLOPs; bias adds, scaling and softmax are not counted (the figure is
the matrix math that tensor/matrix units run). Inputs are what the profiler records per
op: ``Input Dims`` (``ops.input_shapes``), ``Input type`` (``ops.input_dtypes``) and
``Concrete Inputs`` (``ops.concrete_inputs``: stride, padding, flags as text).

Matrix multiply (``MATMUL``):
  mm [M,K]x[K,N], addmm/_addmm_activation (bias, [M,K], [K,N]), _scaled_mm and _int_mm
  [M,K]x[K,N]: 2*M*K*N; bmm/baddbmm/addbmm: 2*B*M*K*N; mv/addmv: 2*M*K;
  matmul: 2*prod(broadcast batch)*M*K*N (1-D operands as row/column vectors);
  linear [...,K] x [N,K]: 2*prod(leading dims)*K*N.
Convolution (``CONV``), with weight w and batch N:
  forward 2 * N * prod(output spatial) * numel(w) (numel(w) = Cout * Cin/groups * prod(k));
  output spatial = floor((in + 2*pad - dil*(k-1) - 1) / stride) + 1, from
  ``Concrete Inputs``; transposed convolution 2 * N * prod(input spatial) * numel(w).
  convolution_backward: the forward count once for the input gradient and once for the
  weight gradient, each only when ``output_mask`` asks for it (the grad_output's
  spatial dims are the output's).
Attention (``ATTENTION``), q [B,H,Lq,D], k [B,Hk,Lk,D], v [B,Hk,Lk,Dv] (or [B,L,H,D] for
  the _flash_attention_* ops): forward 2*B*H*Lq*Lk*(D + Dv) (QK^T and PV); backward twice
  that (dQ, dK, dV, dP; the recomputation of QK^T is not counted, as
  ``torch.utils.flop_counter`` does); causal halves both.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from typing import Any

Shapes = list[list[int]]

# Precision of a profiler dtype string (``Input type``).
DTYPE_PRECISION = {
    "double": "fp64",
    "float": "fp32",
    "c10::BFloat16": "bf16",
    "c10::Half": "fp16",
    "c10::Float8_e4m3fn": "fp8",
    "c10::Float8_e5m2": "fp8",
    "c10::Float8_e4m3fnuz": "fp8",
    "c10::Float8_e5m2fnuz": "fp8",
    "c10::Float8_e8m0fnu": "fp8",
    "signed char": "int8",
    "unsigned char": "int8",
    "c10::qint8": "int8",
    "c10::quint8": "int8",
}
PRECISIONS = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "int8")


def _mm(s: Shapes, a: int, b: int) -> int | None:
    if len(s[a]) == 2 and len(s[b]) == 2:
        return 2 * s[a][0] * s[a][1] * s[b][1]
    return None


def _bmm(s: Shapes, a: int, b: int) -> int | None:
    if len(s[a]) == 3 and len(s[b]) == 3:
        return 2 * s[a][0] * s[a][1] * s[a][2] * s[b][2]
    return None


def _mv(s: Shapes, a: int) -> int | None:
    return 2 * s[a][0] * s[a][1] if len(s[a]) == 2 else None


def _matmul(s: Shapes) -> int | None:
    a, b = s[0], s[1]
    if not a or not b:
        return None
    a2 = [1, *a] if len(a) == 1 else a
    b2 = [*b, 1] if len(b) == 1 else b
    batch = _broadcast(a2[:-2], b2[:-2])
    return 2 * math.prod(batch) * a2[-2] * a2[-1] * b2[-1]


def _broadcast(a: list[int], b: list[int]) -> list[int]:
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + a, [1] * (n - len(b)) + b
    return [max(x, y) if 1 in (x, y) else x for x, y in zip(a, b, strict=True)]


def _linear(s: Shapes) -> int | None:
    if s[0] and len(s[1]) == 2:
        return 2 * math.prod(s[0][:-1]) * s[0][-1] * s[1][0]
    return None


_MM: dict[str, Callable[[Shapes], int | None]] = {
    "aten::mm": lambda s: _mm(s, 0, 1),
    "aten::_scaled_mm": lambda s: _mm(s, 0, 1),
    "aten::_int_mm": lambda s: _mm(s, 0, 1),
    "aten::addmm": lambda s: _mm(s, 1, 2),
    "aten::_addmm_activation": lambda s: _mm(s, 1, 2),
    "aten::bmm": lambda s: _bmm(s, 0, 1),
    "aten::baddbmm": lambda s: _bmm(s, 1, 2),
    "aten::addbmm": lambda s: _bmm(s, 1, 2),
    "aten::mv": lambda s: _mv(s, 0),
    "aten::addmv": lambda s: _mv(s, 1),
    "aten::matmul": _matmul,
    "aten::linear": _linear,
}
MATMUL = tuple(_MM)


# Convolution argument positions: (input, weight, stride, padding, dilation, transposed,
# groups); transposed is a position, or True/False when the op fixes it.
_CONV_ARGS: dict[str, tuple[int, int, int, int, int, int | bool]] = {
    "aten::conv1d": (0, 1, 3, 4, 5, False),
    "aten::conv2d": (0, 1, 3, 4, 5, False),
    "aten::conv3d": (0, 1, 3, 4, 5, False),
    "aten::convolution": (0, 1, 3, 4, 5, 6),
    "aten::_convolution": (0, 1, 3, 4, 5, 6),
    "aten::conv_transpose1d": (0, 1, 3, 4, 7, True),
    "aten::conv_transpose2d": (0, 1, 3, 4, 7, True),
    "aten::conv_transpose3d": (0, 1, 3, 4, 7, True),
    "aten::mkldnn_convolution": (0, 1, 4, 3, 5, False),
    "aten::miopen_convolution": (0, 1, 4, 3, 5, False),
    "aten::cudnn_convolution": (0, 1, 3, 2, 4, False),
    "aten::cudnn_convolution_transpose": (0, 1, 4, 2, 5, True),
}
CONV = (*_CONV_ARGS, "aten::convolution_backward", "aten::cudnn_convolution_backward")

# Attention: (q position, layout, causal flag position, backward).
_ATTN: dict[str, tuple[int, str, int, bool]] = {
    "aten::scaled_dot_product_attention": (0, "bhld", 5, False),
    "aten::_scaled_dot_product_flash_attention": (0, "bhld", 4, False),
    "aten::_scaled_dot_product_flash_attention_for_cpu": (0, "bhld", 4, False),
    "aten::_scaled_dot_product_efficient_attention": (0, "bhld", 6, False),
    "aten::_scaled_dot_product_cudnn_attention": (0, "bhld", 6, False),
    "aten::_flash_attention_forward": (0, "blhd", 8, False),
    "aten::_scaled_dot_product_flash_attention_backward": (1, "bhld", 11, True),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": (1, "bhld", 7, True),
    "aten::_scaled_dot_product_efficient_attention_backward": (1, "bhld", 11, True),
    "aten::_scaled_dot_product_cudnn_attention_backward": (1, "bhld", 14, True),
    "aten::_flash_attention_backward": (1, "blhd", 11, True),
}
ATTENTION = tuple(_ATTN)

NAMES = frozenset((*MATMUL, *CONV, *ATTENTION))


def family(name: str) -> str | None:
    """``matmul``, ``conv`` or ``attention`` for an op this module counts, else None."""
    if name in _MM:
        return "matmul"
    if name in CONV:
        return "conv"
    if name in _ATTN:
        return "attention"
    return None


def _value(text: str) -> Any:
    """One ``Concrete Inputs`` entry: '[2, 2]' -> [2, 2], '1' -> 1, 'True' -> True."""
    t = text.strip()
    if t in ("True", "False"):
        return t == "True"
    try:
        return json.loads(t.replace("True", "true").replace("False", "false"))
    except ValueError:
        return t


def _ints(v: Any, n: int) -> list[int]:
    """A stride/padding/dilation value as n ints (a single value repeats)."""
    if isinstance(v, bool) or v is None or v == "":
        raise ValueError("missing")
    if isinstance(v, int):
        return [v] * n
    if isinstance(v, list) and all(isinstance(x, int) for x in v):
        return v * n if len(v) == 1 else v
    raise ValueError(f"not an int list: {v!r}")


def _conv(name: str, s: Shapes, c: list[Any]) -> int | None:
    if name == "aten::convolution_backward":
        return _conv_backward(s, c)
    if name == "aten::cudnn_convolution_backward":  # output_mask (position 10) if recorded
        mask = c[10] if len(c) > 10 else None
        one = old_cudnn_backward_one(json.dumps(s))
        if one is None or not isinstance(mask, list) or len(mask) < 2:
            return None
        return one * (int(mask[0] is True) + int(mask[1] is True))
    i_in, i_w, i_s, i_p, i_d, tr = _CONV_ARGS[name]
    x, w = s[i_in], s[i_w]
    if len(x) < 3 or len(w) != len(x):
        return None
    transposed = c[tr] if isinstance(tr, int) and not isinstance(tr, bool) else tr
    if transposed is True:
        return 2 * x[0] * math.prod(x[2:]) * math.prod(w)
    if transposed is not False:
        return None
    nd = len(x) - 2
    k = w[2:]
    pad = c[i_p]
    if pad == "same":
        out = x[2:]
    else:
        p = [0] * nd if pad == "valid" else _ints(pad, nd)
        st, dl = _ints(c[i_s], nd), _ints(c[i_d], nd)
        out = [(x[2 + j] + 2 * p[j] - dl[j] * (k[j] - 1) - 1) // st[j] + 1 for j in range(nd)]
    if min(out) <= 0:
        return None
    return 2 * x[0] * math.prod(out) * math.prod(w)


def _conv_backward(s: Shapes, c: list[Any]) -> int | None:
    go, x, w = s[0], s[1], s[2]
    if len(go) < 3 or len(x) != len(go) or len(w) != len(go):
        return None
    transposed, mask = c[7], c[10]
    if not isinstance(transposed, bool) or not isinstance(mask, list) or len(mask) < 2:
        return None
    spatial = x[2:] if transposed else go[2:]
    one = 2 * x[0] * math.prod(spatial) * math.prod(w)
    return one * (int(mask[0] is True) + int(mask[1] is True))


def _attention(name: str, s: Shapes, c: list[Any]) -> int | None:
    iq, layout, icausal, backward = _ATTN[name]
    q, k, v = s[iq], s[iq + 1], s[iq + 2]
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return None
    if layout == "bhld":
        b, h, lq, d = q
        lk, dv = k[2], v[3]
    else:
        b, lq, h, d = q
        lk, dv = k[1], v[3]
    f = 2 * b * h * lq * lk * (d + dv)
    if backward:
        f *= 2
    causal = c[icausal] if icausal < len(c) else None
    return f // 2 if causal is True else f


# Convolutions that are never transposed, and the PyTorch < 2 backward of cuDNN
# convolutions (input, grad_output, weight, ...; no output_mask in the trace): traces
# without ``Concrete Inputs`` are counted from the autograd node's and children's shapes
# (tbdtrace.analysis.engine.op_flops).
PLAIN_CONV = (
    "aten::conv1d",
    "aten::conv2d",
    "aten::conv3d",
    "aten::cudnn_convolution",
    "aten::mkldnn_convolution",
    "aten::miopen_convolution",
)
OLD_CUDNN_BACKWARD = "aten::cudnn_convolution_backward"


def conv_from_output(shapes: str | None, out: list[int]) -> int | None:
    """Forward FLOPs of a plain convolution from its input shapes and its output's
    shape (known from the backward's grad_output): 2 x N x prod(output spatial) x
    numel(weight)."""
    try:
        s = json.loads(shapes or "")
        x, w = s[0], s[1]
        if len(x) < 3 or len(w) != len(x) or len(out) != len(x) or out[0] != x[0]:
            return None
        return 2 * x[0] * math.prod(out[2:]) * math.prod(w)
    except (IndexError, TypeError, ValueError):
        return None


def old_cudnn_backward_one(shapes: str | None) -> int | None:
    """One gradient's FLOPs of ``aten::cudnn_convolution_backward`` (input, grad_output,
    weight, ...): the forward count 2 x N x prod(grad_output spatial) x numel(weight)."""
    try:
        s = json.loads(shapes or "")
        x, go, w = s[0], s[1], s[2]
        if len(go) < 3 or len(x) != len(go) or len(w) != len(go):
            return None
        return 2 * go[0] * math.prod(go[2:]) * math.prod(w)
    except (IndexError, TypeError, ValueError):
        return None


def op_flops(name: str, shapes: str | None, concrete: str | None) -> int | None:
    """FLOPs of one op from its ``Input Dims`` and ``Concrete Inputs`` text (JSON), None
    when the op is not one this module counts or its inputs do not give the count."""
    fam = family(name)
    if fam is None or not shapes:
        return None
    try:
        raw = json.loads(shapes)
        s: Shapes = [x if isinstance(x, list) and _flat(x) else [] for x in raw]
        if fam == "matmul":
            return _MM[name](s)
        cl = json.loads(concrete) if concrete else []
        cv = [_value(x) if isinstance(x, str) else x for x in cl]
        cv += [None] * (len(s) - len(cv))
        if fam == "conv":
            return _conv(name, s, cv)
        return _attention(name, s, cv)
    except (IndexError, TypeError, ValueError, KeyError):
        return None


def _flat(x: list[Any]) -> bool:
    return all(isinstance(v, int) and not isinstance(v, bool) for v in x)


def precision(dtypes: str | None) -> str | None:
    """Precision of an op from its first tensor input dtype (``Input type`` text), None
    when no dtype is recorded or it is not one of :data:`PRECISIONS` (complex, integer
    indices)."""
    if not dtypes:
        return None
    try:
        d = json.loads(dtypes)
    except ValueError:
        return None
    first = next(
        (x for x in d if isinstance(x, str) and x and x not in ("Scalar", "ScalarList")), None
    )
    return DTYPE_PRECISION.get(first) if first else None
