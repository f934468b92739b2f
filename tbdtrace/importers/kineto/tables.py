"""The C++ Kineto parser's staging columns -> tbdtrace tables, without per-row objects.

Staging tables (``csrc/kineto/staging_tables.h``): kernels, memcpy, memset, runtime, sync, ops
(cpu_op / python_function ranges), markers (annotations, and op ranges named
ProfilerStep#N, which also give the steps) and memory. Their string columns are int32
codes into one dictionary of every string the parser interned; here each becomes a
dictionary array in order of first appearance (what ``dictionary_encode`` gives). Rules
that look at a string (memcpy and memset name patterns, ProfilerStep#N, sync kinds, the
runtime/driver split) run once per distinct string and reach the rows through numpy
indexing. ops and markers keep the parser's buffers (no copy).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tbdtrace import _native, schema
from tbdtrace.errors import TraceError
from tbdtrace.importers import collectives
from tbdtrace.importers.columns import bool_array, int_array, str_array
from tbdtrace.importers.kineto import header as kineto_header
from tbdtrace.importers.kineto import repair
from tbdtrace.importers.kineto import vocab as kineto_vocab
from tbdtrace.importers.kineto.feed import FileFix, ParseFailure, ParseJob, start

_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_PA_TYPES = {"int32": pa.int32(), "int64": pa.int64(), "uint64": pa.uint64(), "string": pa.int32()}
# The order the import returns its tables in.
ORDER = (
    "kernels",
    "memcpy",
    "memset",
    "memory",
    "runtime",
    "ops",
    "markers",
    "steps",
    "sync",
    "collectives",
)


class BaseOverflow(OverflowError):
    """A time plus its file's baseTimeNanoseconds leaves int64."""


class Staging:
    """The parser's output: columns per staging table, each string column with its own
    dictionary (``Parser.take_batch``), and which rows came from which file (rows are
    in file order)."""

    def __init__(
        self,
        parsed: dict[str, Any],
        segments: list[tuple[kineto_header.FileInfo, list[int]]],
        base_added: list[int] | None = None,
    ):
        self.cols: dict[str, dict[str, tuple[np.ndarray, np.ndarray | None, int]]] = parsed[
            "tables"
        ]
        self.dicts: dict[str, dict[str, tuple[np.ndarray, np.ndarray]]] = parsed["dicts"]
        self.types = {t: dict(cols) for t, cols in _native.kineto_layout()}
        self.files = [info for info, _ in segments]
        # Per file, what is left to add to its times (the parser may have added its base).
        self.base_todo = [
            f.base - added
            for f, added in zip(self.files, base_added or [0] * len(segments), strict=True)
        ]
        names = [t for t, _ in _native.kineto_layout()]
        self.counts = {t: [c[i] for _, c in segments] for i, t in enumerate(names)}

    def rows(self, table: str) -> int:
        return len(self.cols[table]["start_ns" if table != "memory" else "ts_ns"][0])

    def col(self, table: str, name: str) -> pa.Array:
        values, valid, nulls = self.cols[table][name]
        typ = _PA_TYPES[self.types[table][name]]
        bits = pa.py_buffer(valid) if nulls else None
        return pa.Array.from_buffers(typ, len(values), [bits, pa.py_buffer(values)], nulls)

    def times(self, table: str, name: str) -> pa.Array:
        """A time column with each file's baseTimeNanoseconds added (in place, once).
        BaseOverflow when a time leaves int64 (the parser then adds the bases itself)."""
        values = self.cols[table][name][0]
        start = 0
        for base, n in zip(self.base_todo, self.counts[table], strict=True):
            seg = values[start : start + n]
            start += n
            if base and n:
                lo, hi = int(seg.min()) + base, int(seg.max()) + base
                if lo < _I64_MIN or hi > _I64_MAX:
                    raise BaseOverflow(f"a time plus baseTimeNanoseconds {base} overflows")
                seg += base
        return self.col(table, name)

    def per_file(self, table: str, values: Sequence[Any]) -> np.ndarray:
        """Per-row copy of one value per file."""
        v = np.asarray(values)
        if v.size == 1:  # one file: a fill, not a repeat (several times faster)
            return np.full(self.counts[table][0], v[0], dtype=v.dtype)
        return np.repeat(v, self.counts[table])

    def ranks(self, table: str) -> pa.Array:
        lo, hi = -(1 << 31), (1 << 31) - 1
        rank = [f.rank if f.rank is not None and lo <= f.rank <= hi else None for f in self.files]
        null = self.per_file(table, [r is None for r in rank]).astype(bool)
        return int_array(self.per_file(table, [r or 0 for r in rank]), pa.int32(), null)

    def device_types(self, table: str) -> pa.Array:
        kinds = {"rocm" if f.rocm else "cuda" for f in self.files}
        n = sum(self.counts[table])
        if len(kinds) == 1 and n:  # one kind: the array mapped() gives, without its passes
            return constant(n, kinds.pop())
        ids = self.per_file(table, [1 if f.rocm else 0 for f in self.files]).astype(np.int32)
        return mapped(ids, None, ["cuda", "rocm"])

    def _strings(self, table: str, name: str) -> pa.Array:
        """The column's own dictionary (its strings in order of first appearance)."""
        offsets, data = self.dicts[table][name]
        n = len(offsets) - 1
        if len(data) < (1 << 31):
            return pa.Array.from_buffers(
                pa.string(), n, [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data)]
            )
        return pa.Array.from_buffers(  # pragma: no cover - over 2 GiB of distinct strings
            pa.large_string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
        ).cast(pa.string())

    def strs(self, table: str, name: str) -> pa.Array:
        """A string column as a dictionary array (first-appearance order, as the parser
        numbered it)."""
        values, valid, nulls = self.cols[table][name]
        bits = pa.py_buffer(valid) if nulls else None
        idx = pa.Array.from_buffers(pa.int32(), len(values), [bits, pa.py_buffer(values)], nulls)
        return pa.DictionaryArray.from_arrays(idx, self._strings(table, name))

    def distinct(self, table: str, name: str) -> tuple[np.ndarray, list[str]]:
        """(per-row index into the column's distinct strings, those strings); null rows
        get index -1."""
        values, valid, nulls = self.cols[table][name]
        codes = values.copy()
        if nulls:
            codes[~_unpack(valid, len(values))] = -1
        return codes, self._strings(table, name).to_pylist()


