"""Clock offsets between the nodes of a distributed job (docs/DISTRIBUTED.md "Several
machines").

Ranks on different machines read different clocks. So that ``tbdtrace merge`` can put
the nodes' parts on one time base, every captured rank measures its clock against rank
0's at start, right after ``init_process_group`` returns, through the job's rendezvous
store (the key-value store every rank of a torch.distributed job already reaches):

* a rank ``r > 0`` writes ``ping`` keys with its clock ``t1`` and waits for rank 0's
  ``pong`` key holding rank 0's clock ``t0``, read at ``t4`` on its own clock;
* rank 0 answers every other rank's pings in rank order.

Per round, ``offset = (t1 + t4) / 2 - t0`` (this rank's clock minus rank 0's) with an
error of at most half the round trip ``t4 - t1``; the round with the smallest round trip
is kept (NTP's rule). Nothing is measured in a job of one rank, and a failure (a rank
that is not captured, a store that does not answer within :data:`WAIT_S`) leaves the
offset unknown instead of stopping the program; rank 0 stops answering at the first rank
that does not ask in time (so a job with uncaptured ranks loses :data:`WAIT_S` once).

``TBDTRACE_TEST_CLOCK_SHIFT_NS`` (test-only, read here and nowhere else) makes this
process's node read its clock that many nanoseconds ahead: the measurement, and every
time the capture writes (:func:`shift_tables`), so that a test on one machine can play a
node with a skewed clock.
"""

from __future__ import annotations

import os
import time
from datetime import timedelta
from typing import Any

from tbdtrace import schema
from tbdtrace.collector import child_protocol as proto

SHIFT_ENV = proto.TEST_CLOCK_SHIFT_NS
ROUNDS = 5  # ping-pongs per rank; the one with the smallest round trip counts
WAIT_S = 20.0  # how long one side waits for the other's key before giving up
LAN_ROUND_TRIP_S = 0.002  # a generous store round trip, for the wait of high ranks
METHOD = "rendezvous-store ping-pong at init_process_group"
_KEY = "tbdtrace/clock"


def shift_ns() -> int:
    """The test-only clock shift of this node (0 unless :data:`SHIFT_ENV` is set)."""
    v = os.environ.get(SHIFT_ENV, "")
    try:
        return int(v) if v else 0
    except ValueError:
        return 0


def now_ns() -> int:
    """This node's clock: ``time.time_ns()`` (the trace clock), plus the test shift."""
    return time.time_ns() + shift_ns()


def _serve(store: Any, world: int) -> None:
    """Rank 0: answer every other rank's pings with this node's clock."""
    wait = timedelta(seconds=WAIT_S)
    for r in range(1, world):
        for k in range(ROUNDS):
            store.wait([f"{_KEY}/{r}/{k}/ping"], wait)
            store.set(f"{_KEY}/{r}/{k}/pong", str(now_ns()))


def _ask(store: Any, rank: int) -> dict[str, Any]:
    """Rank > 0: the ping-pong rounds; the round with the smallest round trip."""
    # Rank 0 answers the ranks in order: the first answer comes after the lower ranks'.
    first = timedelta(seconds=WAIT_S + rank * ROUNDS * LAN_ROUND_TRIP_S)
    wait = timedelta(seconds=WAIT_S)
    best: tuple[int, int] | None = None  # (round trip, offset)
    for k in range(ROUNDS):
        t1 = now_ns()
        store.set(f"{_KEY}/{rank}/{k}/ping", str(t1))
        store.wait([f"{_KEY}/{rank}/{k}/pong"], first if k == 0 else wait)
        t0 = int(store.get(f"{_KEY}/{rank}/{k}/pong"))
        t4 = now_ns()
        rtt, off = t4 - t1, (t1 + t4) // 2 - t0
        if best is None or rtt < best[0]:
            best = (rtt, off)
    assert best is not None
    return {"offset_ns": best[1], "error_bound_ns": (best[0] + 1) // 2}


def measure(store: Any, rank: int, world: int) -> dict[str, Any]:
    """This rank's clock offset to rank 0 (``offset_ns``: this clock minus rank 0's;
    ``error_bound_ns``: half the round trip), measured through ``store``.

    Returns ``{"method", "reference_rank": 0, "offset_ns", "error_bound_ns"}``; on
    failure ``offset_ns`` is None and ``error`` says why.
    """
    out: dict[str, Any] = {"method": METHOD, "reference_rank": 0}
    if world <= 1 or rank == 0:
        out.update(offset_ns=0, error_bound_ns=0)
        try:
            if world > 1:
                _serve(store, world)
        except Exception as e:  # noqa: BLE001 - a rank that never asks: stop answering
            out["error"] = f"stopped answering: {type(e).__name__}: {e}"[:200]
        return out
    try:
        out.update(_ask(store, rank))
    except Exception as e:  # noqa: BLE001 - never stop the program for a clock
        out.update(offset_ns=None, error_bound_ns=None, error=f"{type(e).__name__}: {e}"[:200])
    return out


def shift_tables(tables: dict[str, Any], delta_ns: int) -> None:
    """Add ``delta_ns`` to every time column (unit ns) of ``tables`` (Arrow tables or
    column mappings), in place."""
    if not delta_ns:
        return
    import pyarrow as pa
    import pyarrow.compute as pc

    for name, t in list(tables.items()):
        decl = schema.TABLES_BY_NAME.get(name)
        if decl is None or t is None:
            continue
        times = [c.name for c in decl.columns if c.unit == "ns"]
        if isinstance(t, pa.Table):
            for c in times:
                i = t.schema.get_field_index(c)
                if i >= 0:
                    t = t.set_column(i, c, pc.add(t.column(c), pa.scalar(delta_ns, pa.int64())))
            tables[name] = t
        else:
            for c in times:
                if c in t:
                    t[c] = [None if v is None else v + delta_ns for v in t[c]]
