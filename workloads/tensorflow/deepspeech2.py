"""Deep Speech 2 on TensorFlow/Keras: conv front end + bidirectional GRU stack + CTC.

Architecture (as the PyTorch workload, channels-last): spectrogram ``[B, time, freq, 1]``
-> Conv2D 32 x (11 time x 41 freq) stride (2, 2) -> BN -> clipped ReLU(0, 20) -> Conv2D
32 x (11 x 21) stride (1, 2) -> BN -> clipped ReLU -> bidirectional GRU layers (directions
summed, batch-norm between layers) -> BN -> Dense to the characters (blank, space,
apostrophe, a-z = 29) -> CTC loss (tf.nn.ctc_loss, blank 0). AdamW.

Sizes: tiny = 32 frequency bins, 2 GRU layers of 32, 3-5 characters, batch 2; small =
81 bins, 3 layers of 256, 8-20 characters, batch 8; paper = 161 bins (20 ms windows at
16 kHz), 5 layers of 800, 20-60 characters, batch 32. Data: per-character spectral
templates held 4-8 frames (:func:`workloads.tensorflow.synthetic.speech_batch`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import keras
import tensorflow as tf
from keras import layers

from workloads import harness, quality
from workloads.tensorflow import _common, synthetic

MODEL = "deepspeech2"


@dataclass(frozen=True)
class Config:
    freq_bins: int  # spectrogram frequency bins
    rnn_layers: int  # bidirectional GRU layers
    hidden: int  # GRU width (per direction; directions are summed)
    min_chars: int  # shortest transcript, characters
    max_chars: int  # longest transcript, characters
    lr: float  # AdamW learning rate


CONFIGS = {
    "tiny": Config(32, 2, 32, 3, 5, 1e-3),
    "small": Config(81, 3, 256, 8, 20, 3e-4),
    "paper": Config(161, 5, 800, 20, 60, 1.5e-4),
}
BATCH = {"tiny": 2, "small": 8, "paper": 32}


def build_model(cfg: Config) -> keras.Model:
    """Spectrogram ``[B, T, F]`` -> per-frame logits ``[B, ceil(T / 2), 29]``."""
    spec = keras.Input((None, cfg.freq_bins))
    x = layers.Reshape((-1, cfg.freq_bins, 1))(spec)
    x = layers.Conv2D(32, (11, 41), strides=(2, 2), padding="same", use_bias=False)(x)
    x = layers.ReLU(max_value=20.0)(layers.BatchNormalization()(x))
    x = layers.Conv2D(32, (11, 21), strides=(1, 2), padding="same", use_bias=False)(x)
    x = layers.ReLU(max_value=20.0)(layers.BatchNormalization()(x))
    freq_out = math.ceil(math.ceil(cfg.freq_bins / 2) / 2)  # two 'same' stride-2 convs
    x = layers.Reshape((-1, freq_out * 32))(x)
    for i in range(cfg.rnn_layers):
        if i > 0:
            x = layers.BatchNormalization()(x)
        x = layers.Bidirectional(layers.GRU(cfg.hidden, return_sequences=True), merge_mode="sum")(x)
    x = layers.BatchNormalization()(x)
    return keras.Model(spec, layers.Dense(synthetic.CHARS)(x), name="deepspeech2")


def main(argv: list[str] | None = None) -> None:
    args = harness.parse_args(MODEL, _common.FRAMEWORK, BATCH, argv)
    cfg = CONFIGS[args.size]
    device, rng = _common.setup(args)
    with tf.device(device):
        net = build_model(cfg)
        opt = keras.optimizers.AdamW(learning_rate=cfg.lr)
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
                        logit_length=(frames + 1) // 2,
                        logits_time_major=False,
                        blank_index=0,
                    )
                )
            grads = tape.gradient(loss, net.trainable_variables)
            opt.apply_gradients(zip(grads, net.trainable_variables, strict=True))
            return loss

        def step(_: int) -> tf.Tensor:
            spec, frames, labels, label_len = synthetic.speech_batch(
                templates, args.batch_size, cfg.min_chars, cfg.max_chars, rng
            )
            return train_step(*(tf.constant(a) for a in (spec, frames, labels, label_len)))

        spec_h, frames_h, labels_h, len_h = synthetic.speech_batch(
            templates,
            synthetic.HELD_OUT,
            cfg.min_chars,
            cfg.max_chars,
            synthetic.held_out_rng(args.seed),
        )

        def evaluate() -> float:
            logits = net(tf.constant(spec_h), training=False).numpy()
            return quality.greedy_ctc_cer(logits, (frames_h + 1) // 2, labels_h, len_h, blank=0)

        _common.run(MODEL, args, step, evaluate=evaluate, target=quality.target(MODEL, args.size))


if __name__ == "__main__":
    main()
