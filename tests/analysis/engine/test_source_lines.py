"""The user's Python line behind each kernel (tbdtrace.analysis.engine.source_lines).

A hand-written Kineto trace whose expected lines follow from its events (each case
described where it is built), and the real TraceLens fixtures with Python stacks, whose
expected attribution a small reader of the raw JSON computes here (Decimal times, the
events' own correlation ids, this file's own library rule for the fixture's packages).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import tbdtrace
from tbdtrace.analysis.engine.source_lines import is_user_file, parse_call, parse_frame
from tbdtrace.analysis.passes.hotspots import HotspotsConfig
from tests import rawkineto
from tests.conftest import fixture


def test_user_and_library_files() -> None:
    user = [
        "train.py",
        "moca/library/profiling/profile.py",
        "/home/me/proj/model.py",
        "<stdin>",
        "<ipython-input-3-1a2b>",
        "C:/work/train.py",
        "test/train.py",  # a user folder named like a standard-library package
        "code/model.py",
    ]
    library = [
        "torch/nn/modules/module.py",
        "transformers/models/bert/modeling_bert.py",
        "threading.py",
        "multiprocessing/spawn.py",
        "json/decoder.py",
        "concurrent/futures/thread.py",
        "<frozen importlib._bootstrap>",
        "<string>",
        "/usr/lib/python3.11/threading.py",
        "/venv/lib/python3.11/site-packages/timm/layers/mlp.py",
        "/usr/lib/python3/dist-packages/numpy/core/numeric.py",
        "__editable___tbdtrace_0_1_0_finder.py",
        "sitecustomize.py",
        "tbdtrace/collector/profiler_child.py",
    ]
    assert [p for p in user if not is_user_file(p)] == []
    assert [p for p in library if is_user_file(p)] == []
    assert parse_frame("torch/nn/modules/module.py(1501): _call_impl") == (
        "torch/nn/modules/module.py",
        1501,
        "_call_impl",
    )
    assert parse_frame("<built-in method mm of type object at 0x7f>") is None
    assert parse_frame("nn.Module: Linear_0") is None
    assert parse_call("model.py:7") == ("model.py", 7)
    assert parse_call("model.py") is None


def _x(cat: str, name: str, ts: int, dur: int, tid: int = 1, **args: Any) -> dict[str, Any]:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": 1,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def _launch(
    ts: int, corr: int, k_ts: int, k_dur: int, name: str, tid: int = 1
) -> list[dict[str, Any]]:
    run = _x("cuda_runtime", "cudaLaunchKernel", ts, 2, tid, correlation=corr)
    kern = {
        "ph": "X",
        "cat": "kernel",
        "name": name,
        "pid": 0,
        "tid": 7,
        "ts": k_ts,
        "dur": k_dur,
        "args": {"device": 0, "stream": 7, "correlation": corr},
    }
    return [run, kern]


PY = "python_function"


def _synthetic(path: Path) -> None:
    ev = [
        _x(PY, "train.py(1): <module>", 0, 1000),
        _x(PY, "train.py(10): step", 10, 900, CallFrom="train.py:30"),
        # K1: step -> torch's Module call (from train.py:12) -> the user's forward ->
        # torch.mm called at model.py:7: the line is model.py:7, in forward.
        _x(PY, "torch/nn/modules/module.py(1500): _call_impl", 20, 300, CallFrom="train.py:12"),
        _x(PY, "model.py(5): forward", 30, 250, CallFrom="torch/nn/modules/module.py:1510"),
        _x(PY, "<built-in method mm of type object at 0x1>", 40, 50, CallFrom="model.py:7"),
        _x("cpu_op", "aten::mm", 45, 40),
        *_launch(50, 1, 100, 20, "gemm_k"),
        # K2: an op straight under step (operator syntax, no Python call recorded): the
        # frame's own line, train.py:10.
        _x("cpu_op", "aten::add", 400, 20),
        *_launch(405, 2, 200, 10, "add_k"),
        # K3: under a builtin whose CallFrom is not text (ignored: call_from null), so
        # again step's frame line.
        _x(PY, "<built-in function print>", 500, 50, CallFrom=7),
        *_launch(510, 3, 300, 30, "print_k"),
        # K5: a user function called by a library wrapper that step called: the
        # innermost user frame is helper.fn; the call from user code (the wrapper,
        # called at train.py:20) is outside it, so fn's frame line, helper.py:3.
        _x(PY, "torch/utils/checkpoint.py(50): wrapper", 600, 200, CallFrom="train.py:20"),
        _x(PY, "helper.py(3): fn", 610, 100, CallFrom="torch/utils/checkpoint.py:60"),
        *_launch(650, 5, 400, 50, "ckpt_k"),
        # K4: a thread with library frames only: not attributed.
        _x(PY, "threading.py(1000): run", 0, 1000, tid=2, CallFrom="threading.py:990"),
        *_launch(700, 4, 500, 5, "bg_k", tid=2),
    ]
    path.write_text(json.dumps({"traceEvents": ev}))


EXPECTED = {  # source -> (function, line_kind, kernel ns)
    "model.py:7": ("forward", "call", 20_000),
    "train.py:10": ("step", "frame", 40_000),
    "helper.py:3": ("fn", "frame", 50_000),
    "<unattributed>": (None, None, 5_000),
}
KERNEL_SOURCE = {
    "gemm_k": "model.py:7",
    "add_k": "train.py:10",
    "print_k": "train.py:10",
    "ckpt_k": "helper.py:3",
    "bg_k": None,
}


def test_synthetic_trace_lines(tmp_path: Path) -> None:
    path = tmp_path / "stack.json"
    _synthetic(path)
    from tbdtrace import importers

    tables, _ = importers.import_files([path])
    ops = [
        dict(zip(tables["ops"], row, strict=True))
        for row in zip(*(c.to_pylist() for c in tables["ops"].values()), strict=True)
    ]
    a = tbdtrace.analyze(path)
    by_name = {r["name"]: r["call_from"] for r in ops}
    assert by_name["<built-in method mm of type object at 0x1>"] == "model.py:7"
    assert by_name["<built-in function print>"] is None  # a number, not text
    assert by_name["train.py(1): <module>"] is None  # absent
    src = a.hotspots(HotspotsConfig(top=None, by="source")).to_pylist()
    total = sum(v[2] for v in EXPECTED.values())
    got = {r["source"]: (r["function"], r["line_kind"], r["total_ns"]) for r in src}
    assert got == EXPECTED
    for r in src:
        assert r["share"] == pytest.approx(r["total_ns"] / total)
    assert [r["source"] for r in src] == sorted(EXPECTED, key=lambda s: -EXPECTED[s][2])
    assert a.sources(top=None).to_pylist() == src
    kern = {
        r["name"]: (r["source"], r["source_share"])
        for r in a.hotspots(HotspotsConfig(top=None)).to_pylist()
    }
    assert {k: v[0] for k, v in kern.items()} == KERNEL_SOURCE
    assert all(v[1] == 1.0 for k, v in kern.items() if v[0] is not None)


def test_hotspots_by_source_without_stacks_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "nostack.json"
    ev = [_x("cpu_op", "aten::mm", 0, 100), *_launch(10, 1, 50, 20, "gemm_k")]
    path.write_text(json.dumps({"traceEvents": ev}))
    cp = subprocess.run(
        [sys.executable, "-m", "tbdtrace", "hotspots", str(path), "--by", "source"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cp.returncode == 1
    lines = cp.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Python stacks" in lines[0] and str(path) in lines[0]
    assert "--with-stack" in lines[0]
    # The kernel table still has its source column, null.
    rows = tbdtrace.analyze(path).hotspots().to_pylist()
    assert [r["source"] for r in rows] == [None]


# The TraceLens fixtures' user code is the "moca" package; torch, transformers, tqdm and
# the standard library are library code there.
_FIX_LIBRARY = ("torch/", "transformers/", "tqdm/", "<")
_FIX_STDLIB = {"threading", "multiprocessing", "dataclasses", "enum", "inspect", "typing"}
_FRAME = re.compile(r"^(.+)\((\d+)\): (.+)$")


def _fixture_user(name: str) -> tuple[str, str] | None:
    m = _FRAME.match(name)
    if not m:
        return None
    file = m.group(1)
    if file.startswith(_FIX_LIBRARY) or re.split(r"[/.]", file)[0] in _FIX_STDLIB:
        return None
    return f"{file}:{m.group(2)}", m.group(3)


def _expected_from_raw(path: Path) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
    """(source -> kernel ns, kernel name -> source -> ns) by reading the raw events: each
    kernel's runtime call by correlation, the user python_function frames on the call's
    thread containing its start, the latest-starting one (the fixtures have no
    CallFrom, so the line is the frame's own)."""
    doc = rawkineto.load(path)
    ev = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    assert not any("CallFrom" in (e.get("args") or {}) for e in ev)
    runtime = {
        e["args"]["correlation"]: e
        for e in ev
        if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})
    }
    frames: dict[tuple[Any, Any], list[tuple[int, int, tuple[str, str]]]] = defaultdict(list)
    for e in ev:
        if e.get("cat") == "python_function" and (u := _fixture_user(e["name"])):
            s = rawkineto.ns(e["ts"])
            frames[(e["pid"], e["tid"])].append((s, s + rawkineto.ns(e["dur"]), u))
    per_source: dict[str, int] = defaultdict(int)
    per_kernel: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for k in (e for e in ev if e.get("cat") == "kernel"):
        dur = rawkineto.ns(k["dur"])
        r = runtime.get(k["args"].get("correlation"))
        src = "<unattributed>"
        if r is not None:
            t = rawkineto.ns(r["ts"])
            inside = [f for f in frames[(r["pid"], r["tid"])] if f[0] <= t <= f[1]]
            if inside:
                src = max(inside, key=lambda f: (f[0], -f[1]))[2][0]
        per_source[src] += dur
        per_kernel[k["name"]][src] += dur
    return dict(per_source), per_kernel


