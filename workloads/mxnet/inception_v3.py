"""Inception-v3 image classification on MXNet Gluon (model zoo ``inception_v3``, random init).

Gluon's Inception-v3 has no auxiliary classifier; its fixed 8x8 average pool (which only a
299 px input reduces to 1x1) is replaced by a global average pool, as Keras and torchvision
have, so every size runs at its own resolution. RMSprop
with TF-slim's decay 0.9 and epsilon 1.0, but no momentum (MXNet 1.9's non-centered RMSProp
has none; TF-slim uses 0.9). Sizes (workloads/specs.py): tiny =
96 px, 10 classes, batch 8; small = 299 px, 100 classes, batch 8; paper = 299 px, 1000
classes (ImageNet-1k), batch 32. Softmax cross-entropy. Data: class templates + noise.
"""

from __future__ import annotations

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn
from mxnet.gluon.model_zoo import vision

from workloads import harness, quality, specs
from workloads.mxnet import _common
from workloads.tensorflow import synthetic

MODEL = "inception_v3"


Config = specs.InceptionV3
CONFIGS = specs.INCEPTION_V3.configs
BATCH = specs.INCEPTION_V3.batch


def build_model(cfg: Config, ctx: mx.Context) -> gluon.HybridBlock:
    """Gluon's Inception-v3, Xavier-initialised on ``ctx``, ``cfg.classes`` outputs."""
    net = vision.inception_v3(classes=cfg.classes)
    features = net.features
    pool = list(features._children)[-2]  # the 8x8 AvgPool2D before the dropout
    with features.name_scope():
        features.register_child(nn.GlobalAvgPool2D(), pool)
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
    templates = synthetic.class_templates(cfg.classes, 3, cfg.image_px, rng)

    def image_batch(r: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        x, y = synthetic.image_batch(templates, args.batch_size, r)
        return x.transpose(0, 3, 1, 2), y  # NCHW

    data = _common.batches(image_batch, args, ctx, rng)

    def step(_: int) -> float:
        x, y = next(data)
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
