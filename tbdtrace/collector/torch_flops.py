"""Per-op FLOPs and shapes of a PyTorch program, at the dispatcher, for CUPTI captures.

Under ``capture --backend cupti`` torch.profiler cannot run (one CUPTI per process), so no
``ops`` rows would carry shapes or FLOPs. This recorder is a ``TorchDispatchMode`` that the
capture bootstrap enters when the program imports torch: for each call of an op that
``torch.utils.flop_counter`` has a formula for (mm, addmm, bmm, baddbmm, _scaled_mm,
convolution and its backward, the scaled-dot-product/flash/efficient/cuDNN attention ops
and their backwards) it records the op's range on the calling thread, the input shapes and
dtypes in the profiler's notation and the formula's FLOPs, and writes them as ``ops`` rows
(``<spool>/torchops-<pid>``) at exit. Other ops pass through untouched.

Joining to kernels: by time on the launching thread. The row's ``tid`` is the thread's
``pthread_self()`` truncated to 32 bits, which is what CUPTI's runtime records carry as
``threadId`` by default on Linux; a kernel's runtime call inside a recorded op's range on
the same thread was launched by it (the OS thread ids are kept too: where the runtime
records carry those instead, ``capture`` maps the rows to them). The mode is thread-local
state that PyTorch hands to its autograd worker threads, so backward ops are recorded on
the thread that runs them.
Works on CPU tensors too (tested there). ``capture --no-torch-flops`` turns it off.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from tbdtrace.collector import child_protocol as proto

SPOOL_ENV = proto.TORCH_FLOPS_SPOOL
CATEGORY = "torch_dispatch"

# torch dtype name -> the profiler's ``Input type`` spelling (what flop_formulas reads).
_DTYPES = {
    "float32": "float",
    "float64": "double",
    "bfloat16": "c10::BFloat16",
    "float16": "c10::Half",
    "float8_e4m3fn": "c10::Float8_e4m3fn",
    "float8_e5m2": "c10::Float8_e5m2",
    "float8_e4m3fnuz": "c10::Float8_e4m3fnuz",
    "float8_e5m2fnuz": "c10::Float8_e5m2fnuz",
    "int8": "signed char",
    "uint8": "unsigned char",
    "int64": "long int",
    "int32": "int",
    "bool": "bool",
}


def _mode_class() -> Any:
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    from tbdtrace.analysis.engine import flop_formulas as ff

    # Ops without a flop_counter formula that tbdtrace's own formulas count (the CPU
    # flash-attention ops, ...): counted from the recorded shapes and arguments.
    own = {n.removeprefix("aten::") for n in ff.NAMES}
    # ids of the op overloads seen to have no formula: OpOverload hashes in Python (about
    # 0.3 us a lookup), an int set in C; overloads live as long as the process, so ids hold.
    skip: set[int] = set()

    class FlopRecorder(TorchDispatchMode):  # type: ignore[misc]
        """Records (start, end, thread, op, shapes, dtypes, FLOPs) of counted ops."""

        def __init__(self) -> None:
            super().__init__()
            self.rows: list[tuple[Any, ...]] = []
            self.errors = 0
            self.lock = threading.Lock()
            self.threads: dict[int, int] = {}  # recorded tid -> the thread's OS id

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            if id(func) in skip:  # the common case first: one int-set lookup per uncounted op
                return func(*args, **kwargs) if kwargs else func(*args)
            kwargs = kwargs or {}
            packet = func._overloadpacket
            formula = flop_registry.get(packet)
            if formula is None and packet.__name__ not in own:
                skip.add(id(func))
                return func(*args, **kwargs)
            t0 = time.time_ns()
            out = func(*args, **kwargs)
            t1 = time.time_ns()
            name = f"aten::{packet.__name__}"
            shapes, dtypes, concrete = [], [], []
            for a in _positional(func, args, kwargs):
                if isinstance(a, torch.Tensor):
                    shapes.append(list(a.shape))
                    dtypes.append(_DTYPES.get(str(a.dtype).removeprefix("torch."), str(a.dtype)))
                    concrete.append("")
                else:
                    shapes.append([])
                    dtypes.append("")
                    concrete.append(_concrete(a))
            sj = json.dumps(shapes, separators=(",", ":"))
            cj = json.dumps(concrete, separators=(",", ":"))
            try:
                f = (
                    int(formula(*args, **kwargs, out_val=out))
                    if formula is not None
                    else ff.op_flops(name, sj, cj)
                )
            except Exception:  # noqa: BLE001 - an odd overload loses its count, not the run
                f = None
            if f is None:
                self.errors += 1
            row = (
                t0,
                t1,
                threading.get_ident() & 0xFFFFFFFF,
                name,
                sj,
                json.dumps(dtypes, separators=(",", ":")),
                cj,
                f,
            )
            with self.lock:
                self.rows.append(row)
                self.threads.setdefault(row[2], threading.get_native_id())
            return out

    return FlopRecorder


def _positional(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
    """All of the op's arguments in schema order (keyword and default ones after the
    positional ones), as the profiler lists them."""
    out = list(args)
    for a in func._schema.arguments[len(args) :]:
        if a.kwarg_only and a.name not in kwargs:
            continue
        out.append(kwargs.get(a.name, a.default_value if a.has_default_value() else None))
    return out


def _concrete(a: Any) -> str:
    """A non-tensor argument as the profiler writes it in ``Concrete Inputs``."""
    if a is None:
        return ""
    if isinstance(a, bool):
        return "True" if a else "False"
    if isinstance(a, (list, tuple)):
        return "[" + ", ".join(_concrete(x) for x in a) + "]"
    return str(a)


class Recorder:
    """``start()`` enters the dispatch mode for the rest of the program; ``table()`` gives
    the recorded ``ops`` rows; ``stats()`` what meta keeps."""

    def __init__(self) -> None:
        self.mode = _mode_class()()
        self.tf32: dict[str, bool] | None = None

    def start(self) -> None:
        self.mode.__enter__()

    def stop(self) -> None:
        import torch

        # Another mode entered after ours and still active: leave the stack to it.
        with contextlib.suppress(Exception):
            self.mode.__exit__(None, None, None)
        if torch.cuda.is_initialized():
            self.tf32 = {
                "matmul": bool(torch.backends.cuda.matmul.allow_tf32),
                "cudnn": bool(torch.backends.cudnn.allow_tf32),
            }

    def table(self) -> Any:
        from tbdtrace import trace as trace_io

        rows = self.mode.rows
        cols = dict(
            zip(
                (
                    "start_ns",
                    "end_ns",
                    "tid",
                    "name",
                    "input_shapes",
                    "input_dtypes",
                    "concrete_inputs",
                    "flops",
                ),
                map(list, zip(*rows, strict=True)) if rows else [[]] * 8,
                strict=True,
            )
        )
        n = len(rows)
        cols.update(pid=[os.getpid()] * n, category=[CATEGORY] * n)
        return trace_io.to_table("ops", cols, num_rows=n)

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "ops": len(self.mode.rows),
            "uncounted_ops": self.mode.errors,
            "threads": [[k, v] for k, v in self.mode.threads.items()],
        }
        if self.tf32 is not None:
            out["allow_tf32"] = self.tf32
        return out


def start_in_child() -> None:
    """Called when torch is imported in a process under ``capture``: records counted ops
    and writes ``<spool>/torchops-<pid>`` at exit."""
    spool = Path(os.environ[SPOOL_ENV])
    rec = Recorder()
    rec.start()

    def finish() -> None:
        from tbdtrace import trace as trace_io

        rec.stop()
        meta = {"source": "torch_dispatch_flops", "extra": {"torch_flops": rec.stats()}}
        trace_io.write(spool / f"torchops-{os.getpid()}", {"ops": rec.table()}, meta)

    atexit.register(finish)


__all__ = ["CATEGORY", "SPOOL_ENV", "Recorder", "start_in_child"]
