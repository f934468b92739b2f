"""Post-hoc labelling rules, one block per rule, on hand-made iterations (table-driven)."""

from __future__ import annotations

import numpy as np
import pytest

from tbdtrace import trace
from tbdtrace.collector.memory import posthoc
from tbdtrace.collector.memory.phases import Iterations

# Two iterations: forward from start (first work at +10), backward [+100, +200], the
# optimizer from +210 to the end.
ITS = Iterations(
    start_ns=np.array([100, 500]),
    work_ns=np.array([110, 510]),
    bwd_start_ns=np.array([200, 600]),
    bwd_end_ns=np.array([300, 700]),
    opt_start_ns=np.array([310, 710]),
    end_ns=np.array([400, 800]),
    source="launch_threads",
    steps=2,
)
NEVER = None
# address -> (alloc ns or None: allocated before the capture, free ns or NEVER, bytes,
#             expected category, why)
BLOCKS = {
    0x1000: (10, NEVER, 4096, "weights", "a snapshot names it"),
    0x5000: (50, NEVER, 1024, "optimizer_state", "a snapshot names a view inside it"),
    0x2000: (50, NEVER, 512, "inputs", "made before the first step, live into backward"),
    0x2400: (105, 450, 512, "inputs", "made in the step before its first activation"),
    0x3000: (120, 250, 2048, "activations", "forward -> freed in backward"),
    0x3800: (130, 140, 512, "other", "forward temporary"),
    0x3C00: (150, 420, 512, "other", "forward, kept past backward (the loss)"),
    0x4000: (250, 520, 4096, "gradients", "backward -> freed at the next zero_grad"),
    0x4400: (650, NEVER, 8192, "other", "backward, never freed, seen unnamed by a snapshot"),
    0x4800: (260, 280, 512, "other", "backward temporary"),
    0x4C00: (270, 305, 512, "other", "freed by the engine after its last launch"),
    0x6000: (320, 450, 1024, "optimizer_state", "optimizer -> live after the step"),
    0x6400: (330, 340, 512, "other", "optimizer temporary"),
    0x7000: (None, 60, 512, "other", "allocated before the capture"),
    0x7400: (132, 138, 256, "workspace", "inside one operator"),
    0x7800: (405, 480, 512, "other", "between steps, freed before the next backward"),
}
SNAPSHOT_AT = 790  # one snapshot, at the second iteration's end


def _memory() -> trace.pa.Table:
    rows = []
    for addr, (a, f, n, _, _) in BLOCKS.items():
        if a is not None:
            rows.append((a, "alloc", addr, n))
        if f is not None:
            rows.append((f, "free", addr, n))
    return trace.to_table(
        "memory",
        {
            "ts_ns": [r[0] for r in rows],
            "action": [r[1] for r in rows],
            "level": ["allocated"] * len(rows),
            "address": [r[2] for r in rows],
            "bytes": [r[3] for r in rows],
            "device_type": ["cuda"] * len(rows),
            "pid": [5] * len(rows),
            "tid": [1] * len(rows),
        },
    )


OPS = {
    "start_ns": [131],
    "end_ns": [139],
    "tid": [1],
    "category": ["cpu_op"],
    "name": ["aten::convolution"],
}


def test_each_rule_labels_its_block() -> None:
    snaps = posthoc.Snapshots(
        ts_ns=np.array([SNAPSHOT_AT, SNAPSHOT_AT]),
        address=np.array([0x1000, 0x5000 + 256]),
        category=np.array([posthoc.WEIGHTS, posthoc.OPTIMIZER_STATE]),
    )
    out, stats = posthoc.label(_memory(), snaps, ITS, OPS)
    got = dict(
        zip(out.column("address").to_pylist(), out.column("category").to_pylist(), strict=True)
    )
    want = {addr: b[3] for addr, b in BLOCKS.items()}
    assert {a: got[a] for a in want} == want
    assert stats["from_snapshots"] == 2 and stats["iterations"] == 2
    # The gradient rule could not be checked (no snapshot while 0x4000 lived); 0x4400's
    # structure said gradients where the snapshot saw it unnamed.
    g = stats["structural_check"]["gradients"]
    assert g == {"blocks": 1, "agree_blocks": 0, "bytes": 8192, "agree_bytes": 0}


def test_a_snapshot_while_live_names_gradients_the_structure_missed() -> None:
    """A .grad freed inside its own step (zero_grad after the optimizer) is no structural
    gradient, but the step's snapshot names it."""
    mem = trace.to_table(
        "memory",
        {
            "ts_ns": [250, 395],
            "action": ["alloc", "free"],
            "level": ["allocated"] * 2,
            "address": [0x9000] * 2,
            "bytes": [512] * 2,
        },
    )
    none, _ = posthoc.label(mem, posthoc.Snapshots.empty(), ITS)
    assert set(none.column("category").to_pylist()) == {"gradients"}
    early = trace.to_table(
        "memory",
        {
            "ts_ns": [250, 305],
            "action": ["alloc", "free"],
            "level": ["allocated"] * 2,
            "address": [0x9000] * 2,
            "bytes": [512] * 2,
        },
    )
    snaps = posthoc.Snapshots(np.array([302]), np.array([0x9000]), np.array([posthoc.GRADIENTS]))
    out, _ = posthoc.label(early, snaps, ITS)
    assert set(out.column("category").to_pylist()) == {"gradients"}
    plain, _ = posthoc.label(early, posthoc.Snapshots.empty(), ITS)
    assert set(plain.column("category").to_pylist()) == {"other"}


def test_rows_with_a_category_keep_it_and_reserved_rows_stay_unlabelled() -> None:
    mem = trace.to_table(
        "memory",
        {
            "ts_ns": [1, 2, 3],
            "action": ["alloc"] * 3,
            "level": ["allocated", "allocated", "reserved"],
            "address": [0x100, 0x200, 0x100],
            "bytes": [512, 512, 2 << 20],
            "category": ["weights", None, None],
        },
    )
    out, _ = posthoc.label(mem, posthoc.Snapshots.empty(), Iterations.empty())
    assert out.column("category").to_pylist() == ["weights", "other", None]


def test_snapshots_round_trip() -> None:
    s = posthoc.Snapshots(np.array([5, 5]), np.array([-2, 7]), np.array([0, 2]))
    back = posthoc.Snapshots.from_json(s.to_json())
    assert back.ts_ns.tolist() == [5, 5] and back.address.tolist() == [-2, 7]
    assert back.category.tolist() == [0, 2] and back.times().tolist() == [5]


@pytest.mark.parametrize("empty_its", [True, False])
def test_no_blocks_no_error(empty_its: bool) -> None:
    mem = trace.to_table("memory", {"ts_ns": []})
    its = Iterations.empty() if empty_its else ITS
    out, stats = posthoc.label(mem, posthoc.Snapshots.empty(), its)
    assert out.num_rows == 0 and stats["blocks"] == 0
