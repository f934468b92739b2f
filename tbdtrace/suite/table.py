"""Write the TBD table as markdown (for people), CSV and JSON (for tools).

CSV and JSON hold every column of :data:`tbdtrace.suite.rows.COLUMNS` in its unit
(nanoseconds, bytes, ratios 0..1); an unknown value is an empty CSV cell and a JSON null.
The markdown table shows the same rows in readable units (ms, %, MiB), empty where unknown.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import platform
import socket
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from tbdtrace import schema
from tbdtrace.output_policy import replace
from tbdtrace.safe_text import csv_cell
from tbdtrace.suite.plan import BenchConfig
from tbdtrace.suite.rows import COLUMN_NAMES, COLUMNS

MD_FILE, CSV_FILE, JSON_FILE = "bench.md", "bench.csv", "bench.json"
MIB = 1 << 20


def _num(fmt: str, scale: float = 1.0) -> Callable[[Any], str]:
    def f(v: Any) -> str:
        if v is None or (isinstance(v, float) and not math.isfinite(v)):
            return ""
        return format(v * scale if scale != 1.0 else v, fmt)

    return f


_MEM_HEAD = {
    "weights": "Weights",
    "gradients": "Grads",
    "optimizer_state": "Opt. state",
    "inputs": "Inputs",
    "activations": "Activations",
    "workspace": "Workspace",
    "other": "Other",
}

# (heading, column, formatter) of the markdown table.
MD_COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("Model", "model", str),
    ("Framework", "framework", str),
    ("Batch", "batch_size", _num("d")),
    ("Throughput (samples/s)", "throughput_samples_per_s", _num(".2f")),
    ("Min", "throughput_min_samples_per_s", _num(".2f")),
    ("Max", "throughput_max_samples_per_s", _num(".2f")),
    ("Ranks", "nproc", _num("d")),
    ("Per rank (samples/s)", "throughput_per_rank_samples_per_s", _num(".2f")),
    ("Scaling eff. (%)", "scaling_efficiency", _num(".1f", 100)),
    ("Precision", "precision", lambda v: v or ""),
    ("Compiled", "compiled", lambda v: v or ""),
    ("Data", "data", lambda v: v or ""),
    ("Step (ms)", "step_time_ns", _num(".1f", 1e-6)),
    ("Profiled (samples/s)", "profiled_throughput_samples_per_s", _num(".2f")),
    ("Profiler slowdown", "profiler_slowdown", _num(".2f")),
    ("GPU util. (%)", "gpu_utilization", _num(".1f", 100)),
    ("CPU util. (%)", "cpu_utilization", _num(".1f", 100)),
    ("CPU cores", "cpu_cores_used", _num(".2f")),
    ("FP32 eff. (%)", "fp32_efficiency", _num(".2f", 100)),
    ("Peak mem (MiB)", "peak_memory_bytes", _num(".1f", 1 / MIB)),
    *(
        (f"{_MEM_HEAD[c]} (MiB)", f"{c}_bytes", _num(".1f", 1 / MIB))
        for c in schema.MEMORY_CATEGORIES
    ),
    ("Quality", "quality_metric", lambda v: v or ""),
    ("Value", "quality", _num(".4g")),
    ("Target", "quality_target", _num("g")),
    ("Time to quality (s)", "time_to_quality_ns", _num(".1f", 1e-9)),
    ("Status", "status", lambda v: v or ""),
    ("Error", "error", lambda v: v or ""),
)


def _md_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _steps_text(cfg: BenchConfig) -> str:
    if cfg.to_quality:
        return "training until each held-out quality target was met (time-to-quality)"
    return f"{cfg.steps} measured steps"


def markdown(rows: Sequence[dict[str, Any]], cfg: BenchConfig) -> str:
    """The markdown document: a heading, the run's settings, the table."""
    lines = [
        "# TBD benchmark",
        "",
        f"size `{cfg.size}`, {_steps_text(cfg)} after {cfg.warmup} warm-up, "
        f"device `{cfg.device}`. Throughput is the median over measured steps of "
        "samples / step time (min and max beside it) in a run without the profiler (with "
        "several ranks, the sum over ranks; batch is per rank); scaling efficiency is "
        "throughput with N ranks / (N x one rank's); utilization, FP32 efficiency and "
        "memory come from a second, profiled run, whose throughput and slowdown are shown "
        "too. CPU utilization is the workload's own process tree. Memory columns are the "
        "breakdown at the peak; an empty cell is a figure the trace does not provide.",
        "",
    ]
    lines.append("| " + " | ".join(h for h, _, _ in MD_COLUMNS) + " |")
    lines.append("|" + "|".join("---" for _ in MD_COLUMNS) + "|")
    for r in rows:
        lines.append(
            "| "
            + " | ".join(
                _md_cell(f(r.get(c))) if r.get(c) is not None else "" for _, c, f in MD_COLUMNS
            )
            + " |"
        )
    return "\n".join(lines) + "\n"


def _csv_value(v: Any) -> Any:
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return ""
    return csv_cell(v) if isinstance(v, str) else v  # an error text is no formula


def _config_json(cfg: BenchConfig) -> dict[str, Any]:
    d = asdict(cfg)
    d["out_dir"] = str(cfg.out_dir)
    return d


def machine() -> dict[str, Any]:
    """Where the table was made: host name, platform, CPU count, Python version."""
    return {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
    }


def write(rows: Sequence[dict[str, Any]], cfg: BenchConfig) -> list[Path]:
    """Write bench.md, bench.csv and bench.json under ``cfg.out_dir``; return their paths."""
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    md, cs, js = out / MD_FILE, out / CSV_FILE, out / JSON_FILE
    replace(md, markdown(rows, cfg).encode())
    text = io.StringIO(newline="")
    w = csv.writer(text)
    w.writerow(COLUMN_NAMES)
    for r in rows:
        w.writerow([_csv_value(r.get(c)) for c in COLUMN_NAMES])
    replace(cs, text.getvalue().encode())
    clean = [
        {c: (None if _csv_value(r.get(c)) == "" else r.get(c)) for c in COLUMN_NAMES} for r in rows
    ]
    doc = {
        "config": _config_json(cfg),
        "machine": machine(),
        "columns": [{"name": c.name, "unit": c.unit, "doc": c.doc} for c in COLUMNS],
        "rows": clean,
    }
    replace(js, (json.dumps(doc, indent=2) + "\n").encode())
    return [md, cs, js]
