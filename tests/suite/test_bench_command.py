"""``tbdtrace bench`` end to end, on real tiny workloads (the command through
``tbdtrace.cli.main`` in the test process, tests/inprocess.py; each workload a process)."""

from __future__ import annotations

import csv
import json
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tests.inprocess import tbd
from tests.suite.conftest import run_bench

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

TBD_MODELS = (
    "resnet50",
    "inception_v3",
    "seq2seq",
    "transformer",
    "deepspeech2",
    "faster_rcnn",
    "wgan",
    "a3c",
)


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return tbd("bench", *args, check=False)


def _steps_median(trace_dir: Path) -> tuple[float, int]:
    """Samples/s over the measured steps and their count, read from steps.parquet with pyarrow only
    (the file holds true values, docs/TRACE_FORMAT.md)."""
    t = pq.read_table(trace_dir / "steps.parquet").to_pydict()
    recs = list(
        zip(t["start_ns"], t["end_ns"], t["samples"], t["warmup"], t["source"], strict=True)
    )
    if any(r[4] == "harness" for r in recs):
        recs = [r for r in recs if r[4] == "harness"]
    measured = [(b, e, s) for b, e, s, w, _ in recs if not w]
    # the run's throughput: total samples / total time of the measured steps (one rank)
    return sum(s for _, _, s in measured) / (sum(e - b for b, e, _ in measured) / 1e9), len(
        measured
    )


def test_list_prints_one_pair_per_line() -> None:
    p = _bench("--list")
    assert p.returncode == 0, p.stderr
    pairs = [tuple(line.split(" ")) for line in p.stdout.splitlines()]
    assert all(len(x) == 2 for x in pairs)
    assert len(pairs) == len(set(pairs))
    assert {(m, "pytorch") for m in TBD_MODELS} <= set(pairs)
    assert {(m, "tensorflow") for m in TBD_MODELS} <= set(pairs)


@pytest.fixture(scope="module")
def two_tiny(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Two tiny workloads under the default capture (``tbdtrace capture``)."""
    out = tmp_path_factory.mktemp("bench")
    args = ["--models", "seq2seq,transformer", "--frameworks", "pytorch", "--size", "tiny"]
    args += ["--steps", "2", "--warmup", "0", "--device", "cpu"]
    args += ["--no-eval"]  # no quality column is checked; the profiled decoding is long
    return run_bench(out, *args), out


MEMORY_CATEGORIES = (
    "weights",
    "gradients",
    "optimizer_state",
    "inputs",
    "activations",
    "workspace",
    "other",
)


@pytest.mark.slow
def test_two_tiny_workloads_fill_both_rows(two_tiny: tuple) -> None:  # type: ignore[type-arg]
    p, out = two_tiny
    assert p.returncode == 0, p.stderr
    with (out / "bench.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["model"], r["framework"]) for r in rows] == [
        ("seq2seq", "pytorch"),
        ("transformer", "pytorch"),
    ]
    for r in rows:
        assert r["status"] == "ok", r
        assert int(r["batch_size"]) == 4  # both workloads' tiny batch
        assert int(r["measured_steps"]) == 2
        # Throughput from the unprofiled run, the profiled run's beside it.
        median, n = _steps_median(out / "unprofiled" / Path(r["trace"]).name)
        assert n == 2
        assert float(r["throughput_samples_per_s"]) == pytest.approx(median, rel=1e-9)
        profiled, n = _steps_median(Path(r["trace"]))
        assert n == 2
        assert float(r["profiled_throughput_samples_per_s"]) == pytest.approx(profiled, rel=1e-9)
        assert float(r["profiler_slowdown"]) > 0
        lo, hi = float(r["throughput_min_samples_per_s"]), float(r["throughput_max_samples_per_s"])
        assert lo <= median <= hi
        assert int(r["step_time_ns"]) > 0
        assert int(r["wall_ns"]) > int(r["step_time_ns"])
        # Under capture the activity-derived figures are filled too.
        assert r["backend"] != ""
        assert 0 < float(r["cpu_utilization"]) <= 1 and float(r["cpu_cores_used"]) > 0
        peak = int(r["peak_memory_bytes"])
        assert peak > 0
        assert sum(int(r[f"{c}_bytes"]) for c in MEMORY_CATEGORIES) == peak
        assert int(r["weights_bytes"]) > 0


def test_json_and_markdown_agree_with_csv(two_tiny: tuple) -> None:  # type: ignore[type-arg]
    _, out = two_tiny
    doc = json.loads((out / "bench.json").read_text())
    with (out / "bench.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [c["name"] for c in doc["columns"]] == list(rows[0].keys())
    for j, c in zip(doc["rows"], rows, strict=True):
        assert j["model"] == c["model"]
        assert j["throughput_samples_per_s"] == pytest.approx(float(c["throughput_samples_per_s"]))
        for k, v in c.items():
            assert (v == "") == (j[k] is None), k
    md = (out / "bench.md").read_text()
    lines = [
        ln for ln in md.splitlines() if ln.startswith("| seq2seq") or ln.startswith("| transformer")
    ]
    assert len(lines) == 2
    for ln, c in zip(lines, rows, strict=True):
        cells = [x.strip() for x in ln.strip("|").split("|")]
        assert cells[2] == c["batch_size"]
        assert cells[3] == f"{float(c['throughput_samples_per_s']):.2f}"


def test_unknown_model_is_one_line_exit_1(tmp_path: Path) -> None:
    p = _bench("--models", "alexnet", "--out", str(tmp_path))
    assert p.returncode == 1
    assert p.stderr.strip().splitlines() == [
        "tbdtrace: unknown model 'alexnet'; `tbdtrace bench --list` shows the pairs"
    ]


@pytest.mark.parametrize(
    "bad", [["--steps", "0"], ["--batch-sizes", "two"], ["--batch-sizes", "0"], ["--size", "huge"]]
)
def test_bad_options_are_usage_errors(tmp_path: Path, bad: list[str]) -> None:
    p = _bench(*bad, "--out", str(tmp_path))
    assert p.returncode == 2
    assert "Traceback" not in p.stderr
