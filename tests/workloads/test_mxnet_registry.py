"""The registry's TensorFlow and MXNet entries point at runnable modules."""

from __future__ import annotations

import importlib.util

from workloads import registry


def test_tensorflow_has_the_required_models() -> None:
    assert {w.model for w in registry.TENSORFLOW} == {
        "resnet50",
        "inception_v3",
        "transformer",
        "seq2seq",
        "wgan",
        "deepspeech2",
        "faster_rcnn",
        "a3c",
    }
    for w in registry.TENSORFLOW:
        assert (w.framework, w.python) == ("tensorflow", ".venv/bin/python")
        assert w.module == f"workloads.tensorflow.{w.model}"
        assert importlib.util.find_spec(w.module) is not None, w.module


def test_mxnet_runs_in_its_own_venv() -> None:
    # all 8 TBD models, as on PyTorch
    assert {w.model for w in registry.MXNET} == {w.model for w in registry.PYTORCH}
    for w in registry.MXNET:
        assert (w.framework, w.python) == ("mxnet", ".venv-mxnet/bin/python")
        assert w.module == f"workloads.mxnet.{w.model}"
        # find_spec only locates the file; importing needs mxnet, which .venv lacks.
        assert importlib.util.find_spec(w.module) is not None, w.module
    # Same domain and sample unit as the PyTorch entry of the same model.
    for w in registry.TENSORFLOW + registry.MXNET:
        pt = registry.find(w.model, "pytorch")
        assert pt is not None and (pt.domain, pt.sample) == (w.domain, w.sample)
