"""What every TensorFlow workload shares: device choice, seeding and the harness hookup.

Each harness step is one call of a ``tf.function`` training step (a GradientTape forward
and backward pass plus the optimizer update); the first (warm-up) step includes tracing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import numpy as np
import tensorflow as tf

from workloads import dimensions, harness, quality
from workloads.tensorflow import synthetic

FRAMEWORK = "tensorflow"


def device_for(args: harness.HarnessArgs) -> str:
    """``--device auto`` is the first GPU when TensorFlow sees one, else the CPU.

    ``--device cuda`` without a visible GPU exits 1 with one line.
    """
    gpus = tf.config.list_physical_devices("GPU")
    if args.device == "cuda" and not gpus:
        print(
            "workloads: --device cuda but no GPU is visible to TensorFlow "
            "(tensorflow-cpu has none); use --device cpu or auto",
            file=sys.stderr,
        )
        raise SystemExit(1)
    if args.device == "cpu" or not gpus:
        return "/CPU:0"
    return "/GPU:0"


def setup(args: harness.HarnessArgs) -> tuple[str, np.random.Generator]:
    """Device name and a NumPy generator for the synthetic data; seeds Keras/TF."""
    import keras

    device = device_for(args)
    kind = "cuda" if device.startswith("/GPU") else "cpu"
    why = dimensions.unsupported(FRAMEWORK, "", 1, args.precision, False, kind)
    if why:
        print(f"workloads: {why}", file=sys.stderr)
        raise SystemExit(2)
    keras.utils.set_random_seed(args.seed)
    # Models are built after setup, so they take the global policy: bf16 is Keras mixed
    # precision (variables float32, computation bfloat16).
    keras.mixed_precision.set_global_policy(
        "mixed_bfloat16" if args.precision == "bf16" else "float32"
    )
    if kind == "cuda":
        tf.config.experimental.enable_tensor_float_32_execution(args.precision == "tf32")
    return device, np.random.default_rng(args.seed + 1)


def run(
    model: str,
    args: harness.HarnessArgs,
    step_fn: Callable[[int], tf.Tensor | float],
    samples_per_step: int | None = None,
    evaluate: Callable[[], float] | None = None,
    target: harness.Target | None = None,
) -> harness.StepRecorder:
    """Train through the harness. ``float()`` of the loss waits for the step's work.
    ``evaluate`` and ``target``: the held-out quality (see :func:`harness.train`)."""
    return harness.train(
        model,
        FRAMEWORK,
        args,
        lambda i: float(step_fn(i)),
        (lambda: None),
        samples_per_step,
        evaluate,
        target,
    )


def classifier_eval(
    net: Callable[..., tf.Tensor], templates: np.ndarray, args: harness.HarnessArgs
) -> Callable[[], float]:
    """Top-1 accuracy on a fixed held-out set of images (inference mode)."""
    x, y = synthetic.image_batch(templates, synthetic.HELD_OUT, synthetic.held_out_rng(args.seed))

    def evaluate() -> float:
        logits = net(tf.constant(x), training=False)
        return quality.accuracy(np.argmax(logits.numpy(), axis=-1), y)

    return evaluate
