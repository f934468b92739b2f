"""Peak FLOP/s per precision of a device, each with its source.

GPUs, in order:
1. computed: SMs x dense FLOPs per clock per SM of that precision (``data/tensor_rates.csv``,
   from the architecture whitepapers) x the clock, when the trace records the SM count,
   compute capability and clock (a CUPTI capture: also right for a MIG slice or a
   clock-capped part);
2. looked up: the vendor datasheet's dense peak (``data/gpu_peaks.csv``, first row whose
   pattern is found in the device name and whose compute capability, where both are known,
   agrees);
3. else None with the reason.
The precision's peak is the dense (not sparse) figure of the fastest unit that runs matrix
math in it: Tensor/Matrix cores where the datasheet gives them (fp64 Tensor Core on A100
and later), CUDA cores for NVIDIA fp32. CPUs: fp32 from ``fp32.cpu_fp32_peak`` and fp64 at
half of it (a SIMD register holds half as many doubles); other precisions unknown.
"""

from __future__ import annotations

import csv
import re
from functools import lru_cache
from importlib import resources
from typing import Any


def _csv(name: str) -> list[dict[str, str]]:
    text = resources.files("tbdtrace.analysis.engine").joinpath(f"data/{name}").read_text()
    return list(csv.DictReader(text.splitlines()))


@lru_cache(maxsize=1)
def rates() -> dict[tuple[str, str], tuple[int, str]]:
    """(compute capability "M.m", precision) -> (dense FLOPs per clock per SM, source)."""
    return {
        (r["compute_capability"], r["precision"]): (int(r["flops_per_clock_per_sm"]), r["source"])
        for r in _csv("tensor_rates.csv")
    }


@lru_cache(maxsize=256)
def datasheet(name: str, cc: str | None) -> dict[str, str] | None:
    """The first ``gpu_peaks.csv`` row matching a device name (and its compute capability)."""
    for r in _csv("gpu_peaks.csv"):
        if not re.search(r["pattern"], name, re.IGNORECASE):
            continue
        if cc and r["compute_capability"] and r["compute_capability"] != cc:
            continue
        return r
    return None


def _cc(dev: dict[str, Any]) -> str | None:
    major, minor = dev.get("compute_capability_major"), dev.get("compute_capability_minor")
    return None if major is None or minor is None else f"{int(major)}.{int(minor)}"


def gpu_peak(dev: dict[str, Any], precision: str) -> tuple[float | None, str]:
    """(peak FLOP/s of ``precision`` on GPU ``dev`` (a devices row), source or reason)."""
    cc = _cc(dev)
    sms, clock_khz = dev.get("sm_count"), dev.get("core_clock_khz")
    rate = rates().get((cc, precision)) if cc else None
    if rate and sms and clock_khz:
        per_sm, src = rate
        return float(sms) * per_sm * float(clock_khz) * 1e3, (
            f"{sms} SMs x {per_sm} {precision} FLOPs/clock/SM (cc {cc}, {src}) x "
            f"{float(clock_khz) / 1e3:g} MHz (clock and SMs from the trace)"
        )
    name = str(dev.get("name") or "")
    row = datasheet(name, cc) if name else None
    if row is None:
        return None, f"device {name or '?'!r} (cc {cc or '?'}) is not in gpu_peaks.csv"
    value = row.get(precision) or ""
    if not value:
        return None, f"{row['source']} gives no dense {precision} peak"
    return float(value) * 1e12, f"{value} TFLOP/s, {row['source']}"


def cpu_peak(meta: dict[str, Any], precision: str) -> tuple[float | None, str]:
    """(peak FLOP/s of ``precision`` on the capture host's CPU, source or reason)."""
    from tbdtrace.analysis.passes.fp32 import cpu_fp32_peak

    if precision not in ("fp32", "fp64"):
        return None, f"no CPU {precision} peak is modelled (fp32 and fp64 only)"
    p, src = cpu_fp32_peak(meta)
    if p is None or precision == "fp32":
        return p, src
    return p / 2, f"half the FP32 peak (2 doubles per FP32 lane pair): {src}"
