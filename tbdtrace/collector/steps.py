"""The steps file: one JSON object per line, appended by the workload harness
(``workloads/harness.py``) or by a capture window controller (:mod:`.windows`, for steps
marked with ``tbdtrace.step()`` or NVTX ``step N`` ranges), read here into ``steps``
table columns. The one reader of that file: capture (:mod:`.run`), ``tbdtrace recover``
and the suite's ``steps`` runs (:mod:`tbdtrace.suite.capture`) all use it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tbdtrace.errors import TraceError

COLUMNS = ("step", "start_ns", "end_ns", "pid", "rank", "samples", "warmup", "loss", "source")


def empty() -> dict[str, list[Any]]:
    return {k: [] for k in COLUMNS}


def read(path: Path) -> dict[str, list[Any]]:
    """``steps`` columns from a steps file (absent: no rows). A last line torn by a process
    killed while writing it is skipped; any other bad line is a TraceError naming it."""
    cols = empty()
    if not path.exists():
        return cols
    text = path.read_text(errors="replace")
    lines = text.splitlines()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            vals = [int(r[k]) for k in ("step", "start_ns", "end_ns")]
        except (ValueError, KeyError, TypeError) as e:
            if n == len(lines) and not text.endswith("\n"):
                break  # the last record, torn by a process killed while writing it
            raise TraceError(
                f"{path}:{n}: bad steps record ({e}); the workload harness "
                "writes one JSON object per line"
            ) from None
        for k, v in zip(("step", "start_ns", "end_ns"), vals, strict=True):
            cols[k].append(v)
        for k in ("pid", "rank", "samples", "warmup", "loss"):
            cols[k].append(r.get(k))
        cols["source"].append(r.get("source") or "harness")
    return cols


def record(step: int, start_ns: int, end_ns: int, pid: int, source: str) -> str:
    """One steps-file line for a step marked outside the harness."""
    return json.dumps(
        {"step": step, "start_ns": start_ns, "end_ns": end_ns, "pid": pid, "source": source}
    )


def within(
    cols: dict[str, list[Any]], spans: Sequence[tuple[int, int, int | None]]
) -> dict[str, list[Any]]:
    """The rows of ``cols`` whose step lies inside one of ``spans`` ((start_ns, end_ns,
    pid), pid None: any process): the steps a windowed capture recorded."""
    keep = [
        i
        for i, (s, e, p) in enumerate(
            zip(cols["start_ns"], cols["end_ns"], cols["pid"], strict=True)
        )
        if any(a <= s and e <= b and (q is None or p is None or p == q) for a, b, q in spans)
    ]
    return {k: [v[i] for i in keep] for k, v in cols.items()}
