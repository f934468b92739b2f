"""Device peaks, each with its source: FLOP/s per precision, FP32 FLOP/s, DRAM bandwidth.

The one home of peak figures (GPU tables, the CPU model, the DRAM bandwidth); the flops,
fp32, kernel_flops and memcpy passes read them here.

Peak FLOP/s per precision of a GPU (:func:`gpu_peak`), in order:
1. looked up: the vendor datasheet's dense peak (``data/gpu_peaks.csv``, first row whose
   pattern is found in the device name and whose compute capability, where both are known,
   agrees), whatever the trace's source: a capture and an import of one chip get one
   peak. NVIDIA's dense figures are at the boost clock the datasheet uses (1830 MHz for
   H100/H200 tensor math), not the maximum clock a CUPTI capture records (1980 MHz), so
   computing from the capture's clock would read 8% above the datasheet. Where the trace
   records fewer SMs than the row's full chip (a MIG slice, one GCD of an MI250), the
   figure is scaled by SMs / the chip's SMs, and the source says so. A known chip whose
   row gives no figure for the precision has no peak (the reason names the datasheet);
2. computed, only for chips the table lacks: SMs x dense FLOPs per clock per SM of that
   precision (``data/tensor_rates.csv``, from the architecture whitepapers) x the clock,
   when the trace records the SM count, compute capability and clock (a CUPTI capture);
   the source says the chip is not in the table and the clock is the trace's;
3. else None with the reason.
The precision's peak is the dense (not sparse) figure of the fastest unit that runs matrix
math in it: Tensor/Matrix cores where the datasheet gives them (fp64 Tensor Core on A100
and later), CUDA cores for NVIDIA fp32. CPUs (:func:`cpu_peak`): fp32 from
:func:`cpu_fp32_peak` and fp64 at half of it (a SIMD register holds half as many doubles);
other precisions unknown.

The FP32 peak of the TBD-style FP32 figure (:func:`gpu_fp32_peak`) is the datasheet's
FP32 figure for a chip in ``gpu_peaks.csv`` (the flops section's fp32 peak); for other
chips it and the DRAM bandwidth (:func:`dram_bandwidth`) come from the trace, else from
documented tables:
``fp32_lanes.csv`` (FP32 results per clock per SM by compute capability: CUDA C++
Programming Guide, "Arithmetic Instructions", throughput of 32-bit floating-point
add/multiply/multiply-add) and ``gpu_specs.csv`` (boost clock and DRAM bandwidth by device
name: vendor datasheets, looked up, not measured). Each peak comes with a ``*_source``
string saying where every factor came from.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tbdtrace.analysis.engine.grouping import decode_device_key, device_keys

if TYPE_CHECKING:
    from tbdtrace.analysis.engine.context import AnalysisContext

    pass

LANES_SOURCE = (
    "CUDA C++ Programming Guide, Arithmetic Instructions (32-bit floating-point "
    "add, multiply, multiply-add per clock per SM)"
)
# SIMD FP32 lanes by the widest vector extension in /proc/cpuinfo flags.
_SIMD = (("avx512f", 16), ("avx2", 8), ("avx", 8), ("asimd", 4), ("neon", 4), ("sse2", 4))


def _csv(name: str) -> list[dict[str, str]]:
    # A file beside this module (importlib.resources would cost ~3 ms of imports per run).
    text = (Path(__file__).parent / "data" / name).read_text(encoding="utf-8")
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


def _gpu_peak(dev: dict[str, Any], precision: str) -> tuple[float | None, str]:
    """(peak FLOP/s of ``precision`` on GPU ``dev`` (a devices row), source or reason)."""
    cc = _cc(dev)
    name = str(dev.get("name") or "")
    row = datasheet(name, cc) if name else None
    if row is not None:
        value = row.get(precision) or ""
        if not value:
            return None, f"{row['source']} gives no dense {precision} peak"
        return _scaled(float(value) * 1e12, f"{value} TFLOP/s, {row['source']}", row, dev)
    sms, clock_khz = dev.get("sm_count"), dev.get("core_clock_khz")
    rate = rates().get((cc, precision)) if cc else None
    if rate and sms and clock_khz:
        per_sm, src = rate
        return float(sms) * per_sm * float(clock_khz) * 1e3, (
            f"computed ({name or 'the device'!r} is not in gpu_peaks.csv): {sms} SMs x "
            f"{per_sm} {precision} FLOPs/clock/SM (cc {cc}, {src}) x "
            f"{float(clock_khz) / 1e3:g} MHz (clock and SMs from the trace)"
        )
    return None, f"device {name or '?'!r} (cc {cc or '?'}) is not in gpu_peaks.csv"


def _scaled(peak: float, src: str, row: dict[str, str], dev: dict[str, Any]) -> tuple[float, str]:
    """A datasheet peak scaled to the SMs the trace records, when fewer than the chip's."""
    full, sms = row.get("sm_count") or "", dev.get("sm_count")
    if not full or not sms or int(sms) >= int(full):
        return peak, src
    return peak * int(sms) / int(full), (
        f"{src}, x {int(sms)}/{int(full)} SMs (the trace's device has {int(sms)} of the "
        f"chip's {int(full)} SMs: a MIG slice or one die)"
    )


