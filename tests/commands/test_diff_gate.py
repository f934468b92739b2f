"""``tbdtrace diff --fail-above``: the regression gate, end to end on two real captures of
a tiny training job (tests/commands/tiny_mlp.py), the second slowed on purpose
(``--data-delay-ms``) and run for more steps, so per-step figures differ from totals.

Expected values come from the captures' Parquet files read here with pyarrow alone (the
steps and kernels tables), and the verdicts from the thresholds applied here by hand."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tbdtrace.cli import main

DELAY_MS = 200
ROOT = Path(__file__).resolve().parents[2]


def _capture(out: Path, *args: str) -> Path:
    cmd = [sys.executable, "-m", "tbdtrace", "capture", "--backend", "torch", "-o", str(out)]
    cmd += ["--", sys.executable, "-m", "tests.commands.tiny_mlp", "--device", "cpu"]
    cmd += ["--no-eval", "--warmup", "1", *args]
    # One thread: the job's compute stays a few ms per step on a busy machine.
    env = dict(os.environ, OMP_NUM_THREADS="1")
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=ROOT)
    assert cp.returncode == 0, cp.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A: 3 measured steps; B: 8 measured steps, each waiting DELAY_MS more for its data."""
    root = tmp_path_factory.mktemp("gate")
    a = _capture(root / "a.tbd", "--steps", "3")
    b = _capture(root / "b.tbd", "--steps", "8", "--data-delay-ms", str(DELAY_MS))
    return a, b


def _raw(trace: Path) -> dict[str, Any]:
    """The measured steps and, per kernel name, the kernel time placed in them (a kernel
    starting in [first measured start, last measured end): a CPU capture has no launch
    calls), read from the Parquet files."""
    st = pq.read_table(trace / "steps.parquet").to_pylist()
    measured = [s for s in st if not s["warmup"]]
    lo = min(s["start_ns"] for s in measured)
    hi = max(s["end_ns"] for s in measured)
    per_name: dict[str, int] = {}
    for k in pq.read_table(
        trace / "kernels.parquet", columns=["name", "start_ns", "end_ns"]
    ).to_pylist():
        if lo <= k["start_ns"] < hi:
            per_name[k["name"]] = per_name.get(k["name"], 0) + k["end_ns"] - k["start_ns"]
    durations = [s["end_ns"] - s["start_ns"] for s in measured]
    return {"steps": len(measured), "median": statistics.median(durations), "kernels": per_name}


def _diff(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any], str]:
    rc = main(["diff", *argv, "--format", "json"])
    cap = capsys.readouterr()
    return rc, json.loads(cap.out), cap.err


