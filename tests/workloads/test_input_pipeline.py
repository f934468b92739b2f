"""The workloads' input pipeline (``--data host|device``, docs/WORKLOADS.md "Input
pipeline"): batches are built outside the training thread (host) or once, before the
first step, on the device (device); both modes give a run the same batch sequence.

The helpers are exercised with makers written here that report where they ran (process id,
thread id) and sleep, so the expectations are known answers: the training thread's own
pid/thread, and a step time that includes or excludes the maker's sleep. MXNet runs in
``.venv-mxnet``, so its checks run a short script there.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from tests.workloads.runner import REPO, TINY_SAMPLES, check_trained, mxnet_python, run_workload
from workloads import harness
from workloads.pytorch import _common as pt

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

POOL = harness.POOL_BATCHES


def _args(data: str) -> harness.HarnessArgs:
    return harness.parse_args("test", "pytorch", {"tiny": 4}, ["--data", data, "--device", "cpu"])


def test_harness_takes_data_host_by_default() -> None:
    assert _args("host").data == "host"
    assert _args("device").data == "device"
    assert harness.parse_args("test", "pytorch", {"tiny": 4}, []).data == "host"


def test_harness_refuses_an_unknown_data_mode(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        _args("disk")
    assert e.value.code == 2
    assert "--data" in capsys.readouterr().err.strip().splitlines()[-1]


# --- PyTorch ---------------------------------------------------------------------------


def _pid_batch(gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """A batch of 3 random numbers and the id of the process that built it."""
    return torch.rand(3, generator=gen), torch.tensor(os.getpid())


def _take(it: Any, n: int) -> list[Any]:
    return [next(it) for _ in range(n)]


def test_pytorch_host_batches_are_built_in_worker_processes_in_order() -> None:
    gen = torch.Generator().manual_seed(7)
    host = _take(pt.batches(_pid_batch, _args("host"), torch.device("cpu"), gen), POOL + 2)
    pids = {int(p) for _, p in host}
    assert os.getpid() not in pids  # no batch was built by the training process
    assert len(pids) == harness.HOST_WORKERS
    # the same seed and the device mode: the same sequence, its first POOL batches cycled
    gen = torch.Generator().manual_seed(7)
    dev = _take(pt.batches(_pid_batch, _args("device"), torch.device("cpu"), gen), POOL + 2)
    assert {int(p) for _, p in dev} == {os.getpid()}  # built up front, in this process
    for i in range(POOL):
        assert torch.equal(host[i][0], dev[i][0])
    assert dev[POOL][0] is dev[0][0] and dev[POOL + 1][0] is dev[1][0]
    assert not torch.equal(host[POOL][0], host[0][0])  # host keeps drawing new batches
    assert len({tuple(x.tolist()) for x, _ in host}) == POOL + 2


def test_pytorch_host_sequence_does_not_depend_on_the_worker_count() -> None:
    seqs = []
    for workers in (1, 2):
        gen = torch.Generator().manual_seed(3)
        it = pt.batches(_pid_batch, _args("host"), torch.device("cpu"), gen, workers=workers)
        seqs.append([x for x, _ in _take(it, 6)])
    assert all(torch.equal(a, b) for a, b in zip(*seqs, strict=True))


def test_pytorch_device_pool_lives_on_the_device() -> None:
    device = torch.device("cpu")
    gen = torch.Generator().manual_seed(0)
    pool = _take(pt.batches(_pid_batch, _args("device"), device, gen), POOL)
    assert all(t.device == device for batch in pool for t in batch)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_pytorch_batches_reach_the_gpu_in_both_modes() -> None:
    device = torch.device("cuda")
    for data in ("host", "device"):
        gen = torch.Generator().manual_seed(0)
        x, _ = next(pt.batches(_pid_batch, _args(data), device, gen))
        assert x.device.type == "cuda"


MAKER_S = 0.05  # the slow maker's cost per batch
STEP_S = 0.06  # the training step's own cost


def _slow_batch(gen: torch.Generator) -> torch.Tensor:
    time.sleep(MAKER_S)
    return torch.rand(2, generator=gen)


def test_pytorch_host_pipeline_prefetches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step that takes its batch then works STEP_S: built in the step, each step would
    last MAKER_S + STEP_S = 110 ms; prefetched by the workers, STEP_S = 60 ms. The steps
    file's measured steps must sit well under 110 ms."""
    steps_file = tmp_path / "steps.jsonl"
    monkeypatch.setenv(harness.STEPS_FILE_ENV, str(steps_file))
    args = harness.parse_args(
        "slow", "pytorch", {"tiny": 2}, ["--steps", "8", "--warmup", "2", "--no-eval"]
    )
    data = pt.batches(_slow_batch, args, torch.device("cpu"), torch.Generator().manual_seed(0))

    def step(_: int) -> float:
        x = next(data)
        time.sleep(STEP_S)
        return float(x.sum())

    harness.train("slow", "pytorch", args, step)
    recs = [json.loads(line) for line in steps_file.read_text().splitlines()]
    measured = [(r["end_ns"] - r["start_ns"]) / 1e9 for r in recs if not r["warmup"]]
    assert len(measured) == 8
    assert statistics.median(measured) < STEP_S + MAKER_S * 0.5, measured


