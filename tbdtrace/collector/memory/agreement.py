"""How far two labellings of the same blocks agree, in bytes, where memory matters.

Used on a ``--torch-memory exact`` capture of the CUDA allocator history, whose blocks are
also labelled post hoc (:mod:`.torch_cuda`): the agreement goes to
``meta.extra.torch_memory``, the figure on a live run behind the post-hoc default.

The instants are, per iteration: its peak (the first moment the live bytes of the blocks
reach their maximum within [start, end)) and the end of its backward. At each, the bytes
live where both labellings give the same category, over all bytes live; and per
category, the bytes each labelling gives it. ``workspace`` and ``other`` count as one
(temporaries/workspace: the hook tracker tells them apart only with a trace's ops).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from tbdtrace.analysis.engine.memory_blocks import INT64_MAX, Blocks
from tbdtrace.collector.memory.phases import Iterations

I64 = npt.NDArray[np.int64]
MIB = 1 << 20
CATEGORIES = ("weights", "optimizer_state", "gradients", "inputs", "activations", "other")


def codes(names: Sequence[str | None]) -> I64:
    """Category codes (index in :data:`CATEGORIES`; workspace, other and none are other)."""
    idx = {c: i for i, c in enumerate(CATEGORIES)}
    other = idx["other"]
    return np.array([idx.get(n or "other", other) for n in names], dtype=np.int64)


def _peak(blocks: Blocks, sel: I64, lo: int, hi: int) -> int | None:
    """First instant in [lo, hi) at which the live bytes of ``sel`` are largest."""
    a, f, b = blocks.alloc_ts_ns[sel], blocks.free_ts_ns[sel], blocks.bytes[sel]
    base = int(b[(a < lo) & (f >= lo)].sum())
    ia = (a >= lo) & (a < hi)
    jf = (f >= lo) & (f < hi)
    t = np.concatenate([a[ia], f[jf]])
    if not t.size:
        return None
    d = np.concatenate([b[ia], -b[jf]])
    o = np.lexsort((d, t))  # at one instant frees come first: no false peak
    run = base + np.cumsum(d[o])
    return int(t[o][int(np.argmax(run))])


def at_instants(
    blocks: Blocks, sel: I64, first: I64, second: I64, instants: list[tuple[str, int, int]]
) -> list[dict[str, Any]]:
    """Per instant (name, iteration, ns): bytes live, bytes agreeing and per category the
    bytes under ``first`` and ``second`` (codes per block, as :func:`codes`)."""
    a, f, b = blocks.alloc_ts_ns[sel], blocks.free_ts_ns[sel], blocks.bytes[sel]
    c1, c2 = first[sel], second[sel]
    out = []
    for name, it, t in instants:
        live = (a <= t) & (f > t)
        total = int(b[live].sum())
        same = int(b[live & (c1 == c2)].sum())
        per = {
            c: [int(b[live & (c1 == k)].sum()), int(b[live & (c2 == k)].sum())]
            for k, c in enumerate(CATEGORIES)
        }
        out.append(
            {"instant": name, "iteration": it, "ts_ns": t, "bytes": total, "agree_bytes": same}
            | {"by_category": per}
        )
    return out


def compare(
    blocks: Blocks, sel: I64, first: I64, second: I64, its: Iterations, most: int = 64
) -> dict[str, Any]:
    """Agreement of ``second`` with ``first`` at each iteration's peak and end of backward
    (at most ``most`` iterations, evenly spread). Keys: instants; min_fraction and
    median_fraction (agreeing bytes over live bytes); worst per category: the largest
    |second - first| and the tolerance max(2% of first, 1 MiB) at that instant;
    within_goal (every instant at least 98%, every category within its tolerance)."""
    pick = np.unique(np.linspace(0, len(its) - 1, min(most, len(its))).astype(int))
    inst: list[tuple[str, int, int]] = []
    for i in pick.tolist():
        end = int(its.end_ns[i]) if its.end_ns[i] != INT64_MAX else int(its.bwd_end_ns[i]) + 1
        pk = _peak(blocks, sel, int(its.start_ns[i]), end)
        if pk is not None:
            inst.append(("peak", i, pk))
        inst.append(("backward_end", i, int(its.bwd_end_ns[i])))
    rows = at_instants(blocks, sel, first, second, inst)
    frac = [r["agree_bytes"] / r["bytes"] for r in rows if r["bytes"]]
    worst: dict[str, dict[str, int]] = {}
    ok = all(x >= 0.98 for x in frac)
    for r in rows:
        for c, (x, y) in r["by_category"].items():
            tol = max(int(0.02 * x), MIB)
            ok &= abs(y - x) <= tol
            if c not in worst or abs(y - x) > worst[c]["deviation_bytes"]:
                worst[c] = {"deviation_bytes": abs(y - x), "bytes": x, "tolerance_bytes": tol}
    return {
        "instants": len(rows),
        "min_fraction": min(frac) if frac else None,
        "median_fraction": float(np.median(frac)) if frac else None,
        "worst_by_category": worst,
        "within_goal": bool(ok and frac),
    }
