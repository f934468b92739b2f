"""Transformer NMT on MXNet Gluon, written out (tensor2tensor ``transformer_base``).

Gluon 1.9 has no attention layer, so multi-head scaled dot-product attention is written out
with ``batch_dot``. Architecture (t2t's ``transformer_base``): one embedding shared by
source, target and the output softmax, scaled by sqrt(d_model), plus sinusoidal positions ->
pre-norm encoder layers (self-attention, ReLU feed-forward; normalize, sublayer, dropout,
add) and a final layer norm -> pre-norm decoder layers (causal self-attention, cross-
attention) and a final layer norm -> logits against the shared embedding; padding masked in
every attention. Loss: cross-entropy with label smoothing 0.1 (padding ignored). Adam (0.9,
0.98, eps 1e-9) with the inverse-square-root warm-up schedule, set on the trainer before
each step.

Sizes (workloads/specs.py): tiny = d_model 32, 2 heads, 2+2 layers, ff 64, vocab 32, 4-8
tokens, batch 4; small = d_model 256, 4 heads, 3+3 layers, ff 1024, vocab 8000, 10-30
tokens, batch 32; paper = transformer_base: d_model 512, 8 heads, 6+6 layers, ff 2048,
dropout 0.1, vocab 32768, up to 32 tokens, batch 64. Data: the reversal task.
"""

from __future__ import annotations

import math

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn

from workloads import harness, quality, specs
from workloads.mxnet import _common
from workloads.tensorflow import synthetic

MODEL = "transformer"
LABEL_SMOOTHING = 0.1


Config = specs.Transformer
CONFIGS = specs.TRANSFORMER.configs
BATCH = specs.TRANSFORMER.batch


def inverse_sqrt_lr(step: int, d_model: int, warmup_steps: int) -> float:
    """d_model^-0.5 * min(n^-0.5, n * warmup^-1.5), n = step + 1 (step counts from 0)."""
    n = step + 1
    return d_model**-0.5 * min(n**-0.5, n * warmup_steps**-1.5)


