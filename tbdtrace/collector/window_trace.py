"""Capture windows in the trace: the window records the processes wrote become
``meta.windows``, and the tables are cut to the windows.

The backends collect only inside windows, so little is cut: a window's warm-up steps
(collected so that one-time costs stay out of the recorded steps, then discarded, as
``torch.profiler.schedule`` does), the steps of the steps file outside every window, and
the host samples, which the sampler takes for the whole run. A row stays when its time
(``start_ns``, else ``ts_ns``) lies in a window of its process (or of any process, when
the row or the window has no pid): ``[active start, end]``.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace import schema, trace
from tbdtrace.collector import child_protocol as proto

Span = tuple[int, int, int | None]  # (active start ns, end ns, pid or None)


def _mask(times: np.ndarray, pids: np.ndarray | None, spans: Sequence[Span]) -> np.ndarray:
    keep = np.zeros(len(times), dtype=bool)
    for a, b, pid in spans:
        inside = (times >= a) & (times <= b)
        if pid is not None and pids is not None:
            inside &= (pids == pid) | (pids < 0)
        keep |= inside
    return keep


def keep(tables: dict[str, Any], spans: Sequence[Span]) -> None:
    """Drop, in place, the rows of ``tables`` outside ``spans`` (tables without a time
    column stay whole)."""
    for name in list(tables):
        t = tables[name]
        if name not in schema.TABLES_BY_NAME:
            continue  # the collector's private tables (contexts): no time of their own
        if not isinstance(t, pa.Table):
            t = trace.to_table(name, t)
        col = "start_ns" if "start_ns" in t.column_names else "ts_ns"
        if col not in t.column_names:
            continue
        times = t.column(col).fill_null(0).to_numpy(zero_copy_only=False)
        pids = None
        if "pid" in t.column_names:
            pids = t.column("pid").fill_null(-1).to_numpy(zero_copy_only=False)
        mask = _mask(times, pids, spans)
        if not mask.all():
            t = t.filter(pa.array(mask))
        tables[name] = t


def read_windows(spool: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every window record the processes of a capture wrote, by start time."""

    out: list[dict[str, Any]] = []
    for f in sorted(Path(spool).glob(f"{proto.WINDOWS_PREFIX}*.jsonl")):
        for line in f.read_text(errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                out.append(json.loads(line))
    return sorted(out, key=lambda w: (w.get("start_ns") or 0, w.get("pid") or 0))


def summarize(windows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``meta.windows``: one entry per window, processes that opened the same one together
    (their steps, reason, trigger, span on the trace clock, pids)."""
    groups: dict[tuple[Any, ...], dict[str, Any]] = {}
    for w in windows:
        key: tuple[Any, ...] = (w["reason"], w["first_step"], w["last_step"], w["trigger"])
        if w.get("reason") == "on-demand" and w.get("first_step") is None:
            key += (w.get("start_ns"),)
        g = groups.get(key)
        if g is None:
            groups[key] = g = {
                "reason": w.get("reason"),
                "first_step": w.get("first_step"),
                "last_step": w.get("last_step"),
                "trigger": w.get("trigger"),
                "start_ns": w.get("active_start_ns"),
                "end_ns": w.get("end_ns"),
                "complete": bool(w.get("complete")),
                "pids": [],
            }
        g["start_ns"] = min(g["start_ns"], w.get("active_start_ns") or g["start_ns"])
        g["end_ns"] = max(g["end_ns"], w.get("end_ns") or g["end_ns"])
        g["complete"] = g["complete"] and bool(w.get("complete"))
        g["pids"].append(w.get("pid"))
    return sorted(groups.values(), key=lambda g: g["start_ns"] or 0)


def spans_of(windows: list[dict[str, Any]]) -> list[tuple[int, int, int | None]]:
    """(active start, end, pid) of each window record: what the trace keeps."""
    return [
        (int(w["active_start_ns"]), int(w["end_ns"]), w.get("pid"))
        for w in windows
        if w.get("active_start_ns") is not None and w.get("end_ns") is not None
    ]
