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

import gc
import os
import threading
import time
import weakref
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from tbdtrace import trace as trace_io
from tbdtrace.collector.memory.matching import PRIORITY, Obs, label

_RANK = {c: i for i, c in enumerate(PRIORITY)}


@dataclass(frozen=True)
class TrackerConfig:
    activations: bool = True  # install saved-tensor hooks (tensors saved for backward)
    scan_gc: bool = True  # find live modules/optimizers with gc at start and stop
    inputs: bool = True  # label outermost module inputs as `inputs`
    match_tolerance_ns: int = 1_000_000  # slack when an observation is at a block's edge


def _storage(t: Any) -> tuple[int, int, str, int] | None:
    """(address, nbytes, device_type, device_id) of a tensor's storage, None if it has none."""
    try:
        st = t.untyped_storage()
        ptr, nb = int(st.data_ptr()), int(st.nbytes())
    except (RuntimeError, NotImplementedError, AttributeError):
        return None  # sparse, meta, functional wrappers: no plain storage
    if ptr == 0 or nb == 0:
        return None
    dev = t.device
    return ptr, nb, str(dev.type), -1 if dev.index is None else int(dev.index)


def _tensors(obj: Any, depth: int = 0) -> Iterator[Any]:
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth < 4 and isinstance(obj, (list, tuple)):
        for o in obj:
            yield from _tensors(o, depth + 1)
    elif depth < 4 and isinstance(obj, Mapping):
        for o in obj.values():
            yield from _tensors(o, depth + 1)


class TorchMemoryTracker:
    """Observes parameters, gradients, optimizer state, inputs and saved tensors."""

    def __init__(
        self, config: TrackerConfig | None = None, model: Any = None, optimizer: Any = None
    ):
        """``model``/``optimizer`` (optional) are tracked even when ``scan_gc`` is off."""
        self.config = config or TrackerConfig()
        self._explicit = [o for o in (optimizer, model) if o is not None]
        self._obs = Obs([], [], [], [], [], [])
        # (device_type, address) -> (nbytes, category code, device_id) live at start
        self._baseline: dict[tuple[str, int], tuple[int, int, int]] = {}
        self._baseline_free_ns: dict[tuple[str, int], int] = {}
        self._finalizers: list[weakref.finalize[Any, Any]] = []
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
        code = _RANK[category]
        now = time.time_ns()
        with self._lock:
            for t in tensors:
                s = _storage(t)
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
        self.observe(_tensors(tensors), "inputs")

    def _observe_optimizer(self, opt: Any, grads: bool = True) -> None:
        params = [p for g in opt.param_groups for p in g["params"]]
        self.observe(params, "weights")
        if grads:
            self.observe((p.grad for p in params if p.grad is not None), "gradients")
        self.observe(_tensors([dict(s) for s in opt.state.values()]), "optimizer_state")

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
                    for t in _tensors(args)
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
        self._snapshot_baseline()
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
        for f in self._finalizers:
            f.detach()
        self._finalizers.clear()
        for obj in self._objects():
            if _is_optimizer(obj):
                self._observe_optimizer(obj)
            else:
                params = list(obj.parameters())
                self.observe(params, "weights")
                self.observe(obj.buffers(), "weights")
                self.observe((p.grad for p in params if p.grad is not None), "gradients")
        self.stop_ns = time.time_ns()

    def _objects(self) -> list[Any]:
        found = _live_framework_objects() if self.config.scan_gc else []
        ids = {id(o) for o in found}
        return found + [o for o in self._explicit if id(o) not in ids]

    def _snapshot_baseline(self) -> None:
        """Storages live at start: params, buffers, grads and optimizer state of existing
        objects.

        The profiler drops the free of a block allocated before it started, so each such
        tensor gets a finalizer: when it dies during the capture (``zero_grad`` setting a
        ``.grad`` to None) its block is taken as freed then.
        """
        for obj in self._objects():
            if _is_optimizer(obj):
                params = [p for g in obj.param_groups for p in g["params"]]
                state = list(_tensors([dict(st) for st in obj.state.values()]))
            else:
                params, state = list(obj.parameters()), []
                self._hook_params(params)
            grads = [p.grad for p in params if p.grad is not None]
            buffers = [] if _is_optimizer(obj) else list(obj.buffers())
            for tensors, cat in (
                (params, "weights"),
                (buffers, "weights"),
                (grads, "gradients"),
                (state, "optimizer_state"),
            ):
                for t in tensors:
                    self._add_baseline(t, _RANK[cat])

    def _add_baseline(self, t: Any, code: int) -> None:
        s = _storage(t)
        if s is None:
            return
        key = (s[2], s[0])
        prev = self._baseline.get(key)
        if prev is None:
            self._finalizers.append(weakref.finalize(t, self._baseline_died, key))
        if prev is None or code < prev[1]:
            self._baseline[key] = (_allocator_bytes(s[1], s[2]), code, s[3])

    def _baseline_died(self, key: tuple[str, int]) -> None:
        self._baseline_free_ns.setdefault(key, time.time_ns())

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
        mem = pa.concat_tables([self._baseline_rows(mem), mem])
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

    def _baseline_rows(self, mem: pa.Table) -> pa.Table:
        """Alloc rows at start for storages live then; a free row when one died."""
        pid = os.getpid()  # the profiler runs in this process and stamps the same pid
        rows: list[tuple[int, str, tuple[str, int], tuple[int, int, int]]] = []
        for key, val in sorted(self._baseline.items()):
            rows.append((self.start_ns or 0, "alloc", key, val))
            if key in self._baseline_free_ns:
                rows.append((self._baseline_free_ns[key], "free", key, val))
        return trace_io.to_table(
            "memory",
            {
                "ts_ns": [r[0] for r in rows],
                "action": [r[1] for r in rows],
                "level": ["allocated"] * len(rows),
                "bytes": [r[3][0] for r in rows],
                "address": [r[2][1] for r in rows],
                "device_type": [r[2][0] for r in rows],
                "device_id": [r[3][2] for r in rows],
                "pid": [pid] * len(rows),
                "category": [PRIORITY[r[3][1]] for r in rows],
            },
            num_rows=len(rows),
        )


def _allocator_bytes(nbytes: int, device_type: str) -> int:
    """Block size the allocator reports for a storage of ``nbytes``: exact on CPU; the CUDA
    caching allocator rounds up to a multiple of 512 bytes (blocks it does not split can be
    larger still, which a tensor alone cannot tell)."""
    if device_type != "cuda":
        return nbytes
    return max(512, -(-nbytes // 512) * 512)


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


def _is_optimizer(obj: Any) -> bool:
    from torch.optim import Optimizer

    return isinstance(obj, Optimizer)


def _live_framework_objects() -> list[Any]:
    """Live optimizers and outermost modules (a module that is no other's child)."""
    from torch import nn
    from torch.optim import Optimizer

    opts, mods = [], []
    # type() rather than isinstance(): isinstance() may read an object's __class__, which
    # some lazy or deprecated objects intercept (warnings, imports); type() runs no code.
    for o in gc.get_objects():
        t = type(o)
        if issubclass(t, Optimizer):
            opts.append(o)
        elif issubclass(t, nn.Module):
            mods.append(o)
    children = {id(c) for m in mods for c in m.children()}
    return opts + [m for m in mods if id(m) not in children]
