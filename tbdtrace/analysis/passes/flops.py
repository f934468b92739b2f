"""FLOPs and efficiency per rank and precision (docs/METRICS.md, "flops").

Window: the rows of the trace it is given, as every section (the report passes its
window's view; docs/METRICS.md, "Which rows a window holds"), and for rates the length of
that window (:func:`measured_window`: the view's bounds for the rank, else the span of its
kernels). Kernels are classified as the categories pass classifies them.
FLOPs, from the first source that has them (each row names its source):

1. hardware counters: ``kernels.flops`` of the rank's kernels;
   precision from the counted op that launched the kernel;
2. per op, for the matrix-math ops of :mod:`tbdtrace.analysis.engine.flop_formulas` (matmul family,
   convolution forward and backward, scaled-dot-product/flash attention forward and
   backward): the framework's own count (``ops.flops``, Kineto ``with_flops`` or the
   capture's dispatch-level counter), else the analytic formula from shapes and
   ``Concrete Inputs``. Only the outermost such op on a thread counts (``aten::linear``,
   not also the ``aten::addmm`` inside it); ops starting in the window.

Precision comes from the op's first tensor input dtype; fp32 work counts as tf32 where
the trace's meta says PyTorch allowed TF32 for that kind of op
(:func:`tbdtrace.analysis.engine.op_flops.tf32_allowed`) or where a kernel the op launched is a
TF32 kernel by name (:func:`op_precisions`).
Coverage: of the kernel time in the window that could carry counted FLOPs (a kernel of
a category with a FLOP formula: gemm, conv, or attention, not a softmax on its own; or a
kernel launched from inside an op with a formula), the share launched from inside a
counted op (joined by time on the launching thread: the kernel's runtime call, or a CPU
kernel's own thread and start) or, for hardware counts, the share with ``kernels.flops``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from tbdtrace.analysis.engine import categories, intervals, outputs, peaks, shared_arrays
from tbdtrace.analysis.engine import flop_formulas as ff
from tbdtrace.analysis.engine.attribution import on_threads, one_launch_value, thread_groups
from tbdtrace.analysis.engine.cache import Entry
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.analysis.engine.grouping import decode_device_key, one_rank_key, row_rank_keys
from tbdtrace.analysis.engine.intervals import is_sorted
from tbdtrace.analysis.engine.op_flops import I8, op_counts, tf32_allowed
from tbdtrace.analysis.engine.peaks import DeviceProps, device_props
from tbdtrace.analysis.passes import steps as steps_pass
from tbdtrace.arrow_ints import int_column

I64 = npt.NDArray[np.int64]
LO_NS, HI_NS = int(np.iinfo(np.int64).min), int(np.iinfo(np.int64).max)  # window.LO/HI
COVERAGE_THRESHOLD = 0.8  # below this share of FLOP-bearing kernel time, figures are partial
FLOP_CATEGORIES = ("gemm", "conv", "softmax_attention")
# A softmax kernel on its own (cunn_SoftMaxForward, softmax_warp_forward, an inductor
# fused softmax) shares the softmax_attention category with attention kernels but has no
# FLOP formula: it is not in the coverage denominator. Attention kernels name themselves.
_SOFTMAX = re.compile(r"soft_?max", re.IGNORECASE)
_ATTENTION = re.compile(
    r"attn|attention|fmha|flash|\bmha|mha_|sdpa|scaled_dot_product|PrefillWith|DecodeWith",
    re.IGNORECASE,
)
SOURCES = ("hardware", "framework", "analytic")
SOURCE_TEXT = {
    "hardware": "hardware counters (kernels.flops)",
    "framework": "framework counts (ops.flops)",
    "analytic": "analytic shape formulas (ops.input_shapes, ops.concrete_inputs)",
}


@dataclass(frozen=True)
class FlopsConfig:
    steps: steps_pass.StepsConfig = field(default_factory=steps_pass.StepsConfig)
    # Model FLOPs per training sample (forward + backward), for MFU; None: from meta or none.
    model_flops_per_sample: float | None = None
    # Coverage under which a figure is marked partial.
    coverage_threshold: float = COVERAGE_THRESHOLD


SCHEMA = outputs.FLOPS.arrow_schema()  # declared in analysis/engine/outputs.py


@dataclass(frozen=True)
class RankSpan:
    """The time a rank's FLOP rates divide by: sorted disjoint [start, end) intervals (the
    report's window for the rank, or the span of its kernels) and where they come from.
    Not a :class:`Window` of ``engine/window.py`` (one interval per rank, selecting rows):
    a span measures time."""

    starts: I64
    ends: I64
    source: str
    bounded: bool = True  # False: the span of the rank's kernels (a whole trace)

    @property
    def length_ns(self) -> int:
        return int((self.ends - self.starts).sum())


def measured_window(
    ctx: Source, rank: int, keys: list[int], config: steps_pass.StepsConfig | None = None
) -> RankSpan:
    """The window of ``rank`` (-1 for traces without ranks) whose length the FLOP rates
    divide by: on a windowed context (``AnalysisContext.windowed``), that window's bounds
    for the rank; else (a whole trace, or a rank the window leaves unbounded) the span of
    the kernels of its devices ``keys``. The one place the FLOP figures take their window
    from; their rows are every kernel of the context, as in every section."""
    ctx = of(ctx)
    win = ctx.window
    if win is not None:
        rank_keys, rank_lo, rank_hi = win.bounds()
        i = np.flatnonzero(rank_keys == rank)
        b = (int(rank_lo[i[0]]), int(rank_hi[i[0]])) if i.size else win.default
        if b[0] != LO_NS and b[1] != HI_NS:
            steps = next(
                (rw.step_count for rw in win.ranks if (-1 if rw.rank is None else rw.rank) == rank),
                0,
            )
            return RankSpan(np.array([b[0]]), np.array([b[1]]), f"{win.label()} ({steps} steps)")
    bounds = [
        shared_arrays.time_bounds(ctx, "kernels", d)
        for d in keys
        if shared_arrays.rows_of(ctx, "kernels", d) is not None
    ]
    first = min(b[0] for b in bounds)
    last = max(b[1] for b in bounds)
    return RankSpan(np.array([first]), np.array([last]), "whole trace", bounded=False)


def in_window(t: I64, w: RankSpan) -> npt.NDArray[np.bool_]:
    """Mask of times inside the window's intervals (ends included)."""
    if not w.starts.size:
        return np.zeros(t.size, dtype=bool)
    if w.starts.size == 1:  # one interval (the common case): two comparisons
        inside = t >= w.starts[0]
        inside &= t <= w.ends[0]
        return inside
    i = np.searchsorted(w.starts, t, side="right") - 1
    return (i >= 0) & (t <= w.ends[np.clip(i, 0, None)])


