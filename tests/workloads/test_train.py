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
    ("inception_v3", "pytorch"): 8,
    ("seq2seq", "pytorch"): 4,  # sentences
    ("transformer", "pytorch"): 4,
    ("deepspeech2", "pytorch"): 2,  # utterances
    ("faster_rcnn", "pytorch"): 2,
    ("wgan", "pytorch"): 8,
    ("a3c", "pytorch"): 10,  # 2 workers x t_max 5 frames per update
    ("resnet50", "tensorflow"): 4,
    ("inception_v3", "tensorflow"): 8,
    ("seq2seq", "tensorflow"): 4,
    ("transformer", "tensorflow"): 4,
    ("deepspeech2", "tensorflow"): 2,
    ("wgan", "tensorflow"): 8,
    ("a3c", "tensorflow"): 10,
    ("resnet50", "mxnet"): 4,
    ("inception_v3", "mxnet"): 8,
    ("seq2seq", "mxnet"): 4,
    ("transformer", "mxnet"): 4,
    ("deepspeech2", "mxnet"): 2,
    ("wgan", "mxnet"): 8,
    ("a3c", "mxnet"): 10,
}


# The held-out quality measure each model reports after its last step (docs/WORKLOADS.md),
# on every framework.
METRIC = {
    "resnet50": "accuracy",
    "inception_v3": "accuracy",
    "seq2seq": "bleu",
    "transformer": "bleu",
    "deepspeech2": "cer",
    "faster_rcnn": "map50",
    "wgan": "moment_distance",
    "a3c": "episode_reward",
}
# Range of each metric: (low, high); None = no bound on that side.
RANGE = {
    "accuracy": (0.0, 1.0),
    "bleu": (0.0, 100.0),
    "cer": (0.0, None),
    "map50": (0.0, 1.0),
    "moment_distance": (0.0, None),
    "episode_reward": (0.0, None),
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
    evaluated = [r for r in run.records if "quality" in r]
    # evaluated once, after the last step, with the documented fields
    assert [r["step"] for r in evaluated] == [run.records[-1]["step"]]
    q = evaluated[0]["quality"]
    assert q["metric"] == METRIC[w.model]
    assert isinstance(q["eval_ns"], int) and q["eval_ns"] > 0
    assert isinstance(q["target"], float) and isinstance(q["higher_is_better"], bool)
    if q["value"] is None:  # A3C before its first finished episode (10 frames here)
        assert w.model == "a3c" and q["reached"] is False
        return
    low, high = RANGE[q["metric"]]
    assert low <= q["value"] and (high is None or q["value"] <= high), q
    better = q["value"] >= q["target"] if q["higher_is_better"] else q["value"] <= q["target"]
    assert q["reached"] == better
    assert ("time_to_quality_ns" in q) == better
