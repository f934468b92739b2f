"""Run a workload as a subprocess and read its steps file (independently of the harness).

The reader below parses the JSON Lines the harness documents (workloads/harness.py) with
nothing but ``json``, so the tests check the file format, not the harness's own code.
"""

from __future__ import annotations

import atexit
import json
import math
import os
import select
import signal
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from workloads import registry

REPO = Path(__file__).resolve().parents[2]


# Samples in one tiny step, from each model's tiny preset.
TINY_SAMPLES = {
    ("resnet50", "pytorch"): 4,  # batch of 4 images
    ("inception_v3", "pytorch"): 8,
    ("seq2seq", "pytorch"): 4,  # sentences
    ("transformer", "pytorch"): 4,
    ("deepspeech2", "pytorch"): 2,  # utterances
    ("faster_rcnn", "pytorch"): 2,
    ("wgan", "pytorch"): 8,
    ("a3c", "pytorch"): 10,  # 2 workers x t_max 5 frames per update
    ("resnet50", "tensorflow"): 4,
    ("inception_v3", "tensorflow"): 8,
    ("seq2seq", "tensorflow"): 4,
    ("transformer", "tensorflow"): 4,
    ("deepspeech2", "tensorflow"): 2,
    ("faster_rcnn", "tensorflow"): 2,
    ("wgan", "tensorflow"): 8,
    ("a3c", "tensorflow"): 10,
    ("resnet50", "mxnet"): 4,
    ("inception_v3", "mxnet"): 8,
    ("seq2seq", "mxnet"): 4,
    ("transformer", "mxnet"): 4,
    ("deepspeech2", "mxnet"): 2,
    ("faster_rcnn", "mxnet"): 2,  # images
    ("wgan", "mxnet"): 8,
    ("a3c", "mxnet"): 10,
}


def mxnet_python() -> str:
    """.venv-mxnet's Python; fails the test with what to run when it is missing."""
    py = REPO / ".venv-mxnet" / "bin" / "python"
    assert py.exists(), f"{py} is missing; run `make venv-mxnet`"
    return str(py)


@dataclass(frozen=True)
class Run:
    returncode: int
    stderr: str
    records: list[dict]


# One intra-op thread: on a loaded 2-core machine, spinning OpenMP threads slow the
# small-op workloads several-fold; one thread keeps test time steady. TensorFlow ignores
# OMP_NUM_THREADS and sizes its own pools by the cores: one thread in each too, which also
# makes its losses the same run to run and machine to machine. OpenMP reads its variable
# when the library loads, so the fork servers start with these set too.
RUN_ENV = {
    "PYTHONPATH": str(REPO),
    "OMP_NUM_THREADS": "1",
    "TF_NUM_INTRAOP_THREADS": "1",
    "TF_NUM_INTEROP_THREADS": "1",
}


class ForkServer:
    """A running ``forkserver.py`` for one interpreter and framework (DECISIONS 133)."""

    def __init__(self, python: str, framework: str) -> None:
        env = dict(os.environ, **RUN_ENV)
        self.proc = subprocess.Popen(
            [python, str(Path(__file__).with_name("forkserver.py")), framework],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._read(timeout_s=300)  # {"ready": ...}: the imports are done

    def _read(self, timeout_s: float) -> dict:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout_s)
        if not ready:
            raise TimeoutError
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"fork server exited with {self.proc.wait()}")
        return json.loads(line)

    def run(self, req: dict, timeout_s: float) -> int:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        pid = self._read(timeout_s=60)["pid"]
        try:
            return self._read(timeout_s)["returncode"]
        except TimeoutError:
            os.kill(pid, signal.SIGKILL)
            self._read(timeout_s=60)
            raise subprocess.TimeoutExpired([req["module"], *req["args"]], timeout_s) from None

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


_SERVERS: dict[tuple[str, str], ForkServer] = {}


@atexit.register
def _close_servers() -> None:
    for server in _SERVERS.values():
        server.close()


def _server(python: str, module: str) -> ForkServer:
    """The fork server for ``workloads.<framework>.*`` modules under ``python``."""
    parts = module.split(".")
    if len(parts) < 3 or parts[0] != "workloads" or parts[1] not in registry.FRAMEWORKS:
        raise ValueError(f"{module} is not a workload module (workloads.<framework>.<model>)")
    key = (python, parts[1])
    server = _SERVERS.get(key)
    if server is None or server.proc.poll() is not None:
        server = _SERVERS[key] = ForkServer(python, parts[1])
    return server


def run_workload(
    module: str, tmp_path: Path, *args: str, python: str = sys.executable, timeout_s: float = 240
) -> Run:
    """``python -m module args`` from the repo root with TBDTRACE_STEPS_FILE set.

    Runs in a child of the framework's fork server (forkserver.py): the same module, argv,
    environment and working directory, without paying the framework's import again.
    """
    steps = tmp_path / "steps.jsonl"
    tmp_path.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, TBDTRACE_STEPS_FILE=str(steps), **RUN_ENV)
    err = tmp_path / "workload.stderr"
    req = dict(
        module=module,
        args=list(args),
        env=env,
        cwd=str(REPO),
        stdout=str(tmp_path / "workload.stdout"),
        stderr=str(err),
    )
    returncode = _server(python, module).run(req, timeout_s)
    stderr = err.read_text(errors="replace")
    records = []
    if steps.exists():
        records = [json.loads(line) for line in steps.read_text().splitlines() if line.strip()]
    return Run(returncode, stderr, records)


def check_trained(
    run: Run, model: str, framework: str, steps: int, warmup: int, samples: int
) -> None:
    """The contract every workload meets at --size tiny."""
    assert run.returncode == 0, run.stderr[-3000:]
    recs = run.records
    assert [r["step"] for r in recs] == list(range(warmup + steps))
    assert [r["warmup"] for r in recs] == [True] * warmup + [False] * steps
    assert all(r["samples"] == samples for r in recs)
    assert all(r["model"] == model and r["framework"] == framework for r in recs)
    assert len({r["pid"] for r in recs}) == 1
    for r in recs:
        assert isinstance(r["start_ns"], int) and isinstance(r["end_ns"], int)
        assert r["start_ns"] < r["end_ns"]
    for a, b in zip(recs, recs[1:], strict=False):
        assert a["end_ns"] <= b["start_ns"], "steps overlap"
    losses = [r["loss"] for r in recs]
    assert all(isinstance(x, float) and math.isfinite(x) for x in losses), losses
    assert len(set(losses)) > 1, f"loss did not change: {losses}"
