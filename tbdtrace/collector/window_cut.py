"""Cut a windowed capture's tables to its windows.

The backends collect only inside windows, so little is cut: a window's warm-up steps
(collected so that one-time costs stay out of the recorded steps, then discarded, as
``torch.profiler.schedule`` does), the steps of the steps file outside every window, and
the host samples, which the sampler takes for the whole run. A row stays when its time
(``start_ns``, else ``ts_ns``) lies in a window of its process (or of any process, when
the row or the window has no pid): ``[active start, end]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from tbdtrace import schema, trace

Span = tuple[int, int, int | None]  # (active start ns, end ns, pid or None)


def _mask(times: np.ndarray, pids: np.ndarray | None, spans: Sequence[Span]) -> np.ndarray:
    keep = np.zeros(len(times), dtype=bool)
    for a, b, pid in spans:
        inside = (times >= a) & (times <= b)
        if pid is not None and pids is not None:
            inside &= (pids == pid) | (pids < 0)
        keep |= inside
    return keep


def keep(tables: dict[str, Any], spans: Sequence[Span]) -> None:
    """Drop, in place, the rows of ``tables`` outside ``spans`` (tables without a time
    column stay whole)."""
    for name in list(tables):
        t = tables[name]
        if name not in schema.TABLES_BY_NAME:
            continue  # the collector's private tables (contexts): no time of their own
        if not isinstance(t, pa.Table):
            t = trace.to_table(name, t)
        col = "start_ns" if "start_ns" in t.column_names else "ts_ns"
        if col not in t.column_names:
            continue
        times = t.column(col).fill_null(0).to_numpy(zero_copy_only=False)
        pids = None
        if "pid" in t.column_names:
            pids = t.column("pid").fill_null(-1).to_numpy(zero_copy_only=False)
        mask = _mask(times, pids, spans)
        if not mask.all():
            t = t.filter(pa.array(mask))
        tables[name] = t
