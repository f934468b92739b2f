"""``capture --backend tf|mxnet|auto``: the framework's own profiler in an unchanged program.

Each framework trains the same two-layer model (Dense 32->64 with ReLU, Dense 64->10,
Adam) for ``STEPS`` steps. Expected counts and sizes are written out from that model,
not taken from the code under test: parameters 32*64+64 + 64*10+10, float32; Adam keeps
two arrays per parameter (Keras adds its int64 iteration count and float32 learning
rate as variables); each step runs one forward matmul per layer.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tbdtrace import trace

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

REPO = Path(__file__).resolve().parents[2]
MXNET_PY = REPO / ".venv-mxnet" / "bin" / "python"
STEPS = 3
PARAMS = 32 * 64 + 64 + 64 * 10 + 10
WEIGHT_BYTES = 4 * PARAMS

TF_PROGRAM = f"""
import numpy as np
import tensorflow as tf
import keras

model = keras.Sequential(
    [keras.Input((32,)), keras.layers.Dense(64, activation="relu"), keras.layers.Dense(10)]
)
opt = keras.optimizers.Adam(1e-3)
x = tf.constant(np.random.rand(16, 32).astype("float32"))
y = tf.constant(np.random.randint(0, 10, 16))

@tf.function
def step():
    with tf.GradientTape() as tape:
        out = model(x, training=True)
        loss = tf.reduce_mean(
            keras.losses.sparse_categorical_crossentropy(y, out, from_logits=True)
        )
    grads = tape.gradient(loss, model.trainable_variables)
    opt.apply_gradients(zip(grads, model.trainable_variables))
    return loss

for _ in range({STEPS}):
    float(step())
"""

MX_PROGRAM = f"""
import mxnet as mx
import numpy as np
from mxnet import autograd, gluon

net = gluon.nn.HybridSequential()
net.add(gluon.nn.Dense(64, activation="relu", in_units=32), gluon.nn.Dense(10, in_units=64))
net.initialize()
trainer = gluon.Trainer(net.collect_params(), "adam", {{"learning_rate": 1e-3}})
loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
x = mx.nd.array(np.random.rand(16, 32))
y = mx.nd.array(np.random.randint(0, 10, 16))
for _ in range({STEPS}):
    with autograd.record():
        loss = loss_fn(net(x), y)
    loss.backward()
    trainer.step(16)
    mx.nd.waitall()
"""


def capture(tmp: Path, backend: str, python: str, program: str) -> subprocess.CompletedProcess[str]:
    script = tmp / "train.py"
    script.write_text(program)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "tbdtrace", "capture", "--backend", backend]
    cmd += ["--out", str(tmp / "trace"), "--", python, str(script)]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=tmp)


def weights_peak(tr: trace.Trace) -> dict[str, int]:
    """The largest size each model category's block reached in the memory table."""
    m = tr.table("memory", ["category", "action", "bytes"]).to_pydict()
    out: dict[str, int] = {}
    for cat, act, n in zip(m["category"], m["action"], m["bytes"], strict=True):
        if act == "alloc":
            out[cat] = max(out.get(cat, 0), n)
    return out


@pytest.fixture(scope="module")
def tf_trace(tmp_path_factory: pytest.TempPathFactory) -> trace.Trace:
    tmp = tmp_path_factory.mktemp("tf")
    res = capture(tmp, "tf", sys.executable, TF_PROGRAM)
    assert res.returncode == 0, res.stderr[-2000:]
    return trace.open(tmp / "trace")


@pytest.fixture(scope="module")
def mx_trace(tmp_path_factory: pytest.TempPathFactory) -> trace.Trace:
    assert MXNET_PY.exists(), f"{MXNET_PY} is missing; run `make venv-mxnet`"
    tmp = tmp_path_factory.mktemp("mx")
    res = capture(tmp, "auto", str(MXNET_PY), MX_PROGRAM)  # auto: picked by the import
    assert res.returncode == 0, res.stderr[-2000:]
    return trace.open(tmp / "trace")


def op_types(tr: trace.Trace) -> Counter[tuple[bool, str]]:
    """(inside the gradient tape, op type) -> count, for TensorFlow's ``name:Type`` ops."""
    names = tr.table("ops", ["name"]).column("name").to_pylist()
    return Counter((n.startswith("gradient_tape/"), n.rpartition(":")[2]) for n in names)


