"""The bench protocol: CPU utilization is the workload's own process tree.

A program that computes half of each step and sleeps the other half must read about half
a core, whatever else the machine runs. The expected value is the program's own account
of its CPU time over its measured steps (``os.times``), not the sampler's.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tbdtrace import trace
from tbdtrace.suite import BenchConfig, Job, rows
from tbdtrace.suite.capture import Paths, execute

STEP_S = 0.1  # each step: this much CPU time computing, then this much wall time asleep

HALF_ASLEEP = f"""
import json, os, time

steps = open(os.environ["TBDTRACE_STEPS_FILE"], "a", buffering=1)

def cpu_s():
    t = os.times()
    return t.user + t.system

for i in range(14):
    start = time.time_ns()
    if i == 2:  # the measured steps begin (two warm-up steps)
        cpu0, wall0 = cpu_s(), time.monotonic()
    c0 = cpu_s()
    while cpu_s() - c0 < {STEP_S}:
        pass
    time.sleep({STEP_S})
    record = dict(step=i, start_ns=start, end_ns=time.time_ns(), samples=1, warmup=i < 2)
    steps.write(json.dumps(record) + "\\n")
own = (cpu_s() - cpu0) / (time.monotonic() - wall0)
open("own_cores.json", "w").write(json.dumps(own))
"""


@pytest.mark.heavy
def test_a_process_asleep_half_the_time_uses_half_a_core(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "half_asleep.py").write_text(HALF_ASLEEP)
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    job = Job("half", "pytorch", "half_asleep", sys.executable, None)
    cfg = BenchConfig(out_dir=tmp_path / "out", steps=12, warmup=2, device="cpu")
    paths = Paths.for_job(cfg.out_dir, job)
    outcome = execute("steps", job, cfg, paths)
    assert outcome.error is None, outcome.error
    cells, _ = rows.compute(trace.open(paths.trace_dir))
    own = json.loads((paths.log.parent / "own_cores.json").read_text())
    assert cells["measured_steps"] == 12
    # Half a core when the machine is idle; less when other processes delay the
    # computing half (the program's own figure says by how much).
    assert 0.0 < own <= 0.55
    assert cells["cpu_cores_used"] == pytest.approx(own, abs=0.08)
    assert cells["cpu_utilization"] == pytest.approx(
        own / trace.open(paths.trace_dir).meta["extra"]["logical_cpus"], abs=0.08
    )
