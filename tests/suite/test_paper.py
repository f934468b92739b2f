"""``bench --paper``: the sweep's plan, its memory limits, and one real run end to end."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tbdtrace.errors import TraceError
from tbdtrace.suite import BenchConfig, Job, paper
from tbdtrace.suite.rows import empty_row
from tests.inprocess import tbd
from tests.suite.conftest import run_bench

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

MEMORY_CATEGORIES = (
    "weights",
    "gradients",
    "optimizer_state",
    "inputs",
    "activations",
    "workspace",
    "other",
)
LADDER = [1, 2, 4, 8, 16, 32, 64, 96, 128]  # the reference sheet's sweep (section 5)


def test_each_model_sweeps_tbds_batch_sizes() -> None:
    for model in ("resnet50", "inception_v3", "seq2seq", "transformer", "deepspeech2", "wgan"):
        assert list(paper.batches_for(model)) == LADDER, model
    assert list(paper.batches_for("faster_rcnn")) == [1, 2, 4, 8]
    assert list(paper.batches_for("a3c")) == [1, 2, 4, 8, 16]
    assert list(paper.batches_for("resnet50", (128, 3, 2))) == [2, 128]


def test_jobs_follow_the_ladder_per_framework(tmp_path: Path) -> None:
    cfg = BenchConfig(out_dir=tmp_path, models=("resnet50", "a3c"), frameworks=("pytorch",))
    jobs = paper.make_jobs(cfg)
    assert [(j.model, j.batch_size) for j in jobs] == [
        *(("resnet50", b) for b in LADDER),
        *(("a3c", b) for b in (1, 2, 4, 8, 16)),
    ]
    cut = paper.make_jobs(BenchConfig(**{**cfg.__dict__, "batch_sizes": (16, 96, 3)}))
    assert [(j.model, j.batch_size) for j in cut] == [
        ("resnet50", 16),
        ("resnet50", 96),
        ("a3c", 16),
    ]
    with pytest.raises(TraceError, match="none of --batch-sizes 3, 5 is in TBD's sweep"):
        paper.make_jobs(BenchConfig(**{**cfg.__dict__, "batch_sizes": (3, 5)}))


MIB = 1 << 20


def _mem_row(b: int, peak: int, **parts: int) -> dict[str, Any]:
    cells = {f"{c}_bytes": v for c, v in parts.items()}
    return empty_row(
        model="m", framework="f", batch_size=b, status="ok", peak_memory_bytes=peak, **cells
    )


def test_peak_estimate_from_one_and_from_two_rows() -> None:
    # one row: weights + gradients + optimizer state stay, the rest grows with the batch
    one = [
        _mem_row(4, 700 * MIB, weights=100 * MIB, gradients=100 * MIB, optimizer_state=100 * MIB)
    ]
    assert paper.estimate_peak_bytes(one, 8) == 300 * MIB + 400 * MIB * 2
    # two rows: the line through them (peak grows 100 MiB per sample from 4 to 8)
    two = [*one, _mem_row(8, 1100 * MIB)]
    assert paper.estimate_peak_bytes(two, 16) == 1100 * MIB + 8 * 100 * MIB
    # a peak that fell (noise) never makes the estimate smaller than the largest measured
    assert paper.estimate_peak_bytes([*one, _mem_row(8, 650 * MIB)], 16) == 700 * MIB
    assert paper.estimate_peak_bytes([empty_row(batch_size=4, status="ok")], 8) is None


def test_a_batch_estimated_not_to_fit_is_skipped() -> None:
    two = [_mem_row(4, 700 * MIB), _mem_row(8, 1100 * MIB)]  # 1900 MiB at 16
    why = paper.skip_reason(two, 16, 1500 * MIB, "available on the host (MemAvailable)")
    assert why == (
        "not run: estimated peak memory 1.86 GiB (extrapolated from the sweep's smaller "
        "batches) exceeds the 1.46 GiB available on the host (MemAvailable)"
    )
    assert paper.skip_reason(two, 16, 2000 * MIB, "x") is None
    assert paper.skip_reason(two, 16, None, "host memory unknown") is None


def test_an_out_of_memory_run_ends_its_sweep(tmp_path: Path) -> None:
    """A real workload process (tests/suite/oom_workload.py) that fits batches up to 4 and
    fails to allocate from 8 up, through the bench's runner (steps capture)."""
    cfg = BenchConfig(out_dir=tmp_path, steps=1, warmup=0, device="cpu", capture="steps")
    jobs = [
        Job("oomtest", "pytorch", "tests.suite.oom_workload", sys.executable, b)
        for b in (2, 4, 8, 16, 32)
    ]
    rows = paper.run_sweep(jobs, cfg)
    assert [r["status"] for r in rows] == ["ok", "ok", "out_of_memory", "skipped", "skipped"]
    assert rows[2]["error"].startswith(
        "out of memory at batch 8: numpy._core._exceptions._ArrayMemoryError: Unable to "
        "allocate 256. MiB"
    )
    assert "larger batches of this sweep are not run (exit code 1:" in rows[2]["error"]
    assert [r["error"] for r in rows[3:]] == ["not run: batch 8 ran out of memory"] * 2
    assert [r["batch_size"] for r in rows] == [2, 4, 8, 16, 32]
    assert rows[1]["throughput_samples_per_s"] > 0
    # the skipped batches were never started: no log
    assert not (tmp_path / "logs" / "oomtest-pytorch-b16.log").exists()


