"""TensorFlow memory: allocator totals over time, weights and state sized from variables.

TensorFlow gives no per-allocation stream without patching, so this records what its
allocator reports (``tf.config.experimental.get_memory_info``: bytes in use and the peak
since the last ``reset_memory_stats``; it works for CPU:0 as well as GPU:i) at a fixed
interval on a background thread and at every ``step()``, and sizes the model from its
variables::

    with tbdtrace.collector.memory.tensorflow.profile("run.tbd", model=model, optimizer=opt) as p:
        for x, y in data:
            train_step(x, y)
            p.step()

The ``memory`` table then holds, per device, three resizable blocks (level allocated,
one fixed address each): ``weights`` (bytes of the model's variables: trainable and not),
``optimizer_state`` (bytes of the optimizer's variables) and ``other`` (the allocator's
total minus those two, never below 0). A resize is a free of the old size and an alloc
of the new one at the sample time. The peak between two samples is exact in size (the
allocator's own peak, which is reset at each sample) and is stamped 1 ns before the
sample. Gradients are transient inside ``tf.GradientTape``; their size (the trainable
variables' bytes) goes to ``meta.extra.memory_model`` and they count under ``other``.
Weights and optimizer state are counted on the first GPU sampled, else on the CPU (where
TensorFlow places variables in a single-device run).
"""

from __future__ import annotations

import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from tbdtrace import trace as trace_io
from tbdtrace.collector.memory.torch_profile import check_out_dir

_ADDR = {"weights": 1, "optimizer_state": 2, "other": 3}


def variable_bytes(variables: Any) -> int:
    """Sum of ``numel * itemsize`` over TensorFlow/Keras variables (bytes)."""
    import numpy as np

    total = 0
    for v in variables or ():
        total += int(np.prod(v.shape, dtype=np.int64)) * np.dtype(str(v.dtype)).itemsize
    return total


def _devices() -> list[tuple[str, str, int]]:
    """(tf name, device_type, index) for each logical CPU/GPU device."""
    import tensorflow as tf

    out = []
    for d in tf.config.list_logical_devices():
        kind, _, idx = d.name.rpartition("/device:")[2].partition(":")
        if kind in ("CPU", "GPU"):
            out.append((f"{kind}:{idx}", "cpu" if kind == "CPU" else "cuda", int(idx)))
    return out


@dataclass
class Sampler:
    """Samples allocator totals; use through :func:`profile`."""

    interval_s: float = 0.005  # background sampling period
    sizer: Callable[[], dict[str, int]] | None = None  # weights, optimizer_state (bytes)
    fixed: dict[str, int] = field(default_factory=dict)  # the latest sizes
    rows: list[tuple[int, str, int, str, int]] = field(default_factory=list)
    step_ends_ns: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._devs = _devices()
        self._live: dict[tuple[int, str], int] = {}  # (device idx in _devs, category) -> bytes
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name="tbdtrace-tf-memory", daemon=True)

    def start(self) -> None:
        self.sample()
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def step(self) -> None:
        self.sample()
        self.step_ends_ns.append(time.time_ns())

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def sample(self) -> None:
        import tensorflow as tf

        with self._lock:
            if self.sizer is not None:
                self.fixed = self.sizer()
            now = time.time_ns()
            # TensorFlow places variables on the first GPU when there is one.
            home = next((i for i, d in enumerate(self._devs) if d[1] == "cuda"), 0)
            for i, (name, _, _) in enumerate(self._devs):
                info = tf.config.experimental.get_memory_info(name)
                tf.config.experimental.reset_memory_stats(name)
                fixed = self.fixed if i == home else {}
                base = sum(fixed.values())
                self._resize(i, "weights", fixed.get("weights", 0), now)
                self._resize(i, "optimizer_state", fixed.get("optimizer_state", 0), now)
                self._resize(i, "other", max(0, int(info["peak"]) - base), now - 1)
                self._resize(i, "other", max(0, int(info["current"]) - base), now)

    def _resize(self, dev: int, cat: str, nbytes: int, ts: int) -> None:
        old = self._live.get((dev, cat), 0)
        if old == nbytes:
            return
        if old:
            self.rows.append((ts, "free", dev, cat, old))
        if nbytes:
            self.rows.append((ts, "alloc", dev, cat, nbytes))
        self._live[(dev, cat)] = nbytes

    def memory_columns(self) -> dict[str, list[Any]]:
        rows = sorted(self.rows, key=lambda r: r[0])
        return {
            "ts_ns": [r[0] for r in rows],
            "action": [r[1] for r in rows],
            "level": ["allocated"] * len(rows),
            "bytes": [r[4] for r in rows],
            "address": [_ADDR[r[3]] for r in rows],
            "device_type": [self._devs[r[2]][1] for r in rows],
            "device_id": [self._devs[r[2]][2] for r in rows],
            "pid": [os.getpid()] * len(rows),
            "category": [r[3] for r in rows],
        }


@contextmanager
def profile(
    out_dir: str | os.PathLike[str],
    model: Any = None,
    optimizer: Any = None,
    interval_s: float = 0.005,
    workload: str | None = None,
) -> Iterator[Sampler]:
    """Sample TensorFlow memory for the block; on exit write a trace to ``out_dir``.

    ``model`` and ``optimizer`` (Keras objects or anything with ``.variables``) size the
    weights and optimizer state; an optimizer whose variables do not exist yet is sized
    again at every sample.
    """
    check_out_dir(out_dir)

    def size() -> dict[str, int]:
        return {
            "weights": variable_bytes(getattr(model, "variables", None)),
            "optimizer_state": variable_bytes(getattr(optimizer, "variables", None)),
        }

    sampler = Sampler(interval_s=interval_s, sizer=size)
    if any(d[1] == "cpu" for d in sampler._devs) and os.environ.get(
        "TF_CPU_ALLOCATOR_USE_BFC", ""
    ).lower() not in ("1", "true"):
        warnings.warn(
            "TensorFlow's default CPU allocator leaves small allocations out of its "
            "statistics; set TF_CPU_ALLOCATOR_USE_BFC=true before TensorFlow starts "
            "for complete CPU totals",
            stacklevel=3,
        )
    start_ns = time.time_ns()
    sampler.start()
    try:
        yield sampler
    finally:
        sampler.stop()
    tables: dict[str, Any] = {"memory": sampler.memory_columns()}
    ends = sampler.step_ends_ns
    if ends:
        tables["steps"] = {
            "step": list(range(len(ends))),
            "start_ns": [start_ns, *ends[:-1]],
            "end_ns": ends,
            "pid": [os.getpid()] * len(ends),
            "source": ["memory"] * len(ends),
        }
    grads = variable_bytes(getattr(model, "trainable_variables", None))
    trace_io.write(
        out_dir,
        tables,
        {
            "source": "tensorflow",
            "framework": "tensorflow",
            "workload": workload,
            "start_time_ns": start_ns,
            "extra": {"memory_model": {**sampler.fixed, "gradients": grads}},
        },
    )
