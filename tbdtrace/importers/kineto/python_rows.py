"""The Python row-by-row reading of Kineto files (the C++ parser's fallback).

Handles current and pre-1.10 category names (kernel/Kernel, gpu_memcpy/Memcpy,
gpu_memset/Memset, cuda_runtime/Runtime, cpu_op/Operator), ROCm traces, CPU-only traces,
traces without distributedInfo, ``baseTimeNanoseconds`` (newer Kineto writes times
relative to it) and sub-microsecond timestamps.

Times: Kineto writes microseconds, as integers or decimals. They are converted from the
decimal *text* to integer nanoseconds (no float in between), so ``ts`` 1.5 is exactly
1500 ns. Digits finer than 1 ns are rounded half to even.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pyarrow as pa

from tbdtrace import schema
from tbdtrace.errors import TraceError
from tbdtrace.importers import collectives, json_stream, validate
from tbdtrace.importers.columns import TableBuilder
from tbdtrace.importers.kineto.header import FileHeaders, file_meta
from tbdtrace.importers.kineto.repair import read_json
from tbdtrace.importers.kineto.vocab import (
    ANNOTATION_CATS,
    C10_DEVICE_TYPES,
    DRIVER_CATS,
    KERNEL_CATS,
    MEMCPY_CATS,
    MEMCPY_RE,
    MEMORY_KIND,
    MEMSET_CATS,
    MEMSET_RE,
    OP_CATS,
    ROUTED_CATS,
    RUNTIME_CATS,
    STEP_RE,
    SYNC_CATS,
    SYNC_KINDS,
    _int,
    _u64,
)

log = logging.getLogger(__name__)


def _triple(v: Any) -> tuple[int | None, int | None, int | None]:
    if isinstance(v, list) and len(v) == 3:
        return _int(v[0]), _int(v[1]), _int(v[2])
    return None, None, None


class KinetoImporter(FileHeaders):
    """Accumulates the events of one or more Kineto files into column builders."""

    def __init__(self) -> None:
        self.t = {
            name: TableBuilder(name)
            for name in (
                "kernels",
                "memcpy",
                "memset",
                "memory",
                "runtime",
                "ops",
                "markers",
                "steps",
                "devices",
                "sync",
            )
        }
        super().__init__(self.t)
        # Per kernel row, the collective args (collectives.ARGS) for the collectives table.
        self.coll_args: dict[str, list[Any]] = {c: [] for c in collectives.ARGS}

    def add_file(self, path: Path, rank_if_unknown: int | None) -> None:
        events, doc = _load(path)
        f = self.begin_file(path, doc, rank_if_unknown)
        before = Counter(self.skipped)
        n_events = 0
        for i, ev in enumerate(events):
            n_events += 1
            if not isinstance(ev, dict):
                continue
            try:
                self._event(ev, f.base, f.rank, f.rocm)
            except (ValueError, TypeError, KeyError, AttributeError) as e:
                raise TraceError(
                    f"{path}: event {i} ({str(ev.get('name'))[:60]!r}) is malformed ({e}); "
                    "re-export the trace or report the file"
                ) from e
        self.end_file(f, n_events, self.skipped - before)

    def _event(self, ev: dict[str, Any], base: int, rank: int | None, rocm: bool) -> None:
        ph = ev.get("ph")
        cat = ev.get("cat")
        name = ev.get("name")
        if ph == "i" and name == "[memory]":
            self._memory(ev, base, rank)
            return
        if ph != "X" or "ts" not in ev or not isinstance(cat, str) or cat not in ROUTED_CATS:
            return
        span = self._span(ev, base)
        args = ev.get("args") or {}
        if isinstance(span, str) or not isinstance(args, dict):
            self.skipped[span if isinstance(span, str) else "args_not_an_object"] += 1
            return
        start, end = span
        ext = _int(args.get("External id", args.get("external id")))
        if cat in KERNEL_CATS:
            gx, gy, gz = _triple(args.get("grid"))
            bx, by, bz = _triple(args.get("block"))
            self.t["kernels"].append(
                start_ns=start,
                end_ns=end,
                device_id=_int(args.get("device", ev.get("pid"))),
                device_type="rocm" if rocm else "cuda",
                stream_id=_int(args.get("stream", ev.get("tid"))),
                context_id=_int(args.get("context")),
                correlation_id=_int(args.get("correlation")),
                external_id=ext,
                rank=rank,
                name=str(name),
                grid_x=gx,
                grid_y=gy,
                grid_z=gz,
                block_x=bx,
                block_y=by,
                block_z=bz,
                registers_per_thread=_int(args.get("registers per thread")),
                static_shared_bytes=_int(args.get("shared memory")),
            )
            for c, key in collectives.ARGS.items():
                v = args.get(key)
                if c in collectives.STR_ARGS:
                    self.coll_args[c].append(v if isinstance(v, str) else None)
                else:
                    self.coll_args[c].append(_int(v))
        elif cat in MEMCPY_CATS:
            m = MEMCPY_RE.match(str(name))
            self.t["memcpy"].append(
                start_ns=start,
                end_ns=end,
                device_id=_int(args.get("device", ev.get("pid"))),
                device_type="rocm" if rocm else "cuda",
                stream_id=_int(args.get("stream", ev.get("tid"))),
                context_id=_int(args.get("context")),
                correlation_id=_int(args.get("correlation")),
                external_id=ext,
                rank=rank,
                bytes=_int(args.get("bytes")) or 0,
                copy_kind=m.group(1) if m else None,
                src_kind=MEMORY_KIND.get(m.group(2), "unknown") if m else None,
                dst_kind=MEMORY_KIND.get(m.group(3), "unknown") if m else None,
            )
        elif cat in MEMSET_CATS:
            m = MEMSET_RE.match(str(name))
            self.t["memset"].append(
                start_ns=start,
                end_ns=end,
                device_id=_int(args.get("device", ev.get("pid"))),
                device_type="rocm" if rocm else "cuda",
                stream_id=_int(args.get("stream", ev.get("tid"))),
                context_id=_int(args.get("context")),
                correlation_id=_int(args.get("correlation")),
                external_id=ext,
                rank=rank,
                bytes=_int(args.get("bytes")) or 0,
                memory_kind=MEMORY_KIND.get(m.group(1), "unknown") if m else None,
            )
        elif cat in RUNTIME_CATS or cat in DRIVER_CATS:
            self.t["runtime"].append(
                start_ns=start,
                end_ns=end,
                pid=_int(ev.get("pid")),
                tid=_int(ev.get("tid")),
                rank=rank,
                correlation_id=_int(args.get("correlation")),
                external_id=ext,
                name=str(name),
                api="driver" if cat in DRIVER_CATS else "runtime",
                cbid=_int(args.get("cbid")),
            )
        elif cat in SYNC_CATS:
            kind = args.get("cuda_sync_kind", name)
            self.t["sync"].append(
                start_ns=start,
                end_ns=end,
                device_id=_int(args.get("device")),
                stream_id=_int(args.get("stream")),
                context_id=_int(args.get("context")),
                correlation_id=_int(args.get("correlation")),
                pid=_int(ev.get("pid")),
                tid=_int(ev.get("tid")),
                rank=rank,
                sync_kind=SYNC_KINDS.get(str(kind), "unknown"),
            )
        elif cat in OP_CATS or cat in ANNOTATION_CATS:
            self._host_range(ev, cat, start, end, ext, rank)

    @staticmethod
    def _span(ev: dict[str, Any], base: int) -> tuple[int, int] | str:
        """(start_ns, end_ns) of an X event, or why it is skipped. The checks run in the
        order of the C++ parser's (csrc/kineto/rows.cpp, Parser::dispatch): ts, dur, a
        negative dur, ts + dur, then the file's baseTimeNanoseconds added."""
        ts = validate.us_to_ns_checked(ev["ts"])
        if isinstance(ts, str):
            return ts
        dur = validate.us_to_ns_checked(ev["dur"]) if "dur" in ev else 0
        if isinstance(dur, str):
            return dur
        if dur < 0:
            return "negative_duration"
        start, end = base + ts, base + ts + dur
        if not (validate.in_range(ts + dur) and validate.in_range(start)):
            return "time_out_of_range"
        return (start, end) if validate.in_range(end) else "time_out_of_range"

    def _host_range(
        self,
        ev: dict[str, Any],
        cat: str,
        start: int,
        end: int,
        ext: int | None,
        rank: int | None,
    ) -> None:
        name = str(ev.get("name"))
        args = ev.get("args") or {}
        pid, tid = _int(ev.get("pid")), _int(ev.get("tid"))
        on_gpu = cat == "gpu_user_annotation"
        step = STEP_RE.match(name)
        if step and not on_gpu:
            self.t["steps"].append(
                step=int(step.group(1)),
                start_ns=start,
                end_ns=end,
                pid=pid,
                rank=rank,
                source="profiler_step",
            )
        if cat in ANNOTATION_CATS or step:
            self.t["markers"].append(
                start_ns=start,
                end_ns=end,
                pid=pid,
                tid=tid,
                rank=rank,
                device_id=_int(args.get("device", pid)) if on_gpu else None,
                name=name,
                domain=cat,
                kind="range",
                marker_id=ext,
            )
            return
        self.t["ops"].append(
            start_ns=start,
            end_ns=end,
            pid=pid,
            tid=tid,
            rank=rank,
            external_id=ext,
            name=name,
            category=cat,
            sequence_number=_int(args.get("Sequence number")),
            input_shapes=_compact(args.get("Input Dims")),
            input_dtypes=_compact(args.get("Input type")),
            concrete_inputs=_compact(args.get("Concrete Inputs")),
            flops=_int(args.get("flops")),
        )

    def _memory(self, ev: dict[str, Any], base: int, rank: int | None) -> None:
        args = ev.get("args") or {}
        if not isinstance(args, dict):
            self.skipped["args_not_an_object"] += 1
            return
        nbytes = _int(args.get("Bytes"))
        if nbytes is None or "ts" not in ev:
            return
        ts = validate.us_to_ns_checked(ev["ts"])
        if not isinstance(ts, str) and not validate.in_range(base + ts):
            ts = "time_out_of_range"
        if isinstance(ts, str):
            self.skipped[ts] += 1
            return
        dev_type = C10_DEVICE_TYPES.get(_int(args.get("Device Type")) or 0, "cuda")
        addr = _u64(args.get("Addr"))
        self.t["memory"].append(
            ts_ns=base + ts,
            action="alloc" if nbytes >= 0 else "free",
            level="allocated",
            bytes=abs(nbytes),
            address=addr,
            device_id=_int(args.get("Device Id")),
            device_type=dev_type,
            pid=_int(ev.get("pid")),
            tid=_int(ev.get("tid")),
            rank=rank,
            total_allocated_bytes=_int(args.get("Total Allocated")),
            total_reserved_bytes=_int(args.get("Total Reserved")),
        )