def run(ctx: Source, config: FlopsConfig | None = None) -> pa.Table:
    """One row per (rank, precision with FLOPs); a rank without any FLOP source gets one
    row with precision null and the reason in ``flops_source``.

    Columns: rank; devices (names); precision; window_ns, window_source; busy_ns (device
    compute-busy time in the window, ns); flops and its split hardware_/framework_/
    analytic_flops (count); flops_source (sources used); achieved_flops_per_s_wall/_busy
    (FLOP/s); peak_flops_per_s (FLOP/s, summed over the rank's devices), peak_source;
    efficiency_wall/_busy (0..1); flop_kernel_ns (kernel time of FLOP-bearing categories
    in the window), counted_kernel_ns, coverage (their ratio; per rank); samples (measured
    steps' samples), model_flops_per_sample, model_flops_source, mfu (model FLOP/s over
    the window / this precision's peak).
    """
    ctx = of(ctx)
    cfg = config or FlopsConfig()
    by_rank = shared_arrays.devices_by_rank(ctx)
    if not by_rank:
        return SCHEMA.empty_table()
    props = device_props(ctx)
    rows: list[dict[str, Any]] = []
    for r, rkeys in sorted(by_rank.items()):
        rows.extend(_rank_rows(ctx, cfg, r, rkeys, props))
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def _rank_rows(
    ctx: AnalysisContext,
    cfg: FlopsConfig,
    r: int,
    rkeys: list[int],
    props: DeviceProps,
) -> list[dict[str, Any]]:
    w = measured_window(ctx, r, rkeys, cfg.steps)
    busy = compute_busy_ns(ctx, rkeys)
    kin = kernels_in(ctx, rkeys, w)
    per, bearing, counted = _hardware(ctx, kin)
    if per is None:
        per, bearing, counted = _ops(ctx, r, w, kin)
    names = _device_names(props, rkeys)
    base: dict[str, Any] = {
        "rank": None if r < 0 else r,
        "devices": names,
        "window_ns": w.length_ns,
        "window_source": w.source,
        "busy_ns": busy,
        "flop_kernel_ns": bearing,
        "counted_kernel_ns": counted,
        "coverage": counted / bearing if bearing else None,
    }
    samples = _samples(ctx, r, cfg.steps)
    mfps, msrc = _model_flops(ctx, cfg)
    if not per:
        why = (
            "no FLOP source: no kernels.flops, and no matmul, convolution or attention op "
            "with a framework count or with shapes the formulas read"
        )
        return [{**base, "precision": None, "flops_source": why, "peak_source": "-"}]
    out = []
    for p, by_src in sorted(per.items(), key=lambda kv: -sum(kv[1].values())):
        total = sum(by_src.values())
        peak, psrc = device_peak(ctx, props, rkeys, p)
        wall = total * 1e9 / w.length_ns if w.length_ns else None
        bz = total * 1e9 / busy if busy else None
        model_rate = (
            mfps * samples * 1e9 / w.length_ns if mfps and samples and w.length_ns else None
        )
        out.append(
            {
                **base,
                "precision": p,
                "flops": total,
                **{f"{s}_flops": by_src.get(s) for s in SOURCES},
                "flops_source": "; ".join(SOURCE_TEXT[s] for s in SOURCES if s in by_src)
                + (_TF32_SOURCE[any(tf32_allowed(ctx.meta).values())] if p == "tf32" else ""),
                "achieved_flops_per_s_wall": wall,
                "achieved_flops_per_s_busy": bz,
                "peak_flops_per_s": peak,
                "peak_source": psrc,
                "efficiency_wall": wall / peak if wall is not None and peak else None,
                "efficiency_busy": bz / peak if bz is not None and peak else None,
                "samples": samples,
                "model_flops_per_sample": mfps,
                "model_flops_source": msrc,
                "mfu": model_rate / peak if model_rate is not None and peak else None,
            }
        )
    return out


