"""Capture windows with real processes and real profilers: ``capture --steps``,
``--schedule``, ``--on-demand`` (SIGUSR2 and the trigger file) on the torch, tf and mxnet
backends, steps marked by the workload harness, NVTX ``step N`` ranges and
``tbdtrace.step()``; and the in-process ``tbdtrace.capture(schedule=...)``. Expected
values come from the plan (which steps) and from the programs (each step runs one
``linear``/``Dense`` forward pass)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import tbdtrace
from tbdtrace import trace

pytestmark = pytest.mark.heavy

REPO = Path(__file__).resolve().parents[2]
MXNET_PY = REPO / ".venv-mxnet" / "bin" / "python"
ENV = dict(
    os.environ,
    PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    OMP_NUM_THREADS="1",
)

# The workload harness (workloads/harness.py) around a one-linear step.
HARNESS_TORCH = """
import sys, time, torch
from workloads import harness
x = torch.ones(16, 16)
def step(i):
    print(i, flush=True)
    time.sleep(float(sys.argv[2]))
    return float(torch.nn.functional.linear(x, x).sum())
args = harness.HarnessArgs(batch_size=16, steps=int(sys.argv[1]), warmup=0, device="cpu",
                           size="tiny", seed=0, no_eval=True)
harness.train("tiny", "pytorch", args, step)
"""

# NVTX step ranges through torch.cuda.nvtx (no harness, no tbdtrace import).
NVTX_TORCH = """
import torch
x = torch.ones(16, 16)
for i in range(8):
    torch.cuda.nvtx.range_push(f"step {i}")
    torch.nn.functional.linear(x, x).sum()
    torch.cuda.nvtx.range_pop()
"""

HARNESS_TF = """
import numpy as np, tensorflow as tf, keras
from workloads import harness
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(4)])
opt = keras.optimizers.SGD(0.1)
x = tf.constant(np.ones((4, 8), "float32"))
@tf.function
def train():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(model(x, training=True))
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                            model.trainable_variables))
    return loss
args = harness.HarnessArgs(batch_size=4, steps=6, warmup=0, device="cpu", size="tiny",
                           seed=0, no_eval=True)
harness.train("tiny", "tensorflow", args, lambda i: float(train()))
"""

HARNESS_MX = """
import mxnet as mx
from mxnet import autograd, gluon
from workloads import harness
net = gluon.nn.Dense(4, in_units=8)
net.initialize()
trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
x = mx.nd.ones((4, 8))
def step(i):
    with autograd.record():
        loss = net(x).mean()
    loss.backward()
    trainer.step(4)
    return float(loss.asscalar())
args = harness.HarnessArgs(batch_size=4, steps=8, warmup=0, device="cpu", size="tiny",
                           seed=0, no_eval=True)
