"""WGAN (Arjovsky et al. 2017) on MXNet Gluon: DCGAN generator and critic, weight clipping.

The networks are the WGAN reference code's DCGAN_G / DCGAN_D (NCHW): a pyramid of
stride-2 (transposed) 4x4 convolutions with batch-norm until the image size is reached,
both hybridized. One step is one generator iteration: ``n_critic`` critic updates (each on
a fresh real batch, critic weights clipped to [-c, c] after each) then one generator
update. RMSprop, lr 5e-5, c = 0.01, n_critic = 5, as in the paper. The loss reported is
the critic's last D(fake) - D(real) (minus the Wasserstein estimate).

Sizes: tiny = 16 px, nz 16, 16 filters, batch 8; small = 32 px, nz 64, 32 filters,
batch 32; paper = 64 px, nz 100, 64 filters, batch 64 (TBD's WGAN: 64x64, batch 64).
Data: Gaussian blobs.
"""

from __future__ import annotations

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn

from workloads import harness, quality, specs
from workloads.mxnet import _common
from workloads.tensorflow import synthetic

MODEL = "wgan"
CHANNELS = 3


Config = specs.WGAN
CONFIGS = specs.WGAN_SPEC.configs
BATCH = specs.WGAN_SPEC.batch


def generator(cfg: Config) -> nn.HybridSequential:
    """DCGAN_G: z ``[B, nz, 1, 1]`` -> images ``[B, 3, px, px]`` in [-1, 1]."""
    cngf, tisize = cfg.filters // 2, 4
    while tisize != cfg.image_px:
        cngf, tisize = cngf * 2, tisize * 2
    net = nn.HybridSequential()
    net.add(
        nn.Conv2DTranspose(cngf, 4, 1, 0, use_bias=False), nn.BatchNorm(), nn.Activation("relu")
    )
    size = 4
    while size < cfg.image_px // 2:
        cngf //= 2
        net.add(
            nn.Conv2DTranspose(cngf, 4, 2, 1, use_bias=False), nn.BatchNorm(), nn.Activation("relu")
        )
        size *= 2
    net.add(nn.Conv2DTranspose(CHANNELS, 4, 2, 1, use_bias=False), nn.Activation("tanh"))
    return net


def critic(cfg: Config) -> nn.HybridSequential:
    """DCGAN_D: images -> one unbounded score per image ``[B, 1]``."""
    net = nn.HybridSequential()
    net.add(nn.Conv2D(cfg.filters, 4, 2, 1, use_bias=False), nn.LeakyReLU(0.2))
    size, cndf = cfg.image_px // 2, cfg.filters
    while size > 4:
        cndf *= 2
        net.add(nn.Conv2D(cndf, 4, 2, 1, use_bias=False), nn.BatchNorm(), nn.LeakyReLU(0.2))
        size //= 2
    net.add(nn.Conv2D(1, 4, 1, 0, use_bias=False), nn.Flatten())
    return net


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    ctx, rng = _common.setup(args)
    b = args.batch_size
    net_g, net_d = generator(cfg), critic(cfg)
    for net in (net_g, net_d):
        net.initialize(mx.init.Normal(0.02), ctx=ctx)
        net.hybridize()
    opt = {"learning_rate": cfg.lr}
    trainer_g = gluon.Trainer(net_g.collect_params(), "rmsprop", opt)
    trainer_d = gluon.Trainer(net_d.collect_params(), "rmsprop", opt)
    clipped = [p for p in net_d.collect_params().values() if p.grad_req != "null"]

    def noise() -> mx.nd.NDArray:
        return mx.nd.random.normal(shape=(b, cfg.nz, 1, 1), ctx=ctx)

    def reals(r: np.random.Generator) -> tuple[np.ndarray]:
        """One pipeline item: the real images (NCHW) of a step's n_critic critic updates
        (the generator's noise is drawn on the device in the step)."""
        return (
            np.stack(
                [
                    synthetic.blob_images(b, cfg.image_px, CHANNELS, r).transpose(0, 3, 1, 2)
                    for _ in range(cfg.n_critic)
                ]
            ),
        )

    data = _common.batches(reals, args, ctx, rng)

    def step(_: int) -> float:
        loss_d = mx.nd.zeros(1, ctx=ctx)
        (real_all,) = next(data)
        for k in range(cfg.n_critic):
            real = real_all[k]
            fake = net_g(noise())  # not recorded: the critic step does not train G
            with autograd.record():
                loss_d = net_d(fake).mean() - net_d(real).mean()
            loss_d.backward()
            trainer_d.step(1)
            for p in clipped:
                p.set_data(mx.nd.clip(p.data(ctx), -cfg.clip, cfg.clip))
        with autograd.record():
            loss_g = -net_d(net_g(noise())).mean()
        loss_g.backward()
        trainer_g.step(1)
        return float(loss_d.asscalar())

    held = synthetic.held_out_rng(args.seed)
    n = synthetic.HELD_OUT_IMAGES_WGAN
    held_real = synthetic.blob_images(n, cfg.image_px, CHANNELS, held)
    held_z = mx.nd.array(held.standard_normal((n, cfg.nz, 1, 1)), ctx=ctx)

    def evaluate() -> float:
        fake = net_g(held_z).asnumpy().transpose(0, 2, 3, 1)  # NCHW -> NHWC, as held_real
        return quality.moment_distance(fake, held_real)

    _common.run(
        MODEL,
        args,
        step,
        nets=[net_g, net_d],
        trainers=[trainer_g, trainer_d],
        evaluate=evaluate,
        target=quality.target(MODEL, args.size),
    )


if __name__ == "__main__":
    main()
