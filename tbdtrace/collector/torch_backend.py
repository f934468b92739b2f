"""``--backend torch``: capture with torch.profiler, for machines without a usable GPU.

The profiler runs with CPU activities (CUDA as well when ``cuda=True`` and a GPU is
usable), ``record_shapes``, ``profile_memory`` and ``with_flops``. At stop the profiler's
own Chrome-trace export is read back through the Kineto importer
(:mod:`tbdtrace.importers.kineto`): that export is what torch.profiler itself writes from
its Kineto events, with times as integer-microsecond-plus-3-decimals text that the importer
turns into exact nanoseconds, so the conversion is the tested one (shapes, FLOPs, memory
events with addresses, ProfilerStep and record_function ranges) instead of a second
hand-kept copy walking ``_KinetoEvent`` objects. The cost is one temporary JSON file.

Starting the profiler leaves ``torch._inductor`` unloaded (:func:`_inductor_unloaded`):
``torch.profiler.profile`` asks ``hasattr(torch, "_inductor")`` to read inductor's
``triton.cudagraphs`` setting, and on torch's lazy module that question imports inductor
and torch._dynamo, about 2 CPU seconds in every captured process that does not load them
itself.

On top of the import, *compute-leaf* CPU ops become ``kernels`` rows with device_type
``cpu`` so GPU-oriented passes work on CPU traces: the CPU analogue of a GPU kernel is the
innermost op that does the work. Only ``cpu_op`` rows count (``python_function`` rows and
annotations neither contain nor are leaves), nesting is by time on one thread, and:

* an op is a kernel when no *compute* cpu_op nests inside it. Bookkeeping ops
  (:data:`BOOKKEEPING_OPS`: allocation, views, metadata) nested inside an op do not make
  it a non-leaf, so ``aten::mkldnn_convolution`` calling ``aten::empty`` for its output is
  still a kernel (with a plain "no child at all" rule convolutions and matmuls vanish from
  CPU traces);
* a bookkeeping op is a kernel only when it has no cpu_op child and no enclosing op is a
  kernel (its time is already inside that kernel otherwise).
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tbdtrace.importers import kineto

# Ops that allocate, alias or inspect tensors without computing on their data.
BOOKKEEPING_OPS = frozenset(
    {
        "aten::empty",
        "aten::empty_strided",
        "aten::empty_like",
        "aten::resize_",
        "aten::as_strided",
        "aten::view",
        "aten::_reshape_alias",
        "aten::reshape",
        "aten::_unsafe_view",
        "aten::t",
        "aten::transpose",
        "aten::permute",
        "aten::expand",
        "aten::expand_as",
        "aten::alias",
        "aten::detach",
        "detach",
        "aten::detach_",
        "aten::lift_fresh",
        "aten::set_",
        "aten::unsqueeze",
        "aten::squeeze",
        "aten::select",
        "aten::slice",
        "aten::narrow",
        "aten::unbind",
        "aten::split",
        "aten::chunk",
        "aten::result_type",
        "aten::_has_compatible_shallow_copy_type",
        "aten::is_nonzero",
        "aten::item",
        "aten::_local_scalar_dense",
        "aten::resolve_conj",
        "aten::resolve_neg",
        "aten::contiguous",
        "aten::view_as",
        "aten::flatten",
        "aten::numpy_T",
        "aten::as_strided_",
        "aten::resize_as_",
        "aten::squeeze_",
        "aten::unsqueeze_",
        "aten::t_",
        "aten::transpose_",
        "aten::new_empty",
        "aten::new_empty_strided",
        "aten::empty_permuted",
        "aten::_empty_affine_quantized",
        "aten::sym_size",
        "aten::sym_stride",
        "aten::sym_numel",
        "aten::size",
        "aten::stride",
        "aten::dim",
    }
)


@dataclass(frozen=True)
class TorchConfig:
    cuda: bool = False  # also record CUDA activities (only when a GPU is usable)
    record_shapes: bool = True  # input shapes and dtypes of ops
    profile_memory: bool = True  # allocation/free events with addresses and bytes
    with_flops: bool = True  # FLOPs of ops the profiler has formulas for
    with_stack: bool = False  # Python stacks (large; off by default)
    # how memory rows get categories (weights, activations, ...): "posthoc" (step-boundary
    # snapshots and phases, no per-call hook), "exact" (hook tracker) or "off"; MEMORY.md
    torch_memory: str = "posthoc"


def available() -> bool:
    """True when torch and its profiler import."""
    try:
        import torch.profiler  # noqa: F401
    except ImportError:
        return False
    return True


def leaf_mask(ops: dict[str, list[Any]]) -> list[bool]:
    """For each ops row: is it a compute-leaf cpu_op (see the module docstring)?"""
    n = len(ops.get("start_ns", []))
    cats = ops.get("category") or [None] * n
    names = ops.get("name") or [None] * n
    rows = sorted(
        (i for i in range(n) if cats[i] == "cpu_op"),
        key=lambda i: (ops["tid"][i] or 0, ops["start_ns"][i], -ops["end_ns"][i]),
    )
    book = [names[i] in BOOKKEEPING_OPS for i in range(n)]
    compute_child = [False] * n
    any_child = [False] * n
    parent = [-1] * n
    stack: list[int] = []
    tid: Any = object()
    for i in rows:
        if ops["tid"][i] != tid:
            stack, tid = [], ops["tid"][i]
        while stack and not (
            ops["start_ns"][i] >= ops["start_ns"][stack[-1]]
            and ops["end_ns"][i] <= ops["end_ns"][stack[-1]]
        ):
            stack.pop()
        if stack:
            parent[i] = stack[-1]
            any_child[stack[-1]] = True
            if not book[i]:
                # Every enclosing op has a compute descendant; stop at one already marked.
                for a in reversed(stack):
                    if compute_child[a]:
                        break
                    compute_child[a] = True
        stack.append(i)
    leaf = [False] * n
    for i in rows:  # parents come before their children in this order
        if not book[i]:
            leaf[i] = not compute_child[i]
        else:
            a, inside_kernel = parent[i], False
            while a >= 0 and not inside_kernel:
                inside_kernel, a = leaf[a], parent[a]
            leaf[i] = not any_child[i] and not inside_kernel
    return leaf


def leaf_kernels(ops: dict[str, list[Any]]) -> dict[str, list[Any]]:
    """``kernels`` columns (device_type cpu) for the leaf cpu_ops of ``ops`` columns."""
    mask = leaf_mask(ops)
    idx = [i for i, m in enumerate(mask) if m]

    def col(name: str) -> list[Any]:
        src = ops.get(name)
        return [src[i] for i in idx] if src is not None else [None] * len(idx)

    return {
        "start_ns": col("start_ns"),
        "end_ns": col("end_ns"),
        "device_id": [0] * len(idx),
        "device_type": ["cpu"] * len(idx),
        "external_id": col("external_id"),
        "pid": col("pid"),
        "tid": col("tid"),
        "rank": col("rank"),
        "name": col("name"),
        # No flops: the profiler counts them on the op that has a formula (aten::conv2d,
        # aten::addmm), often an ancestor of the leaf; they stay on ops.flops.
    }


@contextlib.contextmanager
def _inductor_unloaded() -> Iterator[None]:
    """For the block, ``hasattr(torch, "_inductor")`` is false while inductor is not loaded.

    ``torch.profiler.profile``'s ``prepare_trace`` reads ``torch._inductor.config.triton.
    cudagraphs`` when ``hasattr(torch, "_inductor")``; torch's module ``__getattr__``
    answers that by importing ``torch._inductor`` (and torch._dynamo with it). Until
    inductor is loaded nothing can have changed that setting from its default, which is
    ``TORCHINDUCTOR_CUDAGRAPHS == "1"``; so while it is unloaded and that variable is not
    "1", the profiler's answer is False either way, and the block takes ``_inductor`` out
    of torch's lazily imported names so that the question costs no import. Otherwise (or
    on a torch without ``torch._lazy_modules``) nothing changes. For the block (the
    profiler's start, milliseconds) another thread's ``torch._inductor`` attribute access
    without an import would fail; ``import torch._inductor`` works as always. A captured
    command's profiler starts before the program runs, on its only thread."""
    import torch

    lazy = getattr(torch, "_lazy_modules", None)
    if (
        "torch._inductor" in sys.modules
        or os.environ.get("TORCHINDUCTOR_CUDAGRAPHS") == "1"
        or not isinstance(lazy, set)
        or "_inductor" not in lazy
    ):
        yield
        return
    lazy.discard("_inductor")
    try:
        yield
    finally:
        lazy.add("_inductor")


class TorchBackend:
    """torch.profiler as a capture backend: ``start()``, then ``stop() -> (tables, meta)``.

    After ``stop()``, :attr:`profiler` is the torch.profiler object that made the trace
    (for ``key_averages()`` and other torch-side views of the same run).
    """

    name = "torch"

    def __init__(self, config: TorchConfig = TorchConfig()):
        self.config = config
        self.profiler: Any = None
        # tbdtrace.collector.memory.torch_labels labeller (profile_memory only)
        self.memory: Any = None

    @staticmethod
    def available() -> bool:
        return available()

    def start(self) -> None:
        import torch
        from torch.profiler import ProfilerActivity, profile

        if self.config.profile_memory:
            # Labels each allocation (weights, gradients, ...): docs/MEMORY.md.
            from tbdtrace.collector.memory.torch_labels import labeller

            self.memory = labeller(self.config.torch_memory)
            if self.memory is not None:
                self.memory.start()
        acts = [ProfilerActivity.CPU]
        if self.config.cuda and torch.cuda.is_available():
            acts.append(ProfilerActivity.CUDA)
        self.profiler = profile(
            activities=acts,
            record_shapes=self.config.record_shapes,
            profile_memory=self.config.profile_memory,
            with_flops=self.config.with_flops,
            with_stack=self.config.with_stack,
        )
        with _inductor_unloaded():
            self.profiler.__enter__()

    def stop(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Stop profiling; returns (tables as column mappings, meta) for trace.write."""
        prof = self.profiler
        prof.__exit__(None, None, None)
        if self.memory is not None:
            self.memory.stop()
        fd, tmp = tempfile.mkstemp(prefix="tbdtrace-torch-", suffix=".json")
        os.close(fd)
        try:
            prof.export_chrome_trace(tmp)
            tables, meta = kineto.import_files([Path(tmp)])
            if "collectives" not in tables:  # gloo's host-side collectives (torch_dist)
                from tbdtrace.collector.torch_dist import host_collectives

                coll = host_collectives(Path(tmp))
                if coll:
                    tables["collectives"] = coll
        finally:
            os.unlink(tmp)
        # The importer gives Arrow columns; the ops and kernels edits below work on lists.
        for name in ("ops", "kernels"):
            if name in tables:
                tables[name] = {c: a.to_pylist() for c, a in tables[name].items()}
        if self.memory is not None:
            tables = self.memory.classify_tables(tables)
        ops = tables.get("ops")
        if ops:
            _add_flops(ops, prof)
            tables["kernels"] = _merge(tables.get("kernels"), leaf_kernels(ops))
        import torch

        meta.update(source="torch", backend="torch", framework="pytorch", source_files=[])
        meta.setdefault("extra", {})["torch_memory"] = (
            self.memory.meta() if self.memory is not None else {"mode": "off"}
        )
        meta.setdefault("extra", {})["torch"] = {
            "version": torch.__version__,
            "config": {k: getattr(self.config, k) for k in self.config.__dataclass_fields__},
            "leaf_ops": "cpu_op rows with no cpu_op nested inside on the same thread",
        }
        if torch.cuda.is_initialized():  # read by the flops pass (fp32 work as tf32)
            meta["extra"]["torch"]["allow_tf32"] = {
                "matmul": bool(torch.backends.cuda.matmul.allow_tf32),
                "cudnn": bool(torch.backends.cudnn.allow_tf32),
            }
        return tables, meta


def _flops_by_id(prof: Any) -> dict[int, int]:
    """``{correlation id: FLOPs}`` of the profiler's events that have FLOPs.

    Read from the profiler's Kineto result events, from which torch builds its
    FunctionEvents (``FunctionEvent.id`` is the event's ``correlation_id()``,
    ``FunctionEvent.flops`` its ``flops()``); building those (``prof.events()``) parses
    every event, memory record and tree link in Python, about a second of CPU time on a
    ResNet-50 step, for these two numbers. Falls back to ``prof.events()`` when the
    result is not where torch keeps it."""
    result = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    if result is None:
        return {e.id: int(e.flops) for e in prof.events() if e.flops}
    return {e.correlation_id(): int(e.flops()) for e in result.events() if e.flops()}


def _add_flops(ops: dict[str, list[Any]], prof: Any) -> None:
    """FLOPs per op from the profiler's events (the Chrome export leaves them out); the
    event's correlation id is the op's ``External id`` in the export."""
    by_id = _flops_by_id(prof)
    if not by_id:
        return
    ext = ops.get("external_id") or []
    old = ops.get("flops") or [None] * len(ext)
    ops["flops"] = [by_id.get(x, f) if x is not None else f for x, f in zip(ext, old, strict=True)]


def _merge(a: dict[str, list[Any]] | None, b: dict[str, list[Any]]) -> dict[str, list[Any]]:
    if not a:
        return b
    na = len(next(iter(a.values())))
    nb = len(next(iter(b.values())))
    keys = set(a) | set(b)
    return {k: (a.get(k) or [None] * na) + (b.get(k) or [None] * nb) for k in keys}