harness.train("tiny", "mxnet", args, step)
"""


def capture(
    tmp: Path, options: list[str], program: str, *args: str, python: str = sys.executable
) -> trace.Trace:
    (tmp / "prog.py").write_text(program)
    cmd = [sys.executable, "-m", "tbdtrace", "capture", "--out", str(tmp / "t"), *options]
    r = subprocess.run(
        [*cmd, "--", python, str(tmp / "prog.py"), *args],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    return tbdtrace.open(tmp / "t")


def windows(tr: trace.Trace) -> list[tuple[Any, ...]]:
    return [(w["reason"], w["first_step"], w["last_step"]) for w in tr.meta["windows"]]


def count_in_steps(tr: trace.Trace, op: str) -> dict[int, int]:
    """``op`` rows that start inside each step of the steps table."""
    steps = tr.table("steps").to_pylist()
    names = tr.table("ops", ["name", "start_ns"]).to_pylist()
    return {
        s["step"]: sum(
            o["name"] == op and s["start_ns"] <= o["start_ns"] <= s["end_ns"] for o in names
        )
        for s in steps
    }


def test_steps_window_records_only_those_harness_steps(tmp_path: Path) -> None:
    tr = capture(tmp_path, ["--backend", "torch", "--steps", "3:5"], HARNESS_TORCH, "10", "0")
    assert windows(tr) == [("steps", 3, 5)]
    assert tr.meta["windows"][0]["complete"] is True
    assert tr.table("steps").to_pydict()["step"] == [3, 4, 5]  # of 0..9
    assert count_in_steps(tr, "aten::linear") == {3: 1, 4: 1, 5: 1}
    names = tr.table("ops", ["name"]).column("name").to_pylist()
    assert names.count("aten::linear") == 3  # nothing recorded outside the window
    # The host samples are cut to the window too.
    w = tr.meta["windows"][0]
    ts = tr.table("host_samples", ["ts_ns"]).column("ts_ns").to_pylist()
    assert all(w["start_ns"] <= t <= w["end_ns"] for t in ts)


def test_schedule_driven_by_nvtx_step_ranges(tmp_path: Path) -> None:
    """wait=1, warmup=1, active=1, repeat=2 over steps 0..7: records 2 and 5 (1 and 4 are
    collected and discarded)."""
    opts = ["--backend", "torch", "--schedule", "wait=1,warmup=1,active=1,repeat=2"]
    tr = capture(tmp_path, opts, NVTX_TORCH)
    assert windows(tr) == [("schedule", 2, 2), ("schedule", 5, 5)]
    steps = tr.table("steps").to_pydict()
    assert steps["step"] == [2, 5] and steps["source"] == ["nvtx", "nvtx"]
    assert count_in_steps(tr, "aten::linear") == {2: 1, 5: 1}
    assert tr.table("ops", ["name"]).column("name").to_pylist().count("aten::linear") == 2


def test_on_demand_by_trigger_file_and_sigusr2(tmp_path: Path) -> None:
    """The job keeps running; a touched trigger file and a SIGUSR2 to tbdtrace each open a
    window of 3 steps."""
    (tmp_path / "prog.py").write_text(HARNESS_TORCH)
    trigger = tmp_path / "go"
    cmd = [sys.executable, "-m", "tbdtrace", "capture", "--backend", "torch", "--on-demand"]
    cmd += ["--window-steps", "3", "--trigger-file", str(trigger), "--out", str(tmp_path / "t")]
    cmd += ["--", sys.executable, str(tmp_path / "prog.py"), "90", "0.02"]
    p = subprocess.Popen(cmd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None
    for line in p.stdout:
        if line.strip() == "5":
            trigger.touch()
        if line.strip() == "50":
            p.send_signal(signal.SIGUSR2)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err
    assert "on demand: `kill -USR2" in err and "Traceback" not in err
    tr = tbdtrace.open(tmp_path / "t")
    wins = tr.meta["windows"]
    assert [(w["reason"], w["trigger"]) for w in wins] == [
        ("on-demand", "SIGUSR2"),
        ("on-demand", "SIGUSR2"),
    ]  # the child sees SIGUSR2 either way; what sent it is in extra.on_demand
    assert [t["by"] for t in tr.meta["extra"]["on_demand"]["triggers"]] == ["file", "SIGUSR2"]
    assert all(w["last_step"] - w["first_step"] == 2 for w in wins)
    assert 5 < wins[0]["first_step"] < 50 <= wins[1]["first_step"]
    steps = tr.table("steps").to_pydict()["step"]
    expect = [s for w in wins for s in range(w["first_step"], w["last_step"] + 1)]
    assert steps == expect
    assert trigger.exists()  # the user's file is never removed


@pytest.mark.skipif(not MXNET_PY.exists(), reason="needs .venv-mxnet (make venv-mxnet)")
@pytest.mark.parametrize("backend", ["tf", "mxnet"])
def test_framework_profiler_windows(tmp_path: Path, backend: str) -> None:
    """TensorFlow's profiler starts and stops per window; MXNet's is paused between them."""
    python = str(MXNET_PY) if backend == "mxnet" else sys.executable
    program = HARNESS_MX if backend == "mxnet" else HARNESS_TF
    opts = ["--backend", backend, "--schedule", "wait=1,active=2,repeat=2"]
    tr = capture(tmp_path, opts, program, python=python)
    assert windows(tr) == [("schedule", 1, 2), ("schedule", 4, 5)]
    assert tr.table("steps").to_pydict()["step"] == [1, 2, 4, 5]
    names = tr.table("ops", ["name"]).column("name").to_pylist()
    op = "FullyConnected"
    if backend == "tf":  # the Dense layer's forward matmul (oneDNN may fuse the bias add)
        op = next(n for n in names if "dense" in n and "MatMul" in n and "gradient" not in n)
    assert count_in_steps(tr, op) == {1: 1, 2: 1, 4: 1, 5: 1}
    assert names.count(op) == 4


def test_in_process_schedule_with_tbdtrace_step(tmp_path: Path) -> None:
    import torch

    x = torch.ones(16, 16)
    sched = tbdtrace.schedule(skip_first=2, active=2, repeat=1)
    with tbdtrace.capture(tmp_path / "t", backend="torch", schedule=sched):
        for _ in range(6):
            torch.nn.functional.linear(x, x).sum()
            tbdtrace.step()
        tbdtrace.step()  # steps go on after the window: nothing more is recorded
    tr = tbdtrace.open(tmp_path / "t")
    assert windows(tr) == [("schedule", 2, 3)]
    assert tr.table("steps").to_pydict()["source"] == ["api", "api"]
    assert count_in_steps(tr, "aten::linear") == {2: 1, 3: 1}
    tbdtrace.step()  # no capture: nothing happens


def test_window_options_are_checked_in_one_line(tmp_path: Path) -> None:
    base = [sys.executable, "-m", "tbdtrace", "capture", "--out", str(tmp_path / "t")]
    for opts, says in (
        (["--steps", "5:2"], "expected A:B with 0 <= A <= B"),
        (["--steps", "1:2", "--on-demand"], "exclude each other"),
        (["--window-steps", "3"], "need --on-demand"),
        (["--schedule", "active=0"], "active >= 1"),
        (["--backend", "cupti", "--counters", "flops", "--steps", "1:2"], "cannot be combined"),
    ):
        r = subprocess.run([*base, *opts, "--", "true"], env=ENV, capture_output=True, text=True)
        assert r.returncode == 2 and says in r.stderr, (opts, r.stderr)
        assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "t").exists()


HARNESS_CUDA = """
import sys, torch
from workloads import harness
x = torch.ones(256, 256, device="cuda")
def step(i):
    return float(torch.nn.functional.linear(x, x).relu().sum())
