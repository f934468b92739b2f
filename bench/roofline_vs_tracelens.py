"""Bytes (and FLOPs) per op: the roofline's byte model (tbdtrace/analysis/engine/
byte_formulas.py) against TraceLens's perf model, on the public Kineto fixtures.

For every op call our byte model counts, TraceLens's bytes for the same op (same name,
same recorded shapes, dtypes and concrete inputs) are computed with the formulas below,
and per op family the script prints: ops compared, ops whose bytes are equal, the ratio
ours / TraceLens (median, min, max), the same for FLOPs where both count them, and the
largest differences with their cause.

TraceLens (AMD-AGI/TraceLens, MIT) is not installable here, so its formulas are
re-expressed below as small functions from a reading of its source, not copied:
``TraceLens/PerfModel/perf_model.py`` (GEMM, CONV, SDPA, UnaryElementwise,
BinaryElementwise at commit 1f1cc0ae3f46cde8ba902a82a280ce95a2f772fe; aten_conv_bwd,
Normalization and its subclasses, Reduce from the 2026 revision of the same file, whose
GEMM, CONV and SDPA formulas are unchanged) and the op-name mapping in
``TraceLens/PerfModel/torch_op_mapping.py`` (commit 021be668007431dbc62a026e97f87fffa026d7a1).
Each function says which class it stands for. Where TraceLens's code reads a value in a
way that fixes it on Kineto JSON (a bool() of the string "False", a length test that
is never true), the function computes what that code computes, and says so.

Usage: .venv/bin/python bench/roofline_vs_tracelens.py [FILE_OR_TRACE_DIR ...] [--top 3]
[--json OUT]. Default inputs: every ``*.json.gz`` under shared/fixtures/kineto
(``$TBDTRACE_FIXTURES`` to move it) and the committed H200 ResNet-50 capture.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import tbdtrace
from tbdtrace.analysis.engine import byte_formulas as bf
from tbdtrace.analysis.engine import flop_formulas as ff

ROOT = Path(__file__).resolve().parents[1]
# The real fixtures are provided beside the checkout (shared/fixtures/), never committed.
FIXTURES = Path(
    os.environ.get("TBDTRACE_FIXTURES")
    or Path(__file__).resolve().parents[2] / "shared" / "fixtures"
)
H200 = ROOT / "tests" / "data" / "gpu" / "h200_demo_resnet50_small"

Dims = list[Any]
Result = tuple[int | None, int | None]  # (bytes, flops)


# --- TraceLens's element sizes ---------------------------------------------------------


def tl_bpe(dtype: Any) -> int | None:
    """Bytes per element as TraceLens's ``name2bpe`` maps a profiler dtype
    (case-insensitive): double and long int 8; float and Scalar 4; half and bfloat16 2;
    the float8 types and unsigned char 1; anything else (int, bool, long) unknown."""
    if not isinstance(dtype, str):
        return None
    sizes = {"double": 8, "long int": 8, "float": 4, "scalar": 4, "c10::half": 2}
    sizes.update({"c10::bfloat16": 2, "unsigned char": 1, "fp8": 1})
    if dtype.lower().startswith("c10::float8_"):
        return 1
    return sizes.get(dtype.lower())


def _numel(shape: Any) -> int:
    """TraceLens's ``prod(shape)``: 1 for an empty shape (a Scalar or 0-dim tensor)."""
    return math.prod(shape) if shape else 1


def _ints(text: str) -> list[int]:
    """A concrete-input int list ('[2, 2]' or '(2, 2)') as TraceLens's str_to_tuple
    reads it (drop the brackets, split on commas)."""
    return [int(x) for x in text[1:-1].split(",")]


# --- GEMM (perf_model.py: GEMM.bytes_func / flops_func and the aten_* subclasses) ------