def cpu_peak(meta: dict[str, Any], precision: str) -> tuple[float | None, str]:
    """(peak FLOP/s of ``precision`` on the capture host's CPU, source or reason)."""
    if precision not in ("fp32", "fp64"):
        return None, f"no CPU {precision} peak is modelled (fp32 and fp64 only)"
    p, src = cpu_fp32_peak(meta)
    if p is None or precision == "fp32":
        return p, src
    return p / 2, f"half the FP32 peak (2 doubles per FP32 lane pair): {src}"


def cpu_fp32_peak(meta: dict[str, Any]) -> tuple[float | None, str]:
    """Peak FP32 FLOP/s of the capture host from ``meta.extra.cpu`` ({cores, flags, mhz}).

    cores x SIMD lanes (widest of avx512f 16, avx2/avx 8, asimd/neon/sse2 4) x FMA units
    (2 with the ``fma`` or ``asimd`` flag, an assumption: current x86 and Arm server
    cores have two FMA pipes; else 1) x 2 x clock (MHz as /proc/cpuinfo gives it).
    """
    cpu = (meta.get("extra") or {}).get("cpu") or meta.get("cpu") or {}
    cores, mhz = cpu.get("cores") or cpu.get("physical_cores"), cpu.get("mhz") or cpu.get("max_mhz")
    flags = cpu.get("flags") or []
    flags = set(flags.split() if isinstance(flags, str) else flags)
    if not cores or not mhz or not flags:
        return None, (
            "CPU peak unknown: the trace has no CPU description (cores, flags, "
            "clock from /proc/cpuinfo) in meta.extra.cpu"
        )
    lanes = next((n for f, n in _SIMD if f in flags), 1)
    fma = 2 if ("fma" in flags or "asimd" in flags) else 1
    peak = float(cores) * lanes * fma * 2 * float(mhz) * 1e6
    return peak, (
        f"{cores} cores x {lanes} FP32 SIMD lanes x {fma} FMA units (assumed) x 2 "
        f"x {mhz} MHz (meta.extra.cpu, from /proc/cpuinfo at capture)"
    )


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


def _gpu_fp32_peak(dev: dict[str, Any]) -> tuple[float | None, str]:
    """(peak FP32 FLOP/s, source or reason): the datasheet's FP32 figure for a chip in
    ``gpu_peaks.csv`` (:func:`gpu_peak`'s, so the fp32 section and the flops section's
    fp32 row rate against one peak), else SMs x lanes/SM x 2 (FMA) x clock."""
    name = str(dev.get("name") or "")
    if name and datasheet(name, _cc(dev)) is not None:
        return _gpu_peak(dev, "fp32")
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


def _dram_bandwidth(dev: dict[str, Any]) -> tuple[float | None, str]:
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


