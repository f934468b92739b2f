"""PyTorch tensor-level CUDA allocations from the caching allocator's own history.

Used where torch.profiler cannot run beside the capture: under the native CUPTI collector
(one CUPTI per process, docs/COLLECTOR.md) the ``allocated`` level of the memory timeline
comes from ``torch.cuda.memory._record_memory_history`` (no stack context) instead of
profiler memory events. CUPTI's MEMORY2 records give the ``reserved`` level (the
allocator's cudaMalloc/cudaFree).

Labels (``--torch-memory``, :mod:`.torch_labels`): ``posthoc`` (default) keeps the
step-boundary snapshots of :class:`~.torch_snapshots.SnapshotRecorder` beside the history
(``torch_snapshots.json`` in the process's part) and labels the blocks in the parent,
where the CUPTI trace gives the phases (:func:`join`); ``exact`` labels them in the
process with the hook tracker (:class:`~.torch_classify.TorchMemoryTracker`) and also
keeps the snapshots, so :func:`join` labels the same blocks post hoc and writes how far
the two agree (``meta.extra.torch_memory.processes[].agreement``).

History entries (``torch.cuda.memory._snapshot()["device_traces"][device]``) map to rows:

* ``alloc``: a block handed to a tensor (``size`` is the block, rounded by the allocator);
* ``free_requested``: the tensor released it; ``allocated`` bytes drop here, as in
  ``torch.cuda.memory_allocated()``. ``free_completed`` (the block is reusable, later
  than the request when the block was used on another stream) is used only for a block
  whose request is missing (the history is a ring buffer: its oldest entries go first);
* ``segment_alloc``/``segment_free`` (and ``segment_map``/``segment_unmap`` with
  expandable segments): the allocator's reserved total, kept in ``total_reserved_bytes``;
  the reserved rows themselves come from CUPTI;
* ``time_us`` is microseconds on the Unix epoch, the clock of CUPTI's timestamps.
"""

from __future__ import annotations

import atexit
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace import trace as trace_io
from tbdtrace.analysis.engine.memory_blocks import pair
from tbdtrace.collector import child_protocol as proto
from tbdtrace.collector.memory import agreement, phases, posthoc
from tbdtrace.collector.memory.torch_classify import TorchMemoryTracker, TrackerConfig
from tbdtrace.collector.memory.torch_labels import check_mode, posthoc_meta
from tbdtrace.collector.memory.torch_snapshots import SnapshotRecorder

SPOOL_ENV = proto.TORCH_MEMORY_SPOOL
MODE_ENV = proto.TORCH_MEMORY_MODE  # posthoc (unset) or exact
MAX_ENTRIES_ENV = proto.TORCH_MEMORY_MAX_ENTRIES
SNAPSHOTS_FILE = proto.TORCH_SNAPSHOTS_NAME  # in a torchmem-<pid> part
# The history's clock step: time_us, microseconds.
HISTORY_RESOLUTION_NS = 1000
# Each history entry costs ~100 bytes without stack context; 2M entries ~ 200 MB at most.
DEFAULT_MAX_ENTRIES = 2_000_000

_SEGMENT_GROW = ("segment_alloc", "segment_map")
_SEGMENT_SHRINK = ("segment_free", "segment_unmap")


