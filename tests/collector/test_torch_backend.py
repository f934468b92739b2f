"""torch backend on a real CPU training loop, checked against torch.profiler's own views
of the same profiler object (key_averages() and the FunctionEvent tree)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
import torch
from torch.profiler import record_function

import tbdtrace
from tbdtrace.collector import CaptureConfig, choose_backend
from tbdtrace.collector.host_sampler import SamplerConfig
from tbdtrace.collector.torch_backend import leaf_mask
from tbdtrace.errors import TraceError

STEPS = 3


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[tbdtrace.Trace, object]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(),
                                torch.nn.Linear(64, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 32), torch.randint(0, 4, (16,))
    out = tmp_path_factory.mktemp("torch") / "run.tbd"
    cfg = CaptureConfig(backend="torch", sampler=SamplerConfig(rate_hz=50.0))
    with tbdtrace.capture(out, config=cfg) as cap:
        for i in range(STEPS):
            with record_function(f"ProfilerStep#{i}"):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
    return tbdtrace.open(cap.path), cap.backend.profiler


def test_ops_agree_with_key_averages(run: tuple[tbdtrace.Trace, object]) -> None:
    tr, prof = run
    ops = tr.table("ops").to_pandas()
    ops["dur_ns"] = ops.end_ns - ops.start_ns
    g = ops.groupby("name", observed=True).agg(n=("dur_ns", "size"), t=("dur_ns", "sum"),
                                               f=("flops", "sum"))
    ka = {e.key: e for e in prof.key_averages()}  # type: ignore[attr-defined]
    marker_names = set(tr.table("markers").to_pandas().name.astype(str))
    for name, row in g.iterrows():
        e = ka[name]
        assert row.n == e.count, name
        # Both come from the same events; the export rounds each to 1 ns.
        assert abs(row.t - e.cpu_time_total * 1000) <= row.n + 1e-6 * row.t, name
        assert int(row.f) == int(e.flops), name
    # Every profiler event is an op row, or a marker (annotations, ProfilerStep).
    # key_averages() groups ProfilerStep#N as "ProfilerStep*".
    assert set(ka) - set(g.index) <= marker_names | {"ProfilerStep*"}
    assert g.f.sum() > 0
    # Input shapes: those of the profiler's own FunctionEvents, op by op.
    mine = [json.loads(v) for v in ops[ops.name == "aten::addmm"].sort_values("start_ns")
            .input_shapes]
    theirs = [e.input_shapes for e in sorted(prof.events(),  # type: ignore[attr-defined]
              key=lambda e: e.time_range.start) if e.name == "aten::addmm"]
    assert mine == theirs and len(mine) == 2 * STEPS


def test_leaf_ops_are_cpu_kernels(run: tuple[tbdtrace.Trace, object]) -> None:
    tr, prof = run
    k = tr.table("kernels").to_pandas()
    assert set(k.device_type.astype(str)) == {"cpu"}
    ka_names = {e.key for e in prof.key_averages()}  # type: ignore[attr-defined]
    markers = set(tr.table("markers").to_pandas().name.astype(str)) | {"ProfilerStep*"}
    # Independent: FunctionEvents with no op child (annotations are not ops).
    evs = [e for e in prof.events() if e.name not in markers]  # type: ignore[attr-defined]
    want = Counter(e.name for e in evs
                   if not [c for c in e.cpu_children if c.name not in markers])
    assert Counter(k.name.astype(str)) == want
    assert set(want) <= ka_names


def test_steps_markers_memory_and_meta(run: tuple[tbdtrace.Trace, object]) -> None:
    tr, prof = run
    st = tr.table("steps").to_pandas()
    assert list(st.step) == list(range(STEPS)) and (st.end_ns > st.start_ns).all()
    mk = tr.table("markers").to_pandas()
    ka = {e.key: e.count for e in prof.key_averages()}  # type: ignore[attr-defined]
    opt = mk[mk.name.astype(str).str.startswith("Optimizer.step")]
    assert len(opt) == STEPS == ka[str(opt.name.iloc[0])]
    mem = tr.table("memory").to_pandas()
    assert len(mem) > 0 and set(mem.device_type.astype(str)) == {"cpu"}
    assert mem.address.notna().all() and (mem.bytes > 0).all()
    assert set(mem.level.astype(str)) == {"allocated"}
    hs = tr.table("host_samples").to_pandas()
    assert {"cpu_util", "rss_bytes"} <= set(hs.metric.astype(str))
    assert tr.meta["backend"] == "torch" and tr.meta["source"] == "torch"
    assert "backend_choice" in tr.meta["extra"]


def test_leaf_mask_nesting() -> None:
    # Table-driven: outer [0,10] holds a [1,4] and b [5,9]; b holds c [6,7]; d on another
    # thread overlaps outer; e is a python_function (never a leaf).
    ops = {"start_ns": [0, 1, 5, 6, 2, 0], "end_ns": [10, 4, 9, 7, 3, 10],
           "tid": [1, 1, 1, 1, 2, 1],
           "category": ["cpu_op"] * 5 + ["python_function"]}
    assert leaf_mask(ops) == [False, True, False, True, True, False]


def test_backend_choice() -> None:
    assert choose_backend("torch") == ("torch", "requested")
    name, why = choose_backend("auto")
    assert name in ("torch", "cupti") and why.startswith("auto")
    with pytest.raises(TraceError, match="unknown backend"):
        choose_backend("tpu")


