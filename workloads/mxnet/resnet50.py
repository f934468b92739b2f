"""ResNet-50 image classification on MXNet Gluon (model zoo ``resnet50_v1``, random init).

TBD's MXNet ResNet-50 (the image-classification ``fit.py`` example). The network is
hybridized (symbolic graph), as the MXNet examples train it. Sizes: tiny = 64 px, 10
classes, batch 4; small = 128 px, 100 classes, batch 16; paper = 224 px, 1000 classes
(ImageNet-1k), batch 32. SGD with momentum 0.9 and weight decay 1e-4, lr 0.1 per 256
images scaled to the batch, lower at tiny. Softmax cross-entropy. Data: class templates +
noise, NCHW.
"""

from __future__ import annotations

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon.model_zoo import vision

from workloads import harness, quality, specs
from workloads.mxnet import _common
from workloads.tensorflow import synthetic

MODEL = "resnet50"


Config = specs.ResNet50
CONFIGS = specs.RESNET50.configs
BATCH = specs.RESNET50.batch


def build_model(cfg: Config, ctx: mx.Context) -> gluon.HybridBlock:
    """Gluon's ResNet-50 v1, Xavier-initialised on ``ctx``, ``cfg.classes`` outputs."""
    net = vision.resnet50_v1(classes=cfg.classes)
    net.initialize(mx.init.Xavier(magnitude=2), ctx=ctx)
    return net


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    ctx, rng = _common.setup(args)
    net = build_model(cfg, ctx)
    net.hybridize(static_alloc=True)
    trainer = gluon.Trainer(
        net.collect_params(), "sgd", {"learning_rate": cfg.lr, "momentum": 0.9, "wd": 1e-4}
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
