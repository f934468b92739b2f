"""The parent's side of the profiler children: one trace from the ``part-<pid>``
directories the captured processes wrote (:mod:`.profiler_child`), with what the
profilers printed.

When some processes are ranks (:mod:`.torch_dist`), the parts of processes that are not
(the torchrun agent, a spawning parent) are left out of the tables and listed in
``meta.extra.parts`` with ``rank`` null.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from tbdtrace import trace
from tbdtrace.collector import child_protocol as proto

# Lines Kineto prints on every CPU-only capture: no news for the user.
# ... and TensorFlow's profiler on every capture (profiler_session.cc, save_profile.cc).
BENIGN_LOG = (
    "USDT:",
    "gpuGetDeviceCount failed",
    "STAGE:",
    "ProfilerStep",
    "Profiler session",
    "Collecting XSpace",
)


def concat(tables: list[pa.Table]) -> pa.Table:
    """One table, one dictionary per string column (an Arrow IPC file allows only one)."""
    return pa.concat_tables(tables).unify_dictionaries().combine_chunks()


def _process(meta: dict[str, Any]) -> dict[str, Any]:
    return dict((meta.get("extra") or {}).get("process") or {})


def _names(p: Path) -> list[str]:
    return sorted(f.stem for f in p.glob(f"*{trace.TABLE_SUFFIX}"))


def assemble(parts: list[Path]) -> tuple[dict[str, Any], dict[str, Any]]:
    """One trace (tables, meta) from the parts (module docstring)."""
    tables: dict[str, list[pa.Table]] = {}
    opened = [trace.open(p) for p in parts]
    metas = [t.meta for t in opened]
    procs = [_process(m) for m in metas]
    ranked = any(pr.get("rank") is not None for pr in procs)
    for p, tr, pr in zip(parts, opened, procs, strict=True):
        if ranked and pr.get("rank") is None:
            continue
        for name in _names(p):
            tables.setdefault(name, []).append(tr.table(name))
    out = {n: concat(ts) for n, ts in tables.items()}
    # The first part that holds a profile gives the meta (a process whose capture window
    # never opened wrote an empty part).
    base = next((m for m in metas if m.get("source")), metas[0] if metas else None)
    meta: dict[str, Any] = dict(base) if base else {"source": "torch"}
    meta["extra"] = dict(meta.get("extra") or {})
    meta["extra"].pop("process", None)
    meta["extra"].pop("windows_opened", None)
    meta["extra"]["parts"] = [
        {"dir": p.name, "start_time_ns": m.get("start_time_ns"), **pr}
        for p, m, pr in zip(parts, metas, procs, strict=True)
    ]
    if ranked:
        ranks = sorted({pr["rank"] for pr in procs if pr.get("rank") is not None})
        worlds = sorted({pr["world_size"] for pr in procs if pr.get("world_size") is not None})
        meta["ranks"] = ranks
        meta["extra"]["distributed"] = {
            "ranks": ranks,
            "world_size": worlds[0] if len(worlds) == 1 else worlds,
            "rank_of_pid": {
                str(pr["pid"]): pr["rank"] for pr in procs if pr.get("rank") is not None
            },
            "not_ranks": [pr["pid"] for pr in procs if pr.get("rank") is None and "pid" in pr],
        }
    starts = [m["start_time_ns"] for m in metas if m.get("start_time_ns") is not None]
    meta["start_time_ns"] = min(starts) if starts else None
    return out, meta


def profiler_log(spool: Path) -> tuple[bytes, list[str]]:
    """What the profiler printed (every process's log, in pid order) and the lines of it
    that are news to the user (not :data:`BENIGN_LOG`)."""
    chunks, news = [], []
    for f in sorted(spool.glob(f"{proto.PROFILER_LOG_PREFIX}*.log")):
        data = f.read_bytes()
        if data:
            chunks.append(f"== {f.name}\n".encode() + data)
        for line in data.decode(errors="replace").splitlines():
            if line.strip() and not any(b in line for b in BENIGN_LOG):
                news.append(line.strip())
    return b"".join(chunks), news


def read(spool: Path) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(tables, meta, notes) from the parts in ``spool``; ``notes`` name the processes
    that started a profiler but left no part (killed before writing it)."""
    parts = sorted(p for p in spool.glob(f"{proto.PART_PREFIX}*") if p.is_dir())
    started = sorted(proto.pid_of(f.name) for f in spool.glob(f"{proto.PROFILER_LOG_PREFIX}*.log"))
    tables, meta = assemble(parts) if parts else ({}, {"source": "torch", "extra": {}})
    notes = []
    have = {proto.pid_of(p.name) for p in parts}
    lost = [pid for pid in started if pid not in have]
    if lost:
        notes.append(
            f"no profile from process(es) {', '.join(map(str, lost))} (killed "
            "before the profiler's data was written)"
        )
    meta["extra"]["profiled_pids"] = started
    return tables, meta, notes


def add_steps(tables: dict[str, Any], meta: dict[str, Any], steps: dict[str, list[Any]]) -> None:
    """The steps file's rows join the parts' ``steps`` (each rank's steps get its rank,
    else its pid's)."""
    if not steps["step"]:
        return
    dist = meta["extra"].get("distributed")
    if dist:
        by_pid = dist["rank_of_pid"]
        steps["rank"] = [
            r if r is not None else by_pid.get(str(p))
            for r, p in zip(steps["rank"], steps["pid"], strict=True)
        ]
    else:
        del steps["rank"]
    tables["steps"] = concat(
        [t for t in (tables.get("steps"), trace.to_table("steps", steps)) if t is not None]
    )
