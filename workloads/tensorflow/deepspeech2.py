"""Deep Speech 2 on TensorFlow/Keras: conv front end + GRU stack + CTC.

Architecture (as the PyTorch workload, channels-last): spectrogram ``[B, time, freq, 1]`` ->
Conv2D 32 x (11 time x 41 freq) stride (2, 2) -> BN -> clipped ReLU(0, 20) -> Conv2D 32 x
(11 x 21) stride (1, 2) -> BN -> clipped ReLU -> GRU layers (bidirectional ones: directions
summed, batch-norm between layers) -> BN -> Dense to the characters (blank, space,
apostrophe, a-z = 29) -> CTC loss (tf.nn.ctc_loss, blank 0). AdamW.

Sizes: tiny = 32 frequency bins, 2 GRU layers of 32, 3-5 characters, batch 2; small = 81
bins, 3 layers of 256, 8-20 characters, batch 8; paper = 161 bins (20 ms windows at 16 kHz),
MLPerf's 3 unidirectional GRU layers of 2560 after valid (unpadded) convolutions, 100-300
characters (LibriSpeech's lengths), batch 32 (workloads/specs.py). Data: per-character
spectral templates held 4-8 frames (:func:`workloads.tensorflow.synthetic.speech_batch`).
"""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import layers

from workloads import harness, quality, specs
from workloads.tensorflow import _common, synthetic

MODEL = "deepspeech2"


Config = specs.DeepSpeech2
CONFIGS = specs.DEEPSPEECH2.configs
BATCH = specs.DEEPSPEECH2.batch


def build_model(cfg: Config) -> keras.Model:
    """Spectrogram ``[B, T, F]`` -> per-frame logits ``[B, cfg.conv_frames(T), 29]``."""
    pad = "same" if cfg.padded_conv else "valid"
    spec = keras.Input((None, cfg.freq_bins))
    x = layers.Reshape((-1, cfg.freq_bins, 1))(spec)
    x = layers.Conv2D(32, (11, 41), strides=(2, 2), padding=pad)(x)
    x = layers.ReLU(max_value=20.0)(layers.BatchNormalization()(x))
    x = layers.Conv2D(32, (11, 21), strides=(1, 2), padding=pad)(x)
    x = layers.ReLU(max_value=20.0)(layers.BatchNormalization()(x))
    x = layers.Reshape((-1, cfg.conv_freq() * 32))(x)
    for i in range(cfg.rnn_layers):
        if i > 0:
            x = layers.BatchNormalization()(x)
        gru = layers.GRU(cfg.hidden, return_sequences=True)
        x = (layers.Bidirectional(gru, merge_mode="sum") if cfg.bidirectional else gru)(x)
    x = layers.BatchNormalization()(x)
    logits = layers.Dense(synthetic.CHARS, use_bias=False)(x)
    return keras.Model(spec, logits, name="deepspeech2")


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    device, rng = _common.setup(args)
    with tf.device(device):
        net = build_model(cfg)
        opt = keras.optimizers.AdamW(learning_rate=cfg.lr)
        _common.build_optimizer(opt, net.trainable_variables)
        templates = synthetic.char_templates(cfg.freq_bins, rng)

        # Utterance lengths vary per batch: one trace for any length (no retracing).
        @tf.function(
            input_signature=[
                tf.TensorSpec([None, None, cfg.freq_bins], tf.float32),
                tf.TensorSpec([None], tf.int32),
                tf.TensorSpec([None, cfg.max_chars], tf.int32),
                tf.TensorSpec([None], tf.int32),
            ]
        )
        def train_step(spec, frames, labels, label_len) -> tf.Tensor:
            with tf.GradientTape() as tape:
                logits = net(spec, training=True)
                loss = tf.reduce_mean(
                    tf.nn.ctc_loss(
                        labels=labels,
                        logits=logits,
                        label_length=label_len,
                        logit_length=cfg.conv_frames(frames),
                        logits_time_major=False,
                        blank_index=0,
                    )
                )
            grads = tape.gradient(loss, net.trainable_variables)
            opt.apply_gradients(zip(grads, net.trainable_variables, strict=True))
            return loss

        data = _common.batches(
            lambda r: synthetic.speech_batch(
                templates, args.batch_size, cfg.min_chars, cfg.max_chars, r
            ),
            args,
            device,
            rng,
        )

        def step(_: int) -> tf.Tensor:
            return train_step(*next(data))

        spec_h, frames_h, labels_h, len_h = synthetic.speech_batch(
            templates,
            synthetic.HELD_OUT,
            cfg.min_chars,
            cfg.max_chars,
            synthetic.held_out_rng(args.seed),
        )

        def evaluate() -> float:
            logits = net(tf.constant(spec_h), training=False).numpy()
            return quality.greedy_ctc_cer(
                logits, cfg.conv_frames(frames_h), labels_h, len_h, blank=0
            )

        _common.run(MODEL, args, step, evaluate=evaluate, target=quality.target(MODEL, args.size))


if __name__ == "__main__":
    main()