def sinusoids(length: int, d_model: int) -> np.ndarray:
    """``[length, d_model]`` sine/cosine position encodings (Vaswani et al.)."""
    ang = np.arange(length)[:, None] / np.power(10000.0, 2 * np.arange(d_model // 2) / d_model)
    out = np.zeros((length, d_model), np.float32)
    out[:, 0::2], out[:, 1::2] = np.sin(ang), np.cos(ang)
    return out


class MultiHeadAttention(gluon.Block):
    def __init__(self, d_model: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.dk = heads, d_model // heads
        with self.name_scope():
            self.q, self.k, self.v, self.o = (nn.Dense(d_model, flatten=False) for _ in range(4))
            self.drop = nn.Dropout(dropout)

    def _split(self, x: mx.nd.NDArray) -> mx.nd.NDArray:
        b, t, _ = x.shape
        x = x.reshape((b, t, self.heads, self.dk)).transpose((0, 2, 1, 3))
        return x.reshape((b * self.heads, t, self.dk))

    def forward(self, query, memory, keep):
        """``keep [B, Tq, Tk]`` (1 = attend) -> ``[B, Tq, d_model]``."""
        b, tq, d = query.shape
        tk = memory.shape[1]
        scores = mx.nd.batch_dot(
            self._split(self.q(query)), self._split(self.k(memory)), transpose_b=True
        ) / math.sqrt(self.dk)
        keep = keep.expand_dims(1).broadcast_to((b, self.heads, tq, tk))
        keep = keep.reshape((b * self.heads, tq, tk))
        scores = mx.nd.where(keep, scores, mx.nd.ones_like(scores) * -1e9)
        ctx = mx.nd.batch_dot(
            self.drop(mx.nd.softmax(scores, axis=-1)), self._split(self.v(memory))
        )
        ctx = ctx.reshape((b, self.heads, tq, self.dk)).transpose((0, 2, 1, 3))
        return self.o(ctx.reshape((b, tq, d)))


class Block(gluon.Block):
    """One pre-norm encoder (cross=False) or decoder (cross=True) layer."""

    def __init__(self, cfg: Config, cross: bool) -> None:
        super().__init__()
        with self.name_scope():
            self.self_attn = MultiHeadAttention(cfg.d_model, cfg.heads, cfg.dropout)
            self.cross_attn = (
                MultiHeadAttention(cfg.d_model, cfg.heads, cfg.dropout) if cross else None
            )
            self.ff1 = nn.Dense(cfg.ff, activation="relu", flatten=False)
            self.ff2 = nn.Dense(cfg.d_model, flatten=False)
            self.norm1 = nn.LayerNorm(epsilon=1e-6)
            self.norm2 = nn.LayerNorm(epsilon=1e-6) if cross else None
            self.norm3 = nn.LayerNorm(epsilon=1e-6)
            self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x, self_keep, memory=None, cross_keep=None):
        h = self.norm1(x)
        x = x + self.drop(self.self_attn(h, h, self_keep))
        if self.cross_attn is not None and self.norm2 is not None:
            x = x + self.drop(self.cross_attn(self.norm2(x), memory, cross_keep))
        return x + self.drop(self.ff2(self.drop(self.ff1(self.norm3(x)))))


class Transformer(gluon.Block):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.scale = math.sqrt(cfg.d_model)
        self.pos = sinusoids(cfg.max_len + 2, cfg.d_model)
        with self.name_scope():
            # t2t's initialisation: N(0, d_model^-0.5), so the sqrt(d_model)-scaled
            # embedding has unit variance, as the positions do
            self.emb = nn.Embedding(
                cfg.vocab, cfg.d_model, weight_initializer=mx.init.Normal(cfg.d_model**-0.5)
            )
            self.enc = nn.Sequential()
            self.dec = nn.Sequential()
            for _ in range(cfg.layers):
                self.enc.add(Block(cfg, cross=False))
                self.dec.add(Block(cfg, cross=True))
            self.enc_norm = nn.LayerNorm(epsilon=1e-6)
            self.dec_norm = nn.LayerNorm(epsilon=1e-6)
            self.drop = nn.Dropout(cfg.dropout)
        self.vocab = cfg.vocab

    def _embed(self, tokens: mx.nd.NDArray) -> mx.nd.NDArray:
        pos = mx.nd.array(self.pos[: tokens.shape[1]], ctx=tokens.context)
        return self.drop(mx.nd.broadcast_add(self.emb(tokens) * self.scale, pos.expand_dims(0)))

    def forward(self, src: mx.nd.NDArray, tgt_in: mx.nd.NDArray) -> mx.nd.NDArray:
        """Logits ``[B, T, vocab]`` for the teacher-forced target input."""
        t, ctx = tgt_in.shape[1], src.context
        src_keep = (src != synthetic.PAD).expand_dims(1)  # [B, 1, S]
        tgt_keep = (tgt_in != synthetic.PAD).expand_dims(1)  # [B, 1, T]
        causal = mx.nd.array(np.tril(np.ones((t, t), np.float32)), ctx=ctx).expand_dims(0)
        self_keep = mx.nd.broadcast_mul(tgt_keep, causal)  # [B, T, T]
        x = self._embed(src)
        enc_keep = mx.nd.repeat(src_keep, src.shape[1], axis=1)  # [B, S, S]
        for blk in self.enc:
            x = blk(x, enc_keep)
        x = self.enc_norm(x)
        y = self._embed(tgt_in)
        cross_keep = mx.nd.repeat(src_keep, t, axis=1)  # [B, T, S]
        for blk in self.dec:
            y = blk(y, self_keep, x, cross_keep)
        # the softmax shares the embedding: logits = y W^T
        return mx.nd.FullyConnected(
            self.dec_norm(y),
            self.emb.weight.data(ctx),
            no_bias=True,
            num_hidden=self.vocab,
            flatten=False,
        )


def smoothed_xent(logits: mx.nd.NDArray, tgt_out: mx.nd.NDArray) -> mx.nd.NDArray:
    """Label-smoothed cross-entropy (target (1 - e) one-hot + e / vocab), mean over tokens."""
    logp = mx.nd.log_softmax(logits, axis=-1)
    nll = -mx.nd.pick(logp, tgt_out, axis=-1)
    uniform = -logp.mean(axis=-1)
    per_tok = (1 - LABEL_SMOOTHING) * nll + LABEL_SMOOTHING * uniform
    mask = tgt_out != synthetic.PAD
    return (per_tok * mask).sum() / mask.sum()


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    ctx, rng = _common.setup(args)
    net = Transformer(cfg)
    net.initialize(mx.init.Xavier(), ctx=ctx)
    trainer = gluon.Trainer(
        net.collect_params(),
        "adam",
        {"learning_rate": 0.0, "beta1": 0.9, "beta2": 0.98, "epsilon": 1e-9},
    )

    data = _common.batches(
        lambda r: synthetic.translation_batch(
            args.batch_size, cfg.min_len, cfg.max_len, cfg.vocab, r
        ),
        args,
        ctx,
        rng,
    )

    def step(i: int) -> float:
        src, _sl, tgt, _tl = next(data)
        with autograd.record():
            loss = smoothed_xent(net(src, tgt[:, :-1]), tgt[:, 1:])
        loss.backward()
        trainer.set_learning_rate(cfg.lr_scale * inverse_sqrt_lr(i, cfg.d_model, cfg.warmup_steps))
        trainer.step(1)
        return float(loss.asscalar())

    held = synthetic.translation_batch(
        synthetic.HELD_OUT, cfg.min_len, cfg.max_len, cfg.vocab, synthetic.held_out_rng(args.seed)
    )

    def nd(a: np.ndarray) -> mx.nd.NDArray:
        return mx.nd.array(a, ctx=ctx)

    def evaluate() -> float:  # outside autograd.record: dropout off
        return quality.greedy_translation_bleu(
            lambda s, sl, ys: net(nd(s), nd(ys)).asnumpy(), *held
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
