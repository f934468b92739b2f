"""Label PyTorch allocations with what they hold, from the live framework objects.

Entry point for capture backends (the torch backend calls it; so does
:func:`tbdtrace.collector.memory.profile`)::

    tracker = TorchMemoryTracker()
    tracker.start()                 # before the profiler starts
    ...                             # training runs, unmodified
    tracker.stop()                  # after the profiler stops
    memory = tracker.classify(memory_table, ops_table)
    # or, on the tables dict given to tbdtrace.trace.write:
    tables = tracker.classify_tables(tables)

``classify`` returns the ``memory`` table with ``category`` filled in, plus one alloc row
per storage that was already live at ``start()`` (parameters, gradients, optimizer state
of modules and optimizers that existed then), stamped at the start time, so weights
allocated before capture still count.

How a block gets its category (no framework is patched; only public hooks are used):

* ``weights``: storage of a parameter or a buffer (BatchNorm's ``running_mean``,
  ``running_var``, ``num_batches_tracked``: model state saved with the parameters) of a
  module called while tracking (global module forward pre-hook), or of a parameter in an
  optimizer's ``param_groups``;
* ``gradients``: storage of a parameter's ``.grad``, seen when it is accumulated
  (``register_post_accumulate_grad_hook``), around every ``optimizer.step()`` (global
  optimizer step hooks) and at ``stop()``;
* ``optimizer_state``: every tensor in ``optimizer.state`` (Adam's ``exp_avg``,
  ``exp_avg_sq`` and ``step`` scalars; SGD's ``momentum_buffer``), seen around each step;
* ``inputs``: tensors passed to an outermost module call that are neither parameters nor
  results of autograd (no ``grad_fn``, no ``requires_grad``): the batch and the targets;
* ``activations``: tensors saved for backward (``torch.autograd.graph.saved_tensors_hooks``
  with identity pack/unpack), TBD's feature maps;
* ``workspace``: still unlabelled blocks allocated and freed inside one framework op
  (see :mod:`tbdtrace.collector.memory.workspace`);
* ``other``: the rest (temporaries between ops, the allocator's own blocks).

An observation (a tensor seen at time ``t``) labels the block at the tensor's storage
address that is live at ``t`` (both clocks are CLOCK_REALTIME nanoseconds: the torch
profiler stamps memory events on the Unix epoch). When a block is seen as several things
the first in :data:`PRIORITY` wins: a weight saved for backward stays a weight.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tbdtrace import trace as trace_io
from tbdtrace.collector.memory.matching import Obs, label
from tbdtrace.collector.memory.torch_live import (
    RANK,
    Baseline,
    is_optimizer,
    live_framework_objects,
    storage,
)
from tbdtrace.collector.memory.torch_live import tensors as tensors_in


@dataclass(frozen=True)
class TrackerConfig:
    activations: bool = True  # install saved-tensor hooks (tensors saved for backward)
    scan_gc: bool = True  # find live modules/optimizers with gc at start and stop
    inputs: bool = True  # label outermost module inputs as `inputs`
    match_tolerance_ns: int = 1_000_000  # slack when an observation is at a block's edge


class TorchMemoryTracker:
    """Observes parameters, gradients, optimizer state, inputs and saved tensors."""

    def __init__(
        self, config: TrackerConfig | None = None, model: Any = None, optimizer: Any = None
    ):
        """``model``/``optimizer`` (optional) are tracked even when ``scan_gc`` is off."""
        self.config = config or TrackerConfig()
        self._explicit = [o for o in (optimizer, model) if o is not None]
        self._obs = Obs([], [], [], [], [], [])
        self._baseline = Baseline()
        self._handles: list[Any] = []
        self._params_hooked: set[int] = set()
        self._saved_hooks: Any = None
        self._local = threading.local()
        self._lock = threading.Lock()
        self.start_ns: int | None = None
        self.stop_ns: int | None = None

    # -- recording -----------------------------------------------------------------------
    def observe(self, tensors: Iterable[Any], category: str) -> None:
        """Record that ``tensors`` hold ``category`` now (public for explicit marking)."""
        code = RANK[category]
        now = time.time_ns()
        with self._lock:
            for t in tensors:
                s = storage(t)
                if s is None:
                    continue
                o = self._obs
                o.ptr.append(s[0])
                o.nbytes.append(s[1])
                o.ts_ns.append(now)
                o.cat.append(code)
                o.device_type.append(s[2])
                o.device_id.append(s[3])

    def mark_inputs(self, *tensors: Any) -> None:
        """Label ``tensors`` (e.g. a batch not passed to a module) as inputs."""
        self.observe(tensors_in(tensors), "inputs")

    def _observe_optimizer(self, opt: Any, grads: bool = True) -> None:
        params = [p for g in opt.param_groups for p in g["params"]]
        self.observe(params, "weights")
        if grads:
            self.observe((p.grad for p in params if p.grad is not None), "gradients")
        self.observe(tensors_in([dict(s) for s in opt.state.values()]), "optimizer_state")

    def _observe_module(self, mod: Any) -> None:
        params = list(mod.parameters())
        self.observe(params, "weights")
        self.observe(mod.buffers(), "weights")
        self.observe((p.grad for p in params if p.grad is not None), "gradients")
        self._hook_params(params)

    def _hook_params(self, params: list[Any]) -> None:
        for p in params:
            if id(p) in self._params_hooked or not p.requires_grad:
                continue
            self._params_hooked.add(id(p))
            hook = getattr(p, "register_post_accumulate_grad_hook", None)
            if hook is not None:
                self._handles.append(hook(lambda q: self.observe([q.grad], "gradients")))

    # -- hooks -------------------------------------------------------------------------------
    def _pre_forward(self, mod: Any, args: Any) -> None:
        depth = getattr(self._local, "depth", 0)
        self._local.depth = depth + 1
        if depth:
            return
        self._observe_module(mod)
        if self.config.inputs:
            own = {id(p) for p in mod.parameters()}
            self.observe(
                (
                    t
                    for t in tensors_in(args)
                    if id(t) not in own and t.grad_fn is None and not t.requires_grad
                ),
                "inputs",
            )

    def _post_forward(self, mod: Any, args: Any, out: Any) -> None:
        self._local.depth = max(0, getattr(self._local, "depth", 1) - 1)

    def _pack(self, t: Any) -> tuple[Any, int]:
        self.observe([t], "activations")
        # A detached alias: same storage, but no reference to the graph. Returning `t`
        # itself would make a saved output hold its own grad_fn (a reference cycle), and a
        # graph dropped without backward would then live until the garbage collector ran.
        # The version is kept because autograd skips its in-place check for hooked saves.
        return t.detach(), int(t._version)

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Snapshot storages live now and install the hooks."""
        import torch
        from torch.nn.modules import module as nn_module
        from torch.optim import optimizer as optim_module

        self.start_ns = time.time_ns()
        objects = self._objects()
        self._baseline.take(objects, self.start_ns)
        for obj in objects:
            if not is_optimizer(obj):
                self._hook_params(list(obj.parameters()))
        self._handles += [
            nn_module.register_module_forward_pre_hook(self._pre_forward),
            nn_module.register_module_forward_hook(self._post_forward, always_call=True),
            optim_module.register_optimizer_step_pre_hook(
                lambda opt, a, k: self._observe_optimizer(opt)
            ),
            optim_module.register_optimizer_step_post_hook(
                lambda opt, a, k: self._observe_optimizer(opt)
            ),
        ]
        if self.config.activations:
            self._saved_hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)
            self._saved_hooks.__enter__()

    def stop(self) -> None:
        """Observe what is live now, then remove every hook."""
        if self._saved_hooks is not None:
            self._saved_hooks.__exit__(None, None, None)
            self._saved_hooks = None
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._baseline.detach()
        for obj in self._objects():
            if is_optimizer(obj):
                self._observe_optimizer(obj)
            else:
                params = list(obj.parameters())
                self.observe(params, "weights")
                self.observe(obj.buffers(), "weights")
                self.observe((p.grad for p in params if p.grad is not None), "gradients")
        self.stop_ns = time.time_ns()

    def _objects(self) -> list[Any]:
        found = live_framework_objects() if self.config.scan_gc else []
        ids = {id(o) for o in found}
        return found + [o for o in self._explicit if id(o) not in ids]

    # -- classification -------------------------------------------------------------------
    def classify(
        self, memory: pa.Table | Mapping[str, Any], ops: pa.Table | Mapping[str, Any] | None = None
    ) -> pa.Table:
        """``memory`` with ``category`` set on every row, plus the start-time baseline rows.

        Args:
            memory: the captured ``memory`` table (pyarrow or column mapping).
            ops: the captured ``ops`` table, for workspace detection (optional).
        Returns:
            a ``memory`` table (schema of tbdtrace.schema), sorted by ts_ns.
        """
        mem = memory if isinstance(memory, pa.Table) else trace_io.to_table("memory", memory)
        mem = pa.concat_tables([self._baseline.rows(), mem])
        if ops is not None and not isinstance(ops, pa.Table):
            ops = trace_io.to_table("ops", ops)
        return label(mem, self._obs, self.config.match_tolerance_ns, ops)

    def classify_tables(self, tables: Mapping[str, Any]) -> dict[str, Any]:
        """``tables`` (name -> pyarrow table or column mapping, as for trace.write) with
        ``memory`` replaced by :meth:`classify` of it and of ``ops``; other tables are
        passed through. A missing ``memory`` table gets the start-time rows alone."""
        out = dict(tables)
        mem = tables.get("memory")
        out["memory"] = self.classify(mem if mem is not None else {"ts_ns": []}, tables.get("ops"))
        return out


def _unpack(packed: tuple[Any, int]) -> Any:
    """Give the saved tensor back, raising as autograd would if it changed in place."""
    t, version = packed
    if int(t._version) != version:
        raise RuntimeError(
            "one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [{t.type()} {list(t.shape)}] is at version {t._version}; "
            f"expected version {version} instead (checked by tbdtrace's saved-tensor hook)"
        )
    return t