# Files above this size (on disk, compressed or not) are streamed event by event.
STREAM_ABOVE_BYTES = 256 << 20


def _load(path: Path) -> tuple[Iterable[Any], dict[str, Any]]:
    """(events, top-level keys) of a Kineto file; streamed when it is big."""
    try:
        big = path.stat().st_size > STREAM_ABOVE_BYTES
    except OSError as e:
        raise TraceError(f"{path}: cannot read ({e.strerror}); check the path") from e
    if big:
        return json_stream.iter_events(path), json_stream.header(path)
    doc = read_json(path)
    if isinstance(doc, list):
        return doc, {}
    if isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list):
        return doc["traceEvents"], doc
    raise TraceError(f"{path}: no traceEvents list; this is not a PyTorch profiler (Kineto) trace")


def _compact(v: Any) -> str | None:
    if v is None:
        return None
    return json.dumps(v, separators=(",", ":"))


def import_files(files: list[Path]) -> tuple[dict[str, dict[str, pa.Array]], dict[str, Any]]:
    imp = KinetoImporter()
    for i, p in enumerate(files):
        imp.add_file(p, rank_if_unknown=i if len(files) > 1 else None)
    try:
        tables = {name: b.arrow_columns() for name, b in imp.t.items() if len(b)}
        coll = _collectives(imp, tables)
        if coll:
            tables["collectives"] = coll
    except (pa.ArrowException, UnicodeEncodeError) as e:
        raise TraceError(
            f"{', '.join(map(str, files))}: a value cannot be stored ({e}); report the file"
        ) from e
    return tables, file_meta(imp, files, tables)


def _collectives(
    imp: KinetoImporter, tables: dict[str, dict[str, pa.Array]]
) -> dict[str, pa.Array] | None:
    kern = tables.get("kernels")
    if not kern:
        return None
    args: dict[str, pa.Array | None] = {}
    for c, values in imp.coll_args.items():
        if all(v is None for v in values):
            args[c] = None
        elif c in collectives.STR_ARGS:
            args[c] = pa.array(values, pa.string()).dictionary_encode()
        else:
            typ = pa.int32() if c == "coll_group_size" else pa.int64()
            lo, hi = (-(1 << 31), 1 << 31) if typ == pa.int32() else (-(1 << 63), 1 << 63)
            args[c] = pa.array([v if v is not None and lo <= v < hi else None for v in values], typ)
    cols = collectives.from_kernels(kern, args, tables.get("ops"))
    if cols is None:
        return None
    names = schema.table("collectives").column_names
    return {k: cols[k] for k in names if k in cols and cols[k].null_count < len(cols[k])}
