"""The model/framework pairs of the TBD suite and how to launch each one.

A :class:`Workload` names a Python module (run with ``python -m``) and the interpreter to
run it with, relative to the repository root: ``.venv/bin/python`` for PyTorch and
TensorFlow, ``.venv-mxnet/bin/python`` for MXNet (which needs numpy<1.24 and so lives in its
own venv). Every module takes the options of :mod:`workloads.harness`.

Each framework has its own tuple below; :data:`WORKLOADS` is their concatenation, in the
order ``tbdtrace bench --list`` prints. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass

FRAMEWORKS = ("pytorch", "tensorflow", "mxnet")

MAIN_PYTHON = ".venv/bin/python"
MXNET_PYTHON = ".venv-mxnet/bin/python"


@dataclass(frozen=True)
class Workload:
    """One model on one framework."""

    model: str  # short model name, e.g. "resnet50" (the same across frameworks)
    framework: str  # one of FRAMEWORKS
    module: str  # module run with ``python -m``, e.g. "workloads.pytorch.resnet50"
    python: str  # interpreter, relative to the repository root (MAIN_PYTHON, MXNET_PYTHON)
    domain: str  # TBD application domain, e.g. "image classification"
    sample: str  # what one sample is, for the throughput unit: "images", "sentences", ...

    @property
    def key(self) -> str:
        """``model-framework``, used in output directory names."""
        return f"{self.model}-{self.framework}"


def _pt(model: str, domain: str, sample: str) -> Workload:
    return Workload(model, "pytorch", f"workloads.pytorch.{model}", MAIN_PYTHON, domain, sample)


PYTORCH: tuple[Workload, ...] = (
    _pt("resnet50", "image classification", "images"),
    _pt("inception_v3", "image classification", "images"),
    _pt("seq2seq", "machine translation", "sentences"),
    _pt("transformer", "machine translation", "sentences"),
    _pt("deepspeech2", "speech recognition", "utterances"),
    _pt("faster_rcnn", "object detection", "images"),
    _pt("wgan", "adversarial learning", "images"),
    _pt("a3c", "reinforcement learning", "frames"),
)


def _tf(model: str, domain: str, sample: str) -> Workload:
    return Workload(
        model, "tensorflow", f"workloads.tensorflow.{model}", MAIN_PYTHON, domain, sample
    )


TENSORFLOW: tuple[Workload, ...] = (
    _tf("resnet50", "image classification", "images"),
    _tf("inception_v3", "image classification", "images"),
    _tf("seq2seq", "machine translation", "sentences"),
    _tf("transformer", "machine translation", "sentences"),
    _tf("deepspeech2", "speech recognition", "utterances"),
    _tf("faster_rcnn", "object detection", "images"),
    _tf("wgan", "adversarial learning", "images"),
    _tf("a3c", "reinforcement learning", "frames"),
)


def _mx(model: str, domain: str, sample: str) -> Workload:
    return Workload(model, "mxnet", f"workloads.mxnet.{model}", MXNET_PYTHON, domain, sample)


MXNET: tuple[Workload, ...] = (
    _mx("resnet50", "image classification", "images"),
    _mx("inception_v3", "image classification", "images"),
    _mx("seq2seq", "machine translation", "sentences"),
    _mx("transformer", "machine translation", "sentences"),
    _mx("deepspeech2", "speech recognition", "utterances"),
    _mx("faster_rcnn", "object detection", "images"),
    _mx("wgan", "adversarial learning", "images"),
    _mx("a3c", "reinforcement learning", "frames"),
)

WORKLOADS: tuple[Workload, ...] = PYTORCH + TENSORFLOW + MXNET


def find(model: str, framework: str) -> Workload | None:
    """The registered workload for ``model`` on ``framework``, or None."""
    for w in WORKLOADS:
        if w.model == model and w.framework == framework:
            return w
    return None
