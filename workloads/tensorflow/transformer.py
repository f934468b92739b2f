"""Transformer NMT on TensorFlow/Keras, written out (tensor2tensor ``transformer_base``).

Architecture (t2t's ``transformer_base``): one embedding shared by source, target and the
output softmax, scaled by sqrt(d_model), plus sinusoidal positions -> pre-norm encoder
layers (self-attention, ReLU feed-forward; normalize, sublayer, dropout, add) and a final
layer norm -> pre-norm decoder layers (causal self-attention, cross-attention) and a final
layer norm -> logits against the shared embedding. Padding is masked in every attention.
Loss: cross-entropy with label smoothing 0.1 (padding ignored). Adam (0.9, 0.98, eps 1e-9)
with the inverse-square-root warm-up schedule of "Attention Is All You Need".

Sizes (workloads/specs.py): tiny = d_model 32, 2 heads, 2+2 layers, ff 64, vocab 32, 4-8
tokens, batch 4; small = d_model 256, 4 heads, 3+3 layers, ff 1024, vocab 8000, 10-30
tokens, batch 32; paper = transformer_base: d_model 512, 8 heads, 6+6 layers, ff 2048,
dropout 0.1, vocab 32768, up to 32 tokens, batch 64 (about t2t's 2048 tokens per batch).
Data: the reversal task (:func:`workloads.tensorflow.synthetic.translation_batch`).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf
from keras import layers

from workloads import harness, quality, specs
from workloads.tensorflow import _common, synthetic

MODEL = "transformer"
LABEL_SMOOTHING = 0.1


Config = specs.Transformer
CONFIGS = specs.TRANSFORMER.configs
BATCH = specs.TRANSFORMER.batch


def sinusoids(length: int, d_model: int) -> np.ndarray:
    """``[length, d_model]`` sine/cosine position encodings (Vaswani et al.)."""
    pos = np.arange(length)[:, None]
    i = np.arange(d_model // 2)[None, :]
    ang = pos / np.power(10000.0, 2 * i / d_model)
    out = np.zeros((length, d_model), np.float32)
    out[:, 0::2], out[:, 1::2] = np.sin(ang), np.cos(ang)
    return out


class InverseSqrt(keras.optimizers.schedules.LearningRateSchedule):
    """lr = scale * d_model^-0.5 * min(n^-0.5, n * warmup^-1.5), n = optimizer step + 1."""

    def __init__(self, d_model: int, warmup_steps: int, scale: float = 1.0) -> None:
        self.d_model, self.warmup_steps, self.scale = d_model, warmup_steps, scale

    def __call__(self, step: tf.Tensor) -> tf.Tensor:
        n = tf.cast(step, tf.float32) + 1.0
        return self.scale * self.d_model**-0.5 * tf.minimum(n**-0.5, n * self.warmup_steps**-1.5)

    def get_config(self) -> dict[str, float]:
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}


class Block(layers.Layer):
    """One pre-norm encoder (cross=False) or decoder (cross=True) layer."""

    def __init__(self, cfg: Config, cross: bool) -> None:
        super().__init__()
        kd = cfg.d_model // cfg.heads
        self.self_attn = layers.MultiHeadAttention(cfg.heads, kd, dropout=cfg.dropout)
        self.cross_attn = (
            layers.MultiHeadAttention(cfg.heads, kd, dropout=cfg.dropout) if cross else None
        )
        self.ff1 = layers.Dense(cfg.ff, activation="relu")
        self.ff2 = layers.Dense(cfg.d_model)
        self.norms = [layers.LayerNormalization(epsilon=1e-6) for _ in range(3 if cross else 2)]
        self.drop = layers.Dropout(cfg.dropout)

    def call(self, x, self_mask, memory=None, cross_mask=None, causal=False, training=False):
        h = self.norms[0](x)
        a = self.self_attn(
            h, h, attention_mask=self_mask, use_causal_mask=causal, training=training
        )
        x = x + self.drop(a, training=training)
        if self.cross_attn is not None:
            h = self.norms[1](x)
            a = self.cross_attn(h, memory, attention_mask=cross_mask, training=training)
            x = x + self.drop(a, training=training)
        f = self.ff2(self.drop(self.ff1(self.norms[-1](x)), training=training))
        return x + self.drop(f, training=training)


class Transformer(keras.Model):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        self.scale = float(np.sqrt(cfg.d_model))
        self.pos = tf.constant(sinusoids(cfg.max_len + 2, cfg.d_model))
        # t2t's initialisation: N(0, d_model^-0.5), so the sqrt(d_model)-scaled embedding
        # has unit variance, as the positions do
        self.emb = layers.Embedding(
            cfg.vocab,
            cfg.d_model,
            embeddings_initializer=keras.initializers.RandomNormal(stddev=cfg.d_model**-0.5),
        )
        self.enc = [Block(cfg, cross=False) for _ in range(cfg.layers)]
        self.dec = [Block(cfg, cross=True) for _ in range(cfg.layers)]
        self.enc_norm = layers.LayerNormalization(epsilon=1e-6)
        self.dec_norm = layers.LayerNormalization(epsilon=1e-6)
        self.drop = layers.Dropout(cfg.dropout)

    def embed(self, tokens: tf.Tensor, training: bool) -> tf.Tensor:
        x = self.emb(tokens) * self.scale + self.pos[: tf.shape(tokens)[1]]
        return self.drop(x, training=training)

    def call(self, src: tf.Tensor, tgt_in: tf.Tensor, training: bool = False) -> tf.Tensor:
        """Logits ``[B, T, vocab]`` for the teacher-forced target input."""
        src_keep = tf.not_equal(src, synthetic.PAD)
        tgt_keep = tf.not_equal(tgt_in, synthetic.PAD)
        x = self.embed(src, training)
        for blk in self.enc:
            x = blk(x, src_keep[:, None, :], training=training)
        x = self.enc_norm(x)
        y = self.embed(tgt_in, training)
        for blk in self.dec:
            y = blk(
                y,
                tgt_keep[:, None, :],
                memory=x,
                cross_mask=src_keep[:, None, :],
                causal=True,
                training=training,
            )
        # the softmax shares the embedding
        return tf.matmul(self.dec_norm(y), self.emb.embeddings, transpose_b=True)


def smoothed_xent(tgt_out: tf.Tensor, logits: tf.Tensor, vocab: int) -> tf.Tensor:
    """Label-smoothed cross-entropy, mean over non-padding target tokens."""
    onehot = tf.one_hot(tgt_out, vocab)
    soft = onehot * (1 - LABEL_SMOOTHING) + LABEL_SMOOTHING / vocab
    per_tok = tf.nn.softmax_cross_entropy_with_logits(labels=soft, logits=logits)
    mask = tf.cast(tf.not_equal(tgt_out, synthetic.PAD), per_tok.dtype)
    return tf.reduce_sum(per_tok * mask) / tf.reduce_sum(mask)


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    device, rng = _common.setup(args)
    with tf.device(device):
        net = Transformer(cfg)
        opt = keras.optimizers.Adam(
            InverseSqrt(cfg.d_model, cfg.warmup_steps, cfg.lr_scale),
            beta_1=0.9,
            beta_2=0.98,
            epsilon=1e-9,
        )
        # a subclassed model creates its weights on its first call: made here, eagerly, so
        # that the step is traced once (_common.build_optimizer)
        net(tf.ones((1, cfg.max_len), tf.int32), tf.ones((1, 2), tf.int32))
        _common.build_optimizer(opt, net.trainable_variables)

        @tf.function(reduce_retracing=True)
        def train_step(src: tf.Tensor, tgt: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                logits = net(src, tgt[:, :-1], training=True)
                loss = smoothed_xent(tgt[:, 1:], logits, cfg.vocab)
            grads = tape.gradient(loss, net.trainable_variables)
            opt.apply_gradients(zip(grads, net.trainable_variables, strict=True))
            return loss

        data = _common.batches(
            lambda r: synthetic.translation_batch(
                args.batch_size, cfg.min_len, cfg.max_len, cfg.vocab, r
            ),
            args,
            device,
            rng,
        )

        def step(_: int) -> tf.Tensor:
            src, _sl, tgt, _tl = next(data)
            return train_step(src, tgt)

        held = synthetic.translation_batch(
            synthetic.HELD_OUT,
            cfg.min_len,
            cfg.max_len,
            cfg.vocab,
            synthetic.held_out_rng(args.seed),
        )

        def evaluate() -> float:
            return quality.greedy_translation_bleu(
                lambda s, _sl, ys: net(tf.constant(s), tf.constant(ys), training=False).numpy(),
                *held,
            )

        _common.run(MODEL, args, step, evaluate=evaluate, target=quality.target(MODEL, args.size))


if __name__ == "__main__":
    main()
