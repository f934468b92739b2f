"""The bench's quality columns: read from the workload's quality line, checked against the
steps file's quality record (read here with ``json`` only)."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest

from tbdtrace.suite import BenchConfig, Job
from tbdtrace.suite.plan import workload_argv
from tbdtrace.suite.runner import quality_from_log
from tests.suite.conftest import BenchRun

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)


def _job() -> Job:
    return Job("wgan", "pytorch", "workloads.pytorch.wgan", sys.executable, 4)


def test_to_quality_is_passed_to_the_workload(tmp_path: Path) -> None:
    assert "--to-quality" not in workload_argv(_job(), BenchConfig(out_dir=tmp_path))
    argv = workload_argv(_job(), BenchConfig(out_dir=tmp_path, to_quality=True))
    assert argv[-1] == "--to-quality"


def test_no_eval_is_passed_to_the_workload(tmp_path: Path) -> None:
    assert "--no-eval" not in workload_argv(_job(), BenchConfig(out_dir=tmp_path))
    argv = workload_argv(_job(), BenchConfig(out_dir=tmp_path, no_eval=True))
    assert argv[-1] == "--no-eval"


def test_no_eval_with_to_quality_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from tbdtrace.commands import bench

    parser = argparse.ArgumentParser()
    bench.register(parser.add_subparsers())
    args = parser.parse_args(["bench", "--to-quality", "--no-eval", "--out", str(tmp_path)])
    with pytest.raises(SystemExit) as e:
        bench._config(args)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith("--to-quality needs the evaluation; drop --no-eval")


def test_quality_line_is_parsed(tmp_path: Path) -> None:
    log = tmp_path / "x.log"
    log.write_text(
        "wgan pytorch size=tiny batch=4 steps=3 loss_first=1 loss_last=0.5 samples_per_s=2\n"
        "resnet50 pytorch quality metric=accuracy value=0.5 target=0.9 reached=no steps=4 "
        "time_to_quality_s=none\n"
        "wgan pytorch quality metric=moment_distance value=0.25 target=0.3 reached=yes "
        "steps=4 time_to_quality_s=1.500\n"
    )
    assert quality_from_log(log, _job()) == {
        "quality_metric": "moment_distance",
        "quality": 0.25,
        "quality_target": 0.3,
        "time_to_quality_ns": 1_500_000_000,
    }
    log.write_text(
        "wgan pytorch quality metric=cer value=nan target=0.2 reached=no steps=1 "
        "time_to_quality_s=none\n"
    )
    got = quality_from_log(log, _job())
    assert got["quality"] is None and got["time_to_quality_ns"] is None
    assert quality_from_log(tmp_path / "missing.log", _job()) == {}


@pytest.mark.slow
def test_bench_row_carries_the_last_evaluation(wgan_steps_run: BenchRun) -> None:
    p, out = wgan_steps_run
    assert p.returncode == 0, p.stderr
    with (out / "bench.csv").open() as f:
        got = list(csv.DictReader(f))
    # one row per input pipeline (--data host,device); the host run's steps file is read
    assert [(r["model"], r["data"]) for r in got] == [("wgan", "host"), ("wgan", "device")]
    row = got[0]
    steps = out / "logs" / "wgan-pytorch-bdefault.steps.jsonl"
    recs = [json.loads(line) for line in steps.read_text().splitlines() if line.strip()]
    evaluated = [r for r in recs if "quality" in r]
    assert [r["step"] for r in evaluated] == [recs[-1]["step"]]  # once, after the last step
    q = evaluated[0]["quality"]
    assert row["quality_metric"] == q["metric"] == "moment_distance"
    assert float(row["quality"]) == pytest.approx(q["value"], rel=1e-5)
    assert float(row["quality_target"]) == q["target"]
    assert (row["time_to_quality_ns"] == "") == (not q["reached"])
