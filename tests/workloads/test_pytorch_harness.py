"""The harness options, exercised through a real PyTorch workload (WGAN, the fastest).

Runs that train are child processes, as a user starts them; options refused before any
training starts are checked through the workload's main() in this process (each child
spends seconds loading torch, which this process holds already)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.workloads.runner import check_trained, run_workload

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

MODULE = "workloads.pytorch.wgan"


def _losses(tmp_path: Path, seed: int) -> list[float]:
    run = run_workload(
        MODULE, tmp_path, "--steps", "2", "--warmup", "0", "--device", "cpu", "--seed", str(seed)
    )
    assert run.returncode == 0, run.stderr
    return [r["loss"] for r in run.records]


def test_batch_size_and_warmup_are_honoured(tmp_path: Path) -> None:
    run = run_workload(
        MODULE, tmp_path, "--batch-size", "3", "--steps", "3", "--warmup", "2", "--device", "cpu"
    )
    check_trained(run, "wgan", "pytorch", steps=3, warmup=2, samples=3)
    assert "samples_per_s=" in run.stderr


def test_seed_makes_runs_repeatable(tmp_path: Path) -> None:
    a = _losses(tmp_path / "a", 7)
    b = _losses(tmp_path / "b", 7)
    c = _losses(tmp_path / "c", 8)
    assert a == b
    assert a != c


def test_no_steps_file_still_trains(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    from tests.workloads.runner import REPO

    env = {k: v for k, v in os.environ.items() if k != "TBDTRACE_STEPS_FILE"}
    p = subprocess.run(
        [sys.executable, "-m", MODULE, "--steps", "1", "--device", "cpu"],
        cwd=REPO,
        env=env,
        text=True,
        capture_output=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "wgan pytorch size=tiny batch=8 steps=1" in p.stderr


def _exit_in_process(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *args: str,
) -> tuple[int | str | None, str]:
    """``main(args)`` of the workload in this process, for the options refused before any
    training starts: the exit status it raises and what it wrote to stderr. A SystemExit is
    what makes `python -m` exit with that status and no traceback; the steps file must not
    appear."""
    from workloads.pytorch import wgan

    steps = tmp_path / "steps.jsonl"
    monkeypatch.setenv("TBDTRACE_STEPS_FILE", str(steps))
    with pytest.raises(SystemExit) as exited:
        wgan.main(list(args))
    assert not steps.exists()
    return exited.value.code, capsys.readouterr().err


@pytest.mark.parametrize("bad", [["--steps", "0"], ["--batch-size", "0"], ["--size", "huge"]])
def test_bad_options_are_usage_errors(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    bad: list[str],
) -> None:
    code, stderr = _exit_in_process(tmp_path, monkeypatch, capsys, *bad)
    assert code == 2
    assert "error:" in stderr.strip().splitlines()[-1]


def test_cuda_without_a_device_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    code, stderr = _exit_in_process(
        tmp_path, monkeypatch, capsys, "--device", "cuda", "--steps", "1"
    )
    assert code == 1
    assert stderr.strip().splitlines()[-1].startswith("workloads: --device cuda")


def test_eval_every_and_no_eval(tmp_path: Path) -> None:
    run = run_workload(
        MODULE,
        tmp_path / "a",
        "--steps",
        "3",
        "--warmup",
        "1",
        "--eval-every",
        "2",
        "--device",
        "cpu",
    )
    check_trained(run, "wgan", "pytorch", steps=3, warmup=1, samples=8)
    # after 2 and 4 steps run (indices 1 and 3; the last step is one of them)
    assert [r["step"] for r in run.records if "quality" in r] == [1, 3]
    assert "wgan pytorch quality metric=moment_distance" in run.stderr
    run = run_workload(MODULE, tmp_path / "b", "--steps", "2", "--no-eval", "--device", "cpu")
    check_trained(run, "wgan", "pytorch", steps=2, warmup=1, samples=8)
    assert not any("quality" in r for r in run.records)
    assert " quality " not in run.stderr


def test_to_quality_without_evaluation_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, stderr = _exit_in_process(tmp_path, monkeypatch, capsys, "--to-quality", "--no-eval")
    assert code == 2
    assert "error:" in stderr.strip().splitlines()[-1]