def test_tf_ops_are_the_models_steps(tf_trace: trace.Trace) -> None:
    assert tf_trace.meta["backend"] == "tf"
    assert tf_trace.meta["framework"] == "tensorflow"
    types = op_types(tf_trace)
    forward = sum(n for (tape, t), n in types.items() if not tape and "MatMul" in t)
    backward = sum(n for (tape, t), n in types.items() if tape and "MatMul" in t)
    assert forward == 2 * STEPS  # one per Dense layer
    # Weight gradients of both layers and the input gradient of the second (the first
    # layer's input is data: its gradient is pruned from the graph).
    assert backward == 3 * STEPS
    assert types[(True, "BiasAddGrad")] == 2 * STEPS
    kernels = tf_trace.table("kernels", ["device_type"]).column("device_type").to_pylist()
    assert len(kernels) == tf_trace.num_rows("ops") and set(kernels) == {"cpu"}


def test_tf_matrix_flops_come_from_the_traced_graph(tf_trace: trace.Trace) -> None:
    from tbdtrace.analysis.passes import fp32

    # Per step, batch 16: forward 2*16*32*64 + 2*16*64*10; backward the two weight
    # gradients (the same counts) and the second layer's input gradient (2*16*10*64).
    per_step = 2 * (2 * 16 * 32 * 64) + 3 * (2 * 16 * 64 * 10)
    flops = tf_trace.table("ops", ["flops"]).column("flops").to_pylist()
    assert sum(f for f in flops if f is not None) == STEPS * per_step
    (row,) = fp32.run(tf_trace).to_pylist()
    assert row["flops"] == STEPS * per_step  # no steps in this trace: the whole run
    assert row["flops_source"].startswith("framework counts")
    assert 0 < row["efficiency_wall"] < 1


def test_tf_model_memory_is_exact(tf_trace: trace.Trace) -> None:
    adam = 2 * WEIGHT_BYTES + 8 + 4  # m and v, int64 iteration, float32 learning rate
    assert tf_trace.meta["extra"]["memory_model"] == {
        "weights": WEIGHT_BYTES,
        "gradients": WEIGHT_BYTES,
        "optimizer_state": adam,
    }
    peak = weights_peak(tf_trace)
    assert peak["weights"] == WEIGHT_BYTES
    assert peak["optimizer_state"] == adam
    assert peak["other"] > 0  # inputs and the step's transients


def test_mxnet_ops_are_the_models_steps(mx_trace: trace.Trace) -> None:
    assert mx_trace.meta["backend"] == "mxnet"
    assert "the framework the program imports" in mx_trace.meta["extra"]["backend_choice"]
    names = Counter(mx_trace.table("ops", ["name"]).column("name").to_pylist())
    assert names["FullyConnected"] == 2 * STEPS  # forward (backward runs bulked)
    assert names["adam_update"] == 4 * STEPS  # one per parameter array
    kernels = mx_trace.table("kernels", ["device_type"]).column("device_type").to_pylist()
    assert len(kernels) == mx_trace.num_rows("ops") and set(kernels) == {"cpu"}


def test_mxnet_model_memory_is_exact(mx_trace: trace.Trace) -> None:
    expect = {
        "weights": WEIGHT_BYTES,
        "gradients": WEIGHT_BYTES,
        "optimizer_state": 2 * WEIGHT_BYTES,
    }
    assert mx_trace.meta["extra"]["memory_model"] == expect
    peak = weights_peak(mx_trace)
    assert {c: peak[c] for c in expect} == expect


def test_a_program_without_the_framework_fails_in_one_line(tmp_path: Path) -> None:
    res = capture(tmp_path, "tf", sys.executable, "print('no framework here')\n")
    assert res.returncode == 1
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "needs a Python program that imports tensorflow" in lines[0]
    assert "Traceback" not in res.stderr


def test_in_process_capture_refuses_child_only_backends(tmp_path: Path) -> None:
    from tbdtrace.collector import capture as capture_api
    from tbdtrace.errors import TraceError

    with pytest.raises(TraceError, match="capture --backend tf"), capture_api(tmp_path / "t", "tf"):
        pass