def gpu_peak(dev: dict[str, Any], precision: str) -> tuple[float | None, str]:
    """(peak FLOP/s of ``precision`` on GPU ``dev`` (a devices row), source or reason)."""
    return _noted(dev, _gpu_peak(dev, precision))


def gpu_fp32_peak(dev: dict[str, Any]) -> tuple[float | None, str]:
    """(peak FP32 FLOP/s of the TBD-style FP32 figure, source or reason)."""
    return _noted(dev, _gpu_fp32_peak(dev))


def dram_bandwidth(dev: dict[str, Any]) -> tuple[float | None, str]:
    """(peak DRAM bandwidth in bytes/s, source or reason)."""
    return _noted(dev, _dram_bandwidth(dev))


GPU_TYPES = ("cuda", "rocm")
# The key a devices row carries (a copy of the row) when it describes a device whose id
# the trace's device work does not use: the line saying so, for every peak's source.
MATCHED = "matched_note"


class DeviceProps:
    """Device key (see ``grouping.device_keys``) -> the devices row describing it.

    A GPU key without a row of its own (rank, type, id) gets, in order: the row of the
    same type and id described without a rank (a trace-wide description); else the one
    GPU row of its rank, when the rank describes exactly one GPU (rows without a rank
    when no row has one; every row of the trace when neither); else none. With
    ``CUDA_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES`` the runtime numbers the visible
    devices 0.. while the profiler records the physical id (kernels on 9, the only
    ``deviceProperties`` entry id 0): the one device described is the one that ran
    them. A matched row is a copy with :data:`MATCHED` set to a line saying so, which
    :func:`gpu_peak`, :func:`gpu_fp32_peak` and :func:`dram_bandwidth` put before their
    source. CPU keys are never matched to a GPU row.
    """

    def __init__(self, rows: dict[int, dict[str, Any]]) -> None:
        self.rows = rows
        self._memo: dict[int, dict[str, Any] | None] = {}

    def get(self, key: int) -> dict[str, Any] | None:
        if key in self.rows:
            return self.rows[key]
        if key not in self._memo:
            self._memo[key] = self._match(key)
        return self._memo[key]

    def _match(self, key: int) -> dict[str, Any] | None:
        rank, dtype, dev = decode_device_key(key)
        if dtype not in GPU_TYPES:
            return None
        decoded = [(decode_device_key(k), row) for k, row in self.rows.items()]
        gpus = [(k, row) for k, row in decoded if k[1] in GPU_TYPES]
        for (r, t, d), row in gpus:
            if r is None and t == dtype and d == dev:
                return row
        scope, where = [g for g in gpus if g[0][0] == rank], f"rank {rank}"
        if rank is None:
            where = "the trace"
        if not scope:
            scope, where = [g for g in gpus if g[0][0] is None], "the trace"
        if not scope:
            scope, where = gpus, "the trace"
        if len(scope) != 1:
            return None
        (_, t, d), row = scope[0]
        note = (
            f"{dtype}:{dev} taken as {t}:{d} ({row.get('name') or 'unnamed'}), the only GPU "
            f"{where} describes (CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES renumber devices)"
        )
        return {**row, MATCHED: note}


def label(props: DeviceProps, key: int) -> str:
    """A device's name for the reader: the described name, else ``type:id`` (a GPU is never
    called ``cpu``; an unknown type reads ``device``)."""
    _, dtype, dev = decode_device_key(key)
    d = props.get(key)
    if dtype == "cpu" or d is None or not d.get("name"):
        return f"{dtype or 'device'}:{'-' if dev is None else dev}"
    return str(d["name"])


def _noted(dev: dict[str, Any], result: tuple[float | None, str]) -> tuple[float | None, str]:
    note = dev.get(MATCHED)
    return result if not note else (result[0], f"{note}; {result[1]}")


def device_props(ctx: AnalysisContext) -> DeviceProps:
    """The trace's devices rows by device key, matching keys they lack (:class:`DeviceProps`)."""
    tbl = ctx.table("devices")
    keys = device_keys(tbl).tolist()
    return DeviceProps(dict(zip(keys, tbl.to_pylist(), strict=True)))