def _unpack(bits: np.ndarray | None, n: int) -> np.ndarray:
    if bits is None:
        return np.ones(n, bool)
    return np.unpackbits(bits, count=n, bitorder="little").astype(bool)


def dictionary(
    codes: np.ndarray, valid: np.ndarray | None, nulls: int, strings: pa.Array
) -> pa.Array:
    """Codes into `strings` (with a validity bitmap) -> dictionary array, first-appearance order."""
    new, used = _native.kineto_recode(codes, valid, len(strings))
    bits = pa.py_buffer(valid) if nulls else None
    idx = pa.Array.from_buffers(pa.int32(), len(codes), [bits, pa.py_buffer(new)], nulls)
    values = strings.take(int_array(used, pa.int32()))
    if values.type != pa.string():  # pragma: no cover - large_string dictionary
        values = values.cast(pa.string())
    return pa.DictionaryArray.from_arrays(idx, values)


def mapped(ids: np.ndarray, valid: np.ndarray | None, lut: Sequence[str | None]) -> pa.Array:
    """Rows indexing `lut` (a value per index, None for null; ids < 0 are null) ->
    dictionary array of the values."""
    values = list(dict.fromkeys(v for v in lut if v is not None))
    pos = {v: i for i, v in enumerate(values)}
    lut_ids = np.array([pos[v] if v is not None else -1 for v in lut] + [-1], np.int32)
    rows = lut_ids[np.where(ids >= 0, ids, len(lut))] if len(ids) else ids.astype(np.int32)
    if valid is not None:
        rows = np.where(valid, rows, -1)
    null = rows < 0
    nulls = int(null.sum())
    bits = np.packbits(~null, bitorder="little") if nulls else None
    return dictionary(rows.astype(np.int32), bits, nulls, str_array(values))


def constant(n: int, value: str) -> pa.Array:
    return pa.DictionaryArray.from_arrays(
        int_array(np.zeros(n, np.int32), pa.int32()), str_array([value])
    )


