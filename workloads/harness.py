"""One harness for every TBD workload, whatever the framework.

This module uses the standard library only: it is imported by workloads running in the
main venv (PyTorch, TensorFlow) and in `.venv-mxnet`, and must not pull a framework or
tbdtrace in.

Each training iteration is one *step*. The harness marks it twice, so that every capture
backend sees it:

* an NVTX range named ``step N`` (when the framework exposes NVTX: torch.cuda.nvtx, or
  the ``nvtx`` push/pop of libnvToolsExt through ctypes when a GPU capture is running);
* a host-side steps record, one JSON object per line, appended to the file named by the
  environment variable ``TBDTRACE_STEPS_FILE`` (set by ``tbdtrace capture`` and
  ``tbdtrace bench``). Fields: ``step``, ``start_ns``, ``end_ns`` (time.time_ns(), the
  trace clock), ``samples``, ``warmup`` (bool), ``loss`` (float), ``pid``, ``model``,
  ``framework``.

The steps file is the one documented place where a workload talks to tbdtrace, with one
addition for MXNet, which no capture backend sees without a GPU: when
``TBDTRACE_MEMORY_TRACE`` names a directory (``tbdtrace bench`` sets it for MXNet jobs), the
MXNet workloads record their memory there with ``tbdtrace.memory.mxnet``
(:func:`memory_trace_dir`).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

SIZES = ("tiny", "small", "paper")
STEPS_FILE_ENV = "TBDTRACE_STEPS_FILE"
MEMORY_TRACE_ENV = "TBDTRACE_MEMORY_TRACE"


def memory_trace_dir() -> str | None:
    """Where an MXNet workload writes its memory trace (``TBDTRACE_MEMORY_TRACE``), if set."""
    return os.environ.get(MEMORY_TRACE_ENV) or None


@dataclass(frozen=True)
class HarnessArgs:
    """The options every workload takes."""

    batch_size: int  # samples per training step
    steps: int  # measured steps, after warm-up
    warmup: int  # warm-up steps, marked as such in the steps records
    device: str  # auto | cpu | cuda
    size: str  # tiny | small | paper (paper = TBD's configuration)
    seed: int  # seeds the framework RNGs and the synthetic data


def parse_args(
    model: str, framework: str, default_batch: dict[str, int], argv: list[str] | None = None
) -> HarnessArgs:
    """Parse the common options. ``default_batch`` maps each size to its batch size."""
    p = argparse.ArgumentParser(
        prog=f"workloads {model} ({framework})",
        description=f"Train {model} on {framework} with synthetic data (TBD workload).",
    )
    p.add_argument("--batch-size", type=int, default=None, help="samples per step")
    p.add_argument("--steps", type=int, default=5, help="measured steps after warm-up")
    p.add_argument("--warmup", type=int, default=1, help="warm-up steps (not measured)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--size", choices=SIZES, default="tiny")
    p.add_argument("--seed", type=int, default=0)
    ns = p.parse_args(argv)
    if ns.steps < 1 or ns.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")
    batch = ns.batch_size if ns.batch_size is not None else default_batch[ns.size]
    if batch < 1:
        p.error("--batch-size must be >= 1")
    return HarnessArgs(batch, ns.steps, ns.warmup, ns.device, ns.size, ns.seed)


class _Nvtx:
    """NVTX push/pop through whatever is available; silently a no-op otherwise."""

    def __init__(self, push: Callable[[str], object] | None, pop: Callable[[], object] | None):
        self._push, self._pop = push, pop

    @classmethod
    def for_framework(cls, framework: str) -> _Nvtx:
        if framework == "pytorch":
            try:
                import torch

                if torch.cuda.is_available():
                    return cls(torch.cuda.nvtx.range_push, torch.cuda.nvtx.range_pop)
            except Exception:  # NVTX is best effort: the steps file is the record
                pass
        for lib in ("libnvToolsExt.so.1", "libnvtx3interop.so.1"):
            try:
                h = ctypes.CDLL(lib)
                push = h.nvtxRangePushA
                push.argtypes = [ctypes.c_char_p]

                def push_str(s: str, push: Any = push) -> object:
                    return push(s.encode())

                return cls(push_str, h.nvtxRangePop)
            except (OSError, AttributeError):
                continue
        return cls(None, None)

    def push(self, name: str) -> None:
        if self._push is not None:
            self._push(name)

    def pop(self) -> None:
        if self._pop is not None:
            self._pop()


@dataclass
class StepRecorder:
    """Marks steps (NVTX + steps file) and keeps the losses for the summary line."""

    model: str
    framework: str
    losses: list[float] = field(default_factory=list)
    durations_ns: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._nvtx = _Nvtx.for_framework(self.framework)
        path = os.environ.get(STEPS_FILE_ENV)
        self._out = open(path, "a", buffering=1) if path else None  # noqa: SIM115

    @contextmanager
    def step(self, index: int, samples: int, warmup: bool) -> Iterator[dict[str, float]]:
        """Wrap one training iteration; the body stores its loss in ``result["loss"]``."""
        result: dict[str, float] = {}
        self._nvtx.push(f"step {index}")
        start_ns = time.time_ns()
        try:
            yield result
        finally:
            end_ns = time.time_ns()
            self._nvtx.pop()
        loss = float(result.get("loss", math.nan))
        self.losses.append(loss)
        if not warmup:
            self.durations_ns.append(end_ns - start_ns)
        if self._out is not None:
            rec = {
                "step": index,
                "start_ns": start_ns,
                "end_ns": end_ns,
                "samples": samples,
                "warmup": warmup,
                "loss": loss if math.isfinite(loss) else None,
                "pid": os.getpid(),
                "model": self.model,
                "framework": self.framework,
            }
            self._out.write(json.dumps(rec) + "\n")

    def close(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None


def train(
    model: str,
    framework: str,
    args: HarnessArgs,
    step_fn: Callable[[int], float],
    sync: Callable[[], None] = lambda: None,
    samples_per_step: int | None = None,
) -> StepRecorder:
    """Run ``args.warmup + args.steps`` iterations of ``step_fn(i) -> loss``.

    ``sync`` waits for the device (e.g. torch.cuda.synchronize) so a step's end time
    covers its GPU work. ``samples_per_step`` is what one step processes when that is not
    the batch size (e.g. A3C: workers x rollout frames); default ``args.batch_size``.
    Prints one summary line on stderr, ``<model> <framework> size=S batch=B steps=N
    loss_first=.. loss_last=.. samples_per_s=..`` (``tbdtrace bench`` reads ``batch=``
    from it when it did not choose the batch), and returns the recorder.
    """
    rec = StepRecorder(model, framework)
    total = args.warmup + args.steps
    samples = args.batch_size if samples_per_step is None else samples_per_step
    try:
        for i in range(total):
            warm = i < args.warmup
            with rec.step(i, samples, warm) as r:
                r["loss"] = float(step_fn(i))
                sync()
    finally:
        rec.close()
    measured_s = sum(rec.durations_ns) / 1e9
    rate = args.steps * samples / measured_s if measured_s > 0 else float("nan")
    print(
        f"{model} {framework} size={args.size} batch={args.batch_size} steps={args.steps} "
        f"loss_first={rec.losses[0]:.6g} loss_last={rec.losses[-1]:.6g} "
        f"samples_per_s={rate:.3f}",
        file=sys.stderr,
    )
    return rec