@dataclass(frozen=True)
class _Kernels:
    rows: I64  # kernel rows of the rank's devices (every row of the trace given; int32 < 2^31)
    bearing: npt.NDArray[np.bool_]  # per row of ``rows``: FLOP-bearing category
    dur: I64


KERNELS_IN: Entry[_Kernels] = Entry(
    "flops.kernels_in", "per rank's devices and window, its kernel rows (the FLOP passes')"
)


BUSY: Entry[int] = Entry("flops.busy", "(device key,): length of its merged kernel intervals")


def compute_busy_ns(ctx: AnalysisContext, keys: list[int]) -> int:
    """Union of the kernel intervals of each device ``keys``, summed over them: the
    summary's ``compute_busy_ns`` of those devices (the same rows, not clipped). Only
    each device's length is kept: its merged intervals are, where already made (the
    summary's), else merged for this and let go of (10M kernels: 0.15 GB not held by
    the FLOP sections, which the report runs before the summary)."""
    total = 0
    for d in keys:

        def length(d: int = d) -> int:
            if ctx.cache.contains(shared_arrays.MERGED, d, "kernels"):
                ms, me = shared_arrays.merged(ctx, d, "kernels")
                return int((me - ms).sum())
            return intervals.union_length(*shared_arrays.spans(ctx, "kernels", d))

        total += ctx.cache.get(BUSY, length, d)
    return total


