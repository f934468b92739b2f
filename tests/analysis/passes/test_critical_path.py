"""The critical path per step: a hand-made trace whose path is worked out by hand below,
and a real Kineto trace (ResNet-50, six profiler steps) checked against the raw file read
by the test's own reader; the report's JSON, text and CSV and the timeline export show
the same path."""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from tbdtrace.analysis.engine import outputs
from tbdtrace.analysis.passes import critical_path as cp
from tbdtrace.cli import main
from tests import rawkineto
from tests.analysis.tiny import US, make
from tests.conftest import fixture

RESNET = "kineto/kineto_tb_plugin/worker0.1623143089861.pt.trace.json.gz"
SGEMM = "ampere_sgemm_128x64_nn"  # a GEMM by its name
ELEMENTWISE = "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>"

# Step 1, [0, 100) us, thread (1, 1), stream 7:
#   op fwd [0, 40) launches K1 (cudaLaunchKernel [10, 15)) and K2 ([20, 25));
#   K1 [18, 50) gemm; K2 [52, 60) elementwise, queued behind K1 (launched at 20 < 50);
#   op item [45, 75) holds cudaStreamSynchronize [46, 62), which returns after K2 ends;
#   nothing on the thread from 75 to the step's end.
# Walking back from 100: idle 75-100, item 62-75, the sync waited for K2 (sync wait
# 60-62), K2 52-60, the gap after K1 50-52, K1 18-50, K1's launch 10-18 (launch delay),
# then fwd 0-10 on the thread.
# Step 2, [100, 200) us: thread 1 runs op a [100, 110) (launching K3 with
# cudaLaunchKernel [102, 104)) and op c [150, 200); thread 2 runs op b [105, 140)
# holding cudaLaunchKernel [120, 125) (K4). Thread 1, idle from 110 to 150, waited for
# thread 2 (its op b ended last in that gap): c 150-200, idle 140-150, b 125-140, the
# launch call 120-125, b 105-120; thread 2, idle before 105, waited for thread 1, whose
# launch call ended at 104: idle 104-105, the call 102-104, a 100-102.
# Step 3, [200, 300) us: op d [200, 300) on thread 1 launches K5 on stream 8 (call
# [210, 212), K5 [215, 260) gemm), calls cudaStreamWaitEvent [220, 221) (a
# stream_wait_event sync row on stream 7), launches K6 on stream 7 ([222, 224), K6
# [262, 270)) and synchronizes stream 7 ([230, 275), a stream sync row). K6 started after
# its launch and after K4 (its predecessor on stream 7, ended at 135): it waited for K5
# on the other stream. Back from 300: d 275-300, the sync waited for K6 (270-275), K6
# 262-270, the wait for K5 260-262 (gpu_gap), K5 215-260, K5's launch 210-215, d 200-210.
# Step 4, [300, 400) us: op g [300, 400) on thread 1 holds cudaDeviceSynchronize [370,
# 390); thread 2 runs op f [340, 360), whose launch call [350, 352) starts K8 [355, 385)
# on stream 9. The sync waited for K8, K8 for its launch on thread 2; thread 2 was idle
# before f, and thread 1 ended no range meanwhile (it was in g), so the path goes back
# to the step's thread: g 300-340, f 340-350, the launch 350-355, K8 355-385, the sync's
# tail 385-390, g 390-400.
PATH_1 = [
    (0, 10, "cpu_op", "fwd", None),
    (10, 18, "launch_delay", "cudaLaunchKernel", None),
    (18, 50, "gpu_kernel", SGEMM, "gemm"),
    (50, 52, "gpu_gap", None, None),
    (52, 60, "gpu_kernel", ELEMENTWISE, "elementwise"),
    (60, 62, "sync_wait", "cudaStreamSynchronize", None),
    (62, 75, "cpu_op", "item", None),
    (75, 100, "cpu_idle", None, None),
]
PATH_2 = [
    (100, 102, "cpu_op", "a", None),
    (102, 104, "cpu_runtime", "cudaLaunchKernel", None),
    (104, 105, "cpu_idle", None, None),
    (105, 120, "cpu_op", "b", None),
    (120, 125, "cpu_runtime", "cudaLaunchKernel", None),
    (125, 140, "cpu_op", "b", None),
    (140, 150, "cpu_idle", None, None),
    (150, 200, "cpu_op", "c", None),
]
PATH_3 = [
    (200, 210, "cpu_op", "d", None),
    (210, 215, "launch_delay", "cudaLaunchKernel", None),
    (215, 260, "gpu_kernel", SGEMM, "gemm"),
    (260, 262, "gpu_gap", None, None),
    (262, 270, "gpu_kernel", ELEMENTWISE, "elementwise"),
    (270, 275, "sync_wait", "cudaStreamSynchronize", None),
    (275, 300, "cpu_op", "d", None),
]
PATH_4 = [
    (300, 340, "cpu_op", "g", None),
    (340, 350, "cpu_op", "f", None),
    (350, 355, "launch_delay", "cudaLaunchKernel", None),
    (355, 385, "gpu_kernel", ELEMENTWISE, "elementwise"),
    (385, 390, "sync_wait", "cudaDeviceSynchronize", None),
    (390, 400, "cpu_op", "g", None),
]
PATHS = PATH_1 + PATH_2 + PATH_3 + PATH_4
STEPS = ((1, PATH_1), (2, PATH_2), (3, PATH_3), (4, PATH_4))


