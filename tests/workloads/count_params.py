"""Trainable parameter counts of one framework's workloads at every size, as JSON.

Run with the framework's own Python (``.venv`` for pytorch and tensorflow, ``.venv-mxnet``
for mxnet): ``python tests/workloads/count_params.py FRAMEWORK SIZE...``. Prints
``{model: {size: count}}`` for the models that framework implements. The nets are built
as the workloads build them (one tiny forward pass where a framework creates its weights
lazily), with their weights' shapes only where the framework allows it (PyTorch's meta
device, Keras's stateless scope); nothing is trained. A model a framework does not
implement (no module ``workloads.<framework>.<model>``) is left out of that framework's
counts.
tests/workloads/test_specs.py compares the frameworks.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from workloads import specs  # noqa: E402

MODELS = (
    "resnet50",
    "inception_v3",
    "seq2seq",
    "transformer",
    "deepspeech2",
    "faster_rcnn",
    "wgan",
)


def _torch(model: str, cfg: Any) -> int:
    import importlib

    import torch

    mod = importlib.import_module(f"workloads.pytorch.{model}")
    nets: list[Any]
    with torch.device("meta"):  # shapes only: no memory, no initialisation cost
        nets = _torch_nets(mod, model, cfg)
    return sum(p.numel() for n in nets for p in n.parameters() if p.requires_grad)


def _torch_nets(mod: Any, model: str, cfg: Any) -> list[Any]:
    nets: list[Any]
    if model in ("resnet50", "inception_v3", "faster_rcnn"):
        nets = [mod.build_model(cfg)]
    elif model == "seq2seq":
        nets = [mod.Seq2Seq(cfg)]
    elif model == "transformer":
        nets = [mod.TransformerNMT(cfg)]
    elif model == "deepspeech2":
        nets = [mod.DeepSpeech2(cfg)]
    else:
        nets = [mod.generator(cfg), mod.critic(cfg)]
    return nets


def _tf(model: str, cfg: Any) -> int:
    import importlib

    import keras
    import numpy as np

    mod = importlib.import_module(f"workloads.tensorflow.{model}")
    nets: list[Any]
    # Shapes only: in a stateless scope Keras creates each variable with its shape and
    # defers its initial value, which is never computed here (the paper sizes' orthogonal
    # GRU kernels alone took a minute to initialise), and the token inputs are symbolic,
    # so the subclassed models are traced, not run.
    with keras.StatelessScope(initialize_variables=False):
        tokens = keras.KerasTensor((1, 5), "int32")
        if model in ("resnet50", "inception_v3", "deepspeech2", "faster_rcnn"):
            nets = [mod.build_model(cfg)]  # faster_rcnn's builds its weights with a forward pass
        elif model == "seq2seq":
            nets = [mod.Seq2Seq(cfg)]
            nets[0](tokens, tokens)
        elif model == "transformer":
            nets = [mod.Transformer(cfg)]
            nets[0](tokens, tokens)
        else:
            nets = [mod.generator(cfg), mod.critic(cfg)]
        return sum(int(np.prod(v.shape)) for n in nets for v in n.trainable_variables)


def _mx(model: str, cfg: Any) -> int:
    import importlib

    import mxnet as mx
    import numpy as np

    mod = importlib.import_module(f"workloads.mxnet.{model}")
    ctx = mx.cpu()
    tokens = mx.nd.full((1, 5), 3)
    nets: list[Any]
    if model in ("resnet50", "inception_v3"):
        nets = [mod.build_model(cfg, ctx)]
        nets[0](mx.nd.zeros((1, 3, cfg.image_px, cfg.image_px)))
    elif model == "faster_rcnn":  # only the ResNet stem's input channels are inferred
        nets = [mod.build_model(cfg, ctx)]
        nets[0].backbone(mx.nd.zeros((1, 3, 64, 64)))
    elif model == "seq2seq":
        nets = [mod.Seq2Seq(cfg)]
        nets[0].initialize(ctx=ctx)
        nets[0](tokens, mx.nd.array([5]), tokens)
    elif model == "transformer":
        nets = [mod.Transformer(cfg)]
        nets[0].initialize(ctx=ctx)
        nets[0](tokens, tokens)
    elif model == "deepspeech2":
        nets = [mod.DeepSpeech2(cfg)]
        nets[0].initialize(ctx=ctx)
        nets[0](mx.nd.zeros((1, 64, cfg.freq_bins)))  # [B, T, F]
    else:
        g, d = mod.generator(cfg), mod.critic(cfg)
        for n in (g, d):
            n.initialize(ctx=ctx)
        d(g(mx.nd.zeros((1, cfg.nz, 1, 1))))
        nets = [g, d]
    return sum(
        int(np.prod(p.shape))
        for n in nets
        for p in n.collect_params().values()
        if p.grad_req != "null"
    )


COUNTERS: dict[str, Callable[[str, Any], int]] = {
    "pytorch": _torch,
    "tensorflow": _tf,
    "mxnet": _mx,
}
SPECS: dict[str, specs.Spec[Any]] = {
    "resnet50": specs.RESNET50,
    "inception_v3": specs.INCEPTION_V3,
    "seq2seq": specs.SEQ2SEQ,
    "transformer": specs.TRANSFORMER,
    "deepspeech2": specs.DEEPSPEECH2,
    "faster_rcnn": specs.FASTER_RCNN,
    "wgan": specs.WGAN_SPEC,
}


def counts(framework: str, sizes: list[str]) -> dict[str, dict[str, int]]:
    """``{model: {size: count}}`` of `framework`'s models, in this process."""
    count = COUNTERS[framework]
    return {m: {s: count(m, SPECS[m].configs[s]) for s in sizes} for m in MODELS}


def main() -> None:
    print(json.dumps(counts(sys.argv[1], sys.argv[2:])))


if __name__ == "__main__":
    main()