def kernels_in(ctx: Source, rkeys: list[int], w: RankSpan) -> _Kernels:
    """The kernel rows of devices ``rkeys`` (every row of the context: a windowed one holds
    the window's rows), with their FLOP-bearing flag and durations (computed once per
    devices and window: the flops, fp32 and kernel_flops passes read the same ones)."""
    ctx = of(ctx)
    return ctx.cache.get(
        KERNELS_IN,
        lambda: _kernels_in(ctx, rkeys, w),
        tuple(rkeys),
        w.starts.tobytes(),
        w.ends.tobytes(),
    )


def _kernels_in(ctx: AnalysisContext, rkeys: list[int], w: RankSpan) -> _Kernels:
    parts = []
    for d in rkeys:
        rows = shared_arrays.rows_of(ctx, "kernels", d)
        if rows is not None:
            if isinstance(rows, slice):  # every row
                parts.append(np.arange(ctx.num_rows("kernels"), dtype=np.int64))
            else:
                parts.append(rows)
    if not parts:
        rows = np.zeros(0, dtype=np.int64)
    else:
        rows = np.concatenate(parts) if len(parts) > 1 else parts[0]
    if not is_sorted(rows):  # each device's rows ascend: one device's need no sort
        rows = np.sort(rows)
    if ctx.num_rows("kernels") < 2**31:  # kept: 10M kernels' rows in 38 MB, not 76
        rows = rows.astype(np.int32, copy=False)
    codes, labels = shared_arrays.codes(ctx, "kernels", "name")
    # One classification for every section: the categories pass's (name, else launching op).
    cat = categories.kernel_codes(ctx).code
    want = np.zeros(len(categories.CATEGORIES), dtype=bool)
    want[[categories.CAT_INDEX[c] for c in ("gemm", "conv")]] = True
    softmax = np.array([_softmax_only(x) for x in labels], bool)
    sa = categories.CAT_INDEX["softmax_attention"]
    bearing_all = want[cat] | ((cat == sa) & ~softmax[codes])
    dur = shared_arrays.durations(ctx, "kernels")
    if not rows.size:
        return _Kernels(rows, np.zeros(0, dtype=bool), dur[rows])
    # One device's rows in file order, one run of them (kernels sorted by start, one
    # window interval): slices of the columns instead of gathered copies.
    lo, hi = int(rows[0]), int(rows[-1]) + 1
    if len(parts) == 1 and hi - lo == rows.size:
        return _Kernels(rows, bearing_all[lo:hi], dur[lo:hi])
    return _Kernels(rows, bearing_all[rows], dur[rows])


def flop_bearing_name(name: str | None) -> bool:
    """A kernel whose name puts it in a category with a FLOP formula (gemm, conv,
    attention; a softmax kernel on its own is not)."""
    cat = categories.classify(name)
    return cat in FLOP_CATEGORIES and not (cat == "softmax_attention" and _softmax_only(name))


def _softmax_only(name: str | None) -> bool:
    """A softmax kernel that is not an attention kernel, by its name."""
    return name is not None and bool(_SOFTMAX.search(name)) and not _ATTENTION.search(name)


PerPrecision = dict[str, dict[str, int]]  # precision -> source -> FLOPs


def _hardware(ctx: AnalysisContext, k: _Kernels) -> tuple[PerPrecision | None, int, int]:
    if not shared_arrays.has_values(ctx, "kernels", "flops"):
        return None, 0, 0
    f = shared_arrays.ints(ctx, "kernels", "flops")[k.rows]
    has = f >= 0
    if not has.any():
        return None, 0, 0
    prec = op_precisions(ctx)
    launcher = launching_counted_op(ctx, k.rows)
    pi = np.full(k.rows.size, -1, dtype=np.int64)
    if prec.size:
        pi = np.where(launcher >= 0, prec[np.clip(launcher, 0, None)], -1)
    per: PerPrecision = {}
    for code in np.unique(pi[has]).tolist():
        p = ff.PRECISIONS[code] if code >= 0 else "unknown"
        per[p] = {"hardware": int(f[has & (pi == code)].sum())}
    # A counted kernel could carry FLOPs whatever its category.
    bearing = k.bearing | has
    return per, int(k.dur[bearing].sum()), int(k.dur[has].sum())


