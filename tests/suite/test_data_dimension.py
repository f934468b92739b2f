"""``tbdtrace bench --data``: the input pipeline as a bench dimension (one run per mode,
passed to the workloads as ``--data``, named in each row and in the table)."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from tbdtrace.suite import plan, rows
from tbdtrace.suite.plan import BenchConfig, Job
from tests.inprocess import tbd
from tests.suite.conftest import BenchRun
from workloads import dimensions

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)


def test_bench_data_modes_match_the_workloads() -> None:
    assert plan.DATA_MODES == dimensions.DATA_MODES


def test_jobs_span_the_data_modes(tmp_path: Path) -> None:
    cfg = BenchConfig(
        out_dir=tmp_path, models=("resnet50",), frameworks=("pytorch",), data=("host", "device")
    )
    jobs = plan.make_jobs(cfg)
    assert [j.data for j in jobs] == ["host", "device"]
    host, device = jobs
    assert host.name == "resnet50-pytorch-bdefault"  # the default run's name is unchanged
    assert device.name == "resnet50-pytorch-bdefault-devicedata"
    assert "--data" not in plan.workload_argv(host, cfg)
    argv = plan.workload_argv(device, cfg)
    assert argv[argv.index("--data") + 1] == "device"


def test_job_and_config_default_to_host_data(tmp_path: Path) -> None:
    assert Job("m", "pytorch", "workloads.pytorch.m", sys.executable, None).data == "host"
    assert BenchConfig(out_dir=tmp_path).data == ("host",)
    assert "data" in rows.SCALING_KEY  # ranks are compared within one input pipeline
    assert "data" in {c.name for c in rows.COLUMNS}


def test_unknown_data_mode_is_a_usage_error(tmp_path: Path) -> None:
    p = tbd("bench", "--data", "disk", "--out", str(tmp_path), check=False)
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
    assert "--data: unknown disk" in p.stderr.strip().splitlines()[-1]


def test_bench_rows_say_which_data_mode_ran(wgan_steps_run: BenchRun) -> None:
    p, out = wgan_steps_run
    assert p.returncode == 0, p.stderr[-3000:]
    with (out / "bench.csv").open() as f:
        got = [(r["data"], r["status"]) for r in csv.DictReader(f)]
    assert got == [("host", "ok"), ("device", "ok")]
    md = (out / "bench.md").read_text()
    assert "| Data |" in md