@pytest.mark.parametrize(
    "rel",
    [
        "kineto/tracelens/gaunernst_bert-small-uncased__1016001.json.gz",
        "kineto/tracelens/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
    ],
)
def test_fixture_lines_match_a_raw_reading(rel: str) -> None:
    path = fixture(rel)
    per_source, per_kernel = _expected_from_raw(path)
    assert len(per_source) >= 1 and sum(per_source.values()) > 0
    a = tbdtrace.analyze(path, window="all")  # every kernel, as the raw reading
    src = a.hotspots(HotspotsConfig(top=None, by="source")).to_pylist()
    assert {r["source"]: r["total_ns"] for r in src} == per_source
    assert all(r["line_kind"] == "frame" for r in src if r["source"] != "<unattributed>")
    # The kernel table's source: each kernel's line with most of its time.
    for r in a.hotspots(HotspotsConfig(top=None)).to_pylist():
        want = per_kernel[r["name"]]
        best = max(want.values())
        if want.get("<unattributed>") == best:
            continue  # no user line holds most of it
        assert want[r["source"]] == best, r["name"]
        assert r["source_share"] == pytest.approx(best / sum(want.values()))
    # The API, the JSON and the CSV of the command give the same rows.
    cp = subprocess.run(
        [
            sys.executable,
            "-m",
            "tbdtrace",
            "hotspots",
            str(path),
            "--by",
            "source",
            "--window",
            "all",
            "--top",
            "1000",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cp.returncode == 0, cp.stderr
    rows = json.loads(cp.stdout)["rows"]
    assert {r["source"]: r["total_ns"] for r in rows} == per_source
    assert sum(Decimal(str(r["share"])) for r in rows) == pytest.approx(1)
