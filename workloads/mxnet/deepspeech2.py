"""Deep Speech 2 on MXNet Gluon (TBD's own DS2 ran on MXNet): conv + GRU stack + CTC.

Architecture (as the PyTorch and TensorFlow workloads): spectrogram ``[B, 1, time, freq]``
-> Conv2D 32 x (11 time x 41 freq) stride (2, 2) -> BN -> clipped ReLU(0, 20) -> Conv2D 32 x
(11 x 21) stride (1, 2) -> BN -> clipped ReLU -> GRU layers (bidirectional ones: directions
summed, batch-norm between layers) -> BN -> Dense to 29 classes -> Gluon's CTCLoss. Gluon
reserves the *last* class for the CTC blank, so characters 1..28 become classes 0..27 and
class 28 is the blank. Adam (MXNet 1.9 has no AdamW).

Sizes: tiny = 32 frequency bins, 2 GRU layers of 32, 3-5 characters, batch 2; small = 81
bins, 3 layers of 256, 8-20 characters, batch 8; paper = 161 bins (20 ms windows at 16 kHz),
MLPerf's 3 unidirectional GRU layers of 2560 after valid (unpadded) convolutions, 100-300
characters (LibriSpeech's lengths), batch 32 (workloads/specs.py). Data: per-character
spectral templates held 4-8 frames.
"""

from __future__ import annotations

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn, rnn

from workloads import harness, quality, specs
from workloads.mxnet import _common
from workloads.tensorflow import synthetic

MODEL = "deepspeech2"


Config = specs.DeepSpeech2
CONFIGS = specs.DEEPSPEECH2.configs
BATCH = specs.DEEPSPEECH2.batch


class ClippedReLU(nn.HybridBlock):
    def hybrid_forward(self, F, x):  # noqa: N803  (Gluon's signature)
        return F.clip(x, 0.0, 20.0)


class DeepSpeech2(gluon.Block):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.hidden = cfg.hidden
        freq_out = cfg.conv_freq()
        pad = cfg.padded_conv
        self.bidirectional = cfg.bidirectional
        with self.name_scope():
            self.conv = nn.HybridSequential()
            self.conv.add(
                nn.Conv2D(32, (11, 41), strides=(2, 2), padding=(5, 20) if pad else (0, 0)),
                nn.BatchNorm(),
                ClippedReLU(),
                nn.Conv2D(32, (11, 21), strides=(1, 2), padding=(5, 10) if pad else (0, 0)),
                nn.BatchNorm(),
                ClippedReLU(),
            )
            self.rnns = [rnn.GRU(cfg.hidden, bidirectional=cfg.bidirectional, layout="NTC")]
            self.norms = [nn.BatchNorm(axis=2) for _ in range(cfg.rnn_layers)]
            self.rnns += [
                rnn.GRU(
                    cfg.hidden,
                    bidirectional=cfg.bidirectional,
                    layout="NTC",
                    input_size=cfg.hidden,
                )
                for _ in range(cfg.rnn_layers - 1)
            ]
            for i, (g, n) in enumerate(zip(self.rnns, self.norms, strict=True)):
                self.register_child(g, f"gru{i}")
                self.register_child(n, f"bn{i}")
            self.out = nn.Dense(synthetic.CHARS, flatten=False, use_bias=False)
        self.freq_out = freq_out

    def forward(self, spec: mx.nd.NDArray) -> mx.nd.NDArray:
        """Spectrogram ``[B, T, F]`` -> logits ``[B, cfg.conv_frames(T), 29]``."""
        x = self.conv(spec.expand_dims(1))  # [B, 32, T', F'']
        b, c, t, f = x.shape
        x = x.transpose((0, 2, 1, 3)).reshape((b, t, c * f))
        for i, gru in enumerate(self.rnns):
            if i > 0:
                x = self.norms[i - 1](x)
            x = gru(x)
            if self.bidirectional:  # directions summed
                x = x.reshape((b, t, 2, self.hidden)).sum(axis=2)
        return self.out(self.norms[-1](x))


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    ctx, rng = _common.setup(args)
    net = DeepSpeech2(cfg)
    net.initialize(mx.init.Xavier(), ctx=ctx)
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": cfg.lr})
    loss_fn = gluon.loss.CTCLoss(layout="NTC", label_layout="NT")
    templates = synthetic.char_templates(cfg.freq_bins, rng)

    def utterances(r: np.random.Generator) -> tuple[np.ndarray, ...]:
        spec, frames, labels, label_len = synthetic.speech_batch(
            templates, args.batch_size, cfg.min_chars, cfg.max_chars, r
        )
        # Characters 1..28 -> classes 0..27; padding 0 -> -1 (Gluon's label padding).
        return spec, labels.astype("float32") - 1, cfg.conv_frames(frames), label_len

    data = _common.batches(utterances, args, ctx, rng)

    def step(_: int) -> float:
        spec, labels, pred_len, label_len = next(data)
        with autograd.record():
            loss = loss_fn(net(spec), labels, pred_len, label_len).mean()
        loss.backward()
        trainer.step(1)
        return float(loss.asscalar())

    spec_h, frames_h, labels_h, len_h = synthetic.speech_batch(
        templates,
        synthetic.HELD_OUT,
        cfg.min_chars,
        cfg.max_chars,
        synthetic.held_out_rng(args.seed),
    )

    def evaluate() -> float:  # outside autograd.record: batch-norm in inference mode
        logits = net(mx.nd.array(spec_h, ctx=ctx)).asnumpy()
        blank = synthetic.CHARS - 1  # Gluon's CTC: blank is the last class
        return quality.greedy_ctc_cer(
            logits, cfg.conv_frames(frames_h), labels_h, len_h, blank=blank, shift=1
        )

    _common.run(
        MODEL,
        args,
        step,
        nets=[net],
        trainers=[trainer],
        evaluate=evaluate,
        target=quality.target(MODEL, args.size),
    )


if __name__ == "__main__":
    main()
