"""What every MXNet Gluon workload shares: device choice, seeding and the harness hookup.

Runs in ``.venv-mxnet`` (MXNet 1.9.1, NumPy 1.23). The synthetic data comes from
:mod:`workloads.tensorflow.synthetic`, which is NumPy only (importing it does not import
TensorFlow), so all frameworks train on the same tasks. MXNet runs asynchronously: a
step's end waits for the engine (``mx.nd.waitall``) so its time covers its work.
"""

from __future__ import annotations

import random
import sys
from collections.abc import Callable, Sequence
from typing import Any

import mxnet as mx
import numpy as np

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
