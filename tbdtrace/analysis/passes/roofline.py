"""Roofline per op: achieved FLOP/s and bytes/s of each op shape against the chip's
compute and memory roofs, and whether the op is compute- or memory-bound.

Rows are (rank, op name, input shapes, input dtypes) of the ops the byte model
(:mod:`tbdtrace.analysis.engine.byte_formulas`) or the FLOP formulas count. An op's device time is
the time of the kernels it launched: each kernel goes to the outermost counted op on its
launch thread containing its launch (the runtime call's start, or the kernel's own start
for CPU-backend kernels, which are leaf ops themselves), as the flops pass counts FLOPs
once at the outermost op: ``aten::linear`` owns the kernels of the ``aten::addmm`` inside
it, with its own FLOPs and bytes. Op rows without kernels are left out. FLOPs are the
flops pass's per-op counts (framework or formula; GEMM, convolution, attention); other
families have no FLOP count, so their intensity is unknown and they are taken as
memory-bound (elementwise, normalization, softmax and reduction ops do O(1)
FLOPs per byte, far below any chip's ridge point).

Roofs per rank, of its first device: the peak FLOP/s of the op's precision (the flops
pass's peak table) and the DRAM/HBM bandwidth (``peaks.dram_bandwidth``: the
trace's devices row, else ``data/gpu_specs.csv`` with its datasheet source). ridge =
peak FLOP/s / peak bytes/s; compute-bound when intensity >= ridge; ``roof_share`` =
achieved FLOP/s / peak FLOP/s when compute-bound, achieved bytes/s / peak bytes/s when
memory-bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace.analysis.engine import byte_formulas, outputs, peaks, shared_arrays
from tbdtrace.analysis.engine import flop_formulas as ff
from tbdtrace.analysis.engine.attribution import on_threads, outermost, thread_groups
from tbdtrace.analysis.engine.context import AnalysisContext, Source, of
from tbdtrace.analysis.engine.grouping import decode_device_key
from tbdtrace.analysis.engine.op_flops import op_counts

SCHEMA = outputs.ROOFLINE.arrow_schema()  # declared in passes/outputs.py
FAMILY_SCHEMA = outputs.ROOFLINE_FAMILY.arrow_schema()
_COLS = ["name", "input_shapes", "input_dtypes", "concrete_inputs"]


@dataclass(frozen=True)
class RooflineConfig:
    by: str = "op"  # op: per op shape; family: per op family (by_family's columns)


BY = ("op", "family")


def run(ctx: Source, config: RooflineConfig | None = None) -> pa.Table:
    """One row per (rank, op, shapes, dtypes), longest device time first (columns:
    docs/METRICS.md ``roofline``); ``config.by="family"``: :func:`by_family`."""
    cfg = config or RooflineConfig()
    if cfg.by not in BY:
        raise ValueError(f"by must be one of {BY}, not {cfg.by!r}")
    if cfg.by == "family":
        return by_family(ctx)
    rows = _rows(of(ctx))
    rows.sort(key=lambda r: (-r["kernel_ns"], r["op"], r["input_shapes"] or ""))
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def by_family(ctx: Source) -> pa.Table:
    """The same per (rank, op family): sums of kernel time, FLOPs and bytes, and the
    figures recomputed from them (FLOPs and intensity only where every op of the family
    has a FLOP count)."""
    groups: dict[tuple[Any, str, str | None], list[dict[str, Any]]] = {}
    for r in _rows(of(ctx)):
        groups.setdefault((r["rank"], r["family"], r["precision"]), []).append(r)
    out = []
    for (rank, fam, prec), rs in groups.items():
        ns = sum(r["kernel_ns"] for r in rs)
        fl = [r["flops"] for r in rs]
        by = [r["bytes"] for r in rs]
        flops = sum(fl) if all(f is not None for f in fl) else None
        nbytes = sum(by) if all(b is not None for b in by) else None
        out.append(
            {
                "rank": rank,
                "family": fam,
                "precision": prec,
                "ops": len(rs),
                "kernel_count": sum(r["kernel_count"] for r in rs),
                "kernel_ns": ns,
                **_figures(
                    fam, flops, nbytes, ns, rs[0]["peak_flops_per_s"], rs[0]["peak_bytes_per_s"]
                ),
            }
        )
    out.sort(key=lambda r: (-r["kernel_ns"], r["family"]))
    return pa.Table.from_pylist(out, schema=FAMILY_SCHEMA)


def _kernel_ops(ctx: AnalysisContext, counted: np.ndarray) -> np.ndarray:
    """Per kernel, the innermost counted ops row on its launch thread containing its
    launch time (-1: none)."""
    n = ctx.num_rows("kernels")
    m = shared_arrays.runtime_match(ctx, "kernels")
    hit = m >= 0
    mc = np.where(hit, m, 0)

    def at_launch(col: str) -> np.ndarray:
        r = shared_arrays.ints(ctx, "runtime", col)
        own = shared_arrays.ints(ctx, "kernels", col)
        return np.where(hit, r[mc] if r.size else -1, own)

    t = at_launch("start_ns")
    queries = thread_groups(at_launch("pid"), at_launch("tid"))
    out = on_threads(ctx, "ops", counted, queries, t) if n else np.zeros(0, np.int64)
    return out


def _rows(ctx: AnalysisContext) -> list[dict[str, Any]]:
    if not ctx.num_rows("kernels") or not ctx.num_rows("ops"):
        return []
    ops = ctx.table("ops", [*_COLS, "rank"]).to_pydict()
    counts = op_counts(ctx)
    nbytes: list[int | None] = []
    cache: dict[tuple[Any, ...], int | None] = {}
    for name, sh, dt, cv in zip(*(ops[c] for c in _COLS), strict=True):
        key = (name, sh, dt, cv)
        if key not in cache:
            cache[key] = byte_formulas.op_bytes(name, sh, dt, cv) if name else None
        nbytes.append(cache[key])
    has_bytes = np.array([b is not None for b in nbytes], dtype=bool)
    # The outermost counted op owns the kernels under it (aten::linear those of its
    # addmm and transposes): its FLOPs and bytes are what they did, counted once.
    counted = outermost(ctx, has_bytes | counts.has_flops())
    owner = _kernel_ops(ctx, counted)
    dur = shared_arrays.durations(ctx, "kernels")
    sel = owner >= 0
    k_ns = np.bincount(owner[sel], weights=dur[sel], minlength=counted.size).astype(np.int64)
    k_n = np.bincount(owner[sel], minlength=counted.size)
    roofs = _roofs(ctx)
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    with_kernels = np.flatnonzero(k_n > 0)
    for i, f in zip(with_kernels.tolist(), counts.flops_of(with_kernels).tolist(), strict=True):
        name = ops["name"][i]
        key = (ops["rank"][i], name, ops["input_shapes"][i], ops["input_dtypes"][i])
        g = groups.get(key)
        if g is None:
            fam = byte_formulas.family(name) or "other"
            g = groups[key] = {
                "rank": ops["rank"][i],
                "op": name,
                "family": fam,
                "input_shapes": ops["input_shapes"][i],
                "input_dtypes": ops["input_dtypes"][i],
                # The flops pass's precision where it counts the op (fp32 as tf32 where
                # the run allowed TF32), else the first tensor input's.
                "precision": (
                    ff.PRECISIONS[int(counts.precision[i])]
                    if counts.precision[i] >= 0
                    else ff.precision(ops["input_dtypes"][i])
                ),
                "count": 0,
                "kernel_count": 0,
                "kernel_ns": 0,
                "flops": 0,
                "bytes": 0,
            }
        g["count"] += 1
        g["kernel_count"] += int(k_n[i])
        g["kernel_ns"] += int(k_ns[i])
        g["flops"] = None if g["flops"] is None or f < 0 else g["flops"] + f
        b = nbytes[i]
        g["bytes"] = None if g["bytes"] is None or b is None else g["bytes"] + b
    out = []
    for g in groups.values():
        pf, pb, src = roofs(g["rank"], g["precision"])
        fig = _figures(g["family"], g["flops"], g["bytes"], g["kernel_ns"], pf, pb)
        out.append({**g, **fig, "peak_source": src})
    return out


def _figures(
    fam: str, flops: int | None, nbytes: int | None, ns: int, pf: float | None, pb: float | None
) -> dict[str, Any]:
    s = ns / 1e9
    inten = flops / nbytes if flops is not None and nbytes else None
    a_f = flops / s if flops is not None and s > 0 else None
    a_b = nbytes / s if nbytes is not None and s > 0 else None
    ridge = pf / pb if pf and pb else None
    if inten is not None and ridge is not None:
        bound: str | None = "compute" if inten >= ridge else "memory"
    elif flops is None and nbytes is not None and fam != "other":
        bound = "memory"  # no FLOP count: a low-intensity family (module docstring)
    else:
        bound = None
    share = None
    if bound == "compute" and a_f is not None and pf:
        share = a_f / pf
    elif bound == "memory" and a_b is not None and pb:
        share = a_b / pb
    return {
        "flops": flops,
        "bytes": nbytes,
        "intensity_flop_per_byte": inten,
        "achieved_flops_per_s": a_f,
        "achieved_bytes_per_s": a_b,
        "peak_flops_per_s": pf,
        "peak_bytes_per_s": pb,
        "ridge_flop_per_byte": ridge,
        "bound": bound,
        "roof_share": share,
    }


def _roofs(ctx: AnalysisContext) -> Any:
    """(rank, precision) -> (peak FLOP/s, peak bytes/s, source), of the rank's first
    device that ran kernels."""
    props = peaks.device_props(ctx)
    first: dict[Any, tuple[str, dict[str, Any]]] = {}
    for k in shared_arrays.device_keys_of(ctx, ("kernels",)):
        rank, dtype, _ = decode_device_key(k)
        first.setdefault(rank, (str(dtype), props.get(k) or {}))

    def roofs(rank: Any, precision: str | None) -> tuple[float | None, float | None, str]:
        dtype, dev = first.get(rank, ("", {}))
        prec = precision or "fp32"
        if dtype in peaks.GPU_TYPES:
            pf, fsrc = peaks.gpu_peak(dev, prec)
            pb, bsrc = peaks.dram_bandwidth(dev)
        else:
            pf, fsrc = peaks.cpu_peak(ctx.meta, prec)
            pb, bsrc = None, "no memory bandwidth modelled for a CPU"
        return pf, pb, f"FLOP/s: {fsrc}; bytes/s: {bsrc}"

    return roofs
