"""Step-boundary snapshots for ``--torch-memory posthoc``: where the model state lives.

:class:`SnapshotRecorder` reads the data pointers of parameters, ``.grad`` and optimizer
state at the end of an optimizer's 1st, 2nd, 4th, 8th, ... ``optimizer.step()`` (one
global optimizer step post-hook, the only Python it adds to a training step; on the
other steps it counts and returns), and of every live module and optimizer at
``start()`` and ``stop()``. Parameters and optimizer state keep their storage from step
to step; the gradients of the steps between snapshots are labelled by their life
(:mod:`.posthoc`, rule 2), which the snapshots check. Module buffers (BatchNorm's
running statistics) are weights that no optimizer knows: torch's global module
registration hooks (one call per parameter or buffer registered, while the model is
built) remember the modules made after ``start()`` (weakly), and their own parameters
and buffers are read at the first ``optimizer.step()`` and at ``stop()``; buffers are
updated in place, so one sighting labels their blocks. (A torch without those hooks,
before 2.1, finds the modules with one ``gc`` scan at the first step.) Nothing here holds
a tensor: only addresses and times are kept, and modules through weak references.

The labeller (:mod:`.posthoc`) matches the addresses to allocator blocks live at each
snapshot's time. Costs (2-core dev box, ResNet-50's 161 parameters with SGD momentum):
~70 us per snapshot with warm caches (0.3-0.5 ms after a training step, under load), a
few microseconds on the other steps; at the first step, the read of the modules built
since start (bench/torch_memory_overhead.py).
"""

from __future__ import annotations

import time
import weakref
from typing import Any

import numpy as np

from tbdtrace.collector.memory.posthoc import GRADIENTS, OPTIMIZER_STATE, WEIGHTS, Snapshots
from tbdtrace.collector.memory.torch_live import (
    Baseline,
    is_optimizer,
    live_framework_objects,
    object_tensors,
)

_CODE = {"weights": WEIGHTS, "gradients": GRADIENTS, "optimizer_state": OPTIMIZER_STATE}