args = harness.HarnessArgs(batch_size=1, steps=10, warmup=0, device="cuda", size="tiny",
                           seed=0, no_eval=True)
harness.train("tiny", "pytorch", args, step, sync=torch.cuda.synchronize)
"""


def _cuda() -> bool:
    import torch

    return bool(torch.cuda.is_available())


@pytest.mark.gpu
@pytest.mark.skipif(not _cuda(), reason="needs a CUDA device")
def test_cupti_window_records_only_its_steps_kernels(tmp_path: Path) -> None:
    """The injected collector starts paused and is resumed and paused at the window's
    edges: every kernel, copy and runtime call recorded lies in steps 3..5, and each of
    those steps launched the same kernels."""
    tr = capture(tmp_path, ["--backend", "cupti", "--steps", "3:5"], HARNESS_CUDA)
    assert windows(tr) == [("steps", 3, 5)]
    w = tr.meta["windows"][0]
    for table in ("kernels", "runtime"):
        starts = tr.table(table, ["start_ns"]).column("start_ns").to_pylist()
        assert starts and all(w["start_ns"] <= s <= w["end_ns"] for s in starts)
    steps = tr.table("steps").to_pylist()
    assert [s["step"] for s in steps] == [3, 4, 5]
    ks = tr.table("kernels", ["name", "start_ns"]).to_pylist()
    per = [
        sorted(k["name"] for k in ks if s["start_ns"] <= k["start_ns"] <= s["end_ns"])
        for s in steps
    ]
    assert per[0] and per[0] == per[1] == per[2]


def test_in_process_on_demand_windows_of_steps_and_of_seconds(tmp_path: Path) -> None:
    """SIGUSR2 opens a window of N steps at the next step, or of S seconds at once (closed
    on the main thread when the time is up); the old SIGUSR2 handler comes back."""
    import torch

    x = torch.ones(16, 16)
    od = tbdtrace.OnDemand(steps=2)
    with tbdtrace.capture(tmp_path / "a", backend="torch", on_demand=od):
        for i in range(8):
            if i == 3:
                os.kill(os.getpid(), signal.SIGUSR2)  # handled before the next step's begin
            torch.nn.functional.linear(x, x).sum()
            tbdtrace.step()
    assert windows(tbdtrace.open(tmp_path / "a")) == [("on-demand", 4, 5)]
    assert signal.getsignal(signal.SIGUSR2) is signal.SIG_DFL

    with tbdtrace.capture(
        tmp_path / "s", backend="torch", on_demand=tbdtrace.OnDemand(seconds=0.3)
    ):
        os.kill(os.getpid(), signal.SIGUSR2)
        end = time.monotonic() + 1.0
        while time.monotonic() < end:  # steps of ~20 ms for 1 s
            torch.nn.functional.linear(x, x).sum()
            time.sleep(0.02)
            tbdtrace.step()
    (w,) = tbdtrace.open(tmp_path / "s").meta["windows"]
    assert w["reason"] == "on-demand" and w["complete"] is True
    assert 0.3e9 <= w["end_ns"] - w["start_ns"] < 0.9e9  # closed by its timer, not the end


def test_recover_keeps_the_windows_of_a_killed_capture(tmp_path: Path) -> None:
    """tbdtrace itself is killed after the window closed: the command gets SIGTERM, writes
    its part, and `recover` makes a trace of the spool with the window alone."""
    (tmp_path / "prog.py").write_text(HARNESS_TORCH)
    cmd = [sys.executable, "-m", "tbdtrace", "capture", "--backend", "torch", "--steps", "1:2"]
    cmd += ["--out", str(tmp_path / "t"), "--", sys.executable, str(tmp_path / "prog.py")]
    p = subprocess.Popen([*cmd, "200", "0.05"], env=ENV, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None
    for line in p.stdout:
        if line.strip() == "6":  # the window (steps 1-2) has closed
            p.kill()
            break
    p.wait()
    (spool,) = (tmp_path / "t").glob(".tbdtrace-spool-*")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(spool.glob("part-*")):
        time.sleep(0.2)  # the command writes its part on the SIGTERM it got
    time.sleep(1.0)
    r = subprocess.run(
        [sys.executable, "-m", "tbdtrace", "recover", str(spool), "--out", str(tmp_path / "r")],
        env=ENV,
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    tr = tbdtrace.open(tmp_path / "r")
    assert windows(tr) == [("steps", 1, 2)]
    assert tr.table("steps").to_pydict()["step"] == [1, 2]
    assert count_in_steps(tr, "aten::linear") == {1: 1, 2: 1}
