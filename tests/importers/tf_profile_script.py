"""Make a real TensorFlow profile of a small Keras training loop (run as a script).

Usage: python tf_profile_script.py OUTDIR. Writes OUTDIR/profile/.../*.xplane.pb and,
from TensorFlow's own profiler tools on that file, OUTDIR/framework_op_stats.json and
OUTDIR/trace_viewer.json.
"""

from __future__ import annotations

import glob
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from tensorflow.python.profiler.internal import _pywrap_profiler_plugin as tools  # noqa: E402

STEPS = 3


def main(out: str) -> None:
    tf.random.set_seed(0)
    model = tf.keras.Sequential(
        [tf.keras.Input((8,)), tf.keras.layers.Dense(16, "relu"), tf.keras.layers.Dense(1)]
    )
    model.compile(optimizer="sgd", loss="mse")
    x, y = tf.random.normal((64, 8)), tf.random.normal((64, 1))
    model.train_on_batch(x, y)  # trace the function before profiling
    tf.profiler.experimental.start(os.path.join(out, "profile"))
    for i in range(STEPS):
        with tf.profiler.experimental.Trace("train", step_num=i, _r=1):
            model.train_on_batch(x, y)
    tf.profiler.experimental.stop()
    (xplane,) = glob.glob(os.path.join(out, "profile", "**", "*.xplane.pb"), recursive=True)
    for tool, name in (
        ("framework_op_stats", "framework_op_stats.json"),
        ("trace_viewer@", "trace_viewer.json"),
    ):
        data = tools.xspace_to_tools_data([xplane], tool, {})[0]
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    print(xplane)


if __name__ == "__main__":
    main(sys.argv[1])
