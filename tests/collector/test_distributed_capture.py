"""``tbdtrace capture`` of a real 2-rank DDP training (gloo, CPU): ranks from the
launcher's environment or torch.distributed, each rank's steps and gloo collectives, and
an injected straggler found by the ranks pass. The training is tests/collector/ddp_tiny.py
(a two-layer MLP, 6 steps of a few ms); rank 1 sleeps DELAY_S inside step 3. CAPTURES runs
are captured (the first serves every test), and in each the injected step is the only
straggler: the few-ms steps' rank-to-rank noise is not flagged (docs/DECISIONS.md
197)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import tbdtrace
from tbdtrace.analysis.passes import ranks as ranks_pass
from tbdtrace.collector import torch_dist

pytestmark = pytest.mark.heavy  # make test-quick leaves it out (DECISIONS 185)

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("ddp_tiny.py")
STEPS = 6
DELAY_S = 0.3
CAPTURES = 2
# DDP all-reduces the gradients of Linear(64, 64) + Linear(64, 8) in one float32 bucket.
GRAD_BYTES = 4 * (64 * 64 + 64 + 64 * 8 + 8)


def _capture(out: Path, command: list[str], extra_env: dict[str, str]) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TINY_STEPS": str(STEPS), **extra_env}
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    cmd = [sys.executable, "-m", "tbdtrace", "capture", "--backend", "torch", "--out", str(out)]
    cp = subprocess.run(
        [*cmd, "--", *command], capture_output=True, text=True, env=env, timeout=300
    )
    assert cp.returncode == 0, cp.stderr[-3000:]


@pytest.fixture(scope="module")
def captures(tmp_path_factory: pytest.TempPathFactory) -> list[tbdtrace.Trace]:
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    out = []
    for i in range(CAPTURES):
        path = tmp_path_factory.mktemp("ddp") / f"run{i}.tbd"
        port = str(20000 + (os.getpid() + 7 * i) % 20000)
        _capture(
            path,
            [*launcher, "--master_port", port, str(SCRIPT)],
            {"TINY_SLEEP": f"1:3:{DELAY_S}"},
        )
        out.append(tbdtrace.open(path))
    return out


@pytest.fixture(scope="module")
def torchrun(captures: list[tbdtrace.Trace]) -> tbdtrace.Trace:
    return captures[0]


def test_two_ranks_and_the_agent_is_none(torchrun: tbdtrace.Trace) -> None:
    meta = torchrun.meta
    assert not meta["partial"]
    dist = meta["extra"]["distributed"]
    assert meta["ranks"] == [0, 1] and dist["world_size"] == 2
    parts = meta["extra"]["parts"]
    ranked = [p for p in parts if p.get("rank") is not None]
    assert sorted(p["rank"] for p in ranked) == [0, 1]
    assert sorted(p["local_rank"] for p in ranked) == [0, 1]
    # The torch.distributed.run agent imports torch too, and is profiled, but is no rank.
    assert len(dist["not_ranks"]) == 1
    agent = dist["not_ranks"][0]
    ops = torchrun.table("ops", ["pid", "rank"]).to_pandas()
    assert agent not in set(ops.pid)
    assert ops["rank"].notna().all()
    for pid, rank in dist["rank_of_pid"].items():
        assert set(ops[ops.pid == int(pid)]["rank"]) == {rank}


def test_each_rank_measured_its_clock_against_rank_0(torchrun: tbdtrace.Trace) -> None:
    # One machine, one clock: the true offset is 0, and rank 0's answer is read between
    # the rank's t1 and t4, so the estimate is within half the round trip of it.
    clocks = {
        p["rank"]: p["clock"] for p in torchrun.meta["extra"]["parts"] if p.get("rank") is not None
    }
    assert clocks[0]["offset_ns"] == 0
    c = clocks[1]
    assert c["offset_ns"] is not None and "error" not in c, c
    assert abs(c["offset_ns"]) <= c["error_bound_ns"]


def test_each_rank_has_its_steps(torchrun: tbdtrace.Trace) -> None:
    st = torchrun.table("steps").to_pandas()
    st = st[st.source.astype(str) == "harness"]
    rank_of_pid = {
        int(p): r for p, r in torchrun.meta["extra"]["distributed"]["rank_of_pid"].items()
    }
    for r in (0, 1):
        mine = st[st["rank"] == r]
        assert sorted(mine.step) == list(range(STEPS))
        assert {rank_of_pid[int(p)] for p in mine.pid} == {r}


def test_gloo_all_reduces_per_rank_matched_by_order(torchrun: tbdtrace.Trace) -> None:
    co = torchrun.table("collectives").to_pandas()
    ar = co[co.op.astype(str) == "all_reduce"]
    per_rank = ar.groupby("rank").size()
    assert list(per_rank.index) == [0, 1] and per_rank[0] == per_rank[1] >= STEPS
    assert (ar.in_bytes == GRAD_BYTES).sum() >= 2 * STEPS
    assert ((ar.end_ns >= ar.start_ns) & (ar.host_start_ns == ar.start_ns)).all()
    # Started inside each rank's steps: one gradient all-reduce per step (gloo's thread
    # may close its range just after the step's end, once the main thread has resumed).
    st = torchrun.table("steps").to_pandas()
    st = st[st.source.astype(str) == "harness"]
    for _, s in st.iterrows():
        mine = ar[
            (ar["rank"] == s["rank"]) & (ar.start_ns >= s.start_ns) & (ar.start_ns < s.end_ns)
        ]
        assert len(mine) == 1, (s["rank"], s.step)
    matched = ranks_pass.match_collectives(torchrun)
    assert matched is not None and matched.method == "order" and matched.unmatched == 0
    assert all(c["ranks"] == [0, 1] for c in matched.rows)
    matched_ar = [c for c in matched.rows if c["op"] == "all_reduce"]
    assert len(matched_ar) == per_rank[0]

    def step_of(rank: int, t: int) -> int | None:
        mine = st[(st["rank"] == rank) & (st.start_ns <= t) & (t < st.end_ns)]
        return int(mine.step.iloc[0]) if len(mine) else None

    # Matched instances pair the two ranks' all-reduces of the same step.
    in_steps = [
        [step_of(r, int(t)) for r, t in zip(c["ranks"], c["starts"], strict=True)]
        for c in matched_ar
    ]
    assert all(a == b for a, b in in_steps)
    assert sorted(a for a, _ in in_steps if a is not None) == list(range(STEPS))


@pytest.mark.parametrize("i", range(CAPTURES))
def test_injected_sleep_is_the_only_straggler(captures: list[tbdtrace.Trace], i: int) -> None:
    steps = ranks_pass.steps(captures[i], ranks_pass.RanksConfig())
    by_step = {s["step"]: s for s in steps}
    assert sorted(by_step) == list(range(STEPS))
    s3 = by_step[3]
    assert s3["slowest_rank"] == 1
    # Two ranks: the median is their mean, so the other rank's work is 2 x median - slowest.
    other = 2 * s3["work_median_ns"] - s3["slowest_work_ns"]
    delay_ns = s3["slowest_work_ns"] - other
    assert abs(delay_ns - DELAY_S * 1e9) <= 0.1 * DELAY_S * 1e9, delay_ns
    # Flagged: step 3 and nothing else, each judged against the run's noise.
    assert [s["step"] for s in steps if s["straggler"]] == [3], [
        (s["step"], s["lead_ns"], s["threshold_ns"]) for s in steps
    ]
    # The noise is the spread of the ranks' work in ordinary steps (leads of tens of us
    # to a few ms on these few-ms steps), far below the injected lead (half the delay).
    assert 0 < s3["noise_ns"] < 0.1 * s3["lead_ns"]


def test_spawned_ranks_take_their_rank_from_torch_distributed(tmp_path: Path) -> None:
    out = tmp_path / "spawn.tbd"
    port = str(40000 + os.getpid() % 20000)
    _capture(
        out,
        [sys.executable, str(SCRIPT), "--spawn", "2"],
        {"MASTER_PORT": port, "TINY_STEPS": "2"},
    )
    tr = tbdtrace.open(out)
    assert not tr.meta["partial"]  # multiprocessing's resource tracker is not profiled
    assert not list(out.glob(".tbdtrace-spool-*"))  # and the spool is gone
    parts = tr.meta["extra"]["parts"]
    assert sorted(p["rank"] for p in parts if p.get("rank") is not None) == [0, 1]
    assert {p["rank_source"] for p in parts if p.get("rank") is not None} == {"torch.distributed"}
    assert len(tr.meta["extra"]["distributed"]["not_ranks"]) == 1  # the spawning parent
    st = tr.table("steps").to_pandas()
    assert sorted(st[st.source.astype(str) == "harness"]["rank"]) == [0, 0, 1, 1]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"RANK": "3", "LOCAL_RANK": "1", "WORLD_SIZE": "8"}, (3, 1, 8, "env:torchrun")),
        (
            {
                "OMPI_COMM_WORLD_RANK": "5",
                "OMPI_COMM_WORLD_LOCAL_RANK": "1",
                "OMPI_COMM_WORLD_SIZE": "6",
            },
            (5, 1, 6, "env:openmpi"),
        ),
        (
            {"SLURM_PROCID": "7", "SLURM_LOCALID": "3", "SLURM_NTASKS": "16"},
            (7, 3, 16, "env:slurm"),
        ),
        ({"PMI_RANK": "2", "PMI_SIZE": "4"}, (2, None, 4, "env:pmi")),
        ({"RANK": "x", "SLURM_PROCID": "1"}, (1, None, None, "env:slurm")),
    ],
)
def test_env_rank(env: dict[str, str], expected: tuple[object, ...]) -> None:
    got = torch_dist.env_rank(env)
    assert got is not None
    assert (got["rank"], got["local_rank"], got["world_size"], got["rank_source"]) == expected


def test_env_rank_none_outside_a_launcher() -> None:
    assert torch_dist.env_rank({"PATH": "/bin", "LOCAL_RANK": "0"}) is None