def history_rows(
    device_traces: Sequence[Sequence[Mapping[str, Any]]], pid: int
) -> tuple[dict[str, list[Any]], dict[str, Any]]:
    """``memory`` columns (level allocated) and counts from a snapshot's device traces.

    Args:
        device_traces: ``_snapshot()["device_traces"]``, one list of entries per device.
        pid: process the entries belong to.
    Returns:
        (columns for ``trace.to_table("memory", ...)``, statistics for meta).
    """
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "ts_ns",
            "action",
            "bytes",
            "address",
            "device_id",
            "stream_id",
            "total_allocated_bytes",
            "total_reserved_bytes",
        )
    }
    stats: dict[str, Any] = {"entries": 0, "actions": {}, "devices": []}
    for dev, entries in enumerate(device_traces):
        live: dict[int, int] = {}  # address -> block bytes, allocated and not yet released
        pending: set[int] = set()  # released by a free_requested, completion not yet seen
        allocated = reserved = 0
        first = last = None
        for e in entries:
            action = str(e.get("action"))
            stats["actions"][action] = stats["actions"].get(action, 0) + 1
            stats["entries"] += 1
            addr, size = int(e.get("addr", 0)), int(e.get("size", 0))
            ts = int(e.get("time_us", 0)) * 1000
            first = ts if first is None else first
            last = ts
            if action in _SEGMENT_GROW:
                reserved += size
                continue
            if action in _SEGMENT_SHRINK:
                reserved = max(0, reserved - size)
                continue
            if action == "alloc":
                live[addr] = size
                allocated += size
                row = "alloc"
            elif action == "free_requested":
                size = live.pop(addr, size)
                allocated = max(0, allocated - size)
                pending.add(addr)
                row = "free"
            elif action == "free_completed":
                if addr in pending:
                    pending.discard(addr)
                    continue
                # The request fell out of the ring buffer: the completion stands for it.
                size = live.pop(addr, size)
                allocated = max(0, allocated - size)
                row = "free"
            else:  # snapshot, oom, annotations: no change in what is allocated
                continue
            cols["ts_ns"].append(ts)
            cols["action"].append(row)
            cols["bytes"].append(size)
            cols["address"].append(addr)
            cols["device_id"].append(dev)
            stream = e.get("stream")
            cols["stream_id"].append(int(stream) if stream is not None else None)
            cols["total_allocated_bytes"].append(allocated)
            cols["total_reserved_bytes"].append(reserved)
        if entries:
            stats["devices"].append(
                {
                    "device_id": dev,
                    "entries": len(entries),
                    "first_ts_ns": first,
                    "last_ts_ns": last,
                }
            )
    n = len(cols["ts_ns"])
    cols.update(
        level=["allocated"] * n,
        device_type=["cuda"] * n,
        pid=[pid] * n,
        memory_kind=["device"] * n,
    )
    return cols, stats


class CudaHistoryRecorder:
    """Records the caching allocator's history, with step-boundary snapshots and, in
    ``exact`` mode, the hook tracker's labels.

    ``start()`` starts the snapshots (and the tracker's hooks) and turns the history on
    when CUDA is initialized (at once if it already is); ``stop()`` snapshots the
    history, turns it off and returns the ``memory`` table (labelled in exact mode, or
    None when CUDA was never used).
    """

    def __init__(
        self,
        config: TrackerConfig | None = None,
        max_entries: int = DEFAULT_MAX_ENTRIES,
        mode: str = "posthoc",
    ):
        self.mode = check_mode(mode)
        if self.mode == "off":
            raise ValueError("CudaHistoryRecorder: mode 'off' records nothing")
        self.tracker = TorchMemoryTracker(config) if self.mode == "exact" else None
        self.snapshots = SnapshotRecorder()
        self.max_entries = max_entries
        self.stats: dict[str, Any] = {}
        self._recording = False

    def start(self) -> None:
        import torch

        if self.tracker is not None:
            self.tracker.start()
        self.snapshots.start()
        # Queued until torch initializes CUDA (run at once when it already has), so a
        # program that never touches the GPU gets no CUDA context from us.
        torch.cuda._lazy_call(self._enable)

    def _enable(self) -> None:
        import torch

        # Runs inside torch's CUDA initialization: an error here must not fail the program.
        try:
            torch.cuda.memory._record_memory_history(
                "all", context=None, stacks="python", max_entries=self.max_entries
            )
        except Exception as e:  # any failure only loses the allocated level
            self.stats["error"] = f"_record_memory_history: {e}"
            return
        self._recording = True

    def stop(self) -> Any:
        """The ``memory`` table (labelled in exact mode), or None if CUDA was not used."""
        import torch

        if self.tracker is not None:
            self.tracker.stop()
        self.snapshots.stop()
        if not self._recording:
            return None
        snap = torch.cuda.memory._snapshot()
        torch.cuda.memory._record_memory_history(None)
        self._recording = False
        traces = snap.get("device_traces") or []
        cols, stats = history_rows(traces, os.getpid())
        stats.update(
            max_entries=self.max_entries,
            wrapped=any(len(t) >= self.max_entries for t in traces),
            stop_time_ns=time.time_ns(),
        )
        self.stats = stats
        table = trace_io.to_table("memory", cols, num_rows=len(cols["ts_ns"]))
        return self.tracker.classify(table) if self.tracker is not None else table

    def part_meta(self) -> dict[str, Any]:
        """The meta of this process's ``torchmem-<pid>`` part."""
        mem = {"mode": self.mode, "recorder": self.snapshots.stats()}
        return {
            "source": "torch_cuda_history",
            "extra": {"torch_cuda_history": self.stats, "torch_memory": mem},
        }


