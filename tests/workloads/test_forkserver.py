"""The workload tests' fork server runs a module as `python -m` does (DECISIONS 133).

Each case runs tests/workloads/forkprobe.py twice, as a fresh `python -m` subprocess and as
a child of a fork server, and compares what the two saw and printed, and how they ended.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.workloads.runner import REPO, RUN_ENV, ForkServer

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

MODULE = "tests.workloads.forkprobe"


@pytest.fixture(scope="module")
def server() -> Iterator[ForkServer]:
    s = ForkServer(sys.executable, "pytorch")
    yield s
    s.close()


def _fresh(mode: str, env: dict[str, str], tmp: Path) -> tuple[int, str, str]:
    p = subprocess.run(
        [sys.executable, "-m", MODULE, mode], cwd=tmp, env=env, capture_output=True, text=True
    )
    return p.returncode, p.stdout, p.stderr


def _forked(server: ForkServer, mode: str, env: dict[str, str], tmp: Path) -> tuple[int, str, str]:
    out, err = tmp / "out", tmp / "err"
    req = dict(module=MODULE, args=[mode], env=env, cwd=str(tmp), stdout=str(out), stderr=str(err))
    rc = server.run(req, timeout_s=60)
    return rc, out.read_text(), err.read_text()


@pytest.mark.parametrize("mode", ["ok", "exit3", "exitmsg", "raise", "kill"])
def test_a_forked_run_is_a_python_dash_m_run(server: ForkServer, mode: str, tmp_path: Path) -> None:
    env = dict(os.environ, **RUN_ENV, FORKPROBE=f"value-{mode}")
    # PYTHONPATH is the repository, so the probe imports from any working directory
    fresh = _fresh(mode, env, tmp_path)
    forked = _forked(server, mode, env, tmp_path)
    expected_rc = {"ok": 0, "exit3": 3, "exitmsg": 1, "raise": 1, "kill": -9}[mode]
    assert fresh[0] == forked[0] == expected_rc
    seen_fresh, seen_forked = (json.loads(r[1].splitlines()[0]) for r in (fresh, forked))
    assert seen_forked == seen_fresh
    assert seen_forked["argv"] == [str(REPO / "tests/workloads/forkprobe.py"), mode]
    assert seen_forked["cwd"] == seen_forked["path0"] == str(tmp_path)
    assert seen_forked["probe_env"] == f"value-{mode}"
    assert seen_forked["threads"] == 1
    # the same output and the same last lines of stderr (a traceback names the same frame)
    assert forked[1] == fresh[1]
    assert forked[2].splitlines()[-1] == fresh[2].splitlines()[-1]
    assert ("atexit ran" in forked[1]) == (mode != "kill")
