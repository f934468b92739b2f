"""Multi-node capture simulated on one machine: two ``tbdtrace capture`` runs, one rank each
of a 2-rank DDP training (tests/collector/ddp_tiny.py, gloo), play two nodes; node 1's
clock reads SHIFT_NS ahead (the test-only ``TBDTRACE_TEST_CLOCK_SHIFT_NS``). ``tbdtrace
merge`` must put both on rank 0's clock.

Tolerances: the recorded offset is the injected shift within the measurement's own error
bound (half its round trip through the rendezvous store; both "nodes" share one real
clock, so the shift is the true offset). After the merge, every matched all-reduce's two
spans overlap within that error bound (neither rank can finish it before the other has
started it; 5 s apart before the merge), and the median difference of the two ranks'
ends of the all-reduces, and of the steps, is at most ALIGNED_NS (single instances may
differ more: gloo's worker threads are scheduled late on a loaded machine).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import tbdtrace
from tbdtrace.analysis.passes import ranks as ranks_pass
from tests.inprocess import tbd

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("ddp_tiny.py")
STEPS = 4
SHIFT_NS = 5_000_000_000
ALIGNED_NS = 20_000_000  # 20 ms


def _node_env(rank: int, port: int, shift: int) -> dict[str, str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TINY_STEPS": str(STEPS),
        "RANK": str(rank),
        "LOCAL_RANK": "0",  # one rank per "node"
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
    }
    env.pop("TBDTRACE_TEST_CLOCK_SHIFT_NS", None)
    if shift:
        env["TBDTRACE_TEST_CLOCK_SHIFT_NS"] = str(shift)
    return env


def _merge(*args: str) -> subprocess.CompletedProcess[str]:
    """``tbdtrace merge ARGS`` through the command line's entry point, in this process (the
    merge reads and writes files only: a process of its own would add only its start-up)."""
    return tbd("merge", *args, check=False)


@pytest.fixture(scope="module")
def nodes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(node 0's part, node 1's part, the merged trace)."""
    d = tmp_path_factory.mktemp("nodes")
    port = 30000 + os.getpid() % 20000
    procs = []
    for rank in (0, 1):
        cmd = [sys.executable, "-m", "tbdtrace", "capture", "--backend", "torch"]
        cmd += ["--out", str(d / f"node{rank}"), "--", sys.executable, str(SCRIPT)]
        env = _node_env(rank, port, SHIFT_NS if rank == 1 else 0)
        procs.append(
            subprocess.Popen(
                cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
        )
    for p in procs:
        out, _ = p.communicate(timeout=300)
        assert p.returncode == 0, out[-3000:]
    cp = _merge(str(d / "merged"), str(d / "node0"), str(d / "node1"))
    assert cp.returncode == 0, cp.stderr
    return d / "node0", d / "node1", d / "merged"


def test_offset_recorded_within_its_error_bound(nodes: tuple[Path, Path, Path]) -> None:
    merged = tbdtrace.open(nodes[2])
    n0, n1 = merged.meta["extra"]["nodes"]
    assert (n0["ranks"], n0["offset_ns"]) == ([0], 0)
    assert n1["ranks"] == [1] and n1["measured_by_rank"] == 1
    assert 0 < n1["error_bound_ns"] < 50_000_000
    assert abs(n1["offset_ns"] - SHIFT_NS) <= n1["error_bound_ns"]
    assert merged.meta["ranks"] == [0, 1]
    assert "ping-pong" in merged.meta["extra"]["clock_alignment"]["method"]


def _all_reduces(tr: tbdtrace.Trace, rank: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, ends) of the rank's all-reduces in order (matched by order across ranks,
    as the ranks pass matches gloo collectives)."""
    co = tr.table("collectives", ["rank", "op", "start_ns", "end_ns"]).to_pandas()
    ar = co[(co.op.astype(str) == "all_reduce") & (co["rank"] == rank)].sort_values("start_ns")
    return ar.start_ns.to_numpy(), ar.end_ns.to_numpy()


def test_merged_collectives_aligned(nodes: tuple[Path, Path, Path]) -> None:
    merged = tbdtrace.open(nodes[2])
    bound = merged.meta["extra"]["nodes"][1]["error_bound_ns"]
    (s0, e0), (s1, e1) = _all_reduces(merged, 0), _all_reduces(merged, 1)
    assert len(s0) == len(s1) >= STEPS
    overlap = np.minimum(e0, e1) - np.maximum(s0, s1)
    assert (overlap >= -bound).all(), overlap
    assert np.median(np.abs(e0 - e1)) <= ALIGNED_NS, np.abs(e0 - e1)
    # The parts as captured: node 1's times are the shift ahead (what the merge undid).
    raw = {r: tbdtrace.open(p) for r, p in ((0, nodes[0]), (1, nodes[1]))}
    raw0 = raw[0].table("collectives", ["end_ns"]).column("end_ns").to_numpy()
    raw1 = raw[1].table("collectives", ["end_ns"]).column("end_ns").to_numpy()
    assert abs(np.median(raw1) - np.median(raw0) - SHIFT_NS) <= 10 * ALIGNED_NS
    matched = ranks_pass.match_collectives(merged)
    assert matched is not None and matched.unmatched == 0
    assert all(c["ranks"] == [0, 1] for c in matched.rows)


def test_merged_steps_and_rows_keep_their_ranks(nodes: tuple[Path, Path, Path]) -> None:
    merged = tbdtrace.open(nodes[2])
    st = merged.table("steps").to_pandas()
    st = st[st.source.astype(str) == "harness"]
    for r in (0, 1):
        assert sorted(st[st["rank"] == r].step) == list(range(STEPS))
    # DDP steps end after their all-reduce on both ranks: aligned step ends.
    e0 = st[st["rank"] == 0].sort_values("step").end_ns.to_numpy()
    e1 = st[st["rank"] == 1].sort_values("step").end_ns.to_numpy()
    assert np.median(np.abs(e0 - e1)) <= ALIGNED_NS
    ops = merged.table("ops", ["rank"]).to_pandas()
    parts = sum(tbdtrace.open(p).num_rows("ops") for p in nodes[:2])
    assert len(ops) == parts and set(ops["rank"]) == {0, 1}


def test_bad_parts_give_one_line(nodes: tuple[Path, Path, Path], tmp_path: Path) -> None:
    n0, n1, _ = nodes
    cases = []
    cp = _merge(str(tmp_path / "a"), str(n0), str(n0))
    cases.append((cp, "rank 0 is also in"))
    cp = _merge(str(tmp_path / "b"), str(n1))
    cases.append((cp, "no part holds rank 0"))
    cp = _merge(str(tmp_path / "c"), str(n0), str(tmp_path / "absent"))
    cases.append((cp, "no such trace directory"))
    broken = tmp_path / "broken"
    shutil.copytree(n1, broken)
    meta = json.loads((broken / "meta.json").read_text())
    for p in meta["extra"]["parts"]:
        p.pop("clock", None)
    (broken / "meta.json").write_text(json.dumps(meta))
    cp = _merge(str(tmp_path / "d"), str(n0), str(broken))
    cases.append((cp, "no clock offset to rank 0"))
    for cp, want in cases:
        assert cp.returncode == 1, cp.stderr
        lines = cp.stderr.strip().splitlines()
        assert len(lines) == 1 and want in lines[0], cp.stderr
        assert "Traceback" not in cp.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "d").exists()


def test_missing_node_is_a_warning(nodes: tuple[Path, Path, Path], tmp_path: Path) -> None:
    cp = _merge(str(tmp_path / "half"), str(nodes[0]))
    assert cp.returncode == 0, cp.stderr
    assert cp.stderr.strip().splitlines() == [
        "tbdtrace merge: warning: ranks 1 are in no part (their node's part was not given); "
        "the merged trace holds the others"
    ]
    half = tbdtrace.open(tmp_path / "half")
    assert half.meta["ranks"] == [0] and half.meta["extra"]["merge_notes"]
