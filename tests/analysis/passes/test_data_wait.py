"""Data-loader waits per step (``steps.data_wait_ns``) and the host-bound idle split, on a
real capture of a tiny training job whose loader is slowed on purpose: with
``--data-delay-ms D`` every step waits at least D for its batch, and the harness's
``harness: data`` ranges (read here from the capture's markers file with pyarrow alone)
give each step's wait exactly."""

from __future__ import annotations

import statistics
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

import tbdtrace
from tbdtrace.analysis.engine import data_wait
from tbdtrace.cli import main
from tests.commands.test_diff_gate import _capture
from tests.conftest import KINETO

DELAY_MS = 150


@pytest.fixture(scope="module")
def slowed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wait") / "slow.tbd"
    return _capture(out, "--steps", "4", "--data-delay-ms", str(DELAY_MS))


def _union_in(ranges: list[tuple[int, int]], lo: int, hi: int) -> int:
    """Length of the union of ``ranges`` clipped to [lo, hi), by a sweep."""
    total, cur_s, cur_e = 0, None, None
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in ranges if e > lo and s < hi):
        if cur_e is None or s > cur_e:
            total += 0 if cur_e is None else cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + (0 if cur_e is None else cur_e - cur_s)


@pytest.mark.heavy
@pytest.mark.slow
def test_each_step_waits_the_delay(slowed: Path) -> None:
    marks = pq.read_table(slowed / "markers.parquet").to_pylist()
    ranges = [
        (m["start_ns"], m["end_ns"])
        for m in marks
        if m["name"] == "harness: data"
        or (m["name"].startswith("enumerate(DataLoader)#") and m["name"].endswith(".__next__"))
    ]
    assert sum(m["name"] == "harness: data" for m in marks) == 5  # one fetch per step
    raw = pq.read_table(slowed / "steps.parquet").to_pylist()
    want = {s["step"]: _union_in(ranges, s["start_ns"], s["end_ns"]) for s in raw}
    st = tbdtrace.analyze(slowed, window="all").steps().to_pylist()
    assert {s["step"]: s["data_wait_ns"] for s in st} == want
    for s in st:
        # The known part: the delay itself, inside the step.
        assert DELAY_MS * 1_000_000 <= s["data_wait_ns"] <= s["duration_ns"]
    measured = [want[s["step"]] for s in raw if not s["warmup"]]
    doc = tbdtrace.analyze(slowed).report()
    summ = doc["steps"]["summary"]
    assert summ["data_wait_ns"] == sum(measured)
    assert summ["data_wait_median_ns"] == statistics.median(measured)


@pytest.mark.heavy
@pytest.mark.slow
def test_host_bound_idle_is_split(slowed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    idle = tbdtrace.analyze(slowed, window="measured").idle().to_pylist()
    (cpu,) = idle
    assert cpu["host_bound_data_ns"] + cpu["host_bound_other_ns"] == cpu["host_bound_ns"]
    # The device (the CPU's ops) sits idle through each step's wait; idle counts the gaps
    # inside the device's span, which starts at the first measured step's first op (after
    # that step's wait): the waits of the other 3 measured steps at least.
    assert cpu["host_bound_data_ns"] >= 3 * DELAY_MS * 1_000_000
    assert cpu["host_bound_other_ns"] < cpu["host_bound_data_ns"]
    assert main(["report", str(slowed)]) == 0
    out = capsys.readouterr().out
    assert "waiting for data" in out and "of it: data" in out
    assert main(["diff", str(slowed), str(slowed), "--fail-above", "data_wait=1%"]) == 0
    capsys.readouterr()


def test_no_data_ranges_is_unknown_not_zero() -> None:
    tr = tbdtrace.analyze(KINETO / "hta" / "sampled_rank-0.json.gz")
    names = set(tr.ctx.table("markers", ["name"]).column("name").to_pylist())
    names |= set(tr.ctx.table("ops", ["name"]).column("name").to_pylist())
    if any(n and "DataLoader" in n for n in names):
        pytest.skip("this fixture records DataLoader ranges")
    assert all(s["data_wait_ns"] is None for s in tr.steps().to_pylist())
    assert all(r["host_bound_data_ns"] is None for r in tr.idle().to_pylist())


def test_intersect_by_hand() -> None:
    a = (np.array([0, 10, 30]), np.array([5, 20, 40]))
    b = (np.array([3, 12, 18, 35]), np.array([11, 15, 32, 50]))
    s, e = data_wait.intersect(*a, *b)
    assert list(zip(s.tolist(), e.tolist(), strict=True)) == [
        (3, 5),
        (10, 11),
        (12, 15),
        (18, 20),
        (30, 32),
        (35, 40),
    ]
