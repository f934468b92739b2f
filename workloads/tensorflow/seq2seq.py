"""Seq2Seq NMT on TensorFlow/Keras: LSTM encoder-decoder with attention (Sockeye / tf-nmt).

Architecture: source embedding -> bidirectional LSTM layer then unidirectional LSTM layers
(source padding masked) -> LSTM decoder initialised from the encoder's final state -> Luong
"general" attention over the encoder states (padding masked) -> tanh(W [h; context]) ->
vocabulary projection. Teacher forcing, cross-entropy over target tokens (padding
ignored), Adam with global gradient norm clipped at 1.0 (Sockeye).

Sizes: tiny = vocab 32, hidden 32, 2 layers, 4-8 tokens, batch 4; small = vocab 1000,
hidden 256, 10-30 tokens, batch 32; paper = IWSLT15 En-Vi scale: vocab 17191 / 7709,
2 layers of 512, up to 50 tokens, batch 128. Data: the reversal task
(:func:`workloads.tensorflow.synthetic.translation_batch`).
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import layers

from workloads import harness, quality, specs
from workloads.tensorflow import _common, synthetic

MODEL = "seq2seq"


Config = specs.Seq2Seq
CONFIGS = specs.SEQ2SEQ.configs
BATCH = specs.SEQ2SEQ.batch


class Seq2Seq(keras.Model):
    def __init__(self, cfg: Config) -> None:
        super().__init__()
        h = cfg.hidden
        self.src_emb = layers.Embedding(cfg.src_vocab, h)
        self.tgt_emb = layers.Embedding(cfg.tgt_vocab, h)
        self.enc_bi = layers.Bidirectional(layers.LSTM(h // 2, return_sequences=True))
        self.enc_rest = [
            layers.LSTM(h, return_sequences=True, return_state=True) for _ in range(cfg.layers - 1)
        ]
        self.dec = [layers.LSTM(h, return_sequences=True) for _ in range(cfg.layers)]
        self.attn = layers.Dense(h, use_bias=False)
        self.combine = layers.Dense(h, activation="tanh")
        self.out = layers.Dense(cfg.tgt_vocab)

    def call(self, src: tf.Tensor, tgt_in: tf.Tensor) -> tf.Tensor:
        """Logits ``[B, T, tgt_vocab]`` for the teacher-forced target input."""
        src_mask = tf.not_equal(src, synthetic.PAD)
        enc = self.enc_bi(self.src_emb(src), mask=src_mask)
        for lstm in self.enc_rest:
            enc, h, c = lstm(enc, mask=src_mask)
        dec = self.tgt_emb(tgt_in)
        for lstm in self.dec:
            dec = lstm(dec, initial_state=[h, c])
        scores = tf.matmul(self.attn(dec), enc, transpose_b=True)  # [B, T, S]
        scores = tf.where(src_mask[:, None, :], scores, tf.fill(tf.shape(scores), -1e9))
        context = tf.matmul(tf.nn.softmax(scores, axis=-1), enc)
        return self.out(self.combine(tf.concat([dec, context], axis=-1)))


def masked_xent(tgt_out: tf.Tensor, logits: tf.Tensor) -> tf.Tensor:
    """Mean cross-entropy over the non-padding target tokens."""
    per_tok = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=tgt_out, logits=logits)
    mask = tf.cast(tf.not_equal(tgt_out, synthetic.PAD), per_tok.dtype)
    return tf.reduce_sum(per_tok * mask) / tf.reduce_sum(mask)


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    device, rng = _common.setup(args)
    vocab = min(cfg.src_vocab, cfg.tgt_vocab)
    with tf.device(device):
        net = Seq2Seq(cfg)
        opt = keras.optimizers.Adam(learning_rate=cfg.lr, global_clipnorm=1.0)
        # a subclassed model creates its weights on its first call: made here, eagerly, so
        # that the step is traced once (_common.build_optimizer)
        net(tf.ones((1, cfg.max_len), tf.int32), tf.ones((1, 2), tf.int32))
        _common.build_optimizer(opt, net.trainable_variables)

        @tf.function(reduce_retracing=True)
        def train_step(src: tf.Tensor, tgt: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = masked_xent(tgt[:, 1:], net(src, tgt[:, :-1], training=True))
            grads = tape.gradient(loss, net.trainable_variables)
            opt.apply_gradients(zip(grads, net.trainable_variables, strict=True))
            return loss

        data = _common.batches(
            lambda r: synthetic.translation_batch(
                args.batch_size, cfg.min_len, cfg.max_len, vocab, r
            ),
            args,
            device,
            rng,
        )

        def step(_: int) -> tf.Tensor:
            src, _sl, tgt, _tl = next(data)
            return train_step(src, tgt)

        held = synthetic.translation_batch(
            synthetic.HELD_OUT, cfg.min_len, cfg.max_len, vocab, synthetic.held_out_rng(args.seed)
        )

        def evaluate() -> float:
            return quality.greedy_translation_bleu(
                lambda s, _sl, ys: net(tf.constant(s), tf.constant(ys)).numpy(), *held
            )

        _common.run(MODEL, args, step, evaluate=evaluate, target=quality.target(MODEL, args.size))


if __name__ == "__main__":
    main()
