"""Run by tests/collector/memory/test_mxnet.py in .venv-mxnet (MXNet 1.9.1 needs NumPy < 1.24):
trains known-answer Gluon models under tbdtrace.collector.memory.mxnet.profile and writes one trace
per case under argv[1]. The constants are read by the test in .venv, which has no MXNet,
so MXNet is imported inside main() only."""

from __future__ import annotations

import os
import sys
from typing import Any

IN, HIDDEN, CLASSES = 32, 64, 10
C_IN, C_OUT, HW, K = 3, 8, 16, 3
STEPS = 3
BATCH = 4
BIG_FLOATS = 10_000_000  # a 40 MB array made and dropped inside the capture
OLD_FLOATS = 1_000_000  # a 4 MB array made before the capture and freed inside it

MODELS = ("mlp", "cnn")
OPTIMIZERS = ("sgd", "adam")
BATCHES = (4, 8, 16)  # MLP trained at three batch sizes (activations grow with the batch)


def case_name(model: str, opt: str, built: str) -> str:
    """Trace directory of one case; ``built`` is "inside" or "before" the capture."""
    return f"{model}-{opt}-{built}"


def main(out: str) -> None:
    import mxnet as mx
    from mxnet import autograd, gluon
    from mxnet.gluon import nn

    from tbdtrace.collector.memory import mxnet as mxm

    mx.random.seed(0)

    def build(model: str, opt: str) -> tuple[Any, Any]:
        net = nn.HybridSequential()
        if model == "mlp":
            net.add(
                nn.Dense(HIDDEN, in_units=IN, activation="relu"), nn.Dense(CLASSES, in_units=HIDDEN)
            )
        else:
            net.add(
                nn.Conv2D(C_OUT, K, padding=1, in_channels=C_IN),
                nn.BatchNorm(in_channels=C_OUT),
                nn.Activation("relu"),
                nn.MaxPool2D(2),
                nn.Flatten(),
                nn.Dense(CLASSES, in_units=C_OUT * (HW // 2) ** 2),
            )
        net.initialize(mx.init.Xavier())
        args = {"learning_rate": 0.01, "momentum": 0.9} if opt == "sgd" else {}
        return net, gluon.Trainer(net.collect_params(), opt, args)

    def batch(model: str, n: int) -> tuple[Any, Any]:
        shape = (n, IN) if model == "mlp" else (n, C_IN, HW, HW)
        return mx.nd.random.normal(shape=shape), mx.nd.array([i % CLASSES for i in range(n)])

    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()

    def train(net: Any, trainer: Any, x: Any, y: Any, steps: int, p: Any = None) -> None:
        for _ in range(steps):
            with autograd.record():
                loss = loss_fn(net(x), y)
            loss.backward()
            trainer.step(x.shape[0])
            if p is not None:
                p.step()
        mx.nd.waitall()

    for model in MODELS:
        for opt in OPTIMIZERS:
            # Built inside: every array is allocated while MXNet's profiler counts.
            with mxm.profile(os.path.join(out, case_name(model, opt, "inside"))) as p:
                net, trainer = build(model, opt)
                p.track(net, trainer)
                train(net, trainer, *batch(model, BATCH), STEPS, p)
            # Built and trained before: the model state is there from the first instant.
            net, trainer = build(model, opt)
            x, y = batch(model, BATCH)
            train(net, trainer, x, y, 1)
            with mxm.profile(
                os.path.join(out, case_name(model, opt, "before")), net=net, trainer=trainer
            ) as p:
                train(net, trainer, x, y, STEPS, p)

    for n in BATCHES:
        with mxm.profile(os.path.join(out, f"mlp-batch{n}")) as p:
            net, trainer = build("mlp", "sgd")
            p.track(net, trainer)
            train(net, trainer, *batch("mlp", n), STEPS, p)

    # An array older than the capture freed inside it: MXNet's counter would go below
    # its start value (it clamps at 0); no total may go negative.
    net, trainer = build("mlp", "sgd")
    old = mx.nd.ones((OLD_FLOATS,))
    mx.nd.waitall()
    with mxm.profile(os.path.join(out, "old-freed"), net=net, trainer=trainer) as p:
        del old
        train(net, trainer, *batch("mlp", BATCH), STEPS, p)

    with mxm.profile(os.path.join(out, "big"), net=net, trainer=trainer, interval_s=0.5) as p:
        big = mx.nd.ones((BIG_FLOATS,))
        p.step()
        del big
        p.step()


if __name__ == "__main__":
    main(sys.argv[1])