def tl_gemm(name: str, d: Dims, t: list[Any], c: list[Any] | None) -> Result:
    """GEMM: M*K + K*N + M*N elements, plus N for a bias (TraceLens assumes a 1 x N bias
    whatever the recorded bias shape), all at the element size of the first matrix
    (output and bias included); bmm/baddbmm: B times that. FLOPs 2*M*N*K (+ M*N for a
    bias), times B. Classes aten_mm, aten_addmm, aten_bmm, aten_baddbmm."""
    has_bias = name in ("aten::addmm", "aten::baddbmm")
    a, b = (d[1], d[2]) if has_bias else (d[0], d[1])
    bpe = tl_bpe(t[1] if has_bias else t[0])
    if name in ("aten::bmm", "aten::baddbmm"):
        batch, m, k = a
        n = b[2]
    else:
        batch, (m, k), n = 1, a, b[1]
    flops = batch * (2 * m * n * k + (m * n if has_bias else 0))
    if bpe is None:
        return None, flops
    return batch * (m * k + k * n + m * n + (n if has_bias else 0)) * bpe, flops


# --- Convolution (perf_model.py: CONV, aten_conv, aten_conv_bwd) ------------------------


def _conv_out(x: Dims, w: Dims, stride: list[int], pad: list[int], dil: list[int]) -> list[int]:
    """CONV.get_output_shape for a convolution that is not transposed."""
    sp = [
        int((x[2 + i] + 2 * pad[i] - dil[i] * (w[2 + i] - 1) - 1) / stride[i] + 1)
        for i in range(len(x) - 2)
    ]
    return [x[0], w[0], *sp]


def _conv_params(c: list[Any], first: int, nd: int) -> tuple[list[int], ...]:
    """stride, padding, dilation from concrete inputs first..first+2 (a 1-list repeats)."""
    out = []
    for i, default in zip(range(first, first + 3), (1, 0, 1), strict=True):
        v = _ints(c[i]) if c[i] != "" else [default] * nd
        out.append(v * nd if len(v) == 1 else v)
    return tuple(out)


def tl_conv(name: str, d: Dims, t: list[Any], c: list[Any] | None) -> Result:
    """aten_conv (aten::convolution): input + weight + output (+ Cout for a bias) at the
    input's element size. The bias counts only when the event has exactly three inputs,
    which aten::convolution's nine never are, so TraceLens never counts the bias here.
    FLOPs 2 * numel(output) * numel(weight[1:]).

    aten_conv_bwd (aten::convolution_backward): CONV.bytes_bwd_func, two passes, each
    with all three tensors: grad_input = grad_output + weight + input, grad_weight =
    grad_output + input + weight; ``output_mask`` is not read, so both gradients always
    count (and grad_output twice); the bias gradient counts when input 3 has a shape,
    which bias_sizes (an int list) never has. FLOPs: twice the forward's."""
    bwd = name == "aten::convolution_backward"
    if c is None or t[int(bwd)] != t[int(bwd) + 1]:
        return None, None  # TraceLens raises on missing params or mixed dtypes
    x, w = (d[1], d[2]) if bwd else (d[0], d[1])
    first = 4 if bwd else 3
    if ast.literal_eval(c[first + 3]) is not False:
        return None, None  # transposed: not compared
    out = _conv_out(x, w, *_conv_params(c, first, len(x) - 2))
    bpe = tl_bpe(t[1] if bwd else t[0])
    one = _numel(x) + _numel(w) + _numel(out)
    bias = (not bwd and len(d) == 3) or (bwd and len(d) > 3 and bool(d[3]))
    flops = 2 * _numel(out) * _numel(w[1:])
    if bwd:
        elems = 2 * one + (_numel(out) + out[1] if bias else 0)
        flops = 2 * flops + (_numel(out) if bias else 0)
    else:
        elems = one + (out[1] if bias else 0)
        flops += _numel(out) if bias else 0
    return (elems * bpe if bpe else None), flops


# --- Attention (perf_model.py: SDPA.bytes_func, aten__scaled_dot_product_*_attention) --

_SDPA_CAUSAL = {
    "aten::_scaled_dot_product_flash_attention": 4,
    "aten::_scaled_dot_product_efficient_attention": 6,
    "aten::_scaled_dot_product_cudnn_attention": 6,
}


