"""Import MXNet profiler JSON (``mx.profiler`` dump, MXNet 1.x) into tbdtrace tables.

The dump is a Chrome trace. Processes are named by ``ph: M`` events: one per device
(``cpu/0``, ``gpu/0``, ``cpu pinned/``, ...) plus pseudo-processes named after categories
(``operator``, ``MXNET_C_API``, ``Device Storage``). Mapping:

* ``ph: B``/``E`` pairs of category ``operator`` on a device process: an ``ops`` row
  (category ``operator``). On a ``cpu/N`` device they are the work itself, so also a
  ``kernels`` row with device_type ``cpu``. Pairs are matched per (pid, tid, name) in
  stack order.
* ``ph: b``/``e`` async pairs of category ``operator`` repeat the same operators on the
  ``operator`` pseudo-process; they are skipped (counting them would double every op).
* ``ph: b``/``e`` pairs of category ``MXNET_C_API``: ``markers`` ranges, domain
  ``MXNET_C_API`` (frontend calls such as MXImperativeInvokeEx).
* ``ph: X`` events (custom ``mx.profiler.Task``/``Frame`` ranges): ``markers`` ranges.
* ``ph: C`` counters (API call counts, device storage in kB) are not imported.

Times are integer microseconds since the epoch (CLOCK_REALTIME).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tbdtrace.errors import TraceError
from tbdtrace.importers import sniff as _sniff
from tbdtrace.importers.columns import TableBuilder
from tbdtrace.importers.kineto import read_json, us_to_ns

_ASYNC_API = "MXNET_C_API"


def _ids(v: Any) -> int | None:
    # MXNet writes 64-bit hashes as pids/tids: keep those that fit int64 columns.
    return v if isinstance(v, int) and -(1 << 63) <= v < (1 << 63) else None


class _Importer:
    def __init__(self) -> None:
        self.t = {n: TableBuilder(n) for n in ("ops", "kernels", "markers")}

    def add(self, path: Path, rank: int | None) -> dict[str, Any]:
        doc = read_json(path)
        events = doc.get("traceEvents") if isinstance(doc, dict) else None
        if not isinstance(events, list):
            raise TraceError(f"{path}: no traceEvents list; this is not an MXNet profile")
        procs = {
            e.get("pid"): str((e.get("args") or {}).get("name", ""))
            for e in events
            if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "process_name"
        }
        open_: dict[tuple[Any, ...], list[int]] = defaultdict(list)
        unmatched = 0
        for e in events:
            if not isinstance(e, dict) or "ts" not in e:
                continue
            ph, cat, name = e.get("ph"), e.get("cat"), str(e.get("name"))
            sync = ph in ("B", "E") and cat == "operator"
            api = ph in ("b", "e") and cat == _ASYNC_API
            if sync or api:
                key = (sync, e.get("pid"), e.get("tid"), name)
                if ph in ("B", "b"):
                    open_[key].append(us_to_ns(e["ts"]))
                    continue
                if not open_[key]:
                    unmatched += 1
                    continue
                start = open_[key].pop()
                end = us_to_ns(e["ts"])
                if sync:
                    self._op(name, start, end, procs.get(e.get("pid"), ""), e, rank)
                else:
                    self._marker(name, start, end, e, rank, _ASYNC_API)
            elif ph == "X":
                start = us_to_ns(e["ts"])
                self._marker(
                    name,
                    start,
                    start + us_to_ns(e.get("dur", 0)),
                    e,
                    rank,
                    str(cat) if cat is not None else None,
                )
        unmatched += sum(len(v) for v in open_.values())
        return {
            "file": str(path),
            "processes": sorted(set(procs.values())),
            "unmatched_begin_end": unmatched,
        }

    def _op(
        self, name: str, start: int, end: int, proc: str, e: dict[str, Any], rank: int | None
    ) -> None:
        tid = _ids(e.get("tid"))
        self.t["ops"].append(
            start_ns=start, end_ns=end, tid=tid, rank=rank, name=name, category="operator"
        )
        if proc.startswith("cpu/"):
            dev = proc.split("/", 1)[1]
            self.t["kernels"].append(
                start_ns=start,
                end_ns=end,
                tid=tid,
                rank=rank,
                name=name,
                device_type="cpu",
                device_id=int(dev) if dev.isdigit() else 0,
            )

    def _marker(
        self,
        name: str,
        start: int,
        end: int,
        e: dict[str, Any],
        rank: int | None,
        domain: str | None,
    ) -> None:
        self.t["markers"].append(
            start_ns=start,
            end_ns=end,
            tid=_ids(e.get("tid")),
            rank=rank,
            name=name,
            domain=domain,
            kind="range",
        )


def import_files(paths: Sequence[str | Path]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Read MXNet profiler dumps; one rank per file when several are given.

    Returns (tables, meta) for :func:`tbdtrace.trace.write`.
    """
    files = [Path(p) for p in paths]
    imp = _Importer()
    metas = [imp.add(p, i if len(files) > 1 else None) for i, p in enumerate(files)]
    tables = {n: b.columns() for n, b in imp.t.items() if len(b)}
    starts = [min(b.column_values("start_ns")) for b in imp.t.values() if len(b)]
    meta = {
        "source": "mxnet",
        "framework": "mxnet",
        "source_files": [str(p) for p in files],
        "ranks": list(range(len(files))) if len(files) > 1 else [],
        "start_time_ns": min(starts) if starts else None,
        "clock": "CLOCK_REALTIME",
        "extra": {"files": metas},
    }
    return tables, meta


sniff = _sniff.mxnet  # the format test (tbdtrace.importers.sniff)
