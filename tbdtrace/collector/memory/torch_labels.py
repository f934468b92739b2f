"""``--torch-memory posthoc|exact|off``: how PyTorch allocations get their categories.

* ``posthoc`` (the default): no per-call hook. Step-boundary snapshots
  (:mod:`.torch_snapshots`) and the trace's phases (:mod:`.phases`) label the allocator's
  blocks after the run (:mod:`.posthoc`);
* ``exact``: the hook tracker (:mod:`.torch_classify`: module, saved-tensor, gradient and
  optimizer hooks), 10-20 ms of Python per ResNet-50 step;
* ``off``: PyTorch allocations are not recorded.

:func:`labeller` gives the object a capture backend drives for a source that reports
allocations made while it runs (torch.profiler's memory events): ``start()`` before the
profiler starts, ``stop()`` after it stops, ``classify_tables(tables)`` on the imported
tables, ``meta()`` for ``meta.extra.torch_memory``. The CUDA allocator history of the
CUPTI capture command is labelled by :mod:`.torch_cuda` from the same parts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from tbdtrace import trace as trace_io
from tbdtrace.collector.memory import phases, posthoc
from tbdtrace.collector.memory.torch_classify import TorchMemoryTracker, TrackerConfig
from tbdtrace.collector.memory.torch_snapshots import SnapshotRecorder

MODES = ("posthoc", "exact", "off")
DEFAULT_MODE = "posthoc"


def check_mode(mode: str | bool) -> str:
    """``mode`` as one of :data:`MODES` (True is the default mode, False is off);
    ValueError naming the choices otherwise."""
    if mode is True:
        return DEFAULT_MODE
    if mode is False:
        return "off"
    if mode not in MODES:
        raise ValueError(f"torch memory mode {mode!r}: choose one of {', '.join(MODES)}")
    return str(mode)


def posthoc_meta(stats: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``meta.extra.torch_memory`` of a post-hoc labelled trace."""
    out: dict[str, Any] = {"mode": "posthoc", "cannot_tell_apart": list(posthoc.CANNOT_TELL_APART)}
    if stats is not None:
        out["labeller"] = dict(stats)
    return out


class PosthocLabeller:
    """Post-hoc labels for torch.profiler memory events (``--backend torch``,
    :func:`tbdtrace.collector.memory.profile`)."""

    mode = "posthoc"

    def __init__(self, model: Any = None, optimizer: Any = None, scan_gc: bool = True):
        self.recorder = SnapshotRecorder(model, optimizer, scan_gc)
        self.stats: dict[str, Any] = {}

    def start(self) -> None:
        self.recorder.start(baseline=True)

    def stop(self) -> None:
        self.recorder.stop()

    def mark_inputs(self, *tensors: Any) -> None:
        """Exact mode's explicit input marking has no post-hoc counterpart: inputs come
        from the blocks' lives (docs/MEMORY.md)."""

    def classify_tables(self, tables: Mapping[str, Any]) -> dict[str, Any]:
        """``tables`` with ``memory`` labelled (plus the start-of-capture rows)."""
        out = dict(tables)
        mem = tables.get("memory")
        mem_t = (
            mem
            if isinstance(mem, pa.Table)
            else trace_io.to_table("memory", mem if mem is not None else {"ts_ns": []})
        )
        mem_t = pa.concat_tables([self.recorder.baseline.rows(), mem_t])
        snaps = self.recorder.snapshots()
        its = phases.find(tables, None, snaps.times())
        out["memory"], stats = posthoc.label(mem_t, snaps, its, tables.get("ops"))
        self.stats = {**stats, **self.recorder.stats(), "pid": os.getpid()}
        return out

    def meta(self) -> dict[str, Any]:
        return posthoc_meta(self.stats)


class ExactLabeller:
    """The hook tracker behind the same interface (``--torch-memory exact``)."""

    mode = "exact"

    def __init__(
        self,
        model: Any = None,
        optimizer: Any = None,
        config: TrackerConfig | None = None,
    ):
        self.tracker = TorchMemoryTracker(config, model=model, optimizer=optimizer)

    def start(self) -> None:
        self.tracker.start()

    def stop(self) -> None:
        self.tracker.stop()

    def mark_inputs(self, *tensors: Any) -> None:
        self.tracker.mark_inputs(*tensors)

    def classify_tables(self, tables: Mapping[str, Any]) -> dict[str, Any]:
        return self.tracker.classify_tables(tables)

    def meta(self) -> dict[str, Any]:
        return {"mode": "exact"}


def labeller(
    mode: str | bool,
    model: Any = None,
    optimizer: Any = None,
    config: TrackerConfig | None = None,
) -> PosthocLabeller | ExactLabeller | None:
    """The labeller of ``mode`` (None for ``off``). ``config`` is the hook tracker's
    (exact); its ``scan_gc`` applies to both."""
    mode = check_mode(mode)
    if mode == "exact":
        return ExactLabeller(model, optimizer, config)
    if mode == "posthoc":
        scan = config.scan_gc if config is not None else True
        return PosthocLabeller(model, optimizer, scan)
    return None
