"""FLOPs from captures: the dispatch-level recorder that ``capture --backend cupti`` starts
in PyTorch children (run here on CPU tensors), and a CPU capture of ResNet-50 whose
matmul + convolution FLOPs match a per-layer count from the model's own layer shapes."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tbdtrace
from tbdtrace.analysis.passes import flops
from tbdtrace.collector.child_protocol import BOOTSTRAP_DIR
from tbdtrace.collector.torch_flops import SPOOL_ENV

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import torch
conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)
fc = torch.nn.Linear(8 * 8 * 8, 10)
x = torch.randn(2, 3, 16, 16)
y = fc(conv(x).flatten(1))
q = torch.randn(2, 4, 16, 8, requires_grad=True)
o = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
(y.sum() + o.sum()).backward()
"""


def _run_child(tmp_path: Path, script: str) -> tbdtrace.Trace:
    spool = tmp_path / "spool"
    spool.mkdir()
    (tmp_path / "child.py").write_text(script)
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(BOOTSTRAP_DIR), str(ROOT)]),
        TBDTRACE_PACKAGE_ROOT=str(ROOT),
        **{SPOOL_ENV: str(spool)},
    )
    env.pop("TBDTRACE_TORCH_MEMORY_SPOOL", None)
    cp = subprocess.run(
        [sys.executable, str(tmp_path / "child.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert cp.returncode == 0, cp.stderr[-2000:]
    (part,) = spool.glob("torchops-*")
    return tbdtrace.open(part)


def test_recorder_counts_dispatched_ops_on_cpu(tmp_path: Path) -> None:
    tr = _run_child(tmp_path, CHILD)
    got = [(r["name"], r["flops"]) for r in tr.table("ops").to_pylist()]
    conv = 2 * 2 * 8 * 8 * 8 * 3 * 3 * 3  # N Cout Hout Wout Cin kh kw (8x8 out: stride 2)
    fc = 2 * 2 * 512 * 10
    attn = 2 * 2 * 4 * 16 * 16 * (8 + 8) // 2  # causal: half
    assert sorted(got) == sorted(
        [
            ("aten::convolution", conv),
            ("aten::addmm", fc),
            ("aten::_scaled_dot_product_flash_attention_for_cpu", attn),
            ("aten::_scaled_dot_product_flash_attention_for_cpu_backward", 2 * attn),
            ("aten::mm", fc),  # fc input gradient
            ("aten::mm", fc),  # fc weight gradient
            ("aten::convolution_backward", conv),  # weight gradient only: x needs no grad
        ]
    )
    ops = tr.table("ops").to_pylist()
    assert all(r["pid"] > 0 and r["tid"] is not None and r["end_ns"] >= r["start_ns"] for r in ops)
    assert {r["category"] for r in ops} == {"torch_dispatch"}
    assert tr.meta["extra"]["torch_flops"]["uncounted_ops"] == 0


def test_cupti_capture_env_switches_the_recorder(tmp_path: Path) -> None:
    from tbdtrace.collector.cupti_backend import CuptiConfig
    from tbdtrace.collector.strategies import Injection, command_env

    on = command_env(
        Injection(CuptiConfig(activities=("kernel",), torch_flops=True)), tmp_path, None
    )
    off = command_env(Injection(CuptiConfig(activities=("kernel",))), tmp_path, None)
    assert on[SPOOL_ENV] == str(tmp_path) and SPOOL_ENV not in off  # off by default


def test_capture_records_flops_only_with_the_torch_flops_option() -> None:
    from tbdtrace.cli import build_parser

    p = build_parser()
    base = ["capture", "--backend", "cupti", "--out", "x"]
    assert p.parse_args([*base, "--", "true"]).torch_flops is False
    assert p.parse_args([*base, "--torch-flops", "--", "true"]).torch_flops is True
    assert p.parse_args([*base, "--no-torch-flops", "--", "true"]).torch_flops is False


def test_capture_maps_recorded_threads_to_the_runtime_records_ids() -> None:
    from tbdtrace import trace
    from tbdtrace.collector.injection import _match_thread_ids

    ops = trace.to_table("ops", {"tid": [5, 6], "name": ["aten::mm"] * 2}, num_rows=2)
    st = {"threads": [[5, 1005], [6, 1006]]}
    got = _match_thread_ids(ops, st, {1005, 77})  # runtime records carry OS thread ids
    assert got.column("tid").to_pylist() == [1005, 1006] and st["thread_ids"] == "os"
    st2 = {"threads": [[5, 1005], [6, 1006]]}
    same = _match_thread_ids(ops, st2, {5})  # CUPTI's default: pthread_self
    assert same.column("tid").to_pylist() == [5, 6] and st2["thread_ids"] == "pthread_self"


def _independent_resnet50_count(batch: int, px: int, classes: int) -> int:
    """Forward + input-gradient + weight-gradient FLOPs of every convolution and of the
    classifier of torchvision's ResNet-50, from the layer shapes seen by forward hooks
    (2 FLOPs per multiply-add). The first convolution's input needs no gradient."""
    import torch
    import torchvision

    # On the meta device: the hooks need only the layers' shapes, which PyTorch works out
    # there without allocating or computing anything (batch 32 at 224 px took seconds).
    with torch.device("meta"):
        net = torchvision.models.resnet50(weights=None, num_classes=classes)
    seen = []

    def hook(m: torch.nn.Module, inp: tuple, out: torch.Tensor) -> None:
        seen.append((m, tuple(inp[0].shape), tuple(out.shape)))

    for m in net.modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            m.register_forward_hook(hook)
    with torch.no_grad():
        net(torch.zeros(batch, 3, px, px, device="meta"))
    total = 0
    for m, x, y in seen:
        if isinstance(m, torch.nn.Conv2d):
            n, cout, oh, ow = y
            fwd = 2 * n * cout * oh * ow * (m.in_channels // m.groups) * math.prod(m.kernel_size)
            grads = 1 if m is net.conv1 else 2  # weight gradient (+ input gradient)
        else:
            fwd = 2 * x[0] * m.in_features * m.out_features
            grads = 2
        total += fwd * (1 + grads)
    seen.clear()  # the hooks hold `seen`, which holds the modules: no cycle left for the gc
    return total


@pytest.fixture(scope="module")
def resnet50_capture(tmp_path_factory: pytest.TempPathFactory) -> tbdtrace.Trace:
    out = tmp_path_factory.mktemp("r50") / "t"
    cp = subprocess.run(
        [
            sys.executable,
            "-m",
            "tbdtrace",
            "capture",
            "--backend",
            "torch",
            "-o",
            str(out),
            "--",
            sys.executable,
            "-m",
            "workloads.pytorch.resnet50",
            "--size",
            "tiny",
            "--steps",
            "1",
            "--warmup",
            "0",
            "--device",
            "cpu",
            "--seed",
            "0",
            # the held-out evaluation runs after the measured step, outside the window
            # whose FLOPs are checked: seconds of CPU time for nothing here
            "--no-eval",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert cp.returncode == 0, cp.stderr[-2000:]
    return tbdtrace.open(out)


def test_resnet50_cpu_capture_flops_match_a_per_layer_count(resnet50_capture) -> None:
    from tests.analysis.tiny import measured

    rows = flops.run(measured(resnet50_capture)).to_pylist()
    fp32 = [r for r in rows if r["precision"] == "fp32"]
    assert len(fp32) == 1 and len(rows) == 1
    r = fp32[0]
    want = _independent_resnet50_count(batch=4, px=64, classes=10)
    assert r["flops"] == pytest.approx(want, rel=0.01)
    assert r["window_source"].startswith("measured steps")
    assert r["peak_flops_per_s"] is not None and r["efficiency_wall"] is not None
    assert r["coverage"] is not None and r["coverage"] > 0.8
