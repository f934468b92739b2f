"""``--nproc 2`` on a PyTorch workload: two DDP ranks (gloo, CPU) started through
torch.distributed.run, each writing its own steps with its rank."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

ROOT = Path(__file__).resolve().parents[2]


def test_resnet50_two_ranks(tmp_path: Path) -> None:
    steps_file = tmp_path / "steps.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TBDTRACE_STEPS_FILE": str(steps_file)}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    cmd = [sys.executable, "-m", "workloads.pytorch.resnet50", "--nproc", "2", "--device", "cpu"]
    cp = subprocess.run(
        # No held-out evaluation: each rank would run it, and nothing here reads it.
        [*cmd, "--steps", "1", "--warmup", "1", "--size", "tiny", "--no-eval"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=300,
    )
    assert cp.returncode == 0, cp.stderr[-3000:]
    summaries = [ln for ln in cp.stderr.splitlines() if ln.startswith("resnet50 pytorch size=")]
    assert len(summaries) == 2  # one per rank
    recs = [json.loads(ln) for ln in steps_file.read_text().splitlines()]
    assert sorted((r["rank"], r["step"]) for r in recs) == [(0, 0), (0, 1), (1, 0), (1, 1)]
    pids = {r["rank"]: {x["pid"] for x in recs if x["rank"] == r["rank"]} for r in recs}
    assert len(pids[0]) == len(pids[1]) == 1 and pids[0] != pids[1]
    # Data seeded per rank (seed + rank): the ranks' first losses differ.
    first = {r["rank"]: r["loss"] for r in recs if r["step"] == 0}
    assert first[0] != first[1]


def test_nproc_must_be_positive(capsys: pytest.CaptureFixture[str]) -> None:
    # The workload's own entry point, in this process: the option is refused before any
    # model is built or rank started, so a process of its own would only add start-up.
    from workloads.pytorch import resnet50

    with pytest.raises(SystemExit) as e:
        resnet50.main(["--nproc", "0"])
    assert e.value.code == 2 and "--nproc must be >= 1" in capsys.readouterr().err