def _ops(ctx: AnalysisContext, r: int, w: RankSpan, k: _Kernels) -> tuple[PerPrecision, int, int]:
    oc = op_counts(ctx)
    one = one_rank_key(ctx, "ops")  # one rank (the common case): no int64 copy of ranks
    if one is None:
        sel = oc.counted & (row_rank_keys(ctx, "ops") == r)
    else:
        sel = oc.counted if one == r else np.zeros(oc.counted.size, dtype=bool)
    if w.bounded:  # a window's view holds the ops overlapping it: those starting in it
        sel = sel & in_window(shared_arrays.ints(ctx, "ops", "start_ns"), w)  # sel may be oc's
    per: PerPrecision = {}
    # Counted ops have FLOPs: the selection over the rows that have them.
    s = sel[oc.rows]
    prec = op_precisions(ctx)[oc.rows]
    for pc_ in np.unique(prec[s]).tolist():
        p = ff.PRECISIONS[pc_] if pc_ >= 0 else "unknown"
        for si in (1, 2):
            m = s & (prec == pc_) & (oc.source == si)
            if m.any():
                per.setdefault(p, {})[SOURCES[si]] = int(oc.flops[m].sum())
    # The denominator: kernels of a FLOP-bearing category, and every kernel launched from
    # inside an op with a formula (the numerator), whatever its category.
    covered = launching_counted_op(ctx, k.rows) >= 0 if k.rows.size else np.zeros(0, bool)
    bearing = k.bearing | covered
    return per, int(k.dur[bearing].sum()), int(k.dur[covered].sum())


def launching_counted_op(ctx: Source, rows: I64) -> I64:
    """Per kernel row, the counted op containing its launch on the launching thread
    (the runtime call's thread and start; a CPU kernel's own), -1 where none."""
    ctx = of(ctx)
    oc = op_counts(ctx)
    if rows.size == 0 or not oc.counted.any():
        return np.full(rows.size, -1, dtype=np.int64)
    m = shared_arrays.runtime_match(ctx, "kernels")[rows]
    hit = m >= 0
    mc = np.where(hit, m, 0)

    def at(col: str) -> I64:
        own_all = shared_arrays.ints(ctx, "kernels", col)
        if col != "start_ns" and hit.any():
            one = one_launch_value(own_all, shared_arrays.ints(ctx, "runtime", col), hit)
            if one is not None:  # one process: no row-sized copies of its id
                return one
        own = own_all[rows]
        if not hit.any():
            return own
        return np.where(hit, shared_arrays.ints(ctx, "runtime", col)[mc], own)

    q_t = at("start_ns")
    queries = thread_groups(at("pid"), at("tid"))
    return on_threads(ctx, "ops", oc.counted, queries, q_t)


# Kernel names of FP32 work on tensor cores (TF32): cuBLAS/cuDNN "..._tf32f32_...", CUTLASS
# "tensorop_s1688gemm" (TF32 mma 16x8x8 on fp32 operands).
_TF32_KERNEL = re.compile(r"tf32|tensorop_s1688", re.IGNORECASE)


_TF32_SOURCE = {
    True: "; tf32: FP32 inputs with TF32 allowed (meta.extra.torch.allow_tf32)",
    False: "; tf32: FP32 inputs whose kernels are TF32 by name (tf32, tensorop_s1688)",
}


OP_PRECISIONS: Entry[I8] = Entry("flops.op_precisions", "per ops row, its precision index")


def op_precisions(ctx: Source) -> I8:
    """Per ops row, the precision index (``op_counts``'s, with fp32 ops that launched a
    TF32 kernel, by its name, as tf32); computed once per trace."""
    ctx = of(ctx)
    return ctx.cache.get(OP_PRECISIONS, lambda: _op_precisions(ctx))


