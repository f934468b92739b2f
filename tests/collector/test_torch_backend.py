"""torch backend on a real CPU training loop, checked against torch.profiler's own views
of the same profiler object (key_averages() and the FunctionEvent tree)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch
from torch.profiler import record_function

import tbdtrace
from tbdtrace.collector import CaptureConfig, choose_backend
from tbdtrace.collector.host_sampler import SamplerConfig
from tbdtrace.collector.torch_backend import BOOKKEEPING_OPS, leaf_mask
from tbdtrace.errors import TraceError

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

STEPS = 3


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[tbdtrace.Trace, object]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 4))
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
    g = ops.groupby("name", observed=True).agg(
        n=("dur_ns", "size"), t=("dur_ns", "sum"), f=("flops", "sum")
    )
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
    mine = [
        json.loads(v) for v in ops[ops.name == "aten::addmm"].sort_values("start_ns").input_shapes
    ]
    theirs = [
        e.input_shapes
        for e in sorted(
            prof.events(),  # type: ignore[attr-defined]
            key=lambda e: e.time_range.start,
        )
        if e.name == "aten::addmm"
    ]
    assert mine == theirs and len(mine) == 2 * STEPS


def test_leaf_ops_are_cpu_kernels(run: tuple[tbdtrace.Trace, object]) -> None:
    tr, prof = run
    k = tr.table("kernels").to_pandas()
    assert set(k.device_type.astype(str)) == {"cpu"}
    ka_names = {e.key for e in prof.key_averages()}  # type: ignore[attr-defined]
    markers = set(tr.table("markers").to_pandas().name.astype(str)) | {"ProfilerStep*"}
    # Independent: walk torch's own FunctionEvent tree (annotations are not ops).
    evs = [e for e in prof.events() if e.name not in markers]  # type: ignore[attr-defined]

    def ops_below(e):  # op descendants, looking through annotations
        for c in e.cpu_children:
            if c.name in markers:
                yield from ops_below(c)
            else:
                yield c
                yield from ops_below(c)

    def enclosing(e):
        p = e.cpu_parent
        while p is not None:
            if p.name not in markers:
                yield p
            p = p.cpu_parent

    def is_compute_leaf(e):
        return not any(d.name not in BOOKKEEPING_OPS for d in ops_below(e))

    want = Counter()
    for e in evs:
        if e.name not in BOOKKEEPING_OPS:
            ok = is_compute_leaf(e)
        else:
            ok = not any(True for _ in ops_below(e)) and not any(
                p.name not in BOOKKEEPING_OPS and is_compute_leaf(p) for p in enclosing(e)
            )
        want[e.name] += ok
    want = +want
    assert Counter(k.name.astype(str)) == want
    assert set(want) <= ka_names
    # The matmuls of the Linear layers are kernels (they allocate their outputs inside).
    assert any(n in want for n in ("aten::addmm", "aten::mm"))


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
    assert mem.address.notna().all() and (mem.bytes >= 0).all()
    assert set(mem.level.astype(str)) == {"allocated"}
    # The memory classifier ran: the model's parameters (live at start) are weights, and
    # SGD's gradients are gradients (docs/MEMORY.md).
    cats = set(mem.category.dropna().astype(str))
    assert {"weights", "gradients"} <= cats, cats
    hs = tr.table("host_samples").to_pandas()
    assert {"cpu_util", "rss_bytes"} <= set(hs.metric.astype(str))
    assert tr.meta["backend"] == "torch" and tr.meta["source"] == "torch"
    assert "backend_choice" in tr.meta["extra"]


def test_leaf_mask_nesting() -> None:
    # Table-driven: outer [0,10] holds a [1,4] and b [5,9]; b holds c [6,7]; d on another
    # thread overlaps outer; e is a python_function (never a leaf).
    ops = {
        "start_ns": [0, 1, 5, 6, 2, 0],
        "end_ns": [10, 4, 9, 7, 3, 10],
        "tid": [1, 1, 1, 1, 2, 1],
        "category": ["cpu_op"] * 5 + ["python_function"],
    }
    assert leaf_mask(ops) == [False, True, False, True, True, False]


def test_bookkeeping_children_keep_a_compute_leaf() -> None:
    # conv [0,10] restrides its output (as_strided_ [1,2]); add [20,30] holds view [21,22];
    # a top-level empty [40,41] is a kernel of its own; copy_ [50,60] holds fill_ [51,52].
    names = [
        "aten::conv",
        "aten::as_strided_",
        "aten::add",
        "aten::view",
        "aten::empty",
        "aten::copy_",
        "aten::fill_",
    ]
    ops = {
        "start_ns": [0, 1, 20, 21, 40, 50, 51],
        "end_ns": [10, 2, 30, 22, 41, 60, 52],
        "tid": [1] * 7,
        "category": ["cpu_op"] * 7,
        "name": names,
    }
    assert leaf_mask(ops) == [True, False, True, False, True, False, True]


def test_backend_choice() -> None:
    assert choose_backend("torch") == ("torch", "requested")
    name, why = choose_backend("auto")
    assert name in ("torch", "cupti") and why.startswith("auto")
    with pytest.raises(TraceError, match="unknown backend"):
        choose_backend("tpu")


CHILD = """
import json, os, sys, time
# The profiler, started before this program, left torch._inductor (and torch._dynamo
# with it) unloaded; the optimizer below loads them itself.
print("inductor loaded at start:", "torch._inductor" in sys.modules)
import torch
from torch.profiler import record_function
torch.manual_seed(0)
m = torch.nn.Linear(8, 4)
opt = torch.optim.SGD(m.parameters(), lr=0.1)
steps = open(os.environ["TBDTRACE_STEPS_FILE"], "a")
for i in range(2):
    t0 = time.time_ns()
    with record_function(f"ProfilerStep#{i}"):
        opt.zero_grad(); m(torch.randn(5, 8)).sum().backward(); opt.step()
    steps.write(json.dumps({"step": i, "start_ns": t0, "end_ns": time.time_ns(),
                            "samples": 5, "warmup": False, "loss": 1.0,
                            "pid": os.getpid()}) + "\\n")
