"""What every TensorFlow workload shares: device choice, seeding and the harness hookup.

Each harness step is one call of a ``tf.function`` training step (a GradientTape forward
and backward pass plus the optimizer update); the first (warm-up) step includes tracing.
Its batch comes from :func:`batches` (``--data``): a ``tf.data`` pipeline that builds
batches in background threads ahead of the step (``host``) or a pool kept on the device.
Every variable the step uses (the model's weights, the optimizer's slots) exists before
its first call (:func:`build_optimizer`), and batches of varying shape match one input
signature, so the step is traced once.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import tensorflow as tf

from workloads import dimensions, harness, quality
from workloads.tensorflow import synthetic

if TYPE_CHECKING:
    import keras

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


def build_optimizer(opt: keras.optimizers.Optimizer, variables: list[keras.Variable]) -> None:
    """Create ``opt``'s slot variables for ``variables`` now, eagerly. Left to the first
    ``apply_gradients`` inside the traced step, they would make ``tf.function`` trace the
    step twice (once creating variables, then again to check that it creates none) and
    wrap each slot's initializer in a ``tf.cond``: about three times the tracing time
    (Inception-v3's tiny step: 20 s of CPU, 6.5 s built first)."""
    opt.build(variables)


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


Make = Callable[[np.random.Generator], tuple[np.ndarray, ...]]


def batches(
    make: Make,
    args: harness.HarnessArgs,
    device: str,
    rng: np.random.Generator,
    workers: int = harness.HOST_WORKERS,
) -> Iterator[tuple[tf.Tensor, ...]]:
    """The training batches of a run as ``args.data`` says; ``make(generator)`` builds one
    batch (a tuple of NumPy arrays) from its own generator
    (:func:`synthetic.batch_rng`); call ``next()`` on the result in each step.

    ``host``: ``workers`` ``Dataset.from_generator`` pipelines (worker w builds batches w,
    w + workers, ...), interleaved in order with ``num_parallel_calls`` so they run in
    tf.data's threads, then ``prefetch`` of :data:`harness.HOST_PREFETCH` batches per
    worker, tf.data's autotuning off (and, on a GPU,
    ``prefetch_to_device``). ``device``: the first :data:`harness.POOL_BATCHES` of the
    same sequence, built once on ``device`` and cycled. The seeds come from ``rng``."""
    base = synthetic.batch_base(rng)
    if args.data == "device":
        with tf.device(device):
            pool = [
                tuple(tf.identity(tf.constant(a)) for a in make(synthetic.batch_rng(base, i)))
                for i in range(harness.POOL_BATCHES)
            ]
        return itertools.cycle(pool)
    first = make(synthetic.batch_rng(base, 0))  # its dtypes and ranks: the dataset's signature
    signature = tuple(tf.TensorSpec([None] * a.ndim, tf.as_dtype(a.dtype)) for a in first)

    def worker(w: np.int64) -> Iterator[tuple[np.ndarray, ...]]:
        for i in itertools.count(int(w), workers):
            yield first if i == 0 else make(synthetic.batch_rng(base, i))

    with tf.device("/CPU:0"):  # the pipeline runs on the host whatever the step's device
        ds = tf.data.Dataset.range(workers).interleave(
            lambda w: tf.data.Dataset.from_generator(worker, args=(w,), output_signature=signature),
            cycle_length=workers,
            block_length=1,
            num_parallel_calls=workers,
            deterministic=True,
        )
        # A fixed prefetch depth (the other frameworks' HOST_PREFETCH per worker) and no
        # autotuning: tf.data's autotuning thread sleeps between optimizations, doubling
        # the interval up to a minute, and deleting the iterator at the end of the run
        # waited for it to wake (20-50 s after the last step, with no CPU used).
        ds = ds.prefetch(harness.HOST_PREFETCH * workers)
        options = tf.data.Options()
        options.autotune.enabled = False
        ds = ds.with_options(options)
        if device.startswith("/GPU"):
            ds = ds.apply(tf.data.experimental.prefetch_to_device(device))
        return harness.fed(iter(ds), args, FRAMEWORK)  # marked, --data-delay-ms later