def start_in_child() -> None:
    """Called when torch is imported in a process under ``capture --backend cupti``:
    records tensor allocations (``TBDTRACE_TORCH_MEMORY_MODE``: posthoc or exact), writes
    ``<spool>/torchmem-<pid>`` at exit."""
    spool = Path(os.environ[SPOOL_ENV])
    max_entries = int(os.environ.get(MAX_ENTRIES_ENV) or DEFAULT_MAX_ENTRIES)
    rec = CudaHistoryRecorder(max_entries=max_entries, mode=os.environ.get(MODE_ENV) or "posthoc")
    rec.start()

    def finish() -> None:
        table = rec.stop()
        if table is None:
            return
        files = {SNAPSHOTS_FILE: rec.snapshots.snapshots().to_json()}
        part = spool / f"{proto.TORCHMEM_PREFIX}{os.getpid()}"
        trace_io.write(part, {"memory": table}, rec.part_meta(), files)

    atexit.register(finish)


def _read_part(p: Path) -> tuple[pa.Table, dict[str, Any], dict[str, Any], posthoc.Snapshots]:
    """(memory table, history statistics, torch_memory meta, snapshots) of one part.
    Parts without a mode were written by the hook tracker alone."""
    tr = trace_io.open(p)
    extra = tr.meta.get("extra") or {}
    snap_file = p / SNAPSHOTS_FILE
    snaps = (
        posthoc.Snapshots.from_json(snap_file.read_bytes())
        if snap_file.exists()
        else posthoc.Snapshots.empty()
    )
    mem = dict(extra.get("torch_memory") or {"mode": "exact"})
    return tr.table("memory"), dict(extra.get("torch_cuda_history") or {}), mem, snaps


def _label_part(
    table: pa.Table, mode: str, snaps: posthoc.Snapshots, its: phases.Iterations
) -> tuple[pa.Table, dict[str, Any]]:
    """Post hoc: the table labelled. Exact: the table as the hooks labelled it, and the
    post-hoc labels of the same blocks compared with it."""
    if mode == "posthoc":
        return posthoc.label(table, snaps, its, None, HISTORY_RESOLUTION_NS)
    blocks = pair(table)
    sel = np.flatnonzero(blocks.address != -1).astype(np.int64)
    post, stats = posthoc.label_blocks(blocks, sel, snaps, its, HISTORY_RESOLUTION_NS)
    names = table.column("category").to_pylist()
    hooks = agreement.codes([names[r] for r in blocks.alloc_row.tolist()] if len(blocks) else [])
    names_post = [posthoc.NAMES[c] for c in post.tolist()]
    if len(its) and sel.size:
        stats["agreement"] = agreement.compare(blocks, sel, hooks, agreement.codes(names_post), its)
    return table, stats


def join(spool_dir: Path, tables: dict[str, Any], extra: dict[str, Any]) -> None:
    """Append each ``torchmem-<pid>`` part (allocated level) to ``tables["memory"]``,
    labelled post hoc against the phases in ``tables`` where the part asks for it;
    ``extra["torch_cuda_history"]`` and ``extra["torch_memory"]`` say what was done."""
    parts = sorted(p for p in spool_dir.glob(f"{proto.TORCHMEM_PREFIX}*") if p.is_dir())
    if not parts:
        return
    phase_tables = dict(tables)
    if "steps" not in phase_tables:  # the harness's steps, read by the runner after this
        from tbdtrace.collector import steps

        harness = steps.read(spool_dir / proto.STEPS_NAME)
        if harness["step"]:
            phase_tables["steps"] = harness
    mems, stats, procs, modes = [], [], [], set()
    for p in parts:
        pid = proto.pid_of(p.name)
        table, st, mem, snaps = _read_part(p)
        st["pid"] = pid
        stats.append(st)
        its = phases.find(phase_tables, pid, snaps.times())
        table, lab = _label_part(table, mem["mode"], snaps, its)
        modes.add(mem["mode"])
        procs.append({"pid": pid, **(mem.get("recorder") or {}), **lab})
        mems.append(table)
    cupti_mem = tables.get("memory")
    if cupti_mem is not None:  # CUPTI's reserved level, as column mappings
        mems.insert(
            0,
            cupti_mem
            if isinstance(cupti_mem, pa.Table)
            else trace_io.to_table("memory", cupti_mem),
        )
    tables["memory"] = pa.concat_tables(mems).unify_dictionaries().combine_chunks()
    extra["torch_cuda_history"] = stats
    mode = modes.pop() if len(modes) == 1 else "mixed"
    extra["torch_memory"] = (posthoc_meta() if mode == "posthoc" else {"mode": mode}) | {
        "processes": procs
    }


__all__ = [
    "MODE_ENV",
    "SPOOL_ENV",
    "CudaHistoryRecorder",
    "history_rows",
    "join",
    "start_in_child",
]
