"""Device work launched before the trace began (issue: pre-trace work placed by its own
start landed in the first measured step).

The PyTorch profiler keeps the device activity of the step before the first one it
records: kernels without a launch record whose correlation id is below every recorded
launch. They belong to the ``pre-trace`` phase, and to no window but ``all``. Expected
values are computed here from the rows written (a hand-built trace) or from the raw JSON
(a real TraceLens trace that has 436 such kernels).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tbdtrace.analysis.engine import context, window
from tbdtrace.analysis.engine.window import WindowSpec
from tbdtrace.analysis.passes import kernels, phases, summary
from tbdtrace.report import ReportOptions, build
from tests import rawkineto
from tests.analysis.tiny import US, make
from tests.conftest import fixture

# (start_us, end_us, name, correlation id, launch_us or None). Steps 1 [100, 200) and
# 2 [200, 300), both measured. The runtime calls have ids 10..13, so the kernels with ids 3
# and 4 and no launch ran before the trace began; id 20 has no launch either but is not
# below every launch: it stays placed by its own start.
KERNELS = [
    (105, 140, "pre_a", 3, None),
    (110, 150, "pre_b", 4, None),
    (120, 130, "mm", 10, 101),
    (160, 170, "relu", 11, 150),
    (220, 230, "mm", 12, 210),
    (260, 265, "relu", 13, 250),
    (270, 280, "lone", 20, None),
]


def _trace(tmp_path: Path) -> Any:
    k = {
        "start_ns": [s * US for s, *_ in KERNELS],
        "end_ns": [e * US for _, e, *_ in KERNELS],
        "name": [n for _, _, n, *_ in KERNELS],
        "correlation_id": [c for *_, c, _ in KERNELS],
        "device_id": [0] * len(KERNELS),
        "device_type": ["cuda"] * len(KERNELS),
    }
    launched = [row for row in KERNELS if row[4] is not None]
    rt = {
        "start_ns": [x[4] * US for x in launched],
        "end_ns": [x[4] * US + 3 * US for x in launched],
        "name": ["cudaLaunchKernel"] * len(launched),
        "correlation_id": [x[3] for x in launched],
        "pid": [1] * len(launched),
        "tid": [1] * len(launched),
    }
    steps = {
        "step": [1, 2],
        "start_ns": [100 * US, 200 * US],
        "end_ns": [200 * US, 300 * US],
        "warmup": [False, False],
    }
    return make(tmp_path, {"kernels": k, "runtime": rt, "steps": steps})


def _expected_pre() -> list[tuple[int, int, str, int, Any]]:
    first_launch_id = min(x[3] for x in KERNELS if x[4] is not None)
    return [x for x in KERNELS if x[4] is None and x[3] < first_launch_id]


def test_pre_trace_work_is_its_own_phase_and_in_no_step(tmp_path: Path) -> None:
    tr = _trace(tmp_path)
    pre = _expected_pre()
    assert [x[2] for x in pre] == ["pre_a", "pre_b"]
    ph = {r["phase"]: r for r in phases.run(tr).to_pylist()}
    assert list(ph) == ["pre-trace", "init", "warmup", "measured", "after"]
    assert ph["pre-trace"]["kernel_count"] == len(pre)
    assert ph["pre-trace"]["kernel_time_ns"] == sum((e - s) * US for s, e, *_ in pre)
    assert ph["pre-trace"]["start_ns"] == min(s for s, *_ in pre) * US
    assert ph["pre-trace"]["end_ns"] == max(e for _, e, *_ in pre) * US
    rest = [x for x in KERNELS if x not in pre]
    assert ph["measured"]["kernel_count"] == len(rest)
    assert ph["init"]["kernel_count"] == 0
    # The phases partition the kernels.
    assert sum(r["kernel_count"] for r in ph.values()) == len(KERNELS)

    # The measured window (and the per-step sections reading it) hold the launched work
    # and the launch-less kernel that is not pre-trace, nothing launched before the trace.
    whole = context.of(tr)
    view = whole.windowed(window.resolve(whole))
    names = kernels.run(view).column("name").to_pylist()
    assert sorted(names) == sorted({x[2] for x in rest})
    s = summary.run(view).to_pylist()[0]
    assert s["kernel_count"] == len(rest)
    assert s["kernel_time_ns"] == sum((e - s_) * US for s_, e, *_ in rest)
    doc = build(tr, ReportOptions())
    assert any("before the trace began" in n for n in doc["window"]["notes"])
    cats = {c["category"]: c["total_ns"] for c in doc["categories"]}
    assert sum(cats.values()) == sum((e - s_) * US for s_, e, *_ in rest)

    # The all window is the trace as recorded: it keeps them, and says so.
    everything = whole.windowed(window.resolve(whole, WindowSpec("all")))
    assert summary.run(everything).to_pylist()[0]["kernel_count"] == len(KERNELS)
    all_doc = build(tr, ReportOptions(window=WindowSpec("all")))
    assert any("keeps 2 device rows" in n for n in all_doc["window"]["notes"])


def test_a_trace_without_launch_records_has_no_pre_trace_work(tmp_path: Path) -> None:
    # Device-only rows (no runtime table): nothing can be told to predate the trace.
    k = {
        "start_ns": [s * US for s, *_ in KERNELS],
        "end_ns": [e * US for _, e, *_ in KERNELS],
        "name": [n for _, _, n, *_ in KERNELS],
        "correlation_id": [c for *_, c, _ in KERNELS],
        "device_id": [0] * len(KERNELS),
        "device_type": ["cuda"] * len(KERNELS),
    }
    tr = make(tmp_path, {"kernels": k})
    assert not window.pre_trace_rows(context.of(tr), "kernels").any()
    assert "pre-trace" not in phases.run(tr).column("phase").to_pylist()


QWEN = "kineto/tracelens/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"


def _raw_launched_in_step(path: Path) -> tuple[int, int, int]:
    """From the raw JSON: (kernels launched inside the recorded step, kernels without a
    launch record whose correlation id is below every launch, all kernels)."""
    ev = rawkineto.device_events(path)
    launch = {
        x["args"]["correlation"]: s for s, _, _, x in ev["runtime"] if "correlation" in x["args"]
    }
    doc = rawkineto.load(path)
    (step,) = [
        e
        for e in doc["traceEvents"]
        if e.get("cat") == "user_annotation" and str(e.get("name", "")).startswith("ProfilerStep#")
    ]
    lo = rawkineto.ns(step["ts"])
    hi = lo + rawkineto.ns(step["dur"])
    first = min(launch)
    inside = pre = 0
    for _, _, _, x in ev["kernels"]:
        c = x["args"].get("correlation")
        if c in launch:
            inside += lo <= launch[c] < hi
        elif c is not None and c < first:
            pre += 1
    return inside, pre, len(ev["kernels"])


def test_real_trace_measured_step_holds_only_what_it_launched() -> None:
    path = fixture(QWEN)
    inside, pre, total = _raw_launched_in_step(path)
    assert pre == 436  # the defect's size on this trace: 30% of its kernel time
    doc = build(_open(path), ReportOptions())
    (rank,) = doc["summary"]["ranks"]
    assert rank["kernel_count"] == inside
    ph = {r["phase"]: r for r in doc["phases"]}
    assert ph["pre-trace"]["kernel_count"] == pre
    assert sum(r["kernel_count"] for r in doc["phases"]) == total
    assert "<unattributed>" not in {r["op"] for r in doc["hotspots"]["ops"]}


def _open(path: Path) -> Any:
    from tbdtrace.commands._open import open_or_import

    return open_or_import(str(path))
