"""The quick tier's guard (tests/conftest.py, DECISIONS 185) tells a training,
capture, workload, browser or cluster process from a quick command-line run."""

from __future__ import annotations

import pytest

from tests.conftest import _heavy_argv

PY = "/work/x/.venv/bin/python"


@pytest.mark.parametrize(
    "argv",
    [
        [PY, "-m", "tbdtrace", "capture", "--out", "d", "--", "true"],
        [PY, "-m", "tbdtrace", "bench", "--models", "resnet50"],
        [PY, "-m", "tbdtrace", "recover", "spool"],
        [PY, "-m", "workloads.pytorch.resnet50", "--size", "tiny"],
        [PY, "/repo/tests/workloads/forkserver.py"],
        ["/usr/bin/chromium", "--headless", "--dump-dom", "file:///r.html"],
        ["torchrun", "--nproc-per-node", "2", "train.py"],
        [PY, "-m", "torch.distributed.run", "train.py"],
        "chromium --headless",
    ],
)
def test_heavy_processes_are_recognised(argv: list[str] | str) -> None:
    assert _heavy_argv(argv)


@pytest.mark.parametrize(
    "argv",
    [
        [PY, "-m", "tbdtrace", "report", "run", "--format", "json"],
        [PY, "-m", "tbdtrace", "import", "t.json.gz", "--out", "d"],
        [PY, "-m", "tbdtrace", "capture", "--help"],
        ["readelf", "-d", "_native.so"],
        [PY, "-c", "import tbdtrace"],
    ],
)
def test_quick_processes_pass(argv: list[str]) -> None:
    assert not _heavy_argv(argv)