# --- TensorFlow ------------------------------------------------------------------------


def _tf_args(data: str) -> harness.HarnessArgs:
    return harness.parse_args(
        "test", "tensorflow", {"tiny": 4}, ["--data", data, "--device", "cpu"]
    )


def _tid_batch(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    return rng.random(3).astype(np.float32), np.array(threading.get_ident(), np.int64)


def test_tensorflow_host_batches_come_from_tf_data_threads() -> None:
    from workloads.tensorflow import _common as tfc

    host = _take(tfc.batches(_tid_batch, _tf_args("host"), "/CPU:0", np.random.default_rng(5)), 10)
    dev = _take(tfc.batches(_tid_batch, _tf_args("device"), "/CPU:0", np.random.default_rng(5)), 10)
    me = threading.get_ident()
    # batch 0 also gives the dataset its signature: built here, before the first step
    assert me not in {int(t) for _, t in host[1:]}
    assert {int(t) for _, t in dev} == {me}
    for i in range(POOL):
        assert np.array_equal(host[i][0].numpy(), dev[i][0].numpy())
    assert dev[POOL][0] is dev[0][0]
    assert not np.array_equal(host[POOL][0].numpy(), host[0][0].numpy())
    assert all(t.device.endswith("CPU:0") for batch in dev for t in batch)


# --- MXNet (in .venv-mxnet) -------------------------------------------------------------

MXNET_SCRIPT = textwrap.dedent(
    """
    import json, threading
    import mxnet as mx, numpy as np
    from workloads import harness
    from workloads.mxnet import _common

    built_by = {}  # a batch's first value -> the thread that built it

    def make(rng):
        x = rng.random(3)
        built_by[float(x[0])] = threading.get_ident()
        return (x,)

    out = {"me": threading.get_ident()}
    for data in ("host", "device"):
        args = harness.parse_args("t", "mxnet", {"tiny": 4}, ["--data", data])
        it = _common.batches(make, args, mx.cpu(), np.random.default_rng(5))
        got = [next(it)[0] for _ in range(10)]
        xs = [b.asnumpy().astype(float).tolist() for b in got]
        out[data] = {
            "x": xs,
            "tid": [built_by[min(built_by, key=lambda v: abs(v - x[0]))] for x in xs],
            "ctx": sorted({str(b.context) for b in got}),
            "cycled": got[harness.POOL_BATCHES] is got[0],
        }
    print(json.dumps(out))
    """
)


def test_mxnet_host_batches_come_from_the_gluon_thread_pool() -> None:
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    p = subprocess.run(
        [mxnet_python(), "-c", MXNET_SCRIPT],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr[-2000:]
    out = json.loads(p.stdout.strip().splitlines()[-1])
    host, dev = out["host"], out["device"]
    assert out["me"] not in host["tid"]  # built by the DataLoader's threads
    assert set(dev["tid"]) == {out["me"]}
    assert host["x"][:POOL] == dev["x"][:POOL]
    assert dev["cycled"] and host["x"][POOL] != host["x"][0]
    assert dev["ctx"] == ["cpu(0)"]


# --- the option reaches each framework's workloads ---------------------------------------


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow", "mxnet"])
def test_data_modes_run_a_workload_on_the_same_batches(framework: str, tmp_path: Path) -> None:
    """seq2seq (the cheapest tiny model) in both modes: each trains and writes its steps,
    and step 0's loss is the same (the same weights and batch 0 in both modes)."""
    python = mxnet_python() if framework == "mxnet" else str(REPO / ".venv" / "bin" / "python")
    first = {}
    for data in ("host", "device"):
        run = run_workload(
            f"workloads.{framework}.seq2seq",
            tmp_path / data,
            *("--size", "tiny", "--steps", "2", "--warmup", "1", "--device", "cpu"),
            *("--no-eval", "--data", data),
            python=python,
        )
        check_trained(run, "seq2seq", framework, 2, 1, TINY_SAMPLES[("seq2seq", framework)])
        first[data] = run.records[0]["loss"]
    assert first["host"] == first["device"]