class SnapshotRecorder:
    """Records where parameters, buffers, gradients and optimizer state live.

    ``start()`` takes the first snapshot (and, for sources that see only what is
    allocated from now on, the :class:`~.torch_live.Baseline`) and installs the optimizer
    post-hook and the module registration hooks; ``stop()`` removes them and takes the
    last snapshot; :meth:`snapshots` gives them all.
    """

    def __init__(self, model: Any = None, optimizer: Any = None, scan_gc: bool = True):
        """``model``/``optimizer`` (optional) are read even when ``scan_gc`` is off."""
        self.scan_gc = scan_gc
        self._explicit = [o for o in (optimizer, model) if o is not None]
        self._ts: list[int] = []
        self._addr: list[list[int]] = []
        self._cat: list[int] = []
        self._modules: list[weakref.ref[Any]] = []  # outermost modules live at start
        # id(module) -> module, for modules that registered a parameter or buffer since
        # start (torch's global registration hooks: model construction, not training)
        self._registered: dict[int, weakref.ref[Any]] = {}
        self._first_read = False  # modules made since start read (at the first step)
        self._handles: list[Any] = []
        self.baseline = Baseline()
        self.steps = 0  # optimizer steps seen
        self._counts: dict[int, int] = {}  # id(optimizer) -> its steps seen
        self.hook_thread_ns: list[int] = []  # thread CPU time of each post-hook call
        self.hook_snapshot: list[bool] = []  # whether that call took a snapshot
        self.errors: list[str] = []  # snapshots that failed (the step itself went on)
        self.gc_scans = 0  # gc scans after start (no registration hooks in this torch)
        self._tensor: Any = None
        self.start_ns: int | None = None
        self.stop_ns: int | None = None

    # -- recording -----------------------------------------------------------------------
    def _add(self, ts: int, cat: str, ptrs: list[int]) -> None:
        if ptrs:
            self._ts.append(ts)
            self._addr.append(ptrs)
            self._cat.append(_CODE[cat])

    def _objects(self) -> list[Any]:
        found = live_framework_objects() if self.scan_gc else []
        ids = {id(o) for o in found}
        return found + [o for o in self._explicit if id(o) not in ids]

    def _read_objects(self, objects: list[Any], ts: int) -> None:
        for obj in objects:
            for cat, tensors in object_tensors(obj):
                self._add(ts, cat, [p for p in map(_data_ptr, tensors) if p])

    def _on_register(self, module: Any, name: str, value: Any) -> None:
        """Module parameter/buffer registration hook: remember the module (weakly)."""
        ref = self._registered.get(id(module))
        if ref is None or ref() is not module:
            self._registered[id(module)] = weakref.ref(module)

    def _read_registered(self, ts: int) -> None:
        """Own parameters and buffers of the live modules made since start."""
        for ref in list(self._registered.values()):
            m = ref()
            if m is None:
                continue
            self._add(ts, "weights", [p for p in map(_data_ptr, m.parameters(recurse=False)) if p])
            self._add(ts, "weights", [p for p in map(_data_ptr, m.buffers(recurse=False)) if p])

    def _after_step(self, opt: Any, args: Any, kwargs: Any) -> None:
        """The optimizer step post-hook: a snapshot of ``opt``'s tensors at its 1st, 2nd,
        4th, 8th, ... step."""
        t0 = time.thread_time_ns()
        self.steps += 1
        n = self._counts[id(opt)] = self._counts.get(id(opt), 0) + 1
        snap = n & (n - 1) == 0
        if snap:
            try:
                self._snapshot(opt, time.time_ns())
            except Exception as e:  # noqa: BLE001 - a snapshot must never fail a step
                self.errors.append(f"{type(e).__name__}: {e}")
        self.hook_thread_ns.append(time.thread_time_ns() - t0)
        self.hook_snapshot.append(snap)

    def _snapshot(self, opt: Any, ts: int) -> None:
        if not self._first_read:  # buffers of modules built since start: no optimizer has them
            self._first_read = True
            if self._handles[1:]:
                self._read_registered(ts)
            elif not self._modules and self.scan_gc:  # a torch without registration hooks
                self.gc_scans += 1
                self._read_objects(self._objects(), ts)
        tensor = self._tensor
        params = [p for g in opt.param_groups for p in g["params"]]
        self._add(ts, "weights", [p.data_ptr() for p in params])
        self._add(
            ts, "gradients", [g.data_ptr() for g in (p.grad for p in params) if g is not None]
        )
        self._add(
            ts,
            "optimizer_state",
            [v.data_ptr() for s in opt.state.values() for v in s.values() if isinstance(v, tensor)],
        )

    # -- lifecycle -----------------------------------------------------------------------
    def start(self, baseline: bool = False) -> None:
        """Snapshot what lives now and install the hooks. ``baseline``: also keep
        start-of-capture rows for a source that reports no earlier allocation."""
        import torch
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim_module

        self._tensor = torch.Tensor
        self.start_ns = time.time_ns()
        objects = self._objects()
        if baseline:
            self.baseline.take(objects, self.start_ns)
        self._read_objects(objects, self.start_ns)
        self._modules = [weakref.ref(o) for o in objects if not is_optimizer(o)]
        self._handles = [optim_module.register_optimizer_step_post_hook(self._after_step)]
        # torch >= 2.1; without them the first step scans with gc instead.
        for name in (
            "register_module_parameter_registration_hook",
            "register_module_buffer_registration_hook",
        ):
            register = getattr(nn_module, name, None)
            if register is not None:
                self._handles.append(register(self._on_register))

    def stop(self) -> None:
        """Remove the hooks and snapshot what lives now (nothing is kept alive)."""
        for h in self._handles:
            h.remove()
        self._handles = []
        self.baseline.detach()
        self.stop_ns = time.time_ns()
        mods = [m for m in (r() for r in self._modules) if m is not None]
        objects = self._objects()
        ids = {id(o) for o in objects}
        self._read_objects(objects + [m for m in mods if id(m) not in ids], self.stop_ns)
        self._read_registered(self.stop_ns)

    def snapshots(self) -> Snapshots:
        """Every sighting, one entry per tensor."""
        n = [len(a) for a in self._addr]
        if not n:
            return Snapshots.empty()
        addr = np.array([p for a in self._addr for p in a], dtype=np.uint64).view(np.int64)
        return Snapshots(
            np.repeat(np.array(self._ts, dtype=np.int64), n),
            addr,
            np.repeat(np.array(self._cat, dtype=np.int64), n),
        )

    def stats(self) -> dict[str, Any]:
        """Counts and the post-hook's thread CPU time: in all, the median call without a
        snapshot and the median snapshot after the first (which also reads the modules
        built since start)."""
        t = np.array(self.hook_thread_ns, dtype=np.int64)
        snap = np.array(self.hook_snapshot, dtype=bool)
        later = snap.copy()
        later[:1] = False
        return {
            "optimizer_steps": self.steps,
            "snapshot_times": len(set(self._ts)),
            "modules_registered": len(self._registered),
            "gc_scans": self.gc_scans,
            "hook_thread_ns": int(t.sum()),
            "hook_plain_median_thread_ns": int(np.median(t[~snap])) if (~snap).any() else None,
            "hook_snapshot_median_thread_ns": int(np.median(t[later])) if later.any() else None,
            "hook_first_thread_ns": int(t[0]) if t.size else None,
            "errors": self.errors[:5],
        }


def _data_ptr(t: Any) -> int:
    """A tensor's data pointer, 0 for one without storage (sparse, meta)."""
    try:
        return int(t.data_ptr())
    except (RuntimeError, NotImplementedError, AttributeError):
        return 0
