"""Memory profiling: allocations labelled weights, gradients, optimizer_state, inputs,
activations, workspace or other (see docs/MEMORY.md).

* ``tbdtrace.collector.memory.torch_labels``: PyTorch's labelling modes
  (``--torch-memory posthoc|exact|off``) and the labellers capture backends call at
  start/stop: post hoc (``posthoc``: step-boundary snapshots, ``torch_snapshots``; the
  trace's phases, ``phases``; the rules, ``posthoc``) or the hook tracker
  (:class:`TorchMemoryTracker`, ``torch_classify``);
* :func:`profile`: in-process PyTorch memory capture to a trace directory;
* ``tbdtrace.collector.memory.tensorflow``: TensorFlow allocator totals and variable sizes;
* ``tbdtrace.collector.memory.mxnet``: MXNet's profiler storage counter and Gluon model sizes.
The analysis over time is the ``memory`` pass (``tbdtrace.analysis.passes.memory``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["TorchMemoryTracker", "TrackerConfig", "profile"]


def __getattr__(name: str) -> Any:
    # Keep `import tbdtrace.collector.memory` light: torch loads only when these are used.
    if name in ("TorchMemoryTracker", "TrackerConfig"):
        from tbdtrace.collector.memory import torch_classify

        return getattr(torch_classify, name)
    if name == "profile":
        from tbdtrace.collector.memory.torch_profile import profile

        return profile
    raise AttributeError(f"module 'tbdtrace.collector.memory' has no attribute {name!r}")
