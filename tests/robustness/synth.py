"""Small inputs the generated robustness tests make themselves: a Kineto profile with
chosen kernel and op names, a version-2 (Arrow IPC) trace, and what a trace holds (to
tell an old trace from a new one after a kill)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

import tbdtrace


def kineto(path: Path, names: list[str], steps: int = 3, thread: str = "main") -> Path:
    """A PyTorch-profiler (Kineto) JSON file: ``steps`` ProfilerStep ranges, in each one
    op ``op_<name>`` launching one kernel ``<name>`` per name (so every name reaches the
    kernels, ops, hotspots and diff tables)."""
    ev: list[dict[str, Any]] = [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": thread}},
    ]
    t = 0
    for i in range(steps):
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{i}",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": 100 + 80 * len(names),
            }
        )
        for j, n in enumerate(names):
            c = i * 1000 + j + 1
            at = t + 10 + j * 80
            ev.append(
                {
                    "ph": "X",
                    "cat": "cpu_op",
                    "name": f"op_{n}",
                    "pid": 1,
                    "tid": 1,
                    "ts": at,
                    "dur": 70,
                    "args": {"External id": c},
                }
            )
            ev.append(
                {
                    "ph": "X",
                    "cat": "cuda_runtime",
                    "name": "cudaLaunchKernel",
                    "pid": 1,
                    "tid": 1,
                    "ts": at + 2,
                    "dur": 5,
                    "args": {"correlation": c, "External id": c},
                }
            )
            ev.append(
                {
                    "ph": "X",
                    "cat": "kernel",
                    "name": n,
                    "pid": 0,
                    "tid": 7,
                    "ts": at + 10,
                    "dur": 40 + j,
                    "args": {"correlation": c, "device": 0, "stream": 7, "External id": c},
                }
            )
        t += 200 + 80 * len(names)
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [{"id": 0, "name": "NVIDIA A100"}],
        "traceEvents": ev,
    }
    path.write_text(json.dumps(doc))
    return path


def v2_trace(d: Path, names: list[str]) -> Path:
    """A version-2 trace (Arrow IPC files, no marker) of kernels and steps, written
    straight with pyarrow as the previous format stored it (plain columns)."""
    d.mkdir(parents=True)
    n = len(names)
    kernels = pa.table(
        {
            "start_ns": pa.array([1000 * (i + 1) for i in range(n)], pa.int64()),
            "end_ns": pa.array([1000 * (i + 1) + 500 for i in range(n)], pa.int64()),
            "name": pa.array(names).dictionary_encode(),
        }
    )
    steps = pa.table(
        {
            "step": pa.array([0], pa.int64()),
            "start_ns": pa.array([0], pa.int64()),
            "end_ns": pa.array([1000 * (n + 2)], pa.int64()),
        }
    )
    for name, tbl in (("kernels", kernels), ("steps", steps)):
        with (
            pa.OSFile(str(d / f"{name}.arrow"), "wb") as sink,
            pa.ipc.new_file(sink, tbl.schema) as w,
        ):
            w.write_table(tbl)
    (d / "meta.json").write_text(json.dumps({"schema_version": 2, "source": "kineto"}))
    return d


def open_strict(path: Path) -> tbdtrace.Trace:
    """The trace at ``path``, every table checked against its marker (a tbdtrace before
    the check opens it as it did)."""
    import inspect

    if "strict" in inspect.signature(tbdtrace.open).parameters:
        return tbdtrace.open(path, strict=True)
    return tbdtrace.open(path)


def content(path: Path) -> tuple[Any, ...]:
    """What the trace at ``path`` holds, for comparing traces: its schema version and
    source, and every table's rows (opened strictly: a mixture fails its check)."""
    tr = open_strict(path)
    rows = []
    for t in tbdtrace.schema.TABLES:
        if tr.has(t.name):
            cols = [c for c in ("start_ns", "end_ns", "name") if c in t.column_names]
            rows.append((t.name, tr.num_rows(t.name), tr.table(t.name, cols).to_pylist()))
    return (tr.meta.get("schema_version"), tr.meta.get("source"), tuple(map(str, rows)))
