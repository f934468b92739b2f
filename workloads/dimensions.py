"""What each framework supports of the suite's run dimensions: ranks (``--nproc``),
precision (``--precision``) and compilation (``--compile``).

One table for both sides: the workloads refuse an unsupported combination with this
reason (one line, exit 2) and ``tbdtrace bench`` writes it as an ``unsupported`` row
without starting the run. Standard library only (imported by every workload, in both
venvs). The reasons are documented in docs/WORKLOADS.md ("Ranks, precision and
compilation").
"""

from __future__ import annotations

PRECISIONS = ("fp32", "tf32", "bf16", "fp16")
DATA_MODES = ("host", "device")  # --data: where the training batches come from

# Workloads whose ranks would not train one model data-parallel.
_NPROC_MODELS = {
    ("pytorch", "a3c"): "A3C's workers are already several processes of one learner; "
    "DDP over them is not wired",
    ("pytorch", "wgan"): "WGAN alternates two models' optimizers (n_critic critic steps per "
    "generator step); DDP over both is not wired",
}
_NPROC_FRAMEWORKS = {
    "tensorflow": "tf.distribute.MultiWorkerMirroredStrategy needs a TF_CONFIG cluster of "
    "worker processes and its collective ops; not wired into the harness yet",
    "mxnet": "kvstore dist_sync needs a scheduler and server processes started by MXNet's "
    "launcher (tools/launch.py), which the MXNet environment here lacks",
}
# Precision support that does not depend on the device: (framework, precision) -> reason.
_PRECISION = {
    ("tensorflow", "fp16"): "Keras mixed_float16 needs a LossScaleOptimizer in each custom "
    "training loop; not wired (mixed_bfloat16 is)",
    ("mxnet", "bf16"): "MXNet AMP (mxnet.contrib.amp) casts to float16 on GPUs only; no "
    "bfloat16 training",
    ("mxnet", "fp16"): "MXNet AMP (mxnet.contrib.amp) is not wired into the Gluon workloads "
    "(GPU-only: it casts to float16 with cuDNN)",
    ("mxnet", "tf32"): "MXNet 1.9 has no TF32 switch",
}
_GPU_ONLY = {
    "tf32": "TF32 is a tensor-core mode of NVIDIA GPUs (Ampere and later); on a CPU run fp32 "
    "or bf16",
    "fp16": "float16 training runs on GPUs (PyTorch's CPU autocast is bfloat16); on a CPU run bf16",
}
_COMPILE = {
    ("pytorch", "a3c"): "A3C steps several worker processes; torch.compile of them is not wired",
    ("pytorch", "wgan"): "WGAN's two models are not compiled (torch.compile not wired)",
}
_COMPILE_FRAMEWORKS = {
    "tensorflow": "tf.function(jit_compile=True) (XLA) is not wired into the workloads' "
    "training steps yet (they are tf.functions without XLA)",
    "mxnet": "Gluon hybridize is not a switch here: ResNet-50, Inception-v3, WGAN and Faster "
    "R-CNN's backbone (ResNet-50 + FPN) are always hybridized, the others never",
}

# Batches a model cannot train at: (framework, model, size) -> (smallest batch, why).
_MIN_BATCH = {
    ("pytorch", "inception_v3", "tiny"): (
        2,
        "at tiny size (96 px) Inception-v3's last blocks run on a 1x1 grid, where PyTorch's "
        "batch norm in training needs more than one value per channel",
    ),
}


def batch_unsupported(framework: str, model: str, size: str, batch: int) -> str | None:
    """Why ``model`` on ``framework`` at ``size`` cannot train ``batch`` samples per step
    (per rank), or None when it can."""
    smallest, why = _MIN_BATCH.get((framework, model, size), (1, ""))
    if batch < smallest:
        return f"--batch-size {batch}: {why}; use {smallest} or more"
    return None


def unsupported(
    framework: str, model: str, nproc: int, precision: str, compiled: bool, device: str
) -> str | None:
    """Why ``model`` on ``framework`` cannot run with these settings on ``device`` (cpu,
    cuda, or auto: not known yet, so GPU-only precisions pass), or None when it can."""
    if precision not in PRECISIONS:
        return f"unknown precision {precision!r}; use one of {', '.join(PRECISIONS)}"
    if nproc > 1:
        why = _NPROC_FRAMEWORKS.get(framework) or _NPROC_MODELS.get((framework, model))
        if why:
            return f"--nproc {nproc}: {why}"
    why = _PRECISION.get((framework, precision))
    if why is None and device == "cpu" and precision in _GPU_ONLY:
        why = _GPU_ONLY[precision]
    if why:
        return f"--precision {precision} on {framework}: {why}"
    why = _COMPILE.get((framework, model)) or _COMPILE_FRAMEWORKS.get(framework)
    if compiled and why:
        return f"--compile on {framework}: {why}"
    return None
