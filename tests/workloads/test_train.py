"""Every registered workload trains at --size tiny on the CPU and marks its steps.

One test per model/framework pair, parametrized from the registry, so a pair added to
`workloads/registry.py` is trained here without a new test file. The samples per step are
written here from each model's tiny configuration (not read from the workload), and the steps
file is read by `tests/workloads/runner.py`, independently of the harness.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.workloads.runner import REPO, check_trained, run_workload
from workloads import registry

# Samples in one tiny step, from each model's tiny preset.
TINY_SAMPLES = {
    ("resnet50", "pytorch"): 4,  # batch of 4 images
    ("inception_v3", "pytorch"): 2,
    ("seq2seq", "pytorch"): 4,  # sentences
    ("transformer", "pytorch"): 4,
    ("deepspeech2", "pytorch"): 2,  # utterances
    ("faster_rcnn", "pytorch"): 2,
    ("wgan", "pytorch"): 8,
    ("a3c", "pytorch"): 10,  # 2 workers x t_max 5 frames per update
    ("resnet50", "tensorflow"): 4,
    ("inception_v3", "tensorflow"): 2,
    ("seq2seq", "tensorflow"): 4,
    ("transformer", "tensorflow"): 4,
    ("deepspeech2", "tensorflow"): 2,
    ("wgan", "tensorflow"): 8,
    ("resnet50", "mxnet"): 4,
    ("inception_v3", "mxnet"): 1,
    ("seq2seq", "mxnet"): 4,
    ("transformer", "mxnet"): 4,
    ("deepspeech2", "mxnet"): 2,
    ("wgan", "mxnet"): 8,
}


def test_every_registered_pair_has_its_expected_samples() -> None:
    assert {(w.model, w.framework) for w in registry.WORKLOADS} == set(TINY_SAMPLES)


@pytest.mark.parametrize("w", registry.WORKLOADS, ids=lambda w: w.key)
def test_tiny_trains_and_records_steps(w: registry.Workload, tmp_path: Path) -> None:
    python = REPO / w.python
    assert python.exists(), f"{python} is missing; run `make venv venv-mxnet`"
    args = ("--size", "tiny", "--steps", "2", "--warmup", "1", "--device", "cpu", "--seed", "0")
    run = run_workload(w.module, tmp_path, *args, python=str(python))
    check_trained(
        run, w.model, w.framework, steps=2, warmup=1, samples=TINY_SAMPLES[(w.model, w.framework)]
    )