def assemble(s: Staging, host_spans: bool = True) -> dict[str, dict[str, pa.Array]]:
    """Every non-empty table as a mapping of Arrow columns (all-null columns left out).
    ``host_spans``: find each collective's host op among these rows (the streaming import
    finds them across batches, :mod:`.stream`)."""
    built: dict[str, dict[str, pa.Array]] = {}
    for table, build in (
        ("kernels", _kernels),
        ("memcpy", _memcpy),
        ("memset", _memset),
        ("runtime", _runtime),
        ("sync", _sync),
        ("memory", _memory),
        ("ops", _ops),
    ):
        if s.rows(table):
            built[table] = build(s)
    if s.rows("markers"):
        built.update(_markers(s))
    if "kernels" in built:
        ops = built.get("ops") if host_spans else None
        coll = collectives.from_kernels(built["kernels"], _coll_args(s), ops)
        if coll is not None:
            built["collectives"] = coll
    out = {}
    for table in ORDER:
        cols = built.get(table)
        if not cols or not len(next(iter(cols.values()))):
            continue
        names = schema.table(table).column_names
        out[table] = {n: cols[n] for n in names if n in cols and cols[n].null_count < len(cols[n])}
    return out


def _device_cols(s: Staging, t: str) -> dict[str, pa.Array]:
    cols = {
        c: s.col(t, c)
        for c in ("device_id", "stream_id", "context_id", "correlation_id", "external_id")
    }
    return {
        "start_ns": s.times(t, "start_ns"),
        "end_ns": s.times(t, "end_ns"),
        "device_type": s.device_types(t),
        "rank": s.ranks(t),
        **cols,
    }


def _kernels(s: Staging) -> dict[str, pa.Array]:
    t = "kernels"
    cols = _device_cols(s, t)
    cols["name"] = s.strs(t, "name")
    for c in (
        "grid_x",
        "grid_y",
        "grid_z",
        "block_x",
        "block_y",
        "block_z",
        "registers_per_thread",
        "static_shared_bytes",
    ):
        cols[c] = s.col(t, c)
    return cols


def _coll_args(s: Staging) -> dict[str, pa.Array | None]:
    """The kernels' collective args (collectives.ARGS), null columns as None."""
    t = "kernels"
    out: dict[str, pa.Array | None] = {}
    for c in collectives.ARGS:
        if not s.cols[t][c][2] < s.rows(t):  # every row null
            out[c] = None
        else:
            out[c] = s.strs(t, c) if c in collectives.STR_ARGS else s.col(t, c)
    return out


def _copy_bytes(s: Staging, t: str) -> pa.Array:
    values, valid, _ = s.cols[t]["bytes"]
    return int_array(np.where(_unpack(valid, len(values)), values, 0), pa.int64())  # `or 0`


def _memcpy(s: Staging) -> dict[str, pa.Array]:
    t = "memcpy"
    cols = _device_cols(s, t)
    cols["bytes"] = _copy_bytes(s, t)
    ids, names = s.distinct(t, "name")
    m = [kineto_vocab.MEMCPY_RE.match(n) for n in names]
    cols["copy_kind"] = mapped(ids, None, [x.group(1) if x else None for x in m])
    for i, c in ((2, "src_kind"), (3, "dst_kind")):
        lut = [kineto_vocab.MEMORY_KIND.get(x.group(i), "unknown") if x else None for x in m]
        cols[c] = mapped(ids, None, lut)
    return cols


def _memset(s: Staging) -> dict[str, pa.Array]:
    t = "memset"
    cols = _device_cols(s, t)
    cols["bytes"] = _copy_bytes(s, t)
    ids, names = s.distinct(t, "name")
    m = [kineto_vocab.MEMSET_RE.match(n) for n in names]
    lut = [kineto_vocab.MEMORY_KIND.get(x.group(1), "unknown") if x else None for x in m]
    cols["memory_kind"] = mapped(ids, None, lut)
    return cols


def _runtime(s: Staging) -> dict[str, pa.Array]:
    t = "runtime"
    ids, cats = s.distinct(t, "category")
    api = ["driver" if c in kineto_vocab.DRIVER_CATS else "runtime" for c in cats]
    return {
        "start_ns": s.times(t, "start_ns"),
        "end_ns": s.times(t, "end_ns"),
        "pid": s.col(t, "pid"),
        "tid": s.col(t, "tid"),
        "rank": s.ranks(t),
        "correlation_id": s.col(t, "correlation_id"),
        "external_id": s.col(t, "external_id"),
        "name": s.strs(t, "name"),
        "api": mapped(ids, None, api),
        "cbid": s.col(t, "cbid"),
    }


