"""Inception-v3 image classification on TensorFlow/Keras (keras.applications, weights=None).

Keras's InceptionV3 has no auxiliary classifier, so the loss is the main head's
cross-entropy. RMSprop (rho 0.9, momentum 0.9, epsilon 1.0), TF-slim's Inception-v3
recipe. Sizes: tiny = 96 px (Keras's minimum is 75), 10 classes, batch 8; small = 299 px,
100 classes, batch 8; paper = 299 px, 1000 classes (ImageNet-1k), batch 32.
Data: class templates + noise.
"""

from __future__ import annotations

import keras
import tensorflow as tf

from workloads import harness, quality, specs
from workloads.tensorflow import _common, synthetic

MODEL = "inception_v3"


Config = specs.InceptionV3
CONFIGS = specs.INCEPTION_V3.configs
BATCH = specs.INCEPTION_V3.batch


def build_model(cfg: Config) -> keras.Model:
    """keras.applications.InceptionV3, randomly initialised, logits for ``cfg.classes``."""
    return keras.applications.InceptionV3(
        weights=None,
        input_shape=(cfg.image_px, cfg.image_px, 3),
        classes=cfg.classes,
        classifier_activation=None,
    )


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    device, rng = _common.setup(args)
    with tf.device(device):
        net = build_model(cfg)
        opt = keras.optimizers.RMSprop(learning_rate=cfg.lr, rho=0.9, momentum=0.9, epsilon=1.0)
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
