"""The registry's PyTorch entries point at runnable modules."""

from __future__ import annotations

import importlib.util

from workloads import registry

TBD_MODELS = {
    "resnet50",
    "inception_v3",
    "seq2seq",
    "transformer",
    "deepspeech2",
    "faster_rcnn",
    "wgan",
    "a3c",
}


def test_all_eight_tbd_models_on_pytorch() -> None:
    assert {w.model for w in registry.PYTORCH} == TBD_MODELS
    for w in registry.PYTORCH:
        assert w.framework == "pytorch"
        assert w.python == ".venv/bin/python"
        assert importlib.util.find_spec(w.module) is not None, w.module
        assert registry.find(w.model, "pytorch") is w


def test_pairs_are_unique_and_frameworks_known() -> None:
    pairs = [(w.model, w.framework) for w in registry.WORKLOADS]
    assert len(pairs) == len(set(pairs))
    assert {w.framework for w in registry.WORKLOADS} <= set(registry.FRAMEWORKS)
    assert registry.find("resnet50", "no-such-framework") is None