def tl_sdpa(name: str, d: Dims, t: list[Any], c: list[Any] | None) -> Result:
    """SDPA forward: q, k, v read and the output [B, H_Q, N_Q, d_v] written, at 2 bytes
    an element whatever the dtype (SDPA.bytes defaults to 2 and the analyzer calls it
    without a size); the logsumexp output not counted. FLOPs B*H_Q*2*N_Q*N_KV*(d_qk +
    d_v), halved when causal. (TraceLens maps the aten SDPA backward ops to a category
    only, without bytes or FLOPs.)"""
    (b, hq, nq, dqk), (_, hkv, nkv, _), (_, _, _, dv) = d[0], d[1], d[2]
    causal = c is not None and str(c[_SDPA_CAUSAL[name]]).lower() == "true"
    flops = b * hq * 2 * nq * nkv * (dqk + dv) // (2 if causal else 1)
    elems = b * nq * hq * dqk + b * nkv * hkv * dqk + b * nkv * hkv * dv + b * nq * hq * dv
    return elems * 2, flops


# --- Elementwise (perf_model.py: UnaryElementwise, BinaryElementwise) -------------------

UNARY = ["copy", "copy_", "clamp_min", "clamp_min_", "clamp_max", "clamp_max_", "sigmoid"]
UNARY += ["rsqrt", "silu", "neg", "pow"]
BINARY = ["div", "div_", "mul", "mul_", "add", "add_", "sigmoid_backward", "threshold_backward"]


def tl_unary(name: str, d: Dims, t: list[Any], c: list[Any] | None) -> Result:
    """aten_unary_elementwise: numel(input 0) read at its size and written at the size
    of input 1 when input 1 has a shape (taken as the output), else at the input's. So
    copy_(self, src) is numel(self) * (size(self) + size(src)). FLOPs numel."""
    n = _numel(d[0])
    b_in = tl_bpe(t[0])
    b_out = tl_bpe(t[1]) if len(d) > 1 and d[1] else b_in
    return (n * (b_in + b_out) if b_in and b_out else None), n


def _broadcast(s1: list[int], s2: list[int]) -> list[int] | None:
    n = max(len(s1), len(s2))
    a, b = [1] * (n - len(s1)) + s1, [1] * (n - len(s2)) + s2
    if any(x != y and 1 not in (x, y) for x, y in zip(a, b, strict=True)):
        return None  # TraceLens raises: not broadcastable
    return [max(x, y) for x, y in zip(a, b, strict=True)]


def tl_binary(name: str, d: Dims, t: list[Any], c: list[Any] | None) -> Result:
    """aten_binary_elementwise: input 0 and input 1 read (a Scalar or 0-dim input as one
    element; a Scalar is 4 bytes), the broadcast result written at the size of input 2
    when it has a shape (an out= tensor), else the larger input size when both inputs
    are tensors, else input 0's. In-place ops are not told apart (add_ counts like add).
    FLOPs numel(result)."""
    s1, s2 = list(d[0] or []), list(d[1] or [])
    out = _broadcast(s1, s2)
    b1, b2 = tl_bpe(t[0]), tl_bpe(t[1])
    if len(d) > 2 and d[2]:
        b3 = tl_bpe(t[2])
    elif b1 and b2:
        b3 = max(b1, b2) if s1 and s2 else b1
    else:
        b3 = None
    if out is None:
        return None, None
    if not (b1 and b2 and b3):
        return None, _numel(out)
    return _numel(s1) * b1 + _numel(s2) * b2 + _numel(out) * b3, _numel(out)


# --- Reductions (perf_model.py, 2026 revision: Reduce, aten_reduce) --------------------

REDUCE = ("sum", "mean", "max", "min", "norm", "std", "var", "amin", "amax")


def tl_reduce(name: str, d: Dims, t: list[Any], c: list[Any] | None) -> Result:
    """aten_reduce: numel(input) read plus numel(output) written, both at the input's
    size (no output dtype in Kineto events). The output's dims come from concrete inputs
    that are not strings; Kineto's are all strings, so TraceLens's output is 1 element.
    FLOPs numel(input)."""
    if not d or not d[0]:
        return None, None
    bpe = tl_bpe(t[0])
    n = _numel(d[0])
    return ((n + 1) * bpe if bpe else None), n


# --- Normalization (perf_model.py, 2026 revision: Normalization and subclasses) -------


def _norm_fwd_bytes(n: int, ch: float, affine: bool, bias: bool, training: bool, bpe: int) -> float:
    """Normalization.bytes_func: activations read and written once; per channel the mean
    and variance (2), weight (affine) and bias (affine and has_bias) read, and 2 more
    written when training (the running statistics)."""
    tensors = 2 + (1 if affine else 0) + (1 if affine and bias else 0) + (2 if training else 0)
    return 2 * n * bpe + tensors * ch * bpe


