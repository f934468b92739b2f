"""What every MXNet Gluon workload shares: device choice, seeding and the harness hookup.

Runs in ``.venv-mxnet`` (MXNet 1.9.1, NumPy 1.23). The synthetic data comes from
:mod:`workloads.tensorflow.synthetic`, which is NumPy only (importing it does not import
TensorFlow), so all frameworks train on the same tasks. MXNet runs asynchronously: a
step's end waits for the engine (``mx.nd.waitall``) so its time covers its work. A step's
batch comes from :func:`batches` (``--data``): a Gluon ``DataLoader`` whose thread pool
builds batches ahead of the step (``host``) or a pool kept on the device.
"""

from __future__ import annotations

import itertools
import random
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import mxnet as mx
import numpy as np
from mxnet import gluon

from workloads import harness, quality
from workloads.tensorflow import synthetic

FRAMEWORK = "mxnet"


def device_for(args: harness.HarnessArgs) -> mx.Context:
    """``--device auto`` is gpu(0) when MXNet sees a GPU, else cpu; ``cuda`` needs one."""
    gpus = mx.context.num_gpus()
    if args.device == "cuda" and gpus == 0:
        print(
            "workloads: --device cuda but MXNet sees no GPU (the mxnet wheel is CPU-only; "
            "a GPU needs mxnet-cu*); use --device cpu or auto",
            file=sys.stderr,
        )
        raise SystemExit(1)
    if args.device == "cpu" or gpus == 0:
        return mx.cpu()
    return mx.gpu(0)


def setup(args: harness.HarnessArgs) -> tuple[mx.Context, np.random.Generator]:
    """Device and a NumPy generator for the synthetic data; seeds MXNet and Python."""
    random.seed(args.seed)
    mx.random.seed(args.seed)
    np.random.seed(args.seed)
    return device_for(args), np.random.default_rng(args.seed + 1)


def run(
    model: str,
    args: harness.HarnessArgs,
    step_fn: Callable[[int], float],
    samples_per_step: int | None = None,
    nets: Sequence[Any] = (),
    trainers: Sequence[Any] = (),
    evaluate: Callable[[], float] | None = None,
    target: harness.Target | None = None,
) -> harness.StepRecorder:
    """Train through the harness; each step ends after the engine has run its work.

    When the harness names a memory trace directory (``tbdtrace bench`` does), training
    runs under ``tbdtrace.collector.memory.mxnet.profile`` with ``nets`` and ``trainers`` sizing the
    weights, gradients and optimizer state (the repository root must be importable).
    ``evaluate`` and ``target``: the held-out quality (see :func:`harness.train`).
    """
    out = harness.memory_trace_dir()
    if out is None:
        return harness.train(
            model, FRAMEWORK, args, step_fn, mx.nd.waitall, samples_per_step, evaluate, target
        )
    from tbdtrace.collector.memory import mxnet as mxm

    with mxm.profile(out, net=list(nets), trainer=list(trainers), workload=model) as p:

        def sync() -> None:
            mx.nd.waitall()
            p.sample()  # cheap unless the model's arrays changed

        return harness.train(
            model, FRAMEWORK, args, step_fn, sync, samples_per_step, evaluate, target
        )


def classifier_eval(
    net: Any, templates: np.ndarray, ctx: mx.Context, args: harness.HarnessArgs, batch: int = 16
) -> Callable[[], float]:
    """Top-1 accuracy on a fixed held-out set of images (inference mode: outside
    ``autograd.record``), in chunks of ``batch``."""
    x, y = synthetic.image_batch(templates, synthetic.HELD_OUT, synthetic.held_out_rng(args.seed))
    x = x.transpose(0, 3, 1, 2)

    def evaluate() -> float:
        pred = [
            net(mx.nd.array(x[i : i + batch], ctx=ctx)).argmax(axis=1).asnumpy()
            for i in range(0, len(x), batch)
        ]
        return quality.accuracy(np.concatenate(pred).astype(int), y)

    return evaluate


Make = Callable[[np.random.Generator], tuple[np.ndarray, ...]]


class SyntheticBatches(gluon.data.Dataset):  # type: ignore[misc]
    """Item ``i`` = training batch ``i``: ``make(synthetic.batch_rng(base, i))`` as CPU
    NDArrays (``mx.nd.array`` of each array, so each keeps the dtype it had in the step)."""

    def __init__(self, make: Make, base: int) -> None:
        self.make, self.base = make, base

    def __getitem__(self, i: int) -> tuple[mx.nd.NDArray, ...]:
        return tuple(
            mx.nd.array(a, ctx=mx.cpu()) for a in self.make(synthetic.batch_rng(self.base, i))
        )

    def __len__(self) -> int:
        return 2**62


class _Endless:
    """Gluon batch sampler of one item per batch: [0], [1], ... (no end)."""

    def __iter__(self) -> Iterator[list[int]]:
        return ([i] for i in itertools.count())

    def __len__(self) -> int:
        return 2**62


def batches(
    make: Make,
    args: harness.HarnessArgs,
    ctx: mx.Context,
    rng: np.random.Generator,
    workers: int = harness.HOST_WORKERS,
) -> Iterator[tuple[mx.nd.NDArray, ...]]:
    """The training batches of a run on ``ctx``, as ``args.data`` says; ``make(generator)``
    builds one batch (a tuple of NumPy arrays, laid out as the step takes them) from its
    own generator; call ``next()`` on the result in each step.

    ``host``: a ``gluon.data.DataLoader`` with a pool of ``workers`` threads
    (``thread_pool=True``: forked processes and MXNet's engine do not mix), batches
    submitted :data:`harness.HOST_PREFETCH` per worker ahead, in order; pinned memory on a
    GPU, where the copy to the device is queued on MXNet's engine without blocking the
    training thread. ``device``: the first :data:`harness.POOL_BATCHES` of the same
    sequence, built once on ``ctx`` and cycled. The seeds come from ``rng``."""
    base = synthetic.batch_base(rng)
    data = SyntheticBatches(make, base)
    if args.data == "device":
        pool = [tuple(a.as_in_context(ctx) for a in data[i]) for i in range(harness.POOL_BATCHES)]
        mx.nd.waitall()
        return itertools.cycle(pool)
    loader = gluon.data.DataLoader(
        data,
        batch_sampler=_Endless(),
        batchify_fn=lambda items: items[0],  # each item is a whole batch
        num_workers=workers,
        thread_pool=True,
        prefetch=workers * harness.HOST_PREFETCH,
        pin_memory=ctx.device_type == "gpu",
    )
    on_ctx = (tuple(a.as_in_context(ctx) for a in batch) for batch in loader)
    return harness.fed(on_ctx, args, FRAMEWORK)  # marked, --data-delay-ms later
