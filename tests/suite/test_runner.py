"""The bench runner: failures become rows, the other jobs still run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tbdtrace.suite import BenchConfig, Job, run_jobs


def _job(
    module: str, model: str = "wgan", batch: int | None = 4, python: str = sys.executable
) -> Job:
    return Job(model, "pytorch", module, python, batch)


@pytest.mark.heavy
def test_a_failing_workload_gets_its_error_and_the_rest_run(tmp_path: Path) -> None:
    cfg = BenchConfig(out_dir=tmp_path, steps=2, warmup=0, device="cpu", capture="steps")
    jobs = [
        _job("workloads.pytorch.no_such_model", model="broken"),
        _job("workloads.pytorch.wgan"),
        _job("workloads.pytorch.wgan", python=str(tmp_path / "no-python")),
    ]
    rows = run_jobs(jobs, cfg)
    assert [r["status"] for r in rows] == ["failed", "ok", "failed"]
    assert "No module named workloads.pytorch.no_such_model" in rows[0]["error"]
    assert "exit code 1" in rows[0]["error"]
    assert rows[0]["throughput_samples_per_s"] is None
    assert rows[1]["error"] is None and rows[1]["throughput_samples_per_s"] > 0
    assert rows[1]["batch_size"] == 4 and rows[1]["measured_steps"] == 2
    assert rows[2]["error"].startswith(f"interpreter {tmp_path / 'no-python'} not found")
    log = (tmp_path / "logs" / "broken-pytorch-b4.log").read_text()
    assert "No module named" in log


@pytest.mark.heavy
def test_a_run_past_the_timeout_is_stopped(tmp_path: Path) -> None:
    cfg = BenchConfig(
        out_dir=tmp_path, steps=1000, warmup=0, device="cpu", capture="steps", timeout_s=0.5
    )
    (row,) = run_jobs([_job("workloads.pytorch.wgan")], cfg)
    assert row["status"] == "failed"
    assert row["error"].startswith("timed out after 0.5 s")
    assert row["wall_ns"] < 30e9


def test_capture_command_wraps_the_workload(tmp_path: Path) -> None:
    from tbdtrace.suite import capture

    cfg = BenchConfig(out_dir=tmp_path, size="small", steps=3, warmup=2, device="cpu")
    job = _job("workloads.pytorch.wgan", batch=16)
    paths = capture.Paths.for_job(tmp_path, job)
    workload = [
        sys.executable,
        "-m",
        "workloads.pytorch.wgan",
        "--size",
        "small",
        "--steps",
        "3",
        "--warmup",
        "2",
        "--device",
        "cpu",
        "--batch-size",
        "16",
    ]
    argv, env = capture.command("tbdtrace", job, cfg, paths)
    assert argv == [
        sys.executable,
        "-m",
        "tbdtrace",
        "capture",
        "--force",
        "--backend",
        capture.backend_for(job),
        "--out",
        str(tmp_path / "wgan-pytorch-b16"),
        "--",
        *workload,
    ]
    assert "TBDTRACE_STEPS_FILE" not in env  # the capture command sets it for the child
    argv, env = capture.command("steps", job, cfg, paths)
    assert argv == workload
    assert env["TBDTRACE_STEPS_FILE"] == str(tmp_path / "logs" / "wgan-pytorch-b16.steps.jsonl")


def test_without_a_gpu_each_framework_gets_its_own_profiler() -> None:
    import pytest

    from tbdtrace.collector import gpu_usable
    from tbdtrace.suite import capture

    if gpu_usable()[0]:
        pytest.skip("a GPU is usable: every framework is captured by CUPTI (auto)")
    for framework, backend in (("pytorch", "torch"), ("tensorflow", "tf"), ("mxnet", "mxnet")):
        job = Job("wgan", framework, f"workloads.{framework}.wgan", sys.executable, None)
        assert capture.backend_for(job) == backend