def _norm_bwd_bytes(
    n: int, ch: float, affine: bool, bias: bool, training: bool, mask0: bool, bpe: int
) -> float:
    """Normalization.bytes_func_bwd: grad_out read; the input read and grad_input written
    (2 x numel) when mask[0] and training, else numel once; invstd (C) when training;
    the weight (C) when affine, and grad_weight (+ grad_bias) written when affine and
    training."""
    out: float = n * bpe + n * bpe * (2 if mask0 and training else 1)
    out += ch * bpe if training else 0
    if affine:
        out += ch * bpe + (ch * bpe * (2 if bias else 1) if training else 0)
    return out


def _mask(c: list[Any] | None, i: int, default: list[bool]) -> list[bool]:
    return [bool(x) for x in ast.literal_eval(c[i])] if c and c[i] else default


def tl_norm(name: str, d: Dims, t: list[Any], c: list[Any] | None) -> Result:
    """BatchNorm / LayerNorm / GroupNorm forward and backward. On Kineto events TraceLens
    reads ``Input Dims[i] is not None`` (always true: an absent tensor is []) for affine
    and bias, and ``bool(Concrete Inputs[k])`` (true for the string "False") for batch
    norm's training flag, so forward batch norm counts as affine and training; layer and
    group norm always train. cudnn_batch_norm_backward is taken as not training (its
    class asserts so): grad_out + input + weight only. Channels: batch and group norm
    dim 1, layer norm the normalized shape's numel (concrete input 1 or 2; from the
    weight's shape where the trace has no concrete inputs, which TraceLens needs);
    group norm backward C / groups. FLOPs not compared (ours has none)."""
    base = name.removeprefix("aten::").removesuffix("_backward")
    bwd = name.endswith("_backward")
    if not bwd:
        x, bpe = d[0], tl_bpe(t[0])
        if not x or not bpe:
            return None, None
        if "layer" in base:
            ch = math.prod(ast.literal_eval(c[1])) if c and c[1] else _numel(d[2])
        else:
            ch = x[1]
        return int(_norm_fwd_bytes(_numel(x), ch, True, True, True, bpe)), None
    if base == "cudnn_batch_norm":  # (input, grad_output, weight, ...)
        x, bpe = d[0], tl_bpe(t[0])
        if not x or not bpe:
            return None, None
        return int(_norm_bwd_bytes(_numel(x), x[1], True, True, False, True, bpe)), None
    x, bpe = d[1], tl_bpe(t[1])
    if not x or not bpe:
        return None, None
    if base == "native_batch_norm":
        return int(_norm_bwd_bytes(_numel(x), x[1], True, True, True, True, bpe)), None
    if base == "native_layer_norm":
        ch = math.prod(ast.literal_eval(c[2])) if c and c[2] else _numel(d[5])
        m = _mask(c, 7, [True, bool(d[5]), bool(d[6])])
        return int(_norm_bwd_bytes(_numel(x), ch, m[1], m[2], True, m[0], bpe)), None
    # native_group_norm_backward(grad_out, input, mean, rstd, weight, N, C, HxW, group, mask)
    if not c or not c[8]:
        return None, None
    m = _mask(c, 9, [True, True, True])
    ch = x[1] / int(c[8])
    return int(_norm_bwd_bytes(_numel(x), ch, True, True, True, m[0], bpe)), None


# --- Which TraceLens class models which op (torch_op_mapping.py) -----------------------

TL: dict[str, Callable[[str, Dims, list[Any], list[Any] | None], Result]] = {
    **{f"aten::{n}": tl_gemm for n in ("mm", "addmm", "bmm", "baddbmm")},
    "aten::convolution": tl_conv,
    "aten::convolution_backward": tl_conv,
    **dict.fromkeys(_SDPA_CAUSAL, tl_sdpa),
    **{f"aten::{n}": tl_unary for n in UNARY},
    **{f"aten::{n}": tl_binary for n in BINARY},
    **{f"aten::{n}": tl_reduce for n in REDUCE},
    **{
        f"aten::{p}{n}_norm{s}": tl_norm
        for n in ("batch", "layer", "group")
        for p in ("", "native_")
        for s in ("", "_backward")
        if not (p == "" and s)
    },
    "aten::cudnn_batch_norm": tl_norm,
    "aten::cudnn_batch_norm_backward": tl_norm,
}


