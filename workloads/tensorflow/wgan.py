"""WGAN (Arjovsky et al. 2017) on TensorFlow/Keras: DCGAN generator and critic, clipping.

The networks are the WGAN reference code's DCGAN_G / DCGAN_D in channels-last Keras: a
pyramid of stride-2 (transposed) 4x4 convolutions with batch-norm until the image size is
reached. One step is one generator iteration: ``n_critic`` critic updates (each on a fresh
real batch, critic weights clipped to [-c, c] after each) then one generator update, all
in one ``tf.function``. RMSprop, lr 5e-5, c = 0.01, n_critic = 5, as in the paper. The
loss reported is the critic's last D(fake) - D(real) (minus the Wasserstein estimate).

Sizes: tiny = 16 px, nz 16, 16 filters, batch 8; small = 32 px, nz 64, 32 filters,
batch 32; paper = 64 px, nz 100, 64 filters, batch 64 (TBD's WGAN: 64x64, batch 64).
Data: Gaussian blobs (:func:`workloads.tensorflow.synthetic.blob_images`).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from keras import layers

from workloads import harness, quality, specs
from workloads.tensorflow import _common, synthetic

MODEL = "wgan"
CHANNELS = 3


Config = specs.WGAN
CONFIGS = specs.WGAN_SPEC.configs
BATCH = specs.WGAN_SPEC.batch


def generator(cfg: Config) -> keras.Model:
    """DCGAN_G: z ``[B, nz]`` -> images ``[B, px, px, 3]`` in [-1, 1]."""
    cngf, tisize = cfg.filters // 2, 4
    while tisize != cfg.image_px:
        cngf, tisize = cngf * 2, tisize * 2
    z = keras.Input((cfg.nz,))
    x = layers.Reshape((1, 1, cfg.nz))(z)
    x = layers.Conv2DTranspose(cngf, 4, 1, "valid", use_bias=False)(x)
    x = layers.ReLU()(layers.BatchNormalization()(x))
    size = 4
    while size < cfg.image_px // 2:
        cngf //= 2
        x = layers.Conv2DTranspose(cngf, 4, 2, "same", use_bias=False)(x)
        x = layers.ReLU()(layers.BatchNormalization()(x))
        size *= 2
    x = layers.Conv2DTranspose(CHANNELS, 4, 2, "same", use_bias=False, activation="tanh")(x)
    return keras.Model(z, x, name="dcgan_g")


def critic(cfg: Config) -> keras.Model:
    """DCGAN_D: images -> one unbounded score per image ``[B]``."""
    img = keras.Input((cfg.image_px, cfg.image_px, CHANNELS))
    x = layers.LeakyReLU(0.2)(layers.Conv2D(cfg.filters, 4, 2, "same", use_bias=False)(img))
    size, cndf = cfg.image_px // 2, cfg.filters
    while size > 4:
        cndf *= 2
        x = layers.Conv2D(cndf, 4, 2, "same", use_bias=False)(x)
        x = layers.LeakyReLU(0.2)(layers.BatchNormalization()(x))
        size //= 2
    x = layers.Conv2D(1, 4, 1, "valid", use_bias=False)(x)
    return keras.Model(img, layers.Flatten()(x), name="dcgan_d")


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    device, rng = _common.setup(args)
    b = args.batch_size
    with tf.device(device):
        net_g, net_d = generator(cfg), critic(cfg)
        opt_g = keras.optimizers.RMSprop(learning_rate=cfg.lr)
        opt_d = keras.optimizers.RMSprop(learning_rate=cfg.lr)
        _common.build_optimizer(opt_g, net_g.trainable_variables)
        _common.build_optimizer(opt_d, net_d.trainable_variables)

        @tf.function
        def train_step(reals: tf.Tensor) -> tf.Tensor:
            loss_d = tf.constant(0.0)
            for k in range(cfg.n_critic):
                z = tf.random.normal((b, cfg.nz))
                with tf.GradientTape() as tape:
                    fake = net_g(z, training=True)
                    loss_d = tf.reduce_mean(net_d(fake, training=True)) - tf.reduce_mean(
                        net_d(reals[k], training=True)
                    )
                grads = tape.gradient(loss_d, net_d.trainable_variables)
                opt_d.apply_gradients(zip(grads, net_d.trainable_variables, strict=True))
                for w in net_d.trainable_variables:
                    w.assign(tf.clip_by_value(w, -cfg.clip, cfg.clip))
            z = tf.random.normal((b, cfg.nz))
            with tf.GradientTape() as tape:
                loss_g = -tf.reduce_mean(net_d(net_g(z, training=True), training=True))
            grads = tape.gradient(loss_g, net_g.trainable_variables)
            opt_g.apply_gradients(zip(grads, net_g.trainable_variables, strict=True))
            return loss_d

        # One pipeline item: the real images of a step's n_critic critic updates (the
        # generator's noise is drawn on the device in the step).
        def reals(r: np.random.Generator) -> tuple[np.ndarray]:
            return (
                np.stack(
                    [
                        synthetic.blob_images(b, cfg.image_px, CHANNELS, r)
                        for _ in range(cfg.n_critic)
                    ]
                ),
            )

        data = _common.batches(reals, args, device, rng)

        def step(_: int) -> tf.Tensor:
            return train_step(*next(data))

        held = synthetic.held_out_rng(args.seed)
        n = synthetic.HELD_OUT_IMAGES_WGAN
        held_real = synthetic.blob_images(n, cfg.image_px, CHANNELS, held)
        held_z = tf.constant(held.standard_normal((n, cfg.nz)).astype(np.float32))

        def evaluate() -> float:
            fake = net_g(held_z, training=False).numpy()
            return quality.moment_distance(fake, held_real)

        _common.run(MODEL, args, step, evaluate=evaluate, target=quality.target(MODEL, args.size))


if __name__ == "__main__":
    main()
