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
  ``framework``. A step after which the model was evaluated on its task's held-out split
  also carries ``quality``: ``{"metric", "value", "target", "higher_is_better", "reached",
  "eval_ns"}`` and, on the evaluation that first met the target, ``time_to_quality_ns``
  (wall time from the first step's start to that evaluation's end, evaluations included:
  MLPerf's time-to-train) and ``steps_to_quality`` (training steps run, warm-up included).
  Every run is evaluated once after its last step (``--no-eval``: never); ``--eval-every
  N`` adds one every N steps, and ``--to-quality`` trains until the target is met (evaluating every
  ``--eval-every`` steps, 10 by default) or ``--max-steps`` steps have run.

The steps file is the one documented place where a workload talks to tbdtrace, with two
additions. When a capture with windows runs (``tbdtrace capture --steps/--schedule/
--on-demand``), its bootstrap has loaded ``tbdtrace.collector.windows`` into the process;
the harness then calls that module's ``harness_begin(i)``/``harness_end(i)`` around each
step (found in ``sys.modules``, never imported: no capture, no call), so that the window
opens at its first step's begin and closes at its last step's end. And one for MXNet,
which no capture backend sees without a GPU: when ``TBDTRACE_MEMORY_TRACE`` names a
directory (``tbdtrace bench`` sets it for MXNet jobs), the MXNet workloads record their
memory there with ``tbdtrace.collector.memory.mxnet`` (:func:`memory_trace_dir`).
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
from typing import Any, TypeVar

from workloads.dimensions import DATA_MODES, PRECISIONS, batch_unsupported, unsupported

SIZES = ("tiny", "small", "paper")
STEPS_FILE_ENV = "TBDTRACE_STEPS_FILE"
MEMORY_TRACE_ENV = "TBDTRACE_MEMORY_TRACE"
# The capture's window controller, when a capture with windows loaded it (never imported).
CAPTURE_WINDOWS_MODULE = "tbdtrace.collector.windows"
# The input pipeline (``--data``, docs/WORKLOADS.md "Input pipeline"): with ``host`` each
# framework's own loader builds batches ahead of the training thread in HOST_WORKERS workers,
# up to HOST_PREFETCH batches per worker ahead; with ``device`` a pool of POOL_BATCHES
# distinct batches is built once before the first step, kept on the training device and
# cycled.
HOST_WORKERS = 2
HOST_PREFETCH = 2
POOL_BATCHES = 8


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
    to_quality: bool = False  # train until the quality target is met (or max_steps)
    max_steps: int = 2000  # --to-quality: give up after this many training steps
    eval_every: int = 0  # evaluate every N steps (0: after the last step only; 10 with
    # --to-quality)
    no_eval: bool = False  # --no-eval: no held-out evaluation at all
    nproc: int = 1  # data-parallel ranks on this machine (PyTorch: DDP; see WORKLOADS.md)
    precision: str = "fp32"  # fp32 | tf32 | bf16 | fp16 (workloads/dimensions.py)
    compile: bool = False  # torch.compile / tf.function(jit_compile=True) / hybridize
    data: str = "host"  # host: the framework's input pipeline with prefetch; device: a
    # pool of POOL_BATCHES batches resident on the training device, cycled
    data_delay_ms: float = 0.0  # --data host: the training thread waits this long more for
    # every batch (a slow input pipeline, on purpose: see :func:`fed`)


@dataclass(frozen=True)
class Target:
    """A quality goal on the held-out split (metrics in :mod:`workloads.quality`)."""

    metric: str  # accuracy | bleu | wer | cer | map50 | moment_distance | episode_reward
    value: float  # the goal
    higher_is_better: bool  # accuracy, bleu, map50, reward: True; error rates: False

    def reached(self, quality: float) -> bool:
        """Whether ``quality`` meets the goal (NaN never does)."""
        if not math.isfinite(quality):
            return False
        return quality >= self.value if self.higher_is_better else quality <= self.value


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
    p.add_argument(
        "--to-quality",
        action="store_true",
        help="train until the held-out quality target is met (time-to-quality); "
        "--steps is then ignored",
    )
    p.add_argument(
        "--max-steps", type=int, default=2000, help="--to-quality: stop after this many steps"
    )
    p.add_argument(
        "--eval-every",
        type=int,
        default=None,
        help="evaluate on the held-out split every N steps (default: after the last step "
        "only; 10 with --to-quality)",
    )
    p.add_argument(
        "--no-eval",
        action="store_true",
        help="skip the held-out evaluation (it runs after the timed steps, but at paper "
        "size it can take tens of seconds on a CPU)",
    )
    p.add_argument(
        "--nproc",
        type=int,
        default=1,
        help="data-parallel ranks on this machine (PyTorch: DistributedDataParallel, gloo "
        "on CPU, NCCL on GPU; --batch-size is per rank)",
    )
    p.add_argument(
        "--precision",
        choices=PRECISIONS,
        default="fp32",
        help="training precision: fp32, tf32 (GPU), bf16 (mixed, autocast / Keras "
        "mixed_bfloat16), fp16 (mixed, GPU); what each framework supports: docs/WORKLOADS.md",
    )
    p.add_argument(
        "--compile",
        action="store_true",
        help="compile the model: torch.compile (PyTorch); see docs/WORKLOADS.md for the others",
    )
    p.add_argument(
        "--data",
        choices=DATA_MODES,
        default="host",
        help="host: batches from the framework's input pipeline, built ahead in worker "
        f"processes or threads (default); device: {POOL_BATCHES} batches built once and kept "
        "on the training device (no input cost in the step); see docs/WORKLOADS.md",
    )
    p.add_argument(
        "--data-delay-ms",
        type=float,
        default=0.0,
        metavar="MS",
        help="with --data host: hand each batch to the training thread MS milliseconds "
        "late, a slow input pipeline on purpose (the step waits MS ms more for its data)",
    )
    ns = p.parse_args(argv)
    if ns.data_delay_ms < 0 or (ns.data_delay_ms > 0 and ns.data != "host"):
        p.error("--data-delay-ms must be >= 0 and needs --data host")
    if ns.to_quality and ns.no_eval:
        p.error("--to-quality needs the evaluation; drop --no-eval")
    if ns.nproc < 1:
        p.error("--nproc must be >= 1")
    if ns.steps < 1 or ns.warmup < 0:
        p.error("--steps must be >= 1 and --warmup >= 0")
    if ns.max_steps < 1 or (ns.eval_every is not None and ns.eval_every < 1):
        p.error("--max-steps and --eval-every must be >= 1")
    why = unsupported(framework, model, ns.nproc, ns.precision, ns.compile, ns.device)
    if why:
        p.error(why)
    batch = ns.batch_size if ns.batch_size is not None else default_batch[ns.size]
    if batch < 1:
        p.error("--batch-size must be >= 1")
    why = batch_unsupported(framework, model, ns.size, batch)
    if why:
        p.error(why)
    every = ns.eval_every if ns.eval_every is not None else (10 if ns.to_quality else 0)
    return HarnessArgs(
        batch,
        ns.steps,
        ns.warmup,
        ns.device,
        ns.size,
        ns.seed,
        ns.to_quality,
        ns.max_steps,
        every,
        ns.no_eval,
        ns.nproc,
        ns.precision,
        ns.compile,
        ns.data,
        ns.data_delay_ms,
    )


B = TypeVar("B")


DATA_MARKER = "harness: data"  # the host range around each fetch (tbdtrace data_wait)


def fed(batches: Iterator[B], args: HarnessArgs, framework: str) -> Iterator[B]:
    """``batches`` as the training thread takes them from a ``--data host`` loader: each
    ``next()`` is one host range named :data:`DATA_MARKER` (PyTorch: ``record_function``,
    so torch.profiler records it; NVTX where a GPU capture is running), the time the step
    waited for its data. With ``--data-delay-ms`` it first sleeps that long, in the
    training thread, so every step waits exactly that much more whatever the loader's
    workers built ahead: a pipeline whose last stage (collation, decoding, a host copy)
    runs in the training thread and cannot keep up, with a wait known in advance, which
    tests of the data-wait figures need."""
    return _Fed(batches, args.data_delay_ms / 1e3, _DataRange.for_framework(framework))


class _DataRange:
    """Opens and closes the data marker through what the framework offers."""

    def __init__(self, framework: str) -> None:
        self._nvtx = _Nvtx.for_framework(framework)
        self._record: Any = None
        torch = sys.modules.get("torch") if framework == "pytorch" else None
        if torch is not None:
            self._record = torch.autograd.profiler.record_function

    @classmethod
    def for_framework(cls, framework: str) -> _DataRange:
        return cls(framework)

    @contextmanager
    def open(self) -> Iterator[None]:
        self._nvtx.push(DATA_MARKER)
        try:
            if self._record is None:
                yield
            else:
                with self._record(DATA_MARKER):
                    yield
        finally:
            self._nvtx.pop()


class _Fed(Iterator[B]):
    def __init__(self, batches: Iterator[B], delay_s: float, marker: _DataRange) -> None:
        self._batches, self._delay_s, self._marker = batches, delay_s, marker

    def __next__(self) -> B:
        with self._marker.open():
            if self._delay_s > 0:
                time.sleep(self._delay_s)
            return next(self._batches)


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


def _rank() -> int | None:
    """This process's rank in a distributed run (torch.distributed once initialized, else
    the launcher's RANK), None outside one; the steps file keeps each rank's steps apart."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:  # noqa: BLE001 - a broken group: fall back on the environment
        pass
    r = os.environ.get("RANK")
    return int(r) if r is not None and r.isdigit() else None


@dataclass
class StepRecorder:
    """Marks steps (NVTX + steps file) and keeps the losses for the summary line."""

    model: str
    framework: str
    losses: list[float] = field(default_factory=list)
    durations_ns: list[int] = field(default_factory=list)
    qualities: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._nvtx = _Nvtx.for_framework(self.framework)
        path = os.environ.get(STEPS_FILE_ENV)
        self._out = open(path, "a", buffering=1) if path else None  # noqa: SIM115
        self._pending: dict[str, Any] | None = None  # last step's record, not yet written
        self.first_start_ns: int | None = None

    def _flush(self) -> None:
        if self._out is not None and self._pending is not None:
            self._out.write(json.dumps(self._pending) + "\n")
        self._pending = None

    def add_quality(self, quality: dict[str, Any]) -> None:
        """Attach an evaluation's result to the last step's record."""
        self.qualities.append(quality)
        if self._pending is not None:
            self._pending["quality"] = quality

    @contextmanager
    def step(self, index: int, samples: int, warmup: bool) -> Iterator[dict[str, float]]:
        """Wrap one training iteration; the body stores its loss in ``result["loss"]``."""
        result: dict[str, float] = {}
        self._flush()
        windows = sys.modules.get(CAPTURE_WINDOWS_MODULE)
        if windows is not None:  # opens a capture window starting at this step
            windows.harness_begin(index)
        self._nvtx.push(f"step {index}")
        start_ns = time.time_ns()
        if self.first_start_ns is None:
            self.first_start_ns = start_ns
        try:
            yield result
        finally:
            end_ns = time.time_ns()
            self._nvtx.pop()
            if windows is not None:  # closes (and flushes) a window ending at this step
                windows.harness_end(index)
        loss = float(result.get("loss", math.nan))
        self.losses.append(loss)
        if not warmup:
            self.durations_ns.append(end_ns - start_ns)
        if self._out is not None:
            self._pending = {
                "step": index,
                "start_ns": start_ns,
                "end_ns": end_ns,
                "samples": samples,
                "warmup": warmup,
                "loss": loss if math.isfinite(loss) else None,
                "pid": os.getpid(),
                "rank": _rank(),
                "model": self.model,
                "framework": self.framework,
            }

    def close(self) -> None:
        self._flush()
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
    evaluate: Callable[[], float] | None = None,
    target: Target | None = None,
) -> StepRecorder:
    """Run ``args.warmup + args.steps`` iterations of ``step_fn(i) -> loss``.

    ``sync`` waits for the device (e.g. torch.cuda.synchronize) so a step's end time
    covers its GPU work. ``samples_per_step`` is what one step processes when that is not
    the batch size (e.g. A3C: workers x rollout frames); default ``args.batch_size``.

    ``evaluate()`` returns the model's quality on the held-out split (``target.metric``);
    it runs outside the timed steps: after the last step, every ``args.eval_every`` steps,
    and with ``args.to_quality`` the loop runs until ``target`` is met or
    ``args.max_steps`` steps have run (the last evaluation decides).

    Prints one summary line on stderr, ``<model> <framework> size=S batch=B steps=N
    loss_first=.. loss_last=.. samples_per_s=..`` (``tbdtrace bench`` reads ``batch=``
    from it when it did not choose the batch), then with an evaluation one line
    ``<model> <framework> quality metric=M value=V target=T reached=yes|no steps=N
    time_to_quality_s=S|none``, and returns the recorder.
    """
    if args.to_quality and (evaluate is None or target is None):
        print(
            f"workloads: {model} on {framework} has no quality target; run it without --to-quality",
            file=sys.stderr,
        )
        raise SystemExit(2)
    if args.no_eval:
        evaluate = None
    rec = StepRecorder(model, framework)
    total = args.max_steps if args.to_quality else args.warmup + args.steps
    samples = args.batch_size if samples_per_step is None else samples_per_step
    ran = 0
    reached_ns: int | None = None
    try:
        for i in range(total):
            warm = i < args.warmup
            with rec.step(i, samples, warm) as r:
                r["loss"] = float(step_fn(i))
                sync()
            ran = i + 1
            last = ran == total
            due = args.eval_every > 0 and ran % args.eval_every == 0
            if evaluate is not None and (due or last):
                q = _evaluate(evaluate, target, rec, ran, reached_ns is None)
                if q.get("time_to_quality_ns") is not None:
                    reached_ns = q["time_to_quality_ns"]
                    if args.to_quality:
                        break
    finally:
        rec.close()
    measured_s = sum(rec.durations_ns) / 1e9
    rate = len(rec.durations_ns) * samples / measured_s if measured_s > 0 else float("nan")
    print(
        f"{model} {framework} size={args.size} batch={args.batch_size} "
        f"steps={len(rec.durations_ns)} "
        f"loss_first={rec.losses[0]:.6g} loss_last={rec.losses[-1]:.6g} "
        f"samples_per_s={rate:.3f}",
        file=sys.stderr,
    )
    if rec.qualities:
        q = rec.qualities[-1]
        value = "nan" if q["value"] is None else f"{q['value']:.6g}"
        ttq = "none" if reached_ns is None else f"{reached_ns / 1e9:.9f}"  # exact ns
        print(
            f"{model} {framework} quality metric={q['metric']} value={value} "
            f"target={q['target']} reached={'yes' if reached_ns is not None else 'no'} "
            f"steps={ran} time_to_quality_s={ttq}",
            file=sys.stderr,
        )
    return rec


def _evaluate(
    evaluate: Callable[[], float],
    target: Target | None,
    rec: StepRecorder,
    steps_run: int,
    first_time: bool,
) -> dict[str, Any]:
    """Run one evaluation and attach it to the last step's record."""
    t0 = time.time_ns()
    value = float(evaluate())
    end = time.time_ns()
    met = target is not None and target.reached(value)
    q: dict[str, Any] = {
        "metric": target.metric if target is not None else None,
        "value": value if math.isfinite(value) else None,
        "target": target.value if target is not None else None,
        "higher_is_better": target.higher_is_better if target is not None else None,
        "reached": met,
        "eval_ns": end - t0,
    }
    if met and first_time and rec.first_start_ns is not None:
        q["time_to_quality_ns"] = end - rec.first_start_ns
        q["steps_to_quality"] = steps_run
    rec.add_quality(q)
    return q
