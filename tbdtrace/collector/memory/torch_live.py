"""What both PyTorch labellers read from live framework objects.

* :func:`live_framework_objects`: the optimizers and outermost modules alive now (``gc``);
* :func:`storage` / :func:`tensors`: a tensor's storage and the tensors inside containers;
* :class:`Baseline`: the storages already live when a capture starts (parameters, buffers,
  gradients, optimizer state), as ``memory`` alloc rows stamped at the start, plus a free
  row when such a tensor dies during the capture (the profiler reports neither).

Used by the hook tracker (:mod:`.torch_classify`, ``--torch-memory exact``) and the
step-boundary snapshots (:mod:`.torch_snapshots`, ``--torch-memory posthoc``).
"""

from __future__ import annotations

import gc
import os
import time
import weakref
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

from tbdtrace import trace as trace_io
from tbdtrace.collector.memory.matching import PRIORITY

RANK = {c: i for i, c in enumerate(PRIORITY)}


def storage(t: Any) -> tuple[int, int, str, int] | None:
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


def tensors(obj: Any, depth: int = 0) -> Iterator[Any]:
    """The tensors in ``obj`` (a tensor, or lists, tuples and mappings of them, 4 deep)."""
    import torch

    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth < 4 and isinstance(obj, (list, tuple)):
        for o in obj:
            yield from tensors(o, depth + 1)
    elif depth < 4 and isinstance(obj, Mapping):
        for o in obj.values():
            yield from tensors(o, depth + 1)


def is_optimizer(obj: Any) -> bool:
    from torch.optim import Optimizer

    return isinstance(obj, Optimizer)


def live_framework_objects() -> list[Any]:
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


def object_tensors(obj: Any) -> list[tuple[str, list[Any]]]:
    """(category, tensors) of a module (parameters and buffers are weights, ``.grad``
    gradients) or an optimizer (its parameters, their ``.grad``, its state)."""
    if is_optimizer(obj):
        params = [p for g in obj.param_groups for p in g["params"]]
        state = list(tensors([dict(st) for st in obj.state.values()]))
        buffers: list[Any] = []
    else:
        params, state, buffers = list(obj.parameters()), [], list(obj.buffers())
    grads = [p.grad for p in params if p.grad is not None]
    return [
        ("weights", params),
        ("weights", buffers),
        ("gradients", grads),
        ("optimizer_state", state),
    ]


def allocator_bytes(nbytes: int, device_type: str) -> int:
    """Block size the allocator reports for a storage of ``nbytes``: exact on CPU; the CUDA
    caching allocator rounds up to a multiple of 512 bytes (blocks it does not split can be
    larger still, which a tensor alone cannot tell)."""
    if device_type != "cuda":
        return nbytes
    return max(512, -(-nbytes // 512) * 512)


class Baseline:
    """Storages live at the start of a capture, as ``memory`` rows.

    The profiler drops the free of a block allocated before it started, so each such
    tensor gets a finalizer: when it dies during the capture (``zero_grad`` setting a
    ``.grad`` to None) its block is taken as freed then.
    """

    def __init__(self) -> None:
        # (device_type, address) -> (nbytes, category code, device_id) live at start
        self.blocks: dict[tuple[str, int], tuple[int, int, int]] = {}
        self.free_ns: dict[tuple[str, int], int] = {}
        self._finalizers: list[weakref.finalize[Any, Any]] = []
        self.start_ns: int | None = None

    def take(self, objects: list[Any], start_ns: int) -> None:
        """Record the parameters, buffers, gradients and state of ``objects`` now."""
        self.start_ns = start_ns
        for obj in objects:
            for cat, ts in object_tensors(obj):
                for t in ts:
                    self._add(t, RANK[cat])

    def _add(self, t: Any, code: int) -> None:
        s = storage(t)
        if s is None:
            return
        key = (s[2], s[0])
        prev = self.blocks.get(key)
        if prev is None:
            self._finalizers.append(weakref.finalize(t, self._died, key))
        if prev is None or code < prev[1]:
            self.blocks[key] = (allocator_bytes(s[1], s[2]), code, s[3])

    def _died(self, key: tuple[str, int]) -> None:
        self.free_ns.setdefault(key, time.time_ns())

    def detach(self) -> None:
        """Stop watching for deaths (at the end of the capture)."""
        for f in self._finalizers:
            f.detach()
        self._finalizers.clear()

    def rows(self, categories: bool = True) -> pa.Table:
        """Alloc rows at start for storages live then; a free row when one died.
        ``categories``: label the rows (else category stays null, for a labeller that
        works from snapshots instead)."""
        pid = os.getpid()  # the profiler runs in this process and stamps the same pid
        rows: list[tuple[int, str, tuple[str, int], tuple[int, int, int]]] = []
        for key, val in sorted(self.blocks.items()):
            rows.append((self.start_ns or 0, "alloc", key, val))
            if key in self.free_ns:
                rows.append((self.free_ns[key], "free", key, val))
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
                "category": [PRIORITY[r[3][1]] if categories else None for r in rows],
            },
            num_rows=len(rows),
        )
