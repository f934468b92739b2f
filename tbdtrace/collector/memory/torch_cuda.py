"""PyTorch tensor-level CUDA allocations from the caching allocator's own history.

Used where torch.profiler cannot run beside the capture: under the native CUPTI collector
(one CUPTI per process, docs/COLLECTOR.md) the ``allocated`` level of the memory timeline
comes from ``torch.cuda.memory._record_memory_history`` instead of profiler memory events,
and the
:class:`~tbdtrace.collector.memory.torch_classify.TorchMemoryTracker` labels it the same way.
CUPTI's MEMORY2 records give the ``reserved`` level (the allocator's cudaMalloc/cudaFree).

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

from tbdtrace.collector import child_protocol as proto
from tbdtrace.collector.memory.torch_classify import TorchMemoryTracker, TrackerConfig

SPOOL_ENV = proto.TORCH_MEMORY_SPOOL
MAX_ENTRIES_ENV = proto.TORCH_MEMORY_MAX_ENTRIES
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
    """Records the caching allocator's history and labels it with the tracker.

    ``start()`` installs the tracker's hooks and turns the history on when CUDA is
    initialized (at once if it already is); ``stop()`` snapshots the history, turns it
    off and returns the labelled ``memory`` table (or None when CUDA was never used).
    """

    def __init__(self, config: TrackerConfig | None = None, max_entries: int = DEFAULT_MAX_ENTRIES):
        self.tracker = TorchMemoryTracker(config)
        self.max_entries = max_entries
        self.stats: dict[str, Any] = {}
        self._recording = False

    def start(self) -> None:
        import torch

        self.tracker.start()
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
        """The labelled ``memory`` table, or None if CUDA was not used."""
        import torch

        self.tracker.stop()
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
        from tbdtrace import trace as trace_io

        table = trace_io.to_table("memory", cols, num_rows=len(cols["ts_ns"]))
        return self.tracker.classify(table)


def start_in_child() -> None:
    """Called when torch is imported in a process under ``capture --backend cupti``:
    records and labels tensor allocations, writes ``<spool>/torchmem-<pid>`` at exit."""
    spool = Path(os.environ[SPOOL_ENV])
    max_entries = int(os.environ.get(MAX_ENTRIES_ENV) or DEFAULT_MAX_ENTRIES)
    rec = CudaHistoryRecorder(max_entries=max_entries)
    rec.start()

    def finish() -> None:
        from tbdtrace import trace as trace_io

        table = rec.stop()
        if table is None:
            return
        meta = {"source": "torch_cuda_history", "extra": {"torch_cuda_history": rec.stats}}
        trace_io.write(spool / f"torchmem-{os.getpid()}", {"memory": table}, meta)

    atexit.register(finish)


__all__ = ["CudaHistoryRecorder", "history_rows", "start_in_child"]
