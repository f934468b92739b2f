"""Old import paths of the analysis modules, kept for code written before they moved.

``tbdtrace.passes.<name>`` is the module that ``<name>`` became (CHANGELOG.md, "Changed"):
a pass is ``tbdtrace.analysis.passes.<name>``, the shared machinery
``tbdtrace.analysis.engine.<name>``, ``sql`` and ``diff`` are ``tbdtrace.analysis.sql``
and ``tbdtrace.analysis.compare``. Importing this package imports every one of them and
registers each under its old name too (the same module object, so a config dataclass
from either path is the same class). New code imports the new paths; nothing in
tbdtrace imports this package.
"""

from __future__ import annotations

import importlib
import sys

_ENGINE = "tbdtrace.analysis.engine"
_PASSES = "tbdtrace.analysis.passes"
# Old name -> the module it became.
MOVED = {
    "categories": f"{_PASSES}.categories",
    "collective_skew": f"{_PASSES}.collective_skew",
    "cpu_activity": f"{_PASSES}.cpu_activity",
    "flops": f"{_PASSES}.flops",
    "fp32": f"{_PASSES}.fp32",
    "hotspots": f"{_PASSES}.hotspots",
    "idle": f"{_PASSES}.idle",
    "kernel_flops": f"{_PASSES}.kernel_flops",
    "kernels": f"{_PASSES}.kernels",
    "memcpy": f"{_PASSES}.memcpy",
    "memory": f"{_PASSES}.memory",
    "memory_series": f"{_PASSES}.memory_series",
    "phases": f"{_PASSES}.phases",
    "ranks": f"{_PASSES}.ranks",
    "step_timeline": f"{_PASSES}.step_timeline",
    "steps": f"{_PASSES}.steps",
    "summary": f"{_PASSES}.summary",
    "utilization": f"{_PASSES}.utilization",
    "attribution": f"{_ENGINE}.attribution",
    "cache": f"{_ENGINE}.cache",
    "flop_formulas": f"{_ENGINE}.flop_formulas",
    "grouping": f"{_ENGINE}.grouping",
    "intervals": f"{_ENGINE}.intervals",
    "joins": f"{_ENGINE}.joins",
    "memory_blocks": f"{_ENGINE}.memory_blocks",
    "outputs": f"{_ENGINE}.outputs",
    "shared_arrays": f"{_ENGINE}.shared_arrays",
    "window": f"{_ENGINE}.window",
    "device_peaks": f"{_ENGINE}.peaks",
    "_peaks": f"{_ENGINE}.peaks",
    "_kernel_names": f"{_ENGINE}.kernel_names",
    "_op_flops": f"{_ENGINE}.op_flops",
    "_memory_devices": f"{_ENGINE}.memory_devices",
    "_windowed": f"{_ENGINE}.context",
    "sql": "tbdtrace.analysis.sql",
    "diff": "tbdtrace.analysis.compare",
}

for _old, _new in MOVED.items():
    _mod = importlib.import_module(_new)
    sys.modules[f"{__name__}.{_old}"] = _mod
    globals()[_old] = _mod