def _sync(s: Staging) -> dict[str, pa.Array]:
    t = "sync"
    ids, kinds = s.distinct(t, "sync_kind")
    lut = [kineto_vocab.SYNC_KINDS.get(k, "unknown") for k in kinds] + ["unknown"]
    cols = {
        c: s.col(t, c)
        for c in ("device_id", "stream_id", "context_id", "correlation_id", "pid", "tid")
    }
    return {
        "start_ns": s.times(t, "start_ns"),
        "end_ns": s.times(t, "end_ns"),
        "rank": s.ranks(t),
        "sync_kind": mapped(np.where(ids >= 0, ids, len(kinds)), None, lut),
        **cols,
    }


def _memory(s: Staging) -> dict[str, pa.Array]:
    t = "memory"
    nbytes = s.cols[t]["bytes"][0]
    if len(nbytes) and nbytes.min() == _I64_MIN:  # its size, 2**63, is beyond int64
        paths = ", ".join(str(f.path) for f in s.files)
        raise TraceError(
            f"{paths}: a value cannot be stored (a [memory] event of -2**63 bytes); report the file"
        )
    dt, dt_valid, _ = s.cols[t]["c10_device_type"]
    c10 = np.where(_unpack(dt_valid, len(dt)), dt, 0)  # `_int(...) or 0`
    n = len(nbytes)
    return {
        "ts_ns": s.times(t, "ts_ns"),
        "action": mapped((nbytes < 0).astype(np.int32), None, ["alloc", "free"]),
        "level": constant(n, "allocated"),
        "bytes": int_array(np.abs(nbytes), pa.int64()),
        "address": s.col(t, "address"),
        "device_id": s.col(t, "device_id"),
        # c10::DeviceType: 0 cpu, 1 cuda, 6 rocm, anything else read as cuda
        "device_type": mapped(
            np.select([c10 == 0, c10 == 6], [0, 2], 1), None, ["cpu", "cuda", "rocm"]
        ),
        "pid": s.col(t, "pid"),
        "tid": s.col(t, "tid"),
        "rank": s.ranks(t),
        "total_allocated_bytes": s.col(t, "total_allocated_bytes"),
        "total_reserved_bytes": s.col(t, "total_reserved_bytes"),
    }


def _ops(s: Staging) -> dict[str, pa.Array]:
    t = "ops"
    cols = {c: s.col(t, c) for c in ("pid", "tid", "external_id", "sequence_number", "flops")}
    strs = {
        c: s.strs(t, c)
        for c in (
            "name",
            "category",
            "input_shapes",
            "input_dtypes",
            "concrete_inputs",
            "call_from",
        )
    }
    return {
        "start_ns": s.times(t, "start_ns"),
        "end_ns": s.times(t, "end_ns"),
        "rank": s.ranks(t),
        **cols,
        **strs,
    }


def _markers(s: Staging) -> dict[str, dict[str, pa.Array]]:
    """Annotation ranges and ProfilerStep#N ranges -> markers; the ProfilerStep#N ranges
    not on a GPU -> steps."""
    t = "markers"
    name_ids, names = s.distinct(t, "name")
    cat_ids, cats = s.distinct(t, "category")
    steps = [kineto_vocab.STEP_RE.match(n) for n in names]
    is_step = np.array([m is not None for m in steps], bool)[name_ids]
    on_gpu = np.array([c == "gpu_user_annotation" for c in cats], bool)[cat_ids]
    n = len(on_gpu)
    dev = pc.if_else(bool_array(on_gpu), s.col(t, "device_id"), pa.nulls(n, pa.int32()))
    markers = {
        "start_ns": s.times(t, "start_ns"),
        "end_ns": s.times(t, "end_ns"),
        "pid": s.col(t, "pid"),
        "tid": s.col(t, "tid"),
        "rank": s.ranks(t),
        "device_id": dev,
        "name": s.strs(t, "name"),
        "domain": s.strs(t, "category"),
        "kind": constant(n, "range"),
        "marker_id": s.col(t, "external_id"),
    }
    step_mask = is_step & ~on_gpu
    keep = bool_array(step_mask)
    step_cols = {c: markers[c].filter(keep) for c in ("start_ns", "end_ns", "pid", "rank")}
    lo, hi = _I64_MIN, _I64_MAX
    nums = [int(m.group(1)) if m else None for m in steps]
    nums = [x if x is not None and lo <= x <= hi else None for x in nums]
    step_vals = np.array([x if x is not None else 0 for x in nums], np.int64)
    step_null = np.array([x is None for x in nums], bool)
    per_row = step_vals[name_ids][step_mask]
    step_cols["step"] = int_array(per_row, pa.int64(), step_null[name_ids][step_mask])
    step_cols["source"] = constant(len(per_row), "profiler_step")
    return {"markers": markers, "steps": step_cols}


