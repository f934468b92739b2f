"""Stragglers judged against the run's own noise: small multi-rank traces built here with
known per-rank work times (seeded jitter plus injected delays), where the expected leads,
noise, threshold and flagged steps come from the rule's formula written in this file
(docs/METRICS.md "Stragglers per step"), and the report's JSON, CSV and text agree."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest

from tbdtrace.analysis.engine.window import WindowSpec
from tbdtrace.report import ReportOptions, build, csvout, tabular
from tbdtrace.report.text import render
from tbdtrace.report.textui import Console
from tests.analysis.tiny import make

MS = 1_000_000  # ns
TRANSFER_NS = 200_000  # each all-reduce's transfer after the last rank's arrival
GAP_NS = 50_000  # host time between steps


def _job(work: np.ndarray) -> dict[str, dict[str, list]]:
    """Steps and collectives of a data-parallel job where rank r works ``work[s, r]`` ns
    in step s, then all ranks meet in one all-reduce that ends TRANSFER_NS after the last
    arrival (the others wait inside it, as NCCL and gloo ranks do)."""
    steps: dict[str, list] = {k: [] for k in ("step", "start_ns", "end_ns", "rank", "warmup")}
    coll: dict[str, list] = {k: [] for k in ("start_ns", "end_ns", "rank", "op", "process_group")}
    t = 1_000 * MS
    for s, row in enumerate(work):
        end = t + int(row.max()) + TRANSFER_NS
        for r, w in enumerate(row):
            steps["step"].append(s)
            steps["start_ns"].append(t)
            steps["end_ns"].append(end)
            steps["rank"].append(r)
            steps["warmup"].append(False)
            coll["start_ns"].append(t + int(w))
            coll["end_ns"].append(end)
            coll["rank"].append(r)
            coll["op"].append("all_reduce")
            coll["process_group"].append("0")
        t = end + GAP_NS
    return {"steps": steps, "collectives": coll}


def _expected(work: np.ndarray, multiple: float = 5.0, floor_share: float = 0.02) -> dict:
    """The rule, from the work times: lead = work - the step's median rank's; noise =
    1.4826 x median |lead| over every (step, rank); threshold = max(multiple x noise,
    floor_share x median step time); a step is flagged when its largest lead exceeds it."""
    leads = work - np.median(work, axis=1, keepdims=True)
    noise = 1.4826 * float(np.median(np.abs(leads)))
    step_time = work.max(axis=1) + TRANSFER_NS  # every rank's step ends with the all-reduce
    threshold = max(multiple * noise, floor_share * float(np.median(step_time)))
    return {
        "lead_ns": leads.max(axis=1),
        "slowest_rank": leads.argmax(axis=1),
        "noise_ns": noise,
        "threshold_ns": threshold,
        "flagged": {int(s) for s in np.flatnonzero(leads.max(axis=1) > threshold)},
    }


def _report(tmp_path: Path, work: np.ndarray) -> dict:
    tr = make(tmp_path, _job(work))
    return build(tr, ReportOptions(window=WindowSpec("all")))


def _work(ranks: int, steps: int, base_ns: int, jitter_ns: float, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.round(base_ns + rng.normal(0, jitter_ns, (steps, ranks))).astype(np.int64)


def _check(doc: dict, work: np.ndarray) -> dict:
    want = _expected(work)
    got = doc["ranks"]["steps"]
    assert [s["step"] for s in got] == list(range(len(work)))
    for s in got:
        n = s["step"]
        assert s["slowest_rank"] == want["slowest_rank"][n]
        assert s["lead_ns"] == pytest.approx(want["lead_ns"][n], abs=1)
        assert s["noise_ns"] == pytest.approx(want["noise_ns"], abs=1)
        assert s["threshold_ns"] == pytest.approx(want["threshold_ns"], abs=1)
    assert {s["step"] for s in got if s["straggler"]} == want["flagged"]
    rule = doc["ranks"]["straggler_rule"]
    assert rule["noise_ns"] == pytest.approx(want["noise_ns"], abs=1)
    assert rule["threshold_ns"] == pytest.approx(want["threshold_ns"], abs=1)
    assert rule["leads"] == work.size and rule["steps"] == len(work)
    assert rule["flagged"] == len(want["flagged"])
    assert (rule["caveat"] is not None) == (work.size < 6)  # few rank-steps say so
    return want


@pytest.mark.parametrize("seed", range(5))
def test_two_ranks_one_injected_delay_is_the_only_straggler(tmp_path: Path, seed: int) -> None:
    # The capture in miniature: 2 ranks, 6 steps of ~5 ms whose ranks differ by
    # ~0.5 ms (a fixed 5% lead, 260 us, flags many of them), 300 ms on rank 1
    # in step 3.
    work = _work(2, 6, 5 * MS, 600_000, seed)
    work[3, 1] += 300 * MS
    want = _check(_report(tmp_path, work), work)
    assert want["flagged"] == {3}
    leads = work - np.median(work, axis=1, keepdims=True)
    old = {s for s in range(6) if leads[s].max() > 0.05 * np.median(work[s] + TRANSFER_NS)}
    assert len(old - {3}) >= 1, old  # the fixed 5% rule flags steps the new one leaves


def test_four_ranks_noise_decides(tmp_path: Path) -> None:
    # 100 us jitter: a 2 ms delay stands out, a 300 us one (3 sigma, 5% of a step) does not.
    work = _work(4, 12, 5 * MS, 100_000, 7)
    work[5, 2] += 2 * MS
    work[8, 0] += 300_000
    want = _check(_report(tmp_path, work), work)
    assert want["flagged"] == {5}


def test_quiet_run_the_floor_decides(tmp_path: Path) -> None:
    # No jitter (noise 0): leads above 2% of the median step time (100 ms) are flagged.
    work = np.full((3, 8), 100 * MS, np.int64)
    work[0, 5] += 3 * MS
    work[2, 1] += 1 * MS
    want = _check(_report(tmp_path, work), work)
    assert want["noise_ns"] == 0 and want["flagged"] == {0}


def test_two_steps_of_two_ranks_cannot_single_one_out(tmp_path: Path) -> None:
    # Leads +-a/2 and +-b/2: the noise is at least 1.4826 x a/4, so no lead exceeds 5 x it,
    # and the rule says why.
    work = np.array([[5 * MS, 5 * MS + 100_000], [5 * MS, 305 * MS]], np.int64)
    doc = _report(tmp_path, work)
    want = _check(doc, work)
    assert want["flagged"] == set()
    assert "3 steps" in doc["ranks"]["straggler_rule"]["caveat"]


def test_csv_and_text_carry_the_lead_and_the_noise(tmp_path: Path) -> None:
    work = _work(2, 6, 5 * MS, 300_000, 0)
    work[3, 1] += 300 * MS
    doc = _report(tmp_path, work)
    tab = tabular.find(doc, "ranks.steps")
    assert tab is not None
    buf = io.StringIO()
    csvout.write(tab, buf)
    rows = list(csv.DictReader(io.StringIO(buf.getvalue())))
    for row, s in zip(rows, doc["ranks"]["steps"], strict=True):
        assert float(row["lead_ns"]) == s["lead_ns"]
        assert float(row["noise_ns"]) == s["noise_ns"]
        assert float(row["threshold_ns"]) == s["threshold_ns"]
        assert row["straggler"] == ("true" if s["straggler"] else "false")
    out = io.StringIO()
    render(doc, ReportOptions(), Console(file=out, width=200))
    text = out.getvalue()
    rule = doc["ranks"]["straggler_rule"]
    assert "Stragglers: 1 of 6 steps flagged." in text
    assert f"{rule['noise_ns'] / 1000:,.3f} us" in text  # the noise, in the text line