def tracelens(name: str, shapes: str, dtypes: str, concrete: str | None) -> Result:
    """TraceLens's (bytes, FLOPs) of one op, (None, None) where it has no model or its
    model fails on these inputs (as TraceLens leaves the row empty)."""
    fn = TL.get(name)
    if fn is None:
        return None, None
    try:
        c = json.loads(concrete) if concrete else None
        return fn(name, json.loads(shapes), json.loads(dtypes), c)
    except (IndexError, KeyError, TypeError, ValueError, SyntaxError, ZeroDivisionError):
        return None, None


# --- Why the counts differ -------------------------------------------------------------


def reason(name: str, d: Dims, t: list[Any], c: list[Any] | None, ours: int, theirs: int) -> str:
    """The cause of a difference, from what differs between the two models for this op."""
    fam = bf.family(name)
    if name in ("aten::addmm", "aten::baddbmm") and _numel(d[0]) != d[2][-1]:
        return "bias/input shape: we count the recorded bias (numel), TraceLens 1 x N"
    if fam == "gemm":
        return "mixed dtypes: we size each operand by its own dtype, TraceLens by the first"
    if name == "aten::convolution_backward":
        mask = ast.literal_eval(c[10]) if c else [True, True, True]
        if not mask[0] or not mask[1]:
            return (
                f"output_mask {mask}: we count the gradients asked for; TraceLens counts "
                "grad_input and grad_weight whatever the mask"
            )
        return "grad_bias: we count its pass (grad_output read, Cout written); TraceLens never"
    if name == "aten::convolution":
        return "bias: we read the recorded bias; TraceLens's bias test never fires here"
    if fam == "attention":
        return "element size: TraceLens uses 2 bytes whatever the dtype"
    if fam == "reduction":
        return "TraceLens adds the output as 1 element (dims in string concrete inputs unread)"
    if name == "aten::cudnn_batch_norm_backward":
        return (
            "TraceLens takes it as inference (grad_out + input + weight, no gradient "
            "written); we also write dx, dw, db"
        )
    if name.endswith("norm_backward"):
        return (
            "TraceLens: 3 x numel + C (invstd) + weight + grad_weight/grad_bias; we read "
            "the saved mean and rstd (one per row) and write what output_mask asks"
        )
    if fam == "normalization":
        return (
            "TraceLens: 2 x numel + 6 x C (mean, variance, weight, bias, 2 running-stat "
            "writes); we read weight and bias (and running stats), write y, the saved "
            "statistics (float, per row/channel) and, in training, the running stats"
        )
    if any(x == "Scalar" for x in t[:2]):
        return "Scalar operand: TraceLens reads it as one 4-byte element; we count none"
    return "other"


# --- Driver ---------------------------------------------------------------------------


def inputs(paths: list[str]) -> list[Path]:
    if paths:
        return [Path(p) for p in paths]
    found = sorted((FIXTURES / "kineto").rglob("*.json.gz"))
    if not found:
        print(
            f"roofline_vs_tracelens: no Kineto fixtures under {FIXTURES / 'kineto'}; "
            "set TBDTRACE_FIXTURES or pass files",
            file=sys.stderr,
        )
    return found + ([H200] if H200.is_dir() else [])


def compare(path: Path) -> list[dict[str, Any]]:
    """One row per op call our byte model counts in ``path`` (whole trace) that TraceLens
    models by name."""
    tr = tbdtrace.analyze(path, window="all")
    cols = ["name", "input_shapes", "input_dtypes", "concrete_inputs"]
    ops = tr.ctx.table("ops", cols).to_pydict()
    rows = []
    cache: dict[tuple[Any, ...], dict[str, Any] | None] = {}
    for key in zip(*(ops[c] for c in cols), strict=True):
        name, sh, dt, cv = key
        if name not in TL or not sh or not dt:
            continue
        if key not in cache:
            ours = bf.op_bytes(name, sh, dt, cv)
            theirs, tl_flops = tracelens(name, sh, dt, cv)
            cache[key] = None
            if ours is not None:
                d, t = json.loads(sh), json.loads(dt)
                c = json.loads(cv) if cv else None
                cache[key] = {
                    "file": path.name,
                    "op": name,
                    "family": bf.family(name),
                    "shapes": sh,
                    "dtypes": dt,
                    "ours_bytes": ours,
                    "tracelens_bytes": theirs,
                    "ours_flops": ff.op_flops(name, sh, cv),
                    "tracelens_flops": tl_flops,
                    "reason": reason(name, d, t, c, ours, theirs)
                    if theirs and theirs != ours
                    else "",
                }
        row = cache[key]
        if row is not None:
            rows.append(row)
    return rows


