"""The figures of a TBD row that come from analysis passes.

Each provider is ``fn(trace, window) -> {column: value}`` where ``window`` is the
measured-steps interval ``(start_ns, end_ns)`` or None. A provider whose pass is not part
of this build returns nothing, so its cells stay empty; one that raises is reported in
the row's ``error`` column by the caller.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pyarrow.compute as pc

from tbdtrace.schema import MEMORY_CATEGORIES
from tbdtrace.trace import Trace

StepSpan = tuple[int, int] | None  # the measured steps' (start_ns, end_ns), or None
GPU_TYPES = ("cuda", "rocm")
NOTES = "_notes"  # key of a provider's notes (list of str) for the error column


def optional_pass(name: str) -> ModuleType | None:
    """``tbdtrace.analysis.passes.<name>`` when this build has it, else None."""
    full = f"tbdtrace.analysis.passes.{name}"
    try:
        return importlib.import_module(full)
    except ModuleNotFoundError as e:
        if e.name == full:
            return None
        raise


def has_gpu_kernels(tr: Trace) -> bool:
    dt = tr.table("kernels", ["device_type"]).column("device_type")
    return bool(len(dt)) and bool(
        pc.any(pc.is_in(dt.cast("string"), value_set=_pa_strings(GPU_TYPES))).as_py()
    )


def _pa_strings(values: tuple[str, ...]) -> Any:
    import pyarrow as pa

    return pa.array(values, type=pa.string())


def gpu_utilization(tr: Trace) -> float | None:
    """GPU compute utilization over the measured steps (utilization pass).

    Kernel busy time / window length, summed over the GPU devices' total rows (the union
    of their rank's measured-step windows, or the device span without steps).
    """
    util = optional_pass("utilization")
    if util is None:
        return None
    t = util.run(tr).to_pydict()
    busy = win = 0
    for dtype, step, b, w in zip(
        t["device_type"], t["step"], t["compute_busy_ns"], t["window_ns"], strict=True
    ):
        if dtype in GPU_TYPES and step is None:
            busy, win = busy + b, win + w
    return busy / win if win else None


def process_cores(tr: Trace) -> float | None:
    """Mean CPU use of the workload's own process tree during the measured steps, in
    cores (host samples ``proc_cpu_cores``; 1.0 = one core busy)."""
    util = optional_pass("utilization")
    return None if util is None else util.cpu(tr, metric="proc_cpu_cores")["mean"]


def logical_cpus(tr: Trace) -> int | None:
    """The machine's logical CPUs as the trace recorded them."""
    extra = tr.meta.get("extra") or {}
    n = extra.get("logical_cpus") or (extra.get("cpu") or {}).get("logical_cpus")
    return int(n) if n else None


def utilization(tr: Trace, window: StepSpan) -> dict[str, Any]:
    """GPU and CPU utilization, separately. GPU: kernel busy time over the measured steps
    (traces with GPU kernels only). CPU: the workload's process tree (not the whole
    machine's, which other processes share), in cores and as a share of the machine's
    logical CPUs."""
    cells: dict[str, Any] = {}
    if has_gpu_kernels(tr):
        cells["gpu_utilization"] = gpu_utilization(tr)
    cores = process_cores(tr)
    if cores is not None:
        n = logical_cpus(tr)
        cells["cpu_cores_used"] = cores
        cells["cpu_utilization"] = cores / n if n else None
    return cells


def memory(tr: Trace, window: StepSpan) -> dict[str, Any]:
    """Peak live memory and its breakdown at the peak (memory pass: ``summarize``).

    The headline level of the pass (allocated when the trace has it, else reserved), at
    the highest peak of the measured steps (steady-state training: the warm-up's one-time
    allocations, whose labels a sampled framework may attach late, are not in the row);
    over the whole trace when no measured step lies in ``window``; no memory events -> no
    cells.
    """
    mod = optional_pass("memory")
    if mod is None or not tr.num_rows("memory"):
        return {}
    doc = mod.summarize(tr)
    peak, breakdown = doc["peak_bytes"], doc["breakdown_at_peak"]
    if window is not None:
        lo, hi = window
        inside = [st for st in doc["steps"] if st["start_ns"] >= lo and st["end_ns"] <= hi]
        if inside:
            top = max(inside, key=lambda st: st["peak_bytes"])  # first of equal peaks
            peak, breakdown = top["peak_bytes"], top["breakdown_at_peak"]
    cells: dict[str, Any] = {"peak_memory_bytes": peak}
    for cat, n in (breakdown or {}).items():
        if cat in MEMORY_CATEGORIES:  # pre_existing: 0 for captures, not a row column
            cells[f"{cat}_bytes"] = n
    return _unlabelled(tr, cells)


def _unlabelled(tr: Trace, cells: dict[str, Any]) -> dict[str, Any]:
    """Categories the capture does not tell apart (``meta.extra.memory_categories``, set by
    the TensorFlow and MXNet backends) are empty cells with a note, not 0: their bytes are
    inside ``other``."""
    labelled = (tr.meta.get("extra") or {}).get("memory_categories")
    if not labelled:
        return cells
    missing = [c for c in MEMORY_CATEGORIES if c not in labelled and c != "other"]
    for c in missing:
        cells[f"{c}_bytes"] = None
    if missing:
        cells[NOTES] = [
            f"memory: {', '.join(missing)} not told apart by the {tr.meta.get('backend')} "
            "capture (counted in other)"
        ]
    return cells


def fp32(tr: Trace, window: StepSpan) -> dict[str, Any]:
    """FP32 efficiency over the measured steps' wall time (fp32 pass, ``efficiency_wall``).

    Several ranks: achieved FLOP/s summed over ranks / their peaks summed. When the pass
    cannot give the figure, the cell stays empty and ``NOTES`` carries its reason.
    """
    mod = optional_pass("fp32")
    if mod is None:
        return {}
    t = mod.run(tr).to_pylist()
    done = [r for r in t if r["achieved_flops_per_s_wall"] is not None and r["peak_flops_per_s"]]
    if not done:
        why = "; ".join(r["flops_source"] if r["flops"] is None else r["peak_source"] for r in t)
        return {NOTES: [f"fp32: {why}"]} if why else {}
    achieved = sum(r["achieved_flops_per_s_wall"] for r in done)
    return {"fp32_efficiency": achieved / sum(r["peak_flops_per_s"] for r in done)}


PROVIDERS: tuple[Callable[[Trace, StepSpan], dict[str, Any]], ...] = (utilization, fp32, memory)
