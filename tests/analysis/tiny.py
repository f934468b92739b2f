"""Tiny hand-made traces for the pass golden tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tbdtrace
from tbdtrace.trace import Trace

US = 1000  # ns


def make(
    tmp_path: Path,
    tables: dict[str, dict[str, Any]],
    name: str = "t",
    meta: dict[str, Any] | None = None,
) -> Trace:
    out = tbdtrace.trace.write(tmp_path / name, tables, meta or {"source": "test"})
    return tbdtrace.open(out)


def kernels(rows: list[tuple[int, int, str]], **cols: Any) -> dict[str, Any]:
    """Kernels on cuda:0 from (start_us, end_us, name) rows; extra columns as lists."""
    return {
        "start_ns": [s * US for s, _, _ in rows],
        "end_ns": [e * US for _, e, _ in rows],
        "name": [n for *_, n in rows],
        "device_id": [0] * len(rows),
        "device_type": ["cuda"] * len(rows),
        **cols,
    }


def measured(trace: Trace) -> Any:
    """``trace`` seen through its measured window (an analysis context), as `report`
    shows it by default."""
    from tbdtrace.analysis.engine import context, window

    whole = context.of(trace)
    return whole.windowed(window.resolve(whole))
