"""Device peaks (FP32 FLOP/s, DRAM bandwidth) from the trace, else from documented tables.

Tables in ``data/``: ``fp32_lanes.csv`` (FP32 results per clock per SM by compute
capability: CUDA C++ Programming Guide, "Arithmetic Instructions", throughput of 32-bit
floating-point add/multiply/multiply-add) and ``gpu_specs.csv`` (boost clock and DRAM
bandwidth by device name: vendor datasheets, looked up, not measured). Each peak comes
with a ``*_source`` string saying where every factor came from.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

LANES_SOURCE = (
    "CUDA C++ Programming Guide, Arithmetic Instructions (32-bit floating-point "
    "add, multiply, multiply-add per clock per SM)"
)


def _csv(name: str) -> list[dict[str, str]]:
    text = resources.files("tbdtrace.analysis.engine").joinpath(f"data/{name}").read_text()
    return list(csv.DictReader(text.splitlines()))


@lru_cache(maxsize=1)
def fp32_lanes() -> dict[tuple[int, int], int]:
    out = {}
    for r in _csv("fp32_lanes.csv"):
        major, minor = r["compute_capability"].split(".")
        out[(int(major), int(minor))] = int(r["fp32_lanes_per_sm"])
    return out


@dataclass(frozen=True)
class Spec:
    boost_clock_mhz: int
    memory_bandwidth_gb_per_s: float
    source: str


@lru_cache(maxsize=256)
def lookup(name: str) -> Spec | None:
    """Datasheet figures for a device name (first matching row of gpu_specs.csv)."""
    for r in _csv("gpu_specs.csv"):
        if re.search(r["pattern"], name, re.IGNORECASE):
            return Spec(
                int(r["boost_clock_mhz"]), float(r["memory_bandwidth_gb_per_s"]), r["source"]
            )
    return None


def gpu_fp32_peak(dev: dict[str, Any]) -> tuple[float | None, str]:
    """(peak FP32 FLOP/s, source or reason) = SMs x lanes/SM x 2 (FMA) x clock."""
    sms, major, minor = (
        dev.get("sm_count"),
        dev.get("compute_capability_major"),
        dev.get("compute_capability_minor"),
    )
    if not sms:
        return None, "SM count not recorded in the trace"
    if major is None or minor is None:
        return None, "compute capability not recorded in the trace"
    lanes = fp32_lanes().get((int(major), int(minor)))
    if lanes is None:
        return None, f"no FP32 lane count known for compute capability {major}.{minor}"
    clock_khz = dev.get("core_clock_khz")
    if clock_khz:
        clock_hz, csrc = float(clock_khz) * 1e3, "clock from the trace (devices.core_clock_khz)"
    else:
        spec = lookup(str(dev.get("name") or ""))
        if spec is None:
            return None, f"no clock in the trace and {dev.get('name')!r} is not in gpu_specs.csv"
        clock_hz = spec.boost_clock_mhz * 1e6
        csrc = f"boost clock {spec.boost_clock_mhz} MHz looked up ({spec.source})"
    peak = float(sms) * lanes * 2 * clock_hz
    return peak, (
        f"{sms} SMs (trace) x {lanes} FP32 lanes/SM (cc {major}.{minor}, "
        f"{LANES_SOURCE}) x 2 x {csrc}"
    )


def dram_bandwidth(dev: dict[str, Any]) -> tuple[float | None, str]:
    """(peak DRAM bandwidth in bytes/s, source or reason)."""
    if dev.get("memory_bandwidth_bytes_per_s"):
        return float(dev["memory_bandwidth_bytes_per_s"]), "trace (devices)"
    clk, bus = dev.get("memory_clock_khz"), dev.get("memory_bus_width_bits")
    if clk and bus:
        return 2.0 * float(clk) * 1e3 * float(
            bus
        ) / 8, "2 x memory clock x bus width / 8 (trace devices; double data rate)"
    spec = lookup(str(dev.get("name") or ""))
    if spec is not None:
        return spec.memory_bandwidth_gb_per_s * 1e9, f"looked up ({spec.source})"
    return None, "DRAM bandwidth not in the trace and the device name is not in gpu_specs.csv"


def device_props(trace: Any) -> dict[int, dict[str, Any]]:
    """Device key (see passes.grouping.device_keys) -> the devices row as a dict."""
    from tbdtrace.analysis.engine.grouping import device_keys

    tbl = trace.table("devices")
    keys = device_keys(tbl).tolist()
    return dict(zip(keys, tbl.to_pylist(), strict=True))
