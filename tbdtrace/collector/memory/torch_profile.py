"""In-process PyTorch memory profiling: ``tbdtrace.collector.memory.profile(out_dir)``.

Runs torch.profiler (CPU activity, and CUDA when available) with ``profile_memory=True``
and a memory labeller (:mod:`tbdtrace.collector.memory.torch_labels`: post hoc by default,
``mode="exact"`` for the hook tracker), then writes a trace whose ``memory`` table has every
allocation labelled by category::

    with tbdtrace.collector.memory.profile("run.tbd") as p:
        for batch in loader:
            train_step(batch)
            p.step()          # ends a step (a row of the steps table)
    tbdtrace.analysis.engine.memory_replay.summarize(tbdtrace.open("run.tbd"))

Nothing in the training code changes. The capture backend ``--backend torch`` does the
same through the same labellers; this API is for scripts that want memory only.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tbdtrace import trace as trace_io
from tbdtrace.collector.memory.torch_classify import TrackerConfig
from tbdtrace.collector.memory.torch_labels import ExactLabeller, PosthocLabeller, labeller
from tbdtrace.errors import TraceError


@dataclass
class Profile:
    """Handle yielded by :func:`profile`."""

    labeller: PosthocLabeller | ExactLabeller
    prof: Any  # torch.profiler.profile
    path: Path
    step_ends_ns: list[int] = field(default_factory=list)

    def step(self) -> None:
        """End the current training step (rows of the steps table, source ``memory``)."""
        self.step_ends_ns.append(time.time_ns())

    def mark_inputs(self, *tensors: Any) -> None:
        """Label tensors as inputs when they never pass through a module call (exact
        mode; post hoc, inputs come from the blocks' lives)."""
        self.labeller.mark_inputs(*tensors)


@contextmanager
def profile(
    out_dir: str | os.PathLike[str],
    model: Any = None,
    optimizer: Any = None,
    config: TrackerConfig | None = None,
    workload: str | None = None,
    mode: str = "posthoc",
) -> Iterator[Profile]:
    """Profile the block's memory; on exit write a trace to ``out_dir``.

    ``model`` and ``optimizer`` are optional: live ones are found on their own (see
    :class:`TrackerConfig.scan_gc`); pass them to be explicit or when scanning is off.
    ``mode``: ``posthoc`` (step-boundary snapshots, no per-call hook) or ``exact`` (the
    hook tracker, ``config`` applies): docs/MEMORY.md.
    """
    import torch
    from torch.profiler import ProfilerActivity

    from tbdtrace.importers import kineto

    check_out_dir(out_dir)
    acts = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        acts.append(ProfilerActivity.CUDA)
    lab = labeller(mode, model, optimizer, config)
    if lab is None:
        raise ValueError("profile(): mode 'off' records nothing; use 'posthoc' or 'exact'")
    prof = torch.profiler.profile(activities=acts, profile_memory=True)
    handle = Profile(lab, prof, Path(out_dir))
    start_ns = time.time_ns()
    lab.start()
    prof.start()
    try:
        yield handle
    finally:
        prof.stop()
        lab.stop()
    with tempfile.TemporaryDirectory(prefix="tbdtrace-mem-") as tmp:
        chrome = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(chrome))
        tables, meta = kineto.import_files([chrome])
    if handle.step_ends_ns:
        tables["steps"] = _steps(start_ns, handle.step_ends_ns)
    tables = lab.classify_tables(tables)
    meta.update(source="torch", backend="torch", workload=workload, source_files=[])
    meta.setdefault("extra", {})["torch_memory"] = lab.meta()
    trace_io.write(out_dir, tables, meta)


def check_out_dir(out_dir: str | os.PathLike[str]) -> None:
    """Fail before training starts, not after, when ``out_dir`` cannot take a trace."""
    out = Path(out_dir)
    if (
        out.exists()
        and not (out / trace_io.META_FILE).exists()
        and (out.is_file() or any(out.iterdir()))
    ):
        raise TraceError(
            f"{out}: exists and is not a tbdtrace trace; choose another output directory"
        )


def _steps(start_ns: int, ends_ns: list[int]) -> dict[str, list[Any]]:
    """Step N runs from the previous ``step()`` call (or the start) to the Nth call."""
    starts = [start_ns, *ends_ns[:-1]]
    return {
        "step": list(range(len(ends_ns))),
        "start_ns": starts,
        "end_ns": list(ends_ns),
        "pid": [os.getpid()] * len(ends_ns),
        "source": ["memory"] * len(ends_ns),
    }