def _hand(tmp_path: Path) -> Any:
    us = lambda xs: [x * US for x in xs]  # noqa: E731
    ops = [(0, 40, 1, "fwd"), (45, 75, 1, "item"), (100, 110, 1, "a"), (105, 140, 2, "b")]
    ops += [(150, 200, 1, "c"), (200, 300, 1, "d"), (300, 400, 1, "g"), (340, 360, 2, "f")]
    rt = [
        (10, 15, 1, 1, "cudaLaunchKernel"),
        (20, 25, 1, 2, "cudaLaunchKernel"),
        (46, 62, 1, 3, "cudaStreamSynchronize"),
        (102, 104, 1, 4, "cudaLaunchKernel"),
        (120, 125, 2, 5, "cudaLaunchKernel"),
        (210, 212, 1, 6, "cudaLaunchKernel"),
        (220, 221, 1, 7, "cudaStreamWaitEvent"),
        (222, 224, 1, 8, "cudaLaunchKernel"),
        (230, 275, 1, 9, "cudaStreamSynchronize"),
        (350, 352, 2, 10, "cudaLaunchKernel"),
        (370, 390, 1, 11, "cudaDeviceSynchronize"),
    ]
    ks = [(18, 50, 1, SGEMM, 7), (52, 60, 2, ELEMENTWISE, 7), (104, 108, 4, SGEMM, 7)]
    ks += [(130, 135, 5, SGEMM, 7), (215, 260, 6, SGEMM, 8), (262, 270, 8, ELEMENTWISE, 7)]
    ks.append((355, 385, 10, ELEMENTWISE, 9))
    return make(
        tmp_path,
        {
            "ops": {
                "start_ns": us([o[0] for o in ops]),
                "end_ns": us([o[1] for o in ops]),
                "pid": [1] * len(ops),
                "tid": [o[2] for o in ops],
                "name": [o[3] for o in ops],
            },
            "runtime": {
                "start_ns": us([r[0] for r in rt]),
                "end_ns": us([r[1] for r in rt]),
                "pid": [1] * len(rt),
                "tid": [r[2] for r in rt],
                "correlation_id": [r[3] for r in rt],
                "name": [r[4] for r in rt],
            },
            "kernels": {
                "start_ns": us([k[0] for k in ks]),
                "end_ns": us([k[1] for k in ks]),
                "correlation_id": [k[2] for k in ks],
                "name": [k[3] for k in ks],
                "device_id": [0] * len(ks),
                "device_type": ["cuda"] * len(ks),
                "stream_id": [k[4] for k in ks],
                "pid": [1] * len(ks),
            },
            "sync": {
                "start_ns": us([220, 230]),
                "end_ns": us([221, 275]),
                "device_id": [0, 0],
                "stream_id": [7, 7],
                "correlation_id": [7, 9],
                "sync_kind": ["stream_wait_event", "stream"],
            },
            "steps": {
                "step": [1, 2, 3, 4],
                "start_ns": us([0, 100, 200, 300]),
                "end_ns": us([100, 200, 300, 400]),
            },
        },
    )


