"""Deep Speech 2 speech recognition: conv front end + GRU stack + CTC.

Architecture (deepspeech.pytorch / the MLPerf reference TBD adapted): spectrogram ``[B, 1,
freq, time]`` -> Conv2d 32x(41x11) stride (2, 2) -> BN -> Hardtanh(0, 20) -> Conv2d
32x(21x11) stride (2, 1) -> BN -> Hardtanh -> GRU layers (bidirectional ones: directions
summed, sequence-wise batch-norm between layers) -> BN -> Linear to the characters (blank,
space, apostrophe, a-z = 29) -> CTC loss. AdamW.

Sizes: tiny = 32 frequency bins, 2 GRU layers of 32, 3-5 characters, batch 2; small = 81
bins, 3 layers of 256, 8-20 characters, batch 8; paper = 161 bins (20 ms windows at 16 kHz),
MLPerf's 3 unidirectional GRU layers of 2560 after valid (unpadded) convolutions, 100-300
characters (LibriSpeech's lengths), batch 32 (workloads/specs.py). Data: each character has
a fixed spectral template; an utterance is its characters' templates held for 4-8 frames
each, plus noise, so CTC can learn the alignment.
"""

from __future__ import annotations

import torch
from torch import nn

from workloads import harness, quality, specs
from workloads.pytorch import _common

MODEL = "deepspeech2"
CHARS = 29  # blank + space + apostrophe + 26 letters


Config = specs.DeepSpeech2
CONFIGS = specs.DEEPSPEECH2.configs
BATCH = specs.DEEPSPEECH2.batch
FRAMES_PER_CHAR = (4, 8)


class BatchRNN(nn.Module):
    """Sequence-wise batch-norm then a GRU (bidirectional: its directions are summed)."""

    def __init__(self, n_in: int, hidden: int, norm: bool, bidirectional: bool) -> None:
        super().__init__()
        self.norm = nn.BatchNorm1d(n_in) if norm else None
        self.rnn = nn.GRU(n_in, hidden, batch_first=True, bidirectional=bidirectional)
        self.hidden = hidden
        self.bidirectional = bidirectional

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [B, T, n_in]
        if self.norm is not None:
            x = self.norm(x.transpose(1, 2)).transpose(1, 2)
        y, _ = self.rnn(x)
        if not self.bidirectional:
            return y
        return y[..., : self.hidden] + y[..., self.hidden :]


class DeepSpeech2(nn.Module):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        pad = cfg.padded_conv
        self.conv = nn.Sequential(
            nn.Conv2d(1, 32, (41, 11), stride=(2, 2), padding=(20, 5) if pad else 0),
            nn.BatchNorm2d(32),
            nn.Hardtanh(0, 20, inplace=True),
            nn.Conv2d(32, 32, (21, 11), stride=(2, 1), padding=(10, 5) if pad else 0),
            nn.BatchNorm2d(32),
            nn.Hardtanh(0, 20, inplace=True),
        )
        f = cfg.conv_freq()
        self.rnns = nn.Sequential(
            *[
                BatchRNN(32 * f if i == 0 else cfg.hidden, cfg.hidden, i > 0, cfg.bidirectional)
                for i in range(cfg.rnn_layers)
            ]
        )
        self.fc = nn.Sequential(
            nn.BatchNorm1d(cfg.hidden), nn.Linear(cfg.hidden, CHARS, bias=False)
        )

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        """Log-probabilities ``[T', B, CHARS]`` (CTC layout), T' = ``cfg.conv_frames(T)``."""
        x = self.conv(spec)  # [B, C, F', T']
        b, c, f, t = x.shape
        x = self.rnns(x.reshape(b, c * f, t).transpose(1, 2))
        x = self.fc[1](self.fc[0](x.transpose(1, 2)).transpose(1, 2))
        return x.log_softmax(-1).transpose(0, 1)


def utterances(
    cfg: Config, templates: torch.Tensor, batch: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(spectrograms [B, 1, freq, T], frame counts [B], targets [sum chars], char counts)."""
    n_chars = torch.randint(cfg.min_chars, cfg.max_chars + 1, (batch,), generator=gen)
    labels, frames = [], []
    for n in n_chars.tolist():
        chars = torch.randint(1, CHARS, (n,), generator=gen)
        hold = torch.randint(FRAMES_PER_CHAR[0], FRAMES_PER_CHAR[1] + 1, (n,), generator=gen)
        labels.append(chars)
        frames.append(templates[chars].repeat_interleave(hold, dim=0))  # [T, freq]
    lengths = torch.tensor([f.shape[0] for f in frames])
    spec = torch.zeros(batch, 1, cfg.freq_bins, int(lengths.max()))
    for i, f in enumerate(frames):
        spec[i, 0, :, : f.shape[0]] = f.T
    spec += 0.3 * torch.randn(spec.shape, generator=gen)
    return spec, lengths, torch.cat(labels), n_chars


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    device, gen = _common.setup(args)
    net = _common.distribute(DeepSpeech2(cfg).to(device), device, args)
    opt = torch.optim.AdamW(net.parameters(), lr=cfg.lr, weight_decay=1e-5)
    ctc = nn.CTCLoss(blank=0, zero_infinity=True)
    templates = torch.rand(CHARS, cfg.freq_bins, generator=gen) * 2
    data = _common.batches(
        lambda g: utterances(cfg, templates, args.batch_size, g), args, device, gen
    )
    net.train()

    def step(_: int) -> float:
        spec, lengths, targets, target_lengths = next(data)
        opt.zero_grad(set_to_none=True)
        log_probs = net(spec)
        out_lengths = cfg.conv_frames(lengths.cpu())  # CTC's lengths: CPU tensors
        loss = ctc(log_probs, targets, out_lengths, target_lengths.cpu())
        loss.backward()
        nn.utils.clip_grad_norm_(net.parameters(), 400.0)
        opt.step()
        return loss.item()

    held = utterances(cfg, templates, _common.HELD_OUT, _common.held_out_generator(args))

    def evaluate() -> float:
        spec, lengths, targets, target_lengths = held
        net.eval()
        with torch.no_grad():
            logits = net(spec.to(device)).transpose(0, 1).cpu().numpy()  # [B, T', CHARS]
        net.train()
        labels = torch.zeros(len(target_lengths), int(target_lengths.max()), dtype=torch.long)
        at = 0
        for i, n in enumerate(target_lengths.tolist()):
            labels[i, :n] = targets[at : at + n]
            at += n
        out_len = cfg.conv_frames(lengths).numpy()
        return quality.greedy_ctc_cer(
            logits, out_len, labels.numpy(), target_lengths.numpy(), blank=0
        )

    _common.run(
        MODEL, args, device, step, evaluate=evaluate, target=quality.target(MODEL, args.size)
    )


if __name__ == "__main__":
    main()
