"""``report --model-flops-per-sample``: MFU in the flops section; bad values are usage errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.analysis.passes.test_flops import _mixed_trace


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tbdtrace", "report", *args], capture_output=True, text=True
    )


def test_mfu_from_the_command_line(tmp_path: Path) -> None:
    tr = _mixed_trace(tmp_path)
    r = _run(str(tr.path), "--format", "json", "--model-flops-per-sample", "2e9")
    assert r.returncode == 0, r.stderr
    rows = {x["precision"]: x for x in json.loads(r.stdout)["flops"]["rows"]}
    # 16 samples in the 200 us measured step, against the H100 SXM bf16 datasheet peak
    assert rows["bf16"]["mfu"] == pytest.approx(2e9 * 16 / 200e-6 / 989.4e12)
    text = _run(str(tr.path), "--model-flops-per-sample", "2e9").stdout
    assert "MFU (bf16, the precision with the most FLOPs)" in text
    assert "partial" in text  # coverage 80/110 < 80%


@pytest.mark.parametrize("value", ["0", "-5"])
def test_bad_model_flops_is_a_usage_error(tmp_path: Path, value: str) -> None:
    r = _run(str(tmp_path), f"--model-flops-per-sample={value}")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "--model-flops-per-sample" in r.stderr and "Traceback" not in r.stderr
