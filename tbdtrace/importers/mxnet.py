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
* ``ph: X`` events (custom ``mx.profiler.Task``/``Frame`` ranges): ``markers`` ranges,
  only in a file with MXNet's marks (its device or category processes, or an operator or
  C API pair): any Chrome trace has ``X`` events, and a PyTorch trace forced through
  ``--format mxnet`` must find no MXNet events, not import its ranges as markers.
* ``ph: C`` counters (API call counts, device storage in kB) are not imported.

Times are integer microseconds since the epoch (CLOCK_REALTIME).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any

from tbdtrace.errors import TraceError
from tbdtrace.importers import sniff as _sniff
from tbdtrace.importers import validate
from tbdtrace.importers.columns import TableBuilder
from tbdtrace.importers.kineto.repair import read_json

_ASYNC_API = "MXNET_C_API"


def _ids(v: Any) -> int | None:
    # MXNet writes 64-bit hashes as pids/tids: keep those that fit int64 columns.
    return v if isinstance(v, int) and -(1 << 63) <= v < (1 << 63) else None


def _key(v: Any) -> Hashable:
    """A pid/tid usable as a dict key (a list or object written there becomes its text)."""
    return v if isinstance(v, int | str | float | None) else repr(v)


def _args(e: dict[str, Any]) -> dict[str, Any]:
    a = e.get("args")
    return a if isinstance(a, dict) else {}


class _Importer:
    def __init__(self) -> None:
        self.t = {n: TableBuilder(n) for n in ("ops", "kernels", "markers")}
        self.skipped: Counter[str] = Counter()  # reason -> events left out (validate.py)

    def add(self, path: Path, rank: int | None) -> dict[str, Any]:
        doc = read_json(path)
        events = doc.get("traceEvents") if isinstance(doc, dict) else None
        if not isinstance(events, list):
            raise TraceError(f"{path}: no traceEvents list; this is not an MXNet profile")
        procs = {
            _key(e.get("pid")): str(_args(e).get("name", ""))
            for e in events
            if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "process_name"
        }
        marked = _mxnet_marks(procs.values(), events)
        open_: dict[tuple[Any, ...], list[int | str]] = defaultdict(list)
        unmatched = 0
        before = Counter(self.skipped)
        for e in events:
            if not isinstance(e, dict) or "ts" not in e:
                continue
            ph, cat, name = e.get("ph"), e.get("cat"), str(e.get("name"))
            sync = ph in ("B", "E") and cat == "operator"
            api = ph in ("b", "e") and cat == _ASYNC_API
            if sync or api:
                key = (sync, _key(e.get("pid")), _key(e.get("tid")), name)
                if ph in ("B", "b"):
                    # A begin with an unusable time still pairs with its end (kept in the
                    # stack as its reason), so the pairs after it stay matched.
                    open_[key].append(validate.us_to_ns_checked(e["ts"]))
                    continue
                if not open_[key]:
                    unmatched += 1
                    continue
                start, end = open_[key].pop(), validate.us_to_ns_checked(e["ts"])
                if isinstance(start, str) or isinstance(end, str):
                    self.skipped[start if isinstance(start, str) else str(end)] += 1
                    continue
                bad = validate.span_ns(start, end)
                if bad is not None:
                    self.skipped[bad] += 1
                elif sync:
                    self._op(name, start, end, procs.get(_key(e.get("pid")), ""), e, rank)
                else:
                    self._marker(name, start, end, e, rank, _ASYNC_API)
            elif ph == "X" and marked:
                span = _x_span(e)
                if isinstance(span, str):
                    self.skipped[span] += 1
                    continue
                domain = str(cat) if cat is not None else None
                self._marker(name, span[0], span[1], e, rank, domain)
        unmatched += sum(len(v) for v in open_.values())
        self.skipped["unmatched_begin_end"] += unmatched
        return {
            "file": str(path),
            "processes": sorted(set(procs.values())),
            "unmatched_begin_end": unmatched,
            "skipped_events": validate.merged(self.skipped - before),
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
            dev = dev if dev.isascii() and dev.isdigit() and len(dev) < 10 else ""
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


_DEVICE_PROCESS = re.compile(r"(cpu|gpu|cpu pinned|cpu shared)/\d*")


def _mxnet_marks(processes: Iterable[str], events: list[Any]) -> bool:
    """Does the dump carry MXNet's marks: a device or category process as MXNet names
    them, or an operator (``B``/``E``) or C API (``b``/``e``) event?"""
    if any(
        p in ("operator", _ASYNC_API, "Device Storage") or _DEVICE_PROCESS.fullmatch(p)
        for p in processes
    ):
        return True
    return any(
        isinstance(e, dict)
        and (
            (e.get("ph") in ("B", "E") and e.get("cat") == "operator")
            or (e.get("ph") in ("b", "e") and e.get("cat") == _ASYNC_API)
        )
        for e in events
    )


def _x_span(e: dict[str, Any]) -> tuple[int, int] | str:
    """(start_ns, end_ns) of an X event, or why it is skipped."""
    start = validate.us_to_ns_checked(e["ts"])
    dur = validate.us_to_ns_checked(e["dur"]) if "dur" in e else 0
    if isinstance(start, str) or isinstance(dur, str):
        return start if isinstance(start, str) else str(dur)
    if dur < 0:
        return "negative_duration"
    return (start, start + dur) if validate.in_range(start + dur) else "time_out_of_range"


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
        "skipped_events": validate.merged(imp.skipped),
        "extra": {"files": metas},
    }
    return tables, meta


sniff = _sniff.mxnet  # the format test (tbdtrace.importers.sniff)
