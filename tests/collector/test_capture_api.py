"""tbdtrace.start()/stop(): one capture at a time, errors as one line, a failed start
leaves nothing running (host sampler included)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

import tbdtrace
from tbdtrace.collector import cupti_backend
from tbdtrace.errors import TraceError


def test_start_stop_with_the_torch_backend_writes_a_trace(tmp_path: Path) -> None:
    import torch

    c = tbdtrace.start(tmp_path / "t", backend="torch")
    with pytest.raises(TraceError, match="already running"):
        tbdtrace.start(tmp_path / "u", backend="torch")
    (torch.ones(64, 64) @ torch.ones(64, 64)).sum()
    # The host is sampled from a helper process, not by a thread of this (training) process.
    assert not [t for t in threading.enumerate() if t.name.startswith("tbdtrace")]
    out = tbdtrace.stop()
    assert out == c.path == tmp_path / "t"
    t = tbdtrace.open(out)
    assert t.meta["backend"] == "torch"
    assert "aten::mm" in t.table("ops", ["name"]).column("name").to_pylist()
    assert t.num_rows("kernels") > 0
    assert t.num_rows("host_samples") > 0
    assert t.meta["extra"]["host_sampler"]["pid"] == os.getpid()
    with pytest.raises(TraceError, match="no capture is running"):
        tbdtrace.stop()


@pytest.mark.skipif(cupti_backend.available(), reason="checks the no-GPU path")
def test_failed_cupti_start_stops_the_sampler_and_leaves_no_capture(tmp_path: Path) -> None:
    before = threading.active_count()
    with pytest.raises(TraceError, match="no CUDA driver/device"):
        tbdtrace.start(tmp_path / "t", backend="cupti")
    assert threading.active_count() == before
    with pytest.raises(TraceError, match="no capture is running"):
        tbdtrace.stop()
    assert not (tmp_path / "t").exists()