@pytest.mark.heavy
@pytest.mark.slow
def test_per_step_figures_and_gate_on_two_real_captures(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = runs
    ra, rb = _raw(a), _raw(b)
    assert (ra["steps"], rb["steps"]) == (3, 8)
    gates = "step_time=50%,kernel_time=1000%,kernel:gemm=10%"
    rc, doc, err = _diff(capsys, str(a), str(b), "--fail-above", gates, "--top", "1000")
    head = doc["headline"]
    assert (head["measured_steps"]["a"], head["measured_steps"]["b"]) == (3, 8)
    assert head["step_median_ns"]["a"] == ra["median"]
    assert head["step_median_ns"]["b"] == rb["median"]
    # The slowed run waits DELAY_MS per step on top of its work.
    assert rb["median"] >= DELAY_MS * 1e6 and rb["median"] > 1.5 * ra["median"]
    # Per step, not totals: 8 steps against 3 would read x2.7 on totals.
    for side, raw in (("a", ra), ("b", rb)):
        total = sum(raw["kernels"].values())
        assert head["kernel_time_per_step_ns"][side] == pytest.approx(total / raw["steps"])
    rows = {r["name"]: r for r in doc["kernels"]}
    assert set(rows) == set(ra["kernels"]) | set(rb["kernels"])
    for name, r in rows.items():
        ta, tb = ra["kernels"].get(name, 0), rb["kernels"].get(name, 0)
        assert (r["a_total_ns"], r["b_total_ns"]) == (ta, tb), name
        assert r["a_per_step_ns"] == pytest.approx(ta / 3) and r["b_per_step_ns"] == pytest.approx(
            tb / 8
        )
        assert r["ratio"] == (pytest.approx((tb / 8) / (ta / 3)) if ta else None)
    changes = [abs(r["delta_per_step_ns"]) for r in doc["kernels"]]
    assert changes == sorted(changes, reverse=True)
    # The verdicts, by hand from the figures: B's step is > 50 % longer; kernel time per
    # step is the same job's (far below x11); gemm by the threshold on its own figures.
    res = {r["metric"]: r for r in doc["gate"]["results"]}
    assert res["step_time"]["status"] == "regression"
    assert res["step_time"]["change"] == pytest.approx(rb["median"] / ra["median"] - 1)
    assert res["kernel_time"]["status"] == "pass"
    gemm = next(r for r in doc["categories"] if r["category"] == "gemm")
    want = "regression" if gemm["b_per_step_ns"] / gemm["a_per_step_ns"] - 1 > 0.10 else "pass"
    assert res["kernel:gemm"]["status"] == want
    assert rc == 4 and doc["gate"]["exit_code"] == 4 and not doc["gate"]["passed"]
    assert "REGRESSION" in err and "step_time" in err


@pytest.mark.heavy
@pytest.mark.slow
def test_gate_passes_a_run_against_itself(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, _ = runs
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")  # appended to, never replaced
    gates = ["step_time=5%,kernel:gemm=10%", "memory.peak=3%,throughput=5%"]
    argv = ["diff", str(a), str(a), "--summary", str(summary)]
    for g in gates:
        argv += ["--fail-above", g]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Gate passed: 4 of 4 within their limits." in out
    md = summary.read_text()
    assert md.startswith("earlier step\n### tbdtrace diff: passed")
    assert "| `memory.peak` |" in md and "| `throughput` |" in md


@pytest.mark.heavy
@pytest.mark.slow
def test_markdown_csv_and_html_say_the_same(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a, b = runs
    gate = ["--fail-above", "step_time=50%,op:no_such_op=1%"]
    _, doc, _ = _diff(capsys, str(a), str(b), *gate)
    assert main(["diff", str(a), str(b), *gate, "--format", "markdown"]) == 4
    md = capsys.readouterr().out
    assert md.startswith("### tbdtrace diff: **REGRESSION**")
    assert "| `step_time` |" in md and "**regression**" in md and "**missing**" in md
    assert main(["diff", str(a), str(b), *gate, "--format", "csv", "-o", str(tmp_path / "c")]) == 4
    capsys.readouterr()
    lines = (tmp_path / "c" / "gate.csv").read_text().splitlines()
    assert lines[0].split(",")[:2] == ["metric", "unit"] and len(lines) == 3
    step = lines[1].split(",")
    assert float(step[3]) == doc["gate"]["results"][0]["a"]
    assert step[-1] == "regression" and lines[2].endswith(",missing")
    page = tmp_path / "d.html"
    assert main(["diff", str(a), str(b), *gate, "--format", "html", "-o", str(page)]) == 4
    html = page.read_text()
    assert '<p id="verdict" class="fail">REGRESSION: 2 of 2 gates failed' in html
    assert 'id="s-gate"' in html and 'id="s-kernels"' in html


def test_bad_thresholds_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        ("step_tim=5%", "no such metric"),
        ("step_time=5", "give the limit as a percentage"),
        ("kernel:gemmm=5%", "no such category"),
        ("step_time=-1%", "must be a percentage >= 0"),
    ]
    for spec, msg in cases:
        assert main(["diff", "x", "y", "--fail-above", spec]) == 2
        err = capsys.readouterr().err
        assert msg in err and err.count("\n") == 1, (spec, err)


def test_help_documents_the_exit_status_and_metrics(capsys: pytest.CaptureFixture[str]) -> None:
    from tbdtrace.analysis import gate as diff_gate

    assert main(["diff", "--help"]) == 0  # --help: the status argparse exits with
    out = capsys.readouterr().out
    assert "4 a gate failed (regression)" in " ".join(out.split())
    for m in diff_gate.METRICS:
        assert m.name in out
