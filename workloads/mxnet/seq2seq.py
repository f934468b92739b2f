"""Seq2Seq NMT on MXNet Gluon: LSTM encoder-decoder with attention (Sockeye's framework).

Architecture: source embedding -> bidirectional LSTM layer then unidirectional LSTM layers
(both told each sentence's length, so padding is skipped) -> LSTM decoder initialised from
the encoder's final state -> Luong "general" attention over the encoder states (padding
masked) -> tanh(W [h; context]) -> vocabulary projection. Teacher forcing, cross-entropy
over target tokens (padding ignored), Adam with global gradient norm clipped at 1.0.

Sizes: tiny = vocab 32, hidden 32, 2 layers, 4-8 tokens, batch 4; small = vocab 1000,
hidden 256, 10-30 tokens, batch 32; paper = IWSLT15 En-Vi scale: vocab 17191 / 7709,
2 layers of 512, up to 50 tokens, batch 128. Data: the reversal task.
"""

from __future__ import annotations

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon
from mxnet.gluon import nn, rnn

from workloads import harness, quality, specs
from workloads.mxnet import _common
from workloads.tensorflow import synthetic

MODEL = "seq2seq"


Config = specs.Seq2Seq
CONFIGS = specs.SEQ2SEQ.configs
BATCH = specs.SEQ2SEQ.batch


class Seq2Seq(gluon.Block):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        h = cfg.hidden
        self.layers = cfg.layers
        with self.name_scope():
            self.src_emb = nn.Embedding(cfg.src_vocab, h)
            self.tgt_emb = nn.Embedding(cfg.tgt_vocab, h)
            self.enc_bi = rnn.LSTM(
                h // 2, bidirectional=True, layout="NTC", use_sequence_length=True
            )
            self.enc_rest = rnn.LSTM(
                h, num_layers=cfg.layers - 1, layout="NTC", use_sequence_length=True
            )
            self.dec = rnn.LSTM(h, num_layers=cfg.layers, layout="NTC")
            self.attn = nn.Dense(h, use_bias=False, flatten=False)
            self.combine = nn.Dense(h, activation="tanh", flatten=False)
            self.out = nn.Dense(cfg.tgt_vocab, flatten=False)

    def forward(self, src: mx.nd.NDArray, src_len: mx.nd.NDArray, tgt_in: mx.nd.NDArray):
        """Logits ``[B, T, tgt_vocab]`` for the teacher-forced target input."""
        b, ctx = src.shape[0], src.context
        bi, _ = self.enc_bi(
            self.src_emb(src), self.enc_bi.begin_state(b, ctx=ctx), sequence_length=src_len
        )
        enc, (h, c) = self.enc_rest(
            bi, self.enc_rest.begin_state(b, ctx=ctx), sequence_length=src_len
        )
        top = h.shape[0] - 1
        h0 = mx.nd.repeat(h[top : top + 1], self.layers, axis=0)
        c0 = mx.nd.repeat(c[top : top + 1], self.layers, axis=0)
        dec, _ = self.dec(self.tgt_emb(tgt_in), [h0, c0])
        scores = mx.nd.batch_dot(self.attn(dec), enc, transpose_b=True)  # [B, T, S]
        keep = mx.nd.broadcast_lesser(
            mx.nd.arange(src.shape[1], ctx=ctx).reshape(1, 1, -1), src_len.reshape(-1, 1, 1)
        )
        scores = mx.nd.where(
            mx.nd.broadcast_like(keep, scores), scores, mx.nd.ones_like(scores) * -1e9
        )
        context = mx.nd.batch_dot(mx.nd.softmax(scores, axis=-1), enc)
        return self.out(self.combine(mx.nd.concat(dec, context, dim=2)))


def masked_xent(logits: mx.nd.NDArray, tgt_out: mx.nd.NDArray) -> mx.nd.NDArray:
    """Mean cross-entropy over the non-padding target tokens."""
    nll = -mx.nd.pick(mx.nd.log_softmax(logits, axis=-1), tgt_out, axis=-1)
    mask = tgt_out != synthetic.PAD
    return (nll * mask).sum() / mask.sum()


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    ctx, rng = _common.setup(args)
    net = Seq2Seq(cfg)
    net.initialize(mx.init.Xavier(), ctx=ctx)
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": cfg.lr})
    vocab = min(cfg.src_vocab, cfg.tgt_vocab)

    data = _common.batches(
        lambda r: synthetic.translation_batch(args.batch_size, cfg.min_len, cfg.max_len, vocab, r),
        args,
        ctx,
        rng,
    )

    def step(_: int) -> float:
        src, src_len, tgt, _tl = next(data)
        with autograd.record():
            loss = masked_xent(net(src, src_len, tgt[:, :-1]), tgt[:, 1:])
        loss.backward()
        grads = [p.grad(ctx) for p in net.collect_params().values() if p.grad_req != "null"]
        gluon.utils.clip_global_norm(grads, 1.0)
        trainer.step(1)
        return float(loss.asscalar())

    held = synthetic.translation_batch(
        synthetic.HELD_OUT, cfg.min_len, cfg.max_len, vocab, synthetic.held_out_rng(args.seed)
    )

    def nd(a: np.ndarray) -> mx.nd.NDArray:
        return mx.nd.array(a, ctx=ctx)

    def evaluate() -> float:  # outside autograd.record: dropout off
        return quality.greedy_translation_bleu(
            lambda s, sl, ys: net(nd(s), nd(sl), nd(ys)).asnumpy(), *held
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
