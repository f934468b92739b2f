"""Description of the capture host's CPU, for the CPU FP32 peak (``meta.extra.cpu``)."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def describe(
    cpuinfo: Path = Path("/proc/cpuinfo"), sysfs: Path = Path("/sys/devices/system/cpu")
) -> dict[str, Any]:
    """{model, cores, logical_cpus, flags, mhz, mhz_source} of this machine.

    ``cores``: physical cores the process may run on (hyperthreads share FMA units);
    ``mhz``: the maximum clock from cpufreq when the kernel exposes it, else the
    ``cpu MHz`` that /proc/cpuinfo reports. Keys are absent when unknown.
    """
    out: dict[str, Any] = {"machine": platform.machine()}
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return out
    first = text.split("\n\n", 1)[0]
    fields = {}
    for line in first.splitlines():
        k, _, v = line.partition(":")
        fields[k.strip()] = v.strip()
    out["model"] = fields.get("model name") or fields.get("Processor")
    flags = fields.get("flags") or fields.get("Features") or ""
    out["flags"] = sorted(set(flags.split()))
    allowed = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    out["logical_cpus"] = allowed
    pairs = {(b.get("physical id"), b.get("core id")) for b in _blocks(text)}
    siblings = max(1, int(fields.get("siblings", 1) or 1))
    cores_per_pkg = max(1, int(fields.get("cpu cores", siblings) or siblings))
    threads_per_core = max(1, siblings // cores_per_pkg)
    out["cores"] = max(1, (allowed or len(pairs) or 1) // threads_per_core)
    try:
        khz = int((sysfs / "cpu0" / "cpufreq" / "cpuinfo_max_freq").read_text())
        out["mhz"], out["mhz_source"] = khz / 1000.0, "cpufreq cpuinfo_max_freq"
    except (OSError, ValueError):
        if fields.get("cpu MHz"):
            out["mhz"], out["mhz_source"] = float(fields["cpu MHz"]), "/proc/cpuinfo cpu MHz"
    return out


def _blocks(text: str) -> list[dict[str, str]]:
    res = []
    for block in text.strip().split("\n\n"):
        d = {}
        for line in block.splitlines():
            k, _, v = line.partition(":")
            d[k.strip()] = v.strip()
        res.append(d)
    return res