steps.close()
print(os.getpid())
sys.exit(3)
"""


def test_capture_command_profiles_an_unchanged_child(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(CHILD)
    user_site = tmp_path / "usersite"
    user_site.mkdir()
    marker = tmp_path / "user_sitecustomize_ran"
    (user_site / "sitecustomize.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    env = dict(os.environ, PYTHONPATH=str(user_site))
    out = tmp_path / "run.tbd"
    cp = subprocess.run(
        [
            sys.executable,
            "-m",
            "tbdtrace",
            "capture",
            "--backend",
            "torch",
            "--sample-hz",
            "20",
            "-o",
            str(out),
            "--",
            sys.executable,
            str(script),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert cp.returncode == 3, cp.stderr[-2000:]  # the child's exit code
    child_pid = int(cp.stdout.strip().splitlines()[-1])
    assert "inductor loaded at start: False" in cp.stdout.splitlines()
    assert marker.exists()  # the user's own sitecustomize still ran
    tr = tbdtrace.open(out)
    assert tr.meta["backend"] == "torch" and tr.meta["command"][-1] == str(script)
    ops = tr.table("ops").to_pandas()
    assert set(ops.pid) == {child_pid} and (ops.name == "aten::addmm").sum() == 2
    st = tr.table("steps").to_pandas()
    assert sorted(st.source.astype(str)) == ["harness"] * 2 + ["profiler_step"] * 2
    hs = tr.table("host_samples").to_pandas()
    assert (hs.metric.astype(str) == "rss_bytes").sum() >= 2
    assert tr.table("kernels").num_rows > 0
    # Memory labelled post hoc by default: Linear(8, 4) is 36 float32 parameters, and
    # the last step's gradients are live at exit.
    mem = tr.meta["extra"]["torch_memory"]
    assert mem["mode"] == "posthoc" and mem["labeller"]["iterations"] == 2
    assert mem["labeller"]["optimizer_steps"] == 2
    from tbdtrace.analysis.passes import memory

    last = memory.timeline(tr).to_pylist()[-1]
    assert last["weights_bytes"] == 4 * 36 and last["gradients_bytes"] == 4 * 36


def test_profiler_still_reads_inductors_cudagraphs_once_inductor_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backend keeps torch from importing inductor at start (the child above); once
    inductor is loaded (here: tests/conftest.py loads torch._dynamo, which loads it), the
    profiler reads its ``triton.cudagraphs`` setting as torch.profiler alone does."""
    import sys

    import torch._inductor.config as inductor_config

    from tbdtrace.collector.torch_backend import TorchBackend, TorchConfig

    assert "torch._inductor" in sys.modules
    for var in ("DISABLE_CUPTI_LAZY_REINIT", "TEARDOWN_CUPTI"):  # start_trace may set them
        monkeypatch.setenv(var, "unset")
        monkeypatch.delenv(var)
    for value in (True, False):
        with inductor_config.patch({"triton.cudagraphs": value}):
            backend = TorchBackend(TorchConfig(profile_memory=False, with_flops=False))
            backend.start()
            torch.ones(2).sum()
            backend.stop()
        assert backend.profiler.has_cudagraphs is value
    assert "_inductor" in torch._lazy_modules  # type: ignore[attr-defined]


def test_capture_command_errors_are_one_line(tmp_path: Path) -> None:
    cases = [
        (["--", "/bin/true"], 1, "--backend torch needs a Python program that imports torch"),
        (["--", str(tmp_path / "missing")], 1, "cannot start"),
        ([], 2, "no command given"),
    ]
    for tail, rc, msg in cases:
        cp = subprocess.run(
            [
                sys.executable,
                "-m",
                "tbdtrace",
                "capture",
                "--backend",
                "torch",
                "-o",
                str(tmp_path / "o.tbd"),
                *tail,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert cp.returncode == rc and msg in cp.stderr, (tail, cp.stderr)
        assert "Traceback" not in cp.stderr and len(cp.stderr.strip().splitlines()) == 1


def test_auto_backend_without_gpu_is_torch_and_says_why(tmp_path: Path) -> None:
    from tbdtrace.collector import gpu_usable

    usable, _ = gpu_usable()
    cfg = CaptureConfig(backend="auto", sampler=SamplerConfig(rate_hz=20.0))
    with tbdtrace.capture(tmp_path / "a.tbd", config=cfg) as cap:
        torch.ones(4, 4).sum()
    tr = tbdtrace.open(cap.path)
    if not usable:  # this machine: no NVIDIA driver
        assert tr.meta["backend"] == "torch"
        assert tr.meta["extra"]["backend_choice"].startswith("auto: no usable GPU")
        assert tr.meta["extra"]["host_sampler"]["nvml"].startswith("unavailable")
    assert tr.table("ops").num_rows > 0