def test_other_failures_are_not_out_of_memory(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text("Traceback ...\nModuleNotFoundError: No module named 'x'\n")
    failed = empty_row(status="failed", error="exit code 1: ModuleNotFoundError")
    assert paper.out_of_memory(failed, [log]) is None
    assert paper.out_of_memory({**failed, "status": "ok"}, [log]) is None
    killed = {**failed, "error": "exit code -9: no output (log: x)"}
    assert paper.out_of_memory(killed, [tmp_path / "absent.log"]) == (
        "killed by SIGKILL, as the kernel's OOM killer does (not confirmed by a message)"
    )
    for text in (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating",
        "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 8",
        "mxnet.base.MXNetError: cudaMalloc retry failed: out of memory",
    ):
        log.write_text(f"Traceback ...\n{text}\n")
        assert paper.out_of_memory(failed, [log]) == text


def test_the_failed_runs_log_is_read(tmp_path: Path) -> None:
    cfg = BenchConfig(out_dir=tmp_path)
    job = Job("resnet50", "pytorch", "m", sys.executable, 8)
    unprofiled = empty_row(status="failed", error="unprofiled run: exit code 1: x")
    profiled = empty_row(status="failed", error="exit code 1: x")
    assert paper.failed_log(job, cfg, unprofiled) == (
        tmp_path / "unprofiled" / "logs" / "resnet50-pytorch-b8.log"
    )
    assert paper.failed_log(job, cfg, profiled) == tmp_path / "logs" / "resnet50-pytorch-b8.log"


def test_paper_size_is_the_default_only_with_paper(tmp_path: Path) -> None:
    import argparse

    from tbdtrace.commands import bench

    parser = argparse.ArgumentParser()
    bench.register(parser.add_subparsers())
    for argv, size in (
        (["bench", "--paper"], "paper"),
        (["bench", "--paper", "--size", "tiny"], "tiny"),
        (["bench"], "tiny"),
    ):
        args = parser.parse_args([*argv, "--steps", "1", "--out", str(tmp_path)])
        assert bench._config(args).size == size, argv


def test_batch_sizes_outside_every_sweep_are_one_line_exit_1(tmp_path: Path) -> None:
    p = tbd(
        *("bench", "--paper", "--models", "resnet50", "--batch-sizes", "3"),
        *("--out", str(tmp_path)),
        check=False,
    )
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == [
        "tbdtrace: none of --batch-sizes 3 is in TBD's sweep of the selected models; the "
        "sweeps are listed in docs/WORKLOADS.md (Reproducing TBD's figures)"
    ]
    assert not list(tmp_path.iterdir())  # nothing run, nothing written


@pytest.fixture(scope="module")
def paper_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("paper")
    argv = ["--paper", "--models", "resnet50", "--frameworks", "pytorch", "--size", "tiny"]
    argv += ["--batch-sizes", "1,2", "--steps", "1", "--warmup", "0", "--device", "cpu"]
    argv += ["--no-eval"]  # the summary's lines read throughput and memory, not quality
    return run_bench(out, *argv), out


def test_paper_sweep_end_to_end(paper_run: tuple[subprocess.CompletedProcess[str], Path]) -> None:
    p, out = paper_run
    assert p.returncode == 0, p.stderr
    with (out / "bench.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["model"], r["batch_size"], r["size"], r["status"]) for r in rows] == [
        ("resnet50", "1", "tiny", "ok"),
        ("resnet50", "2", "tiny", "ok"),
    ]
    assert json.loads((out / "bench.json").read_text())["config"]["size"] == "tiny"
    for png in ("bench_throughput.png", "bench_memory.png", "bench_utilization.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png
    text = (out / "paper_summary.md").read_text()
    assert "2 runs (2 ok); device `cpu` (no GPU kernels in the rows), size `tiny`" in text
    assert "resnet50 (batch 1-2)" in text
    assert "![bench_throughput.png](bench_throughput.png)" in text
    # the throughput line carries the CSV's numbers, its trend computed here
    t1, t2 = (float(r["throughput_samples_per_s"]) for r in rows)
    kind = "rising" if t2 / t1 >= 1.1 else "falling" if t2 / t1 <= 1 / 1.1 else "flat"
    assert f"resnet50 pytorch: {kind}, x{t2 / t1:.2f} over batch 1-2" in text
    # the memory line reads the breakdown the CSV holds
    mem = [{c: int(r[f"{c}_bytes"] or 0) for c in MEMORY_CATEGORIES} for r in rows]
    top = sum(max(m, key=lambda c: m[c]) == "activations" for m in mem)
    assert f"activations are the largest category in {top} of 2 rows" in text
