"""Where the training thread waited for its next batch: those intervals per rank, and the
time they cover in each step.

A data wait is a host range of one of these (``markers`` or ``ops`` rows, whichever table
the source put them in):

* ``harness: data``: the workload harness's own marker around each fetch of a batch by
  the training thread (every ``--data host`` loader, ``--data-delay-ms`` inside it; PyTorch
  records it through ``record_function``, NVTX captures through an NVTX range);
* ``enumerate(DataLoader)#<iterator>.__next__``: the range torch.profiler records around
  each ``next()`` on a DataLoader (any PyTorch program, not only the harness's).

They nest (the harness's marker holds the DataLoader's range), so a rank's data waits are
the union of both kinds. A trace with neither has no data-wait figure (null, never 0: a
0 would claim the loader kept up when nothing was measured).
"""

from __future__ import annotations

import re

import numpy as np
import numpy.typing as npt

from tbdtrace.analysis.engine import intervals, shared_arrays
from tbdtrace.analysis.engine.cache import Entry
from tbdtrace.analysis.engine.context import AnalysisContext

HARNESS_MARKER = "harness: data"  # workloads/harness.py DATA_MARKER
_DATA = re.compile(r"harness: data|enumerate\(DataLoader\)#.*\.__next__")

Merged = tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]
WAITS: Entry[dict[int, Merged] | None] = Entry(
    "data_wait.intervals", "per rank key (-1: no rank), the merged data-wait intervals"
)


def intervals_by_rank(ctx: AnalysisContext) -> dict[int, Merged] | None:
    """Per rank (-1 for rows without a rank), the merged data-wait intervals; None when
    the trace has no data-wait range at all."""
    return ctx.cache.get(WAITS, lambda: _intervals(ctx))


def _intervals(ctx: AnalysisContext) -> dict[int, Merged] | None:
    starts: list[np.ndarray] = []
    ends: list[np.ndarray] = []
    ranks: list[np.ndarray] = []
    for table in ("markers", "ops"):
        if not ctx.num_rows(table):
            continue
        code, labels = shared_arrays.codes(ctx, table, "name")
        hit = np.array([bool(lb and _DATA.fullmatch(lb)) for lb in labels], dtype=bool)
        if not hit.any():
            continue
        rows = np.flatnonzero(hit[code])
        starts.append(shared_arrays.ints(ctx, table, "start_ns")[rows])
        ends.append(shared_arrays.ints(ctx, table, "end_ns")[rows])
        ranks.append(shared_arrays.ints(ctx, table, "rank")[rows])
    if not starts:
        return None
    s, e, r = np.concatenate(starts), np.concatenate(ends), np.concatenate(ranks)
    return {int(k): intervals.merge(s[r == k], e[r == k]) for k in np.unique(r)}


def per_step(
    ctx: AnalysisContext,
    rank: npt.NDArray[np.int64],
    start: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64] | None:
    """Data-wait time inside each step [start, end) of rank key ``rank`` (-1: no rank);
    None when the trace has no data-wait range. A step of a rank without ranges waits 0."""
    waits = intervals_by_rank(ctx)
    if waits is None:
        return None
    out = np.zeros(start.size, dtype=np.int64)
    for k in np.unique(rank):
        sel = np.flatnonzero(rank == k)
        m = waits.get(int(k))
        if m is not None and sel.size:
            out[sel] = intervals.covered_in_merged(
                m[0], m[1], start[sel], np.maximum(end[sel], start[sel])
            )
    return out


def intersect(
    a_s: npt.NDArray[np.int64],
    a_e: npt.NDArray[np.int64],
    b_s: npt.NDArray[np.int64],
    b_e: npt.NDArray[np.int64],
) -> Merged:
    """The intersection of two sets of merged intervals (each sorted and disjoint), as
    merged intervals."""
    lo = np.searchsorted(b_e, a_s, side="right")  # first b ending after each a starts
    hi = np.searchsorted(b_s, a_e, side="left")  # b starting before each a ends
    n = np.maximum(hi - lo, 0)
    ia = np.repeat(np.arange(a_s.size), n)
    ib = np.arange(int(n.sum()), dtype=np.int64) + np.repeat(lo - (np.cumsum(n) - n), n)
    s = np.maximum(a_s[ia], b_s[ib])
    e = np.minimum(a_e[ia], b_e[ib])
    keep = e > s
    return s[keep].astype(np.int64), e[keep].astype(np.int64)
