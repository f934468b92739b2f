"""Memory advice (docs/METRICS.md "Memory advice"): the peak by op and by module,
fragmentation and headroom, on two PyTorch-profiler traces with memory events, ops and
modules (TraceLens's fixtures), against a reading of the raw JSON written here
(tests/rawkineto.py loads it), and the same figures in the JSON, CSV, text and API."""

from __future__ import annotations

import csv
import io
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

import tbdtrace
from tbdtrace.analysis.passes.memory_advice import MemoryAdviceConfig
from tbdtrace.report import html
from tests import rawkineto
from tests.conftest import fixture
from tests.inprocess import tbd

TRACES = [
    "kineto/tracelens/gaunernst_bert-small-uncased__1016001.json.gz",
    "kineto/tracelens/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz",
]


def _expected(src: Path) -> dict[str, Any]:
    """The advice from the raw file: CUDA device 0's [memory] events, the peak of the
    allocator's Total Allocated, the blocks live then (allocs paired with the next free
    of their address), each given to the outermost cpu_op (or the innermost
    ``nn.Module:`` range) on its thread containing it."""
    events = rawkineto.load(src)["traceEvents"]
    mem = [
        e
        for e in events
        if e.get("name") == "[memory]"
        and e["args"].get("Device Type") == 1
        and e["args"].get("Device Id") == 0
    ]
    mem.sort(key=lambda e: e["ts"])  # stable: file order within one time
    peak = max(e["args"]["Total Allocated"] for e in mem)
    at = next(i for i, e in enumerate(mem) if e["args"]["Total Allocated"] == peak)
    reserved_at_peak = mem[at]["args"]["Total Reserved"]
    # pair each free with the latest open alloc of its address; live at the peak: allocated
    # at or before the peak event and not freed by then
    open_by_addr: dict[int, list[int]] = defaultdict(list)
    freed_at: dict[int, int] = {}
    for i, e in enumerate(mem):
        a = e["args"]
        if a["Bytes"] > 0:
            open_by_addr[a["Addr"]].append(i)
        elif open_by_addr[a["Addr"]]:
            freed_at[open_by_addr[a["Addr"]].pop()] = i
    live = [
        e
        for i, e in enumerate(mem)
        if e["args"]["Bytes"] > 0 and i <= at and freed_at.get(i, len(mem)) > at
    ]
    ranges: dict[tuple[int, int], list[tuple[Decimal, Decimal, str, bool]]] = defaultdict(list)
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in ("cpu_op", "python_function"):
            continue
        name = str(e["name"])
        is_module = name.startswith("nn.Module:")
        if e["cat"] == "cpu_op" or is_module:
            ranges[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], name, is_module))

    def owner(alloc: dict[str, Any], module: bool) -> str | None:
        t = alloc["ts"]
        around = [
            r for r in ranges[(alloc["pid"], alloc["tid"])] if r[3] == module and r[0] <= t <= r[1]
        ]
        if not around:
            return None
        pick = max(around, key=lambda r: r[0]) if module else min(around, key=lambda r: r[0])
        return pick[2]

    out: dict[str, Any] = {"peak": peak, "reserved_at_peak": reserved_at_peak}
    for by, module in (("op", False), ("module", True)):
        acc: dict[str | None, list[int]] = defaultdict(lambda: [0, 0])
        for e in live:
            a = acc[owner(e, module)]
            a[0] += 1
            a[1] += e["args"]["Bytes"]
        out[by] = {k: tuple(v) for k, v in acc.items()}
        out["pre_existing"] = peak - sum(e["args"]["Bytes"] for e in live)
    props = rawkineto.load(src).get("deviceProperties") or []
    out["device_memory"] = next(p["totalGlobalMem"] for p in props if p["id"] == 0)
    out["reserved_peak"] = max(e["args"]["Total Reserved"] for e in mem)
    return out


def _rows_by_name(rows: list[dict[str, Any]]) -> tuple[dict[str | None, tuple[int, int]], int]:
    pre = [r for r in rows if r["pre_existing"]]
    assert len(pre) <= 1
    named = {r["name"]: (r["blocks"], r["bytes"]) for r in rows if not r["pre_existing"]}
    return named, (pre[0]["bytes"] if pre else 0)


@pytest.fixture(scope="module", params=TRACES, ids=lambda p: p.split("/")[-1][:20])
def case(request: pytest.FixtureRequest) -> tuple[Path, dict[str, Any], dict[str, Any]]:
    src = fixture(request.param)
    doc = json.loads(tbd("report", str(src), "--window", "all", "--format", "json").stdout)
    return src, doc, _expected(src)