def test_path_worked_out_by_hand(tmp_path: Path) -> None:
    seg = cp.run(_hand(tmp_path))
    assert seg.schema == outputs.CRITICAL_PATH.arrow_schema()
    got = [
        (r["start_ns"] // US, r["end_ns"] // US, r["resource"], r["name"], r["category"])
        for r in seg.to_pylist()
    ]
    assert got == PATHS
    steps = seg.column("step").to_pylist()
    assert steps == [k for k, path in STEPS for _ in path]
    assert seg.column("seq").to_pylist() == [i for _k, path in STEPS for i in range(len(path))]

    # per resource: the hand path's sums
    by = cp.run(_hand(tmp_path / "b"), cp.CriticalPathConfig(by="resource"))
    assert by.schema == outputs.CRITICAL_PATH_RESOURCE.arrow_schema()
    want: dict[tuple[int, str, str | None], int] = defaultdict(int)
    for step, path in STEPS:
        for a, b, res, _name, cat in path:
            want[(step, res, cat)] += (b - a) * US
    got_by = {(r["step"], r["resource"], r["category"]): r["path_ns"] for r in by.to_pylist()}
    assert got_by == dict(want)
    assert all(r["share"] == r["path_ns"] / (100 * US) for r in by.to_pylist())

    ops = cp.run(_hand(tmp_path / "c"), cp.CriticalPathConfig(by="op"))
    assert ops.schema == outputs.CRITICAL_PATH_OP.arrow_schema()
    first = ops.to_pylist()[0]  # the GEMMs K1 and K5: 77 us, then c (50 us)
    assert (first["name"], first["path_ns"], first["steps"]) == (SGEMM, 77 * US, 2)
    b_row = next(r for r in ops.to_pylist() if r["name"] == "b")
    assert (b_row["path_ns"], b_row["segments"]) == (30 * US, 2)
    assert b_row["share"] == 30 / 400


def test_bad_by(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="by must be one of"):
        cp.run(_hand(tmp_path), cp.CriticalPathConfig(by="kernel"))


@pytest.fixture(scope="module")
def resnet() -> Any:
    from tbdtrace.importers import kineto
    from tbdtrace.trace import from_tables

    path = fixture(RESNET)
    return path, from_tables(*kineto.import_files([path]))


def _raw_device(path: Path) -> dict[str, list[tuple[int, int]]]:
    """Kernels, copies and sets of the raw file, by name, as (start, end) in ns; copies and
    sets named as the timeline names them (Memcpy HtoD, ...)."""
    out: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for ev in rawkineto.load(path)["traceEvents"]:
        cat = ev.get("cat")
        if ev.get("ph") != "X" or cat not in rawkineto.KERNEL | rawkineto.MEMCPY | rawkineto.MEMSET:
            continue
        s = rawkineto.ns(ev["ts"])
        out[ev.get("name", "")].append((s, s + rawkineto.ns(ev.get("dur", 0))))
    return out


def test_resnet_paths_cover_each_step(resnet: Any) -> None:
    path, tr = resnet
    seg = cp.run(tr).to_pylist()
    steps = {(r["step"], r["step_start_ns"], r["step_ns"]) for r in seg}
    assert len(steps) == 6  # profiler steps 5..10
    for step, start, length in steps:
        rows = [r for r in seg if r["step"] == step]
        assert [r["seq"] for r in rows] == list(range(len(rows)))
        # contiguous, from the step's start to its end, adding up to its length
        assert rows[0]["start_ns"] == start and rows[-1]["end_ns"] == start + length
        assert all(a["end_ns"] == b["start_ns"] for a, b in zip(rows, rows[1:], strict=False))
        assert all(r["duration_ns"] == r["end_ns"] - r["start_ns"] > 0 for r in rows)
        assert sum(r["duration_ns"] for r in rows) == length

    # Device segments lie inside a kernel, copy or set of the same name in the raw file.
    raw = _raw_device(path)
    dev = [r for r in seg if r["resource"] in ("gpu_kernel", "copy", "memset")]
    assert dev, "the path reaches the GPU (through the steps' HtoD copies at least)"
    for r in dev:
        name = r["name"] if r["resource"] == "gpu_kernel" else None
        cands = raw[name] if name else [iv for k, v in raw.items() if "Memcpy" in k for iv in v]
        assert any(s <= r["start_ns"] and r["end_ns"] <= e for s, e in cands), r


def test_resnet_host_segments_are_innermost(resnet: Any) -> None:
    """Each cpu_op / cpu_runtime segment lies inside a range of that name on its thread
    with no deeper range of the thread overlapping it (read from the trace's tables by a
    loop written here)."""
    _path, tr = resnet
    seg = cp.run(tr).to_pylist()
    ranges: dict[tuple[int, int], list[tuple[int, int, str]]] = defaultdict(list)
    for table in ("ops", "runtime"):
        t = tr.table(table, ["start_ns", "end_ns", "pid", "tid", "name"]).to_pydict()
        for s, e, p, th, n in zip(*t.values(), strict=True):
            if e > s:
                ranges[(p, th)].append((s, e, str(n)))
    host = [r for r in seg if r["resource"] in ("cpu_op", "cpu_runtime")]
    assert len(host) > 1000
    for r in host[::211]:  # a sample: the check scans all of a thread's ranges
        rs = ranges[(r["pid"], r["tid"])]
        a, b = r["start_ns"], r["end_ns"]
        own = [x for x in rs if x[0] <= a and b <= x[1] and x[2] == r["name"]]
        assert own, r
        inner = min(own, key=lambda x: x[1] - x[0])
        deeper = [
            x
            for x in rs
            if x[0] < b and a < x[1] and inner[0] <= x[0] and x[1] <= inner[1] and x != inner
        ]
        assert not deeper, (r, deeper[:3])


def test_report_json_agrees_with_the_pass(resnet: Any, tmp_path: Path) -> None:
    """The section's tables against the pass's own, on the real trace."""
    path, tr = resnet
    by = cp.run(tr, cp.CriticalPathConfig(by="resource")).to_pylist()
    # the report covers the measured steps: all six here (no warm-up flags)
    out = tmp_path / "r.json"
    assert main(["report", str(path), "--critical-path", "--format", "json", "-o", str(out)]) == 0
    doc = json.loads(out.read_text())["critical_path"]
    assert doc["included"] is True
    totals: dict[tuple[str, str | None], int] = defaultdict(int)
    for r in by:
        totals[(r["resource"], r["category"])] += r["path_ns"]
    assert {(r["resource"], r["category"]): r["path_ns"] for r in doc["resources"]} == totals
    assert len(doc["steps"]) == 6
    for s in doc["steps"]:  # the per-resource columns add up to the step
        assert sum(s[f"{x}_ns"] for x in cp.RESOURCES) == s["step_ns"]
    assert doc["top_ops"][0]["path_ns"] == max(r["path_ns"] for r in doc["top_ops"])


def test_report_views_of_the_hand_path(tmp_path: Path) -> None:
    """JSON, CSV and text of the hand-made trace's section: the sums worked out above."""
    tr = _hand(tmp_path)
    want: dict[tuple[str, str | None], int] = defaultdict(int)
    for a, b, res, _name, cat in PATHS:
        want[(res, cat)] += (b - a) * US
    out = tmp_path / "r.json"
    assert (
        main(["report", str(tr.path), "--critical-path", "--format", "json", "-o", str(out)]) == 0
    )
    doc = json.loads(out.read_text())["critical_path"]
    assert {(r["resource"], r["category"]): r["path_ns"] for r in doc["resources"]} == want
    assert [r["per_step_ns"] for r in doc["resources"]] == [
        r["path_ns"] / 4 for r in doc["resources"]
    ]
    assert [(s["step"], s["cpu_op_ns"], s["gpu_kernel_ns"]) for s in doc["steps"]] == [
        (1, 23 * US, 40 * US),
        (2, 82 * US, 0),
        (3, 35 * US, 53 * US),
        (4, 60 * US, 30 * US),
    ]

    folder = tmp_path / "csv"
    assert (
        main(["report", str(tr.path), "--critical-path", "--format", "csv", "-o", str(folder)]) == 0
    )
    with open(folder / "critical_path.resources.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert {(r["resource"], r["category"] or None): int(r["path_ns"]) for r in rows} == want

    txt = tmp_path / "r.txt"
    assert main(["report", str(tr.path), "--critical-path", "-o", str(txt)]) == 0
    text = txt.read_text()
    assert "Critical path by resource" in text and "Top ops on the critical path" in text
    assert "GPU kernel: gemm" in text and "77.000 us" in text  # K1 and K5 on the paths

    off = tmp_path / "off.json"
    assert main(["report", str(tr.path), "--format", "json", "-o", str(off)]) == 0
    sec = json.loads(off.read_text())["critical_path"]
    assert sec["included"] is False and "--critical-path" in sec["how"]


# The rows the hand path goes through, as the timeline names its slices.
MARKED = sorted(
    ["fwd", "item", "a", "b", "c", "d", "f", "g", SGEMM, SGEMM]
    + [ELEMENTWISE] * 3
    + ["cudaStreamSynchronize"] * 2
    + ["cudaDeviceSynchronize"]
    + ["cudaLaunchKernel"] * 5  # K1's, K5's and K8's launches (delays), two calls on the path
)


def test_chrome_export_marks_the_path(tmp_path: Path) -> None:
    tr = _hand(tmp_path)
    out = tmp_path / "t.json"
    assert (
        main(["export", str(tr.path), "--format", "chrome", "-o", str(out), "--critical-path"]) == 0
    )
    events = json.loads(out.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    track = [e for e in events if str(e.get("cat", "")).startswith("critical_path,")]
    got = sorted((e["ts"], e["ts"] + e["dur"], e["args"]["resource"]) for e in track)
    assert got == sorted((float(a), float(b), res) for a, b, res, *_ in PATHS)
    assert {e["args"]["step"] for e in track} == {1, 2, 3, 4}
    flagged = [e for e in events if e.get("args", {}).get("critical_path") == 1]
    assert sorted(e["name"] for e in flagged) == MARKED

    plain = tmp_path / "plain.json"
    assert main(["export", str(tr.path), "--format", "chrome", "-o", str(plain)]) == 0
    assert "critical_path" not in plain.read_text()


def test_perfetto_export_marks_the_path(tmp_path: Path) -> None:
    from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb

    tr = _hand(tmp_path)
    out = tmp_path / "t.perfetto-trace"
    assert main(["export", str(tr.path), "-o", str(out), "--critical-path"]) == 0
    trace = pb.Trace()
    trace.ParseFromString(out.read_bytes())
    cats: dict[int, str] = {}
    for p in trace.packet:
        if p.HasField("interned_data"):
            cats.update({c.iid: c.name for c in p.interned_data.event_categories})
    begins = [
        (p.timestamp, cats[p.track_event.category_iids[0]])
        for p in trace.packet
        if p.HasField("track_event") and p.track_event.type == pb.TrackEvent.TYPE_SLICE_BEGIN
    ]
    on_path = sorted((t, c) for t, c in begins if c.startswith("critical_path,"))
    assert on_path == sorted((a * US, f"critical_path,{res}") for a, _b, res, *_ in PATHS)


def test_trace_without_steps_gets_one_path_over_its_host_span() -> None:
    """HTA's event-sync fixture has no steps: one path per rank, from the first host
    range (cpu_op, cuda_runtime in the raw file) to the last one's end."""
    from tbdtrace.importers import kineto
    from tbdtrace.trace import from_tables

    path = fixture("kineto/hta/event_sync_trace.json.gz")
    host = [
        (rawkineto.ns(e["ts"]), rawkineto.ns(e["ts"]) + rawkineto.ns(e.get("dur", 0)))
        for e in rawkineto.load(path)["traceEvents"]
        if e.get("ph") == "X" and e.get("cat") in ("cpu_op", "cuda_runtime")
    ]
    lo, hi = min(s for s, _ in host), max(e for _, e in host)
    seg = cp.run(from_tables(*kineto.import_files([path]))).to_pylist()
    assert {r["step"] for r in seg} == {None}
    assert (seg[0]["start_ns"], seg[-1]["end_ns"]) == (lo, hi)
    assert sum(r["duration_ns"] for r in seg) == hi - lo == seg[0]["step_ns"]
    # the last matmul's kernel, which cudaDeviceSynchronize waited for, is on the path
    raw = _raw_device(path)
    gemm = [r for r in seg if r["resource"] == "gpu_kernel"]
    assert [(r["start_ns"], r["end_ns"]) for r in gemm] == [max(raw[gemm[0]["name"]])]
    assert [r["name"] for r in seg if r["resource"] == "sync_wait"] == ["cudaDeviceSynchronize"]
