"""Inception-v3 image classification on MXNet Gluon (model zoo ``inception_v3``, random init).

Gluon's Inception-v3 has no auxiliary classifier and ends in an 8x8 average pool, so it
needs 299 px inputs at every size: tiny shrinks only the classes and the batch. RMSprop
with TF-slim's decay 0.9 and epsilon 1.0, but no momentum (MXNet 1.9's non-centered RMSProp
has none; TF-slim uses 0.9). Sizes: tiny =
299 px, 10 classes, batch 1; small = 299 px, 100 classes, batch 8; paper = 299 px, 1000
classes (ImageNet-1k), batch 32. Softmax cross-entropy. Data: class templates + noise.
"""

from __future__ import annotations

from dataclasses import dataclass

import mxnet as mx
from mxnet import autograd, gluon
from mxnet.gluon.model_zoo import vision

from workloads import harness, quality
from workloads.mxnet import _common
from workloads.tensorflow import synthetic

MODEL = "inception_v3"
IMAGE_PX = 299  # the only input size Gluon's Inception-v3 accepts


@dataclass(frozen=True)
class Config:
    classes: int  # output classes
    lr: float  # RMSprop learning rate


CONFIGS = {
    "tiny": Config(10, 0.001),
    "small": Config(100, 0.045),
    "paper": Config(1000, 0.045),
}
BATCH = {"tiny": 1, "small": 8, "paper": 32}


def build_model(cfg: Config, ctx: mx.Context) -> gluon.HybridBlock:
    """Gluon's Inception-v3, Xavier-initialised on ``ctx``, ``cfg.classes`` outputs."""
    net = vision.inception_v3(classes=cfg.classes)
    net.initialize(mx.init.Xavier(magnitude=2), ctx=ctx)
    return net


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    ctx, rng = _common.setup(args)
    net = build_model(cfg, ctx)
    net.hybridize(static_alloc=True)
    trainer = gluon.Trainer(
        net.collect_params(),
        "rmsprop",
        {"learning_rate": cfg.lr, "gamma1": 0.9, "epsilon": 1.0},
    )
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    templates = synthetic.class_templates(cfg.classes, 3, IMAGE_PX, rng)

    def step(_: int) -> float:
        x, y = synthetic.image_batch(templates, args.batch_size, rng)
        x = mx.nd.array(x.transpose(0, 3, 1, 2), ctx=ctx)
        y = mx.nd.array(y, ctx=ctx)
        with autograd.record():
            loss = loss_fn(net(x), y).mean()
        loss.backward()
        trainer.step(1)
        return float(loss.asscalar())

    _common.run(
        MODEL,
        args,
        step,
        nets=[net],
        trainers=[trainer],
        evaluate=_common.classifier_eval(net, templates, ctx, args),
        target=quality.target(MODEL, args.size),
    )


if __name__ == "__main__":
    main()
