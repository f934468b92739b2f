"""bench/ranks.py's goal checks against a real ``ranks`` section: the generated 8-rank set
(one 3 ms straggler, no slow link) reported in one process; every check passes on the
faults that were injected and fails on faults that were not."""

from __future__ import annotations

import io
import json
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from tbdtrace.cli import main
from tests.scaleout.conftest import STRAGGLER

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import ranks as bench_ranks  # noqa: E402


@pytest.fixture(scope="module")
def section(generated: Path) -> dict[str, Any]:
    out = io.StringIO()
    with redirect_stdout(out), redirect_stderr(io.StringIO()):
        assert main(["report", str(generated), "--format", "json"]) == 0
    return json.loads(out.getvalue())["ranks"]


def _failed(goals: list[tuple[bool, str]]) -> list[str]:
    return [what for met, what in goals if not met]


def test_injected_faults_pass(section: dict[str, Any]) -> None:
    goals, found, slow = bench_ranks.fault_goals(section, 8, (STRAGGLER,), None)
    # straggler named and flagged, its delay over the threshold, ranks and slow links
    assert len(goals) == 3 and _failed(goals) == []
    rank, step, delay_ns = STRAGGLER
    assert found[0].startswith(f"step {step}: rank {rank} (injected {rank}), lead 3.0 ms, flagged")
    assert found[1].startswith("other steps flagged: none")
    assert slow == []
    # the delay over the run's threshold, as the rule's own figures give it
    rule = section["straggler_rule"]
    ratio = delay_ns / rule["threshold_ns"]
    assert ratio > 1 and f"= {ratio:.1f} x the straggler threshold" in goals[1][1]


def test_wrong_rank_missing_step_and_small_delay_fail(section: dict[str, Any]) -> None:
    rank, step, delay_ns = STRAGGLER
    floor_ns = section["straggler_rule"]["floor_ns"]
    injected = ((rank - 1, step, delay_ns), (rank, 99, delay_ns), (rank, step, int(floor_ns / 2)))
    goals, found, _ = bench_ranks.fault_goals(section, 8, injected, None)
    failed = _failed(goals)
    assert len(failed) == 3
    assert failed[0].startswith(f"step {step}'s slowest rank {rank} (injected: rank {rank - 1})")
    assert failed[1] == f"step 99 (rank {rank} injected): not in the report"
    assert failed[2].startswith(f"step {step}: injected delay {floor_ns / 2 / 1e6:g} ms = 0.")
    assert "MISSED" in found[0] and found[1] == "step 99: MISSING"


def test_rank_count_and_slow_link_checked(section: dict[str, Any]) -> None:
    for n, link in ((9, None), (8, 7)):
        goals, _, _ = bench_ranks.fault_goals(section, n, (STRAGGLER,), link)
        assert _failed(goals) == [
            f"8 of {n} ranks reported, slow link found on [] "
            f"(injected: {[] if link is None else [link]})"
        ]