def _op_precisions(ctx: AnalysisContext) -> I8:
    oc = op_counts(ctx)
    prec = oc.precision
    if not prec.size or not oc.counted.any():
        return prec
    tf32 = shared_arrays.label_mask(
        ctx, "kernels", "name", lambda x: _TF32_KERNEL.search(x) is not None
    )
    rows = np.flatnonzero(tf32)
    if rows.size == 0:
        return prec
    op = launching_counted_op(ctx, rows)
    op = op[op >= 0]
    fp32, tf = ff.PRECISIONS.index("fp32"), ff.PRECISIONS.index("tf32")
    out = prec.copy()
    out[op[prec[op] == fp32]] = tf
    return out


def _device_names(props: DeviceProps, keys: list[int]) -> str:
    return ", ".join(dict.fromkeys(peaks.label(props, key) for key in keys))


def device_peak(
    ctx: Source, props: DeviceProps, keys: list[int], precision: str
) -> tuple[float | None, str]:
    ctx = of(ctx)
    if precision == "unknown":
        return None, "precision unknown (no input dtypes recorded)"
    total, srcs = 0.0, []
    for key in keys:
        _, dtype, dev = decode_device_key(key)
        d = props.get(key)
        if dtype == "cpu":
            p, src = peaks.cpu_peak(ctx.meta, precision)
        elif d is None:
            p, src = None, f"device {dtype}:{dev} not described in the trace"
        else:
            p, src = peaks.gpu_peak(d, precision)
        if p is None:
            return None, src
        total += p
        srcs.append(src)
    more = f" (sum over {len(keys)} devices)" if len(keys) > 1 else ""
    return total, "; ".join(dict.fromkeys(srcs)) + more


def _samples(ctx: AnalysisContext, r: int, cfg: steps_pass.StepsConfig) -> int | None:
    m = steps_pass.measured(steps_pass.run(ctx, cfg))
    sel = int_column(m, "rank") == r
    s = int_column(m, "samples", -1)[sel]
    return int(s[s >= 0].sum()) if (s >= 0).any() else None


def _model_flops(ctx: AnalysisContext, cfg: FlopsConfig) -> tuple[float | None, str | None]:
    if cfg.model_flops_per_sample:
        return float(cfg.model_flops_per_sample), "--model-flops-per-sample"
    v = (ctx.meta.get("extra") or {}).get("model_flops_per_sample")
    if v:
        return float(v), "meta.extra.model_flops_per_sample"
    return None, None


def fp32_flops(
    ctx: Source, rank: int, keys: list[int], config: steps_pass.StepsConfig | None = None
) -> tuple[int | None, str]:
    """FP32 FLOPs of ``rank`` in its window (the ``fp32`` pass's figure), with the source
    or the reason there are none."""
    ctx = of(ctx)
    w = measured_window(ctx, rank, keys, config)
    kin = kernels_in(ctx, keys, w)
    per, _, _ = _hardware(ctx, kin)
    if per is None:
        per, _, _ = _ops(ctx, rank, w, kin)
    # The FP32 figure covers the work that ran as FP32 only: work on FP32 inputs that ran
    # as TF32 is rated against the TF32 tensor peak in the flops section's tf32 row, never
    # against the CUDA-core FP32 peak (one efficiency per precision; DECISIONS 180).
    tf32 = sum(per.get("tf32", {}).values())
    elsewhere = f"; {tf32} FLOPs on FP32 inputs ran as TF32: in the flops section's tf32 row"
    if "fp32" in per:
        srcs = per["fp32"]
        text = "; ".join(SOURCE_TEXT[s] for s in SOURCES if srcs.get(s))
        return sum(srcs.values()), text + (elsewhere if tf32 else "")
    if tf32:
        return None, "no work ran as FP32" + elsewhere
    if "unknown" in per and "hardware" in per["unknown"]:
        return per["unknown"]["hardware"], (
            SOURCE_TEXT["hardware"] + "; precision unknown (no launching op with input "
            "dtypes), counted as FP32"
        )
    if per:
        return None, "no FP32 work counted (the counted FLOPs are " + ", ".join(per) + ")"
    return None, (
        "no FLOP source: no kernels.flops, and no matmul, convolution or attention op with "
        "a framework count or with shapes the formulas read"
    )
