"""WGAN (Arjovsky et al. 2017): DCGAN generator and critic, weight clipping, RMSprop.

The networks are the WGAN reference code's DCGAN_G / DCGAN_D, which grow a pyramid of
stride-2 (transposed) convolutions with batch-norm until the image size is reached, so
the same definition serves 16 px and 64 px. One step is one generator iteration: ``n_critic``
critic updates (each on a fresh real batch, critic weights clipped to [-c, c] after each)
then one generator update. RMSprop, lr 5e-5, c = 0.01, n_critic = 5, as in the paper.
The loss reported is the critic's, D(fake) - D(real) (minus the Wasserstein estimate).

Sizes: tiny = 16 px, nz 16, 16 filters, batch 8; small = 32 px, nz 64, 32 filters,
batch 32; paper = 64 px, nz 100, 64 filters, batch 64 (TBD's WGAN: 64x64 images, batch 64).
Data: images of one to three Gaussian blobs on a dark background.
"""

from __future__ import annotations

import torch
from torch import nn

from workloads import harness, quality, specs
from workloads.pytorch import _common

MODEL = "wgan"


Config = specs.WGAN
CONFIGS = specs.WGAN_SPEC.configs
BATCH = specs.WGAN_SPEC.batch

HELD_OUT_IMAGES = 256
CHANNELS = 3


def generator(cfg: Config) -> nn.Sequential:
    """DCGAN_G: z [B, nz, 1, 1] -> image [B, 3, px, px] in [-1, 1]."""
    cngf, size = cfg.filters // 2, 4
    while size != cfg.image_px:
        cngf, size = cngf * 2, size * 2
    layers: list[nn.Module] = [
        nn.ConvTranspose2d(cfg.nz, cngf, 4, 1, 0, bias=False),
        nn.BatchNorm2d(cngf),
        nn.ReLU(True),
    ]
    size = 4
    while size < cfg.image_px // 2:
        layers += [
            nn.ConvTranspose2d(cngf, cngf // 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(cngf // 2),
            nn.ReLU(True),
        ]
        cngf, size = cngf // 2, size * 2
    layers += [nn.ConvTranspose2d(cngf, CHANNELS, 4, 2, 1, bias=False), nn.Tanh()]
    return nn.Sequential(*layers)


def critic(cfg: Config) -> nn.Sequential:
    """DCGAN_D: image -> one unbounded score per sample, ``[B]``."""
    layers: list[nn.Module] = [
        nn.Conv2d(CHANNELS, cfg.filters, 4, 2, 1, bias=False),
        nn.LeakyReLU(0.2, inplace=True),
    ]
    csize, cndf = cfg.image_px // 2, cfg.filters
    while csize > 4:
        layers += [
            nn.Conv2d(cndf, cndf * 2, 4, 2, 1, bias=False),
            nn.BatchNorm2d(cndf * 2),
            nn.LeakyReLU(0.2, inplace=True),
        ]
        csize, cndf = csize // 2, cndf * 2
    layers += [nn.Conv2d(cndf, 1, 4, 1, 0, bias=False), nn.Flatten(0)]
    return nn.Sequential(*layers)


def blobs(px: int, batch: int, gen: torch.Generator) -> torch.Tensor:
    """Real images: one to three coloured Gaussian blobs, ``[B, 3, px, px]`` in [-1, 1]."""
    grid = torch.linspace(0, 1, px)
    img = torch.zeros(batch, CHANNELS, px, px)
    for _ in range(3):
        centre = torch.rand(batch, 2, generator=gen)
        width = 0.05 + 0.1 * torch.rand(batch, 1, 1, generator=gen)
        on = (torch.rand(batch, 1, 1, generator=gen) < 0.7).float()
        colour = torch.rand(batch, CHANNELS, 1, 1, generator=gen)
        d2 = (grid[None, None, :] - centre[:, 0, None, None]) ** 2 + (
            grid[None, :, None] - centre[:, 1, None, None]
        ) ** 2
        img += colour * (on * torch.exp(-d2 / (2 * width**2)))[:, None]
    return img.clamp(0, 1) * 2 - 1


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    device, gen = _common.setup(args)
    g, d = generator(cfg).to(device), critic(cfg).to(device)
    opt_g = torch.optim.RMSprop(g.parameters(), lr=cfg.lr)
    opt_d = torch.optim.RMSprop(d.parameters(), lr=cfg.lr)
    b = args.batch_size
    # One item of the input pipeline: the real images of a step's n_critic critic updates.
    # The generator's noise is drawn on the training device in the step (no input cost).
    data = _common.batches(
        lambda gn: torch.stack([blobs(cfg.image_px, b, gn) for _ in range(cfg.n_critic)]),
        args,
        device,
        gen,
    )
    g.train()
    d.train()

    def step(_: int) -> float:
        for p in d.parameters():
            p.requires_grad_(True)
        reals = next(data)
        for k in range(cfg.n_critic):
            real = reals[k]
            with torch.no_grad():
                fake = g(torch.randn(b, cfg.nz, 1, 1, device=device))
            opt_d.zero_grad(set_to_none=True)
            loss_d = d(fake).mean() - d(real).mean()
            loss_d.backward()
            opt_d.step()
            with torch.no_grad():
                for p in d.parameters():
                    p.clamp_(-cfg.clip, cfg.clip)
        for p in d.parameters():
            p.requires_grad_(False)
        opt_g.zero_grad(set_to_none=True)
        loss_g = -d(g(torch.randn(b, cfg.nz, 1, 1, device=device))).mean()
        loss_g.backward()
        opt_g.step()
        return loss_d.item()

    held_gen = _common.held_out_generator(args)
    held_real = blobs(cfg.image_px, HELD_OUT_IMAGES, held_gen)
    held_z = torch.randn(HELD_OUT_IMAGES, cfg.nz, 1, 1, generator=held_gen)

    def evaluate() -> float:
        g.eval()
        with torch.no_grad():
            fake = g(held_z.to(device)).cpu()
        g.train()
        return quality.moment_distance(fake.numpy(), held_real.numpy())

    _common.run(
        MODEL, args, device, step, evaluate=evaluate, target=quality.target(MODEL, args.size)
    )


if __name__ == "__main__":
    main()
