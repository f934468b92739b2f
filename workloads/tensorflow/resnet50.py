"""ResNet-50 image classification on TensorFlow/Keras (keras.applications, weights=None).

Sizes: tiny = 64 px, 10 classes, batch 4; small = 128 px, 100 classes, batch 16; paper =
224 px, 1000 classes (ImageNet-1k), batch 32. SGD with momentum 0.9 and weight decay 1e-4;
lr 0.1 per 256 images scaled to the batch (0.0125 at 32), lower at tiny. Cross-entropy on
logits. Data: class templates + noise (:func:`workloads.tensorflow.synthetic.image_batch`).
"""

from __future__ import annotations

import keras
import tensorflow as tf

from workloads import harness, quality, specs
from workloads.tensorflow import _common, synthetic

MODEL = "resnet50"


Config = specs.ResNet50
CONFIGS = specs.RESNET50.configs
BATCH = specs.RESNET50.batch


def build_model(cfg: Config) -> keras.Model:
    """keras.applications.ResNet50, randomly initialised, logits for ``cfg.classes``;
    batch-norm with torchvision's momentum and epsilon (Keras's defaults, momentum 0.99,
    move the running statistics ten times slower than PyTorch's and MXNet's 0.1, so the
    evaluated model lagged the trained one by a hundred steps)."""
    net = keras.applications.ResNet50(
        weights=None,
        input_shape=(cfg.image_px, cfg.image_px, 3),
        classes=cfg.classes,
        classifier_activation=None,
    )
    for layer in net.layers:
        if isinstance(layer, keras.layers.BatchNormalization):
            layer.momentum, layer.epsilon = 0.9, 1e-5
    return net


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    device, rng = _common.setup(args)
    with tf.device(device):
        net = build_model(cfg)
        opt = keras.optimizers.SGD(learning_rate=cfg.lr, momentum=0.9, weight_decay=1e-4)
        _common.build_optimizer(opt, net.trainable_variables)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        templates = synthetic.class_templates(cfg.classes, 3, cfg.image_px, rng)

        @tf.function
        def train_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = loss_fn(y, net(x, training=True))
            opt.apply_gradients(
                zip(
                    tape.gradient(loss, net.trainable_variables),
                    net.trainable_variables,
                    strict=True,
                )
            )
            return loss

        data = _common.batches(
            lambda r: synthetic.image_batch(templates, args.batch_size, r), args, device, rng
        )

        def step(_: int) -> tf.Tensor:
            return train_step(*next(data))

        evaluate = _common.classifier_eval(net, templates, args)
        _common.run(MODEL, args, step, evaluate=evaluate, target=quality.target(MODEL, args.size))


if __name__ == "__main__":
    main()