def test_peak_by_op_and_module_match_the_raw_file(case) -> None:
    _, doc, want = case
    adv = doc["memory"]["advice"]
    assert adv["peak_bytes"] == doc["memory"]["peak_bytes"] == want["peak"]
    for by in ("op", "module"):
        rows = adv[f"peak_by_{by}"]
        named, pre = _rows_by_name(rows)
        assert named == want[by], by
        assert pre == want["pre_existing"], by
        assert sum(r["bytes"] for r in rows) == want["peak"]
        for r in rows:
            assert r["share"] == pytest.approx(r["bytes"] / want["peak"], rel=1e-12)
        assert [r["bytes"] for r in rows] == sorted((r["bytes"] for r in rows), reverse=True)
    # the ops a reader acts on, not the allocator's own calls
    assert not any(str(n).startswith(("aten::empty", "nn.Module")) for n in want["op"])
    assert any(n is not None and n.startswith("aten::") for n in want["op"])


def test_fragmentation_and_headroom_match_the_raw_file(case) -> None:
    _, doc, want = case
    adv = doc["memory"]["advice"]
    assert adv["reserved_at_peak_bytes"] == want["reserved_at_peak"]
    assert adv["fragmentation_bytes"] == want["reserved_at_peak"] - want["peak"] > 0
    assert adv["device_memory_bytes"] == want["device_memory"]
    assert adv["headroom_of"] == "reserved"
    assert adv["headroom_bytes"] == want["device_memory"] - want["reserved_peak"]


def test_api_csv_and_text_say_the_same(case) -> None:
    src, doc, _ = case
    adv = doc["memory"]["advice"]
    a = tbdtrace.analyze(src, window="all")
    for by in ("op", "module"):
        api = a.memory_advice(MemoryAdviceConfig(by=by)).to_pylist()
        assert [{k: r[k] for k in adv[f"peak_by_{by}"][0]} for r in api] == adv[f"peak_by_{by}"]
        assert {r["by"] for r in api} == {by}
        table = f"memory.advice.peak_by_{by}"
        out = tbd("report", str(src), "--window", "all", "--format", "csv", "--section", table)
        got = list(csv.DictReader(io.StringIO(out.stdout)))
        assert [(r["name"], int(r["bytes"])) for r in got] == [
            (r["name"] or "", r["bytes"]) for r in adv[f"peak_by_{by}"]
        ]
    text = tbd("report", str(src), "--window", "all").stdout
    top = adv["peak_by_op"][0]
    assert "Memory peak by op" in text and "Memory peak by module" in text
    assert ("(allocated before the trace)" if top["pre_existing"] else str(top["name"])) in text
    gib = adv["headroom_bytes"] / 2**30
    assert "Headroom on cuda:0" in text and f"{gib:.2f} GiB of" in text


def test_unknown_device_memory_says_unknown(tmp_path: Path) -> None:
    """A CUPTI capture of one H200 (committed): allocations without a thread are not
    attributed, and the device's memory is known; without the devices table, the
    headroom is unknown and the text says so."""
    gpu = Path(__file__).resolve().parents[3] / "tests/data/gpu/h200_resnet50_cupti"
    doc = json.loads(tbd("report", str(gpu), "--format", "json").stdout)
    adv = doc["memory"]["advice"]
    assert [r["name"] for r in adv["peak_by_op"]] == [None]
    assert adv["peak_by_op"][0]["bytes"] == doc["memory"]["peak_bytes"]
    dev = tbdtrace.open(gpu).table("devices").to_pylist()[0]
    assert adv["device_memory_bytes"] == dev["memory_bytes"]
    reserved = doc["memory"]["levels"]["reserved"]["peak_bytes"]
    assert adv["headroom_bytes"] == dev["memory_bytes"] - reserved
    text = tbd("report", str(gpu)).stdout
    assert "Memory peak by op: not attributed" in text
    # the same memory events without the device table: the headroom is unknown
    tr = tbdtrace.open(gpu)
    bare = tbdtrace.write(tmp_path / "bare", {"memory": tr.table("memory")}, dict(tr.meta))
    doc = json.loads(tbd("report", str(bare), "--format", "json").stdout)
    adv = doc["memory"]["advice"]
    assert adv["device_memory_bytes"] is None and adv["headroom_bytes"] is None
    assert adv["fragmentation_bytes"] is not None  # the reserved events are still there
    assert "Headroom on cuda:0, pid 877: unknown" in tbd("report", str(bare)).stdout
    page = html.render(doc)
    assert '<div class="v">unknown</div><div class="k">headroom (device memory -' in page
