"""workloads.mxnet.deepspeech2 (Deep Speech 2, Gluon) trains at --size tiny and marks its steps."""

from __future__ import annotations

from pathlib import Path

from tests.workloads.runner import REPO, check_trained, run_workload

MODULE = "workloads.mxnet.deepspeech2"


def mxnet_python() -> str:
    """.venv-mxnet's Python; fails the test with what to run when it is missing."""
    py = REPO / ".venv-mxnet" / "bin" / "python"
    assert py.exists(), f"{py} is missing; run `make venv-mxnet`"
    return str(py)


def test_tiny_trains_and_records_steps(tmp_path: Path) -> None:
    run = run_workload(
        MODULE,
        tmp_path,
        "--size",
        "tiny",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--device",
        "cpu",
        python=mxnet_python(),
    )
    check_trained(run, "deepspeech2", "mxnet", steps=2, warmup=1, samples=2)