def import_files(
    files: list[Path], job: ParseJob | None = None
) -> tuple[dict[str, dict[str, pa.Array]], dict[str, Any]]:
    """Same contract as :func:`tbdtrace.importers.kineto.import_files`; ``job``: a parse
    of ``files`` already started with :func:`tbdtrace.importers.kineto.feed.start`.

    A file the parser stops on is repaired and the files parsed again, or reported in one
    line (:func:`tbdtrace.importers.kineto.repair.resolve`)."""
    fixes: dict[int, FileFix] = {}
    for _ in range(repair.MAX_PARSES):
        try:
            done = (job or start(files, background=False, fixes=fixes)).wait()
        except ParseFailure as failure:
            fixes = repair.resolve(failure, fixes)
            job = None
            continue
        try:
            return _tables(files, done)
        except BaseOverflow:  # parse again, the parser adding each file's base itself
            bases = [info.base for info in _headers(files, done)[1]]
            fixes = {i: replace(fixes.get(i, FileFix()), base=b) for i, b in enumerate(bases)}
            job = None
    raise TraceError(  # pragma: no cover - scores of duplicated traceEvents keys
        f"{', '.join(map(str, files))}: the file still cannot be read after "
        f"{repair.MAX_PARSES} repairs; report the file"
    )


def _headers(
    files: list[Path], job: ParseJob
) -> tuple[kineto_header.FileHeaders, list[kineto_header.FileInfo]]:
    imp = kineto_header.FileHeaders()  # devices and per-file meta
    infos = []
    for i, fp in enumerate(job.parsed):
        doc = {} if fp.top_level_list else _header(fp.path, fp.header)
        info = imp.begin_file(fp.path, doc, i if len(files) > 1 else None)
        imp.skipped.update(fp.skipped)
        imp.end_file(info, fp.events, fp.skipped)
        infos.append(info)
    return imp, infos


def _tables(
    files: list[Path], job: ParseJob, batch: dict[str, Any] | None = None
) -> tuple[dict[str, dict[str, pa.Array]], dict[str, Any]]:
    """The tables of a finished parse; ``batch``: its rows, when already taken (a
    batch-mode parse whose rows all came in one batch)."""
    imp, infos = _headers(files, job)
    segments = [(info, fp.rows) for info, fp in zip(infos, job.parsed, strict=True)]
    rows = batch if batch is not None else job.parser.take_batch()
    staging = Staging(rows, segments, [fp.base_added for fp in job.parsed])
    tables = assemble(staging)
    devices = imp.t["devices"]
    if len(devices):
        tables["devices"] = devices.arrow_columns()
    return tables, kineto_header.file_meta(imp, files, tables)


def _header(path: Path, raw: bytes) -> dict[str, Any]:
    """The top-level keys other than traceEvents (the parser kept their JSON text)."""
    try:
        doc = json.loads("{" + raw.decode("utf-8", errors="replace") + "}", parse_float=str)
    except (ValueError, RecursionError) as e:
        raise TraceError(
            f"{path}: invalid JSON outside traceEvents ({e}); re-export the trace"
        ) from e
    assert isinstance(doc, dict)
    return doc


def in_memory_or_none(
    files: list[Path], job: ParseJob, taken: list[Any]
) -> tuple[dict[str, dict[str, pa.Array]], dict[str, Any]] | None:
    """A batch-mode parse of one Kineto file as tables in memory when all its rows come
    in its first batch (the file is small enough: see ``IN_MEMORY_ROWS`` of
    tbdtrace/commands/_open.py); else None, the batches taken so far appended to
    ``taken`` for the streaming import to go on with (:mod:`.stream`). A file the parser
    stops on, or whose base overflows, is imported again in memory as
    :func:`import_files` does."""
    try:
        first = job.next_batch()
        second = job.next_batch() if first is not None else None
    except ParseFailure:
        job.cancel()
        return import_files(files)
    if second is not None:
        taken += [first, second]
        return None
    if len(files) != 1:  # several files: a batch per file
        job.cancel()
        return import_files(files)
    try:
        return _tables(files, job, first[1] if first is not None else None)
    except BaseOverflow:
        return import_files(files)
