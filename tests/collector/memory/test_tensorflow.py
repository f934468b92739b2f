"""TensorFlow: allocator totals over time, weights and optimizer state from variables.

Known answers from the layer shapes: P float32 parameters are 4P bytes of weights and
4P of (transient) gradients; Keras Adam keeps 8P of moments plus an int64 iteration
counter and a float32 learning rate (12 bytes). A 40 MB tensor made inside the capture
must show in the peak and be gone afterwards. TF_CPU_ALLOCATOR_USE_BFC=true makes the
CPU allocator count every allocation (by default it skips small ones).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tbdtrace
from tbdtrace.analysis.passes import memory
from tests.collector.memory import tf_script as s

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

ROOT = Path(__file__).resolve().parents[3]
P = (s.IN * s.HIDDEN + s.HIDDEN) + (s.HIDDEN * s.CLASSES + s.CLASSES)


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tf")
    env = {**os.environ, "TF_CPU_ALLOCATOR_USE_BFC": "true", "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, "-m", "tests.collector.memory.tf_script", str(out)],
        cwd=ROOT,
        env=env,
        check=True,
        timeout=300,
    )
    return out


def test_weights_and_state_from_variables(traces: Path) -> None:
    tr = tbdtrace.open(traces / "train")
    doc = memory.summarize(tr)
    assert tr.meta["framework"] == "tensorflow"
    assert doc["model_bytes"] == {
        "weights": 4 * P,
        "gradients": 4 * P,
        "optimizer_state": 8 * P + 12,
    }
    assert doc["breakdown_at_peak"]["weights"] == 4 * P
    assert doc["breakdown_at_peak"]["optimizer_state"] == 8 * P + 12
    assert len(doc["steps"]) == 3
    tl = memory.timeline(tr)
    for c in memory.CATEGORY_COLUMNS:
        assert int(np.min(tl.column(c).to_numpy())) >= 0


def test_big_tensor_in_peak_and_freed(traces: Path) -> None:
    tr = tbdtrace.open(traces / "big")
    doc = memory.summarize(tr)
    big = 4 * s.BIG_FLOATS
    other_peak = doc["breakdown_at_peak"]["other"]
    # the BFC allocator hands out whole bins: at most the next power of two (< 2x)
    assert big <= other_peak < 2 * big
    tl = memory.timeline(tr)
    assert tl.column("other_bytes")[-1].as_py() < big  # dropped before the capture ended
