"""steps pass: golden rows on a hand-made trace."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from tbdtrace.analysis.passes import steps
from tests.analysis.tiny import make

MS = 1_000_000


def _trace(tmp_path: Path, warmup: list[bool | None], samples: list[int | None]):
    n = len(warmup)
    return make(
        tmp_path,
        {
            "steps": {
                "step": list(range(n)),
                "start_ns": [i * 100 * MS for i in range(n)],
                "end_ns": [i * 100 * MS + (50 + 10 * i) * MS for i in range(n)],
                "warmup": warmup,
                "samples": samples,
                "source": ["harness"] * n,
            }
        },
    )


def test_durations_throughput_and_measured_window(tmp_path: Path) -> None:
    tr = _trace(tmp_path, [True, False, False, False], [32, 32, 32, None])
    t = steps.run(tr)
    assert t.column("duration_ns").to_pylist() == [50 * MS, 60 * MS, 70 * MS, 80 * MS]
    tp = t.column("throughput_per_s").to_pylist()
    assert tp[:3] == pytest.approx([32 / 0.05, 32 / 0.06, 32 / 0.07])
    assert tp[3] is None  # no samples: throughput unknown, duration still there
    s = steps.summarize(t)
    assert s["measured_count"] == 3 and s["warmup_count"] == 1
    assert s["measured_ns"] == (60 + 70 + 80) * MS
    assert s["step_median_ns"] == 70 * MS
    assert s["step_rate_median_per_s"] == pytest.approx((32 / 0.06 + 32 / 0.07) / 2)
    assert s["step_rate_mean_per_s"] == pytest.approx((32 / 0.06 + 32 / 0.07) / 2)
    # total samples / total time of the measured steps that have samples
    assert s["throughput_per_s"] == pytest.approx(64 / 0.13)
    # 80 ms / 60 ms: within twice, no warning
    assert s["slowest_to_fastest_step"] == pytest.approx(80 / 60)
    assert s["uneven_steps_warning"] is None


def test_throughput_is_samples_over_time_and_uneven_steps_warn(tmp_path: Path) -> None:
    # Four measured steps of 8 samples: 1 s, 1 s, 1 s and one fast 0.05 s step. The run did
    # 32 samples in 3.05 s; the mean of per-step rates, (8 + 8 + 8 + 160) / 4 = 46, is 4.4x
    # that (the fast outlier's rate dominates it).
    durations_ms = [1000, 1000, 1000, 50]
    starts = [sum(durations_ms[:i]) * MS for i in range(4)]
    tr = make(
        tmp_path,
        {
            "steps": {
                "step": [0, 1, 2, 3],
                "start_ns": starts,
                "end_ns": [a + d * MS for a, d in zip(starts, durations_ms, strict=True)],
                "warmup": [False] * 4,
                "samples": [8] * 4,
                "source": ["harness"] * 4,
            }
        },
    )
    s = steps.summarize(steps.run(tr))
    assert s["throughput_per_s"] == pytest.approx(32 / 3.05)
    assert s["step_rate_mean_per_s"] == pytest.approx(46.0)
    assert s["slowest_to_fastest_step"] == pytest.approx(20.0)
    assert "20.0x" in s["uneven_steps_warning"]
    # Every view shows samples / time as the throughput, the per-step mean only labelled.
    import json

    from tests.inprocess import tbd

    path = str(tmp_path / "t")
    doc = json.loads(tbd("report", path, "--format", "json").stdout)
    assert doc["steps"]["summary"]["throughput_per_s"] == pytest.approx(32 / 3.05)
    assert doc["steps"]["summary"]["uneven_steps_warning"] == s["uneven_steps_warning"]
    text = tbd("report", path).stdout
    assert "throughput 10.49 samples/s (samples / measured time" in text
    assert "mean 46.00 samples/s" in text and "warning: uneven steps" in text
    import csv
    import io

    out = tbd("report", path, "--format", "csv", "--section", "steps").stdout
    row = next(csv.DictReader(io.StringIO(out)))
    assert float(row["summary.throughput_per_s"]) == pytest.approx(32 / 3.05)
    assert row["summary.uneven_steps_warning"] == s["uneven_steps_warning"]
    tbd("report", path, "--format", "html", "-o", str(tmp_path / "r.html"))
    html = (tmp_path / "r.html").read_text()
    assert "throughput (samples / time)" in html and "10.5 samples/s" in html


def test_config_warmup_applies_only_without_flags(tmp_path: Path) -> None:
    tr = _trace(tmp_path, [None] * 4, [10] * 4)
    t = steps.run(tr, steps.StepsConfig(warmup_steps=2))
    assert t.column("warmup").to_pylist() == [True, True, False, False]
    assert steps.summarize(t)["throughput_per_s"] == pytest.approx(20 / 0.15)
    flagged = _trace(tmp_path, [False] * 4, [10] * 4)
    assert not any(
        steps.run(flagged, steps.StepsConfig(warmup_steps=2)).column("warmup").to_pylist()
    )


def test_no_steps_table(tmp_path: Path) -> None:
    tr = make(tmp_path, {})
    assert steps.run(tr).num_rows == 0
    s = steps.summarize(steps.run(tr))
    assert s["step_count"] == 0 and s["throughput_per_s"] is None
    assert s["step_median_ns"] is None or math.isnan(s["step_median_ns"])


def test_fixture_profiler_steps_match_the_raw_json(tmp_path: Path) -> None:
    import tbdtrace
    from tbdtrace.importers import kineto
    from tests import rawkineto
    from tests.conftest import fixture

    path = fixture("kineto/hta/sampled_rank-1.json.gz")
    tables, meta = kineto.import_files([path])
    tr = tbdtrace.open(tbdtrace.trace.write(tmp_path / "t", tables, meta))
    raw = rawkineto.load(path)["traceEvents"]
    want = sorted(
        (int(e["name"].split("#")[1]), rawkineto.ns(e["dur"]))
        for e in raw
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
    )
    t = steps.run(tr)
    assert (
        list(zip(t.column("step").to_pylist(), t.column("duration_ns").to_pylist(), strict=True))
        == want
    )
    s = steps.summarize(t)
    assert s["measured_ns"] == sum(d for _, d in want) and s["throughput_per_s"] is None