def _ratios(rows: list[dict[str, Any]], what: str) -> list[float]:
    return [
        r[f"ours_{what}"] / r[f"tracelens_{what}"]
        for r in rows
        if r[f"ours_{what}"] is not None and r[f"tracelens_{what}"]
    ]


def _stat(rs: list[float]) -> str:
    if not rs:
        return "-"
    return f"{statistics.median(rs):.3f} ({min(rs):.3f}-{max(rs):.3f})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", help="Kineto files or trace directories")
    ap.add_argument("--top", type=int, default=3, help="largest differences shown per family")
    ap.add_argument("--json", type=Path, help="write every compared op call here")
    args = ap.parse_args(argv)
    rows: list[dict[str, Any]] = []
    for p in inputs(args.paths):
        if not p.exists():
            print(f"roofline_vs_tracelens: {p}: no such file or directory", file=sys.stderr)
            return 1
        try:
            got = compare(p)
        except (tbdtrace.TraceError, OSError, ValueError) as e:
            print(f"roofline_vs_tracelens: {p}: {e}", file=sys.stderr)
            return 1
        both = [r for r in got if r["tracelens_bytes"] is not None]
        print(f"{p.name}: {len(got)} op calls both model by name, {len(both)} with both counts")
        rows += got
    if not rows:
        return 1
    print()
    print(
        "| family | op calls | TraceLens no count | compared | bytes equal | bytes ours/TraceLens"
        " median (min-max) | FLOPs compared | FLOPs equal | FLOPs ours/TraceLens |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    fams = sorted({r["family"] for r in rows})
    for fam in fams:
        rs = [r for r in rows if r["family"] == fam]
        cmp = [r for r in rs if r["tracelens_bytes"]]
        eq = sum(r["ours_bytes"] == r["tracelens_bytes"] for r in cmp)
        fl = [r for r in rs if r["ours_flops"] is not None and r["tracelens_flops"]]
        feq = sum(r["ours_flops"] == r["tracelens_flops"] for r in fl)
        print(
            f"| {fam} | {len(rs)} | {len(rs) - len(cmp)} | {len(cmp)} | {eq} | "
            f"{_stat(_ratios(cmp, 'bytes'))} | {len(fl)} | {feq} | {_stat(_ratios(fl, 'flops'))} |"
        )
    print()
    print("Per op (calls compared, bytes equal, ratio median (min-max)); largest differences:")
    for fam in fams:
        print(f"\n{fam}:")
        rs = [r for r in rows if r["family"] == fam and r["tracelens_bytes"]]
        for op in sorted({r["op"] for r in rs}):
            o = [r for r in rs if r["op"] == op]
            eq = sum(r["ours_bytes"] == r["tracelens_bytes"] for r in o)
            print(f"  {op}: {len(o)} compared, {eq} equal, ratio {_stat(_ratios(o, 'bytes'))}")
        seen: set[tuple[str, str, str]] = set()
        diff = sorted(
            (r for r in rs if r["ours_bytes"] != r["tracelens_bytes"]),
            key=lambda r: -abs(math.log(r["ours_bytes"] / r["tracelens_bytes"])),
        )
        shown = 0
        for r in diff:
            k = (r["op"], r["shapes"], r["dtypes"])
            if k in seen or shown >= args.top:
                continue
            seen.add(k)
            shown += 1
            print(
                f"    x{r['ours_bytes'] / r['tracelens_bytes']:.3f} {r['op']} {r['shapes']} "
                f"{r['dtypes']} ({r['file']}): ours {r['ours_bytes']:,} B, TraceLens "
                f"{r['tracelens_bytes']:,} B; {r['reason']}"
            )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
