"""workloads.pytorch.a3c trains at --size tiny and marks its steps."""

from __future__ import annotations

from pathlib import Path

from tests.workloads.runner import check_trained, run_workload

MODULE = "workloads.pytorch.a3c"


def test_tiny_trains_and_records_steps(tmp_path: Path) -> None:
    run = run_workload(
        MODULE,
        tmp_path,
        "--size",
        "tiny",
        "--steps",
        "2",
        "--warmup",
        "1",
        "--device",
        "cpu",
        "--seed",
        "0",
    )
    # tiny: 2 workers x t_max 5 = 10 frames per update
    check_trained(run, "a3c", "pytorch", steps=2, warmup=1, samples=10)


def test_network_is_the_four_layer_a3c_net() -> None:
    from workloads.pytorch import a3c

    net = a3c.ActorCritic(4)
    # conv 4->16 8x8, conv 16->32 4x4, fc 2592->256, policy 256->4, value 256->1.
    expected = (4 * 16 * 64 + 16) + (16 * 32 * 16 + 32) + (2592 * 256 + 256) + 1028 + 257
    assert sum(p.numel() for p in net.parameters()) == expected
