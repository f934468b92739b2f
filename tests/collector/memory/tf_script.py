"""Run by tests/collector/memory/test_tensorflow.py in a fresh interpreter (TensorFlow must see
TF_CPU_ALLOCATOR_USE_BFC before it starts): writes traces under argv[1]."""

from __future__ import annotations

import os
import sys
from typing import Any

IN, HIDDEN, CLASSES = 32, 64, 10
BIG_FLOATS = 10_000_000  # a 40 MB tensor made and dropped inside the capture


def main(out: str) -> None:
    # Imported here so that the test module can read the constants without TensorFlow.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import keras
    import tensorflow as tf

    from tbdtrace.collector.memory import tensorflow as tfm

    model = keras.Sequential(
        [
            keras.Input((IN,)),
            keras.layers.Dense(HIDDEN, activation="relu"),
            keras.layers.Dense(CLASSES),
        ]
    )
    opt = keras.optimizers.Adam()
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    x, y = tf.random.normal((16, IN)), tf.random.uniform((16,), 0, CLASSES, dtype=tf.int32)
    with tfm.profile(os.path.join(out, "train"), model=model, optimizer=opt) as p:
        for _ in range(3):
            step(x, y)
            p.step()
    with tfm.profile(os.path.join(out, "big"), model=model, optimizer=opt, interval_s=0.5) as p:
        big = tf.fill((BIG_FLOATS,), 1.0)
        p.sample()
        del big
        p.step()


if __name__ == "__main__":
    main(sys.argv[1])
