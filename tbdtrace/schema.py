"""The tbdtrace trace schema, declared once.

A trace is a directory holding one Parquet file per table (``<table>.parquet``) and
``meta.json``. This module is the single source of truth for the tables, their columns
(name, Arrow type, unit, doc) and the enumerations used in string columns. The C++
collector's column layout is checked against it by a test, and ``docs/TRACE_FORMAT.md``
is generated from it (``make docs``; a test keeps
the file in step).

Conventions:
* times are int64 nanoseconds since the Unix epoch on the trace clock (``*_ns``);
* sizes are bytes (``*_bytes``), rates ``*_per_s``;
* strings are dictionary-encoded (``dictionary<int32, string>``);
* a missing value is an Arrow null, never a sentinel.

Storage (version 3): each table is a Parquet file (``<table>.parquet``) holding the true
value of every column, so any Parquet reader (DuckDB, Polars, pandas, Spark) sees the
same rows as ``tbdtrace.open``. Event tables are written in time order (``start_ns`` then
``end_ns`` descending, so a range precedes the ranges it contains; else ``ts_ns``;
stable); the columns with an ``encoding`` (times and ids) are stored
``DELTA_BINARY_PACKED``, which in time order turns large, nearly sorted numbers into
small differences, the others dictionary-encoded; pages are zstd-compressed.
Versions 1 and 2 (``<table>.arrow``, Arrow IPC) are still read: version 2 stored those
columns as ``encoding`` says (``delta``: difference from the previous row, the first row
holding its value; ``minus_start_ns``: ``end_ns - start_ns``) under the field name
``<column>.<encoding>``, and the reader decodes them (``tbdtrace/tablefile.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

SCHEMA_VERSION = 3
# Versions this reader accepts: 1 and 2 are Arrow IPC files, 1 without encoded fields;
# `tbdtrace upgrade` rewrites them as version 3.
READABLE_VERSIONS = (1, 2, 3)

# Version-2 field encodings (still read); in version 3 such columns are stored true,
# DELTA_BINARY_PACKED.
DELTA = "delta"  # stored as the difference from the previous row (first row: the value)
MINUS_START = "minus_start_ns"  # end stored as end_ns - start_ns
ENCODINGS = (DELTA, MINUS_START)

STR = pa.dictionary(pa.int32(), pa.string())
I32 = pa.int32()
I64 = pa.int64()
U64 = pa.uint64()
F64 = pa.float64()
BOOL = pa.bool_()


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    unit: str  # "ns", "bytes", "count", "id", "text", "ratio", ...
    doc: str
    nullable: bool = True
    encoding: str | None = None  # version-2 encoding (ENCODINGS); None = stored as is

    @property
    def disk_name(self) -> str:
        """Name of the field in a version-2 table file."""
        return self.name if self.encoding is None else f"{self.name}.{self.encoding}"

    @property
    def parquet_encoding(self) -> str:
        """Parquet encoding of the column in version-3 files: the time and id columns
        (those version 2 encoded) as sorted differences, the rest as dictionaries."""
        return "DELTA_BINARY_PACKED" if self.encoding else "RLE_DICTIONARY"


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...]

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([pa.field(c.name, c.type, nullable=c.nullable) for c in self.columns])

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(f"table {self.name!r} has no column {name!r}")

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def time_column(self) -> str | None:
        """The column rows are ordered by on disk (start_ns, else ts_ns), if any."""
        names = self.column_names
        return next((c for c in ("start_ns", "ts_ns") if c in names), None)


def _c(
    name: str,
    type_: pa.DataType,
    unit: str,
    doc: str,
    nullable: bool = True,
    encoding: str | None = None,
) -> Column:
    return Column(name, type_, unit, doc, nullable, encoding)


# Columns shared by event tables: where the event happened and who caused it.
def _span(what: str) -> tuple[Column, ...]:
    return (
        _c("start_ns", I64, "ns", f"{what} start", nullable=False, encoding=DELTA),
        _c("end_ns", I64, "ns", f"{what} end (>= start_ns)", nullable=False, encoding=MINUS_START),
    )


_PID = _c("pid", I32, "id", "operating-system process id of the process that issued it")
_TID = _c("tid", I64, "id", "operating-system thread id")
_RANK = _c("rank", I32, "id", "distributed rank of the source file (null when unknown)")
_DEVICE = _c("device_id", I32, "id", "device index within its process (CUDA ordinal)")
_DEVICE_TYPE = _c("device_type", STR, "enum:DEVICE_TYPES", "cuda, rocm or cpu")
_STREAM = _c("stream_id", I64, "id", "stream (queue) the work ran on")
_CORR = _c(
    "correlation_id",
    I64,
    "id",
    "links device work to the runtime/driver call that issued it",
    encoding=DELTA,
)
_EXT = _c(
    "external_id",
    I64,
    "id",
    "framework op id (external correlation): joins to ops.external_id",
    encoding=DELTA,
)
_CTX = _c("context_id", I64, "id", "CUDA context id")

DEVICE_TYPES = ("cuda", "rocm", "cpu")
MEMCPY_KINDS = ("HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA")
MEMORY_KINDS = (
    "pageable",
    "pinned",
    "device",
    "array",
    "managed",
    "device_static",
    "managed_static",
    "unknown",
)
MEMORY_ACTIONS = ("alloc", "free")
MEMORY_LEVELS = ("reserved", "allocated")
MEMORY_CATEGORIES = (
    "weights",
    "gradients",
    "optimizer_state",
    "inputs",
    "activations",
    "workspace",
    "other",
)
API_KINDS = ("runtime", "driver")
MARKER_KINDS = ("range", "mark")
SYNC_KINDS = ("event", "stream", "context", "stream_wait_event", "unknown")
# CUPTI's overhead kinds (CUpti_ActivityOverheadKind), as the collector names them.
OVERHEAD_KINDS = (
    "driver_compiler",
    "cupti_buffer_flush",
    "cupti_instrumentation",
    "cupti_resource",
    "module_loading",
    "lazy_function_loading",
    "command_buffer_full",
    "activity_buffer_request",
    "uvm_activity_init",
    "unknown",
)
COLLECTIVE_OPS = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "broadcast",
    "send",
    "recv",
    "barrier",
    "other",
)

TABLES: tuple[Table, ...] = (
    Table(
        "kernels",
        "Work executed on a device: GPU kernels (cupti, Kineto, nsys) and, for CPU-backend "
        "traces, the leaf framework ops that ran on the CPU (device_type cpu).",
        (
            *_span("kernel execution"),
            _DEVICE,
            _DEVICE_TYPE,
            _STREAM,
            _CTX,
            _CORR,
            _EXT,
            _PID,
            _TID,
            _RANK,
            _c("name", STR, "text", "kernel name, demangled when the source gives it"),
            _c("mangled_name", STR, "text", "mangled kernel name when known"),
            _c("grid_x", I32, "count", "grid size x"),
            _c("grid_y", I32, "count", "grid size y"),
            _c("grid_z", I32, "count", "grid size z"),
            _c("block_x", I32, "count", "block size x"),
            _c("block_y", I32, "count", "block size y"),
            _c("block_z", I32, "count", "block size z"),
            _c("registers_per_thread", I32, "count", "registers per thread"),
            _c("static_shared_bytes", I32, "bytes", "static shared memory per block"),
            _c("dynamic_shared_bytes", I32, "bytes", "dynamic shared memory per block"),
            _c("graph_id", I64, "id", "CUDA graph id when launched from a graph"),
            _c("graph_node_id", I64, "id", "CUDA graph node id"),
            _c("flops", I64, "count", "floating-point operations, when the source counts them"),
        ),
    ),
    Table(
        "memcpy",
        "Memory copies executed by a device (MEMCPY, MEMCPY2/peer-to-peer).",
        (
            *_span("copy"),
            _DEVICE,
            _DEVICE_TYPE,
            _STREAM,
            _CTX,
            _CORR,
            _EXT,
            _PID,
            _RANK,
            _c("bytes", I64, "bytes", "bytes copied", nullable=False),
            _c("copy_kind", STR, "enum:MEMCPY_KINDS", "direction: HtoD, DtoH, DtoD, PtoP, ..."),
            _c("src_kind", STR, "enum:MEMORY_KINDS", "memory kind of the source"),
            _c("dst_kind", STR, "enum:MEMORY_KINDS", "memory kind of the destination"),
            _c("src_device_id", I32, "id", "source device (peer copies)"),
            _c("dst_device_id", I32, "id", "destination device (peer copies)"),
        ),
    ),
    Table(
        "memset",
        "Memory sets executed by a device.",
        (
            *_span("memset"),
            _DEVICE,
            _DEVICE_TYPE,
            _STREAM,
            _CTX,
            _CORR,
            _EXT,
            _PID,
            _RANK,
            _c("bytes", I64, "bytes", "bytes set", nullable=False),
            _c("value", I32, "count", "value written"),
            _c("memory_kind", STR, "enum:MEMORY_KINDS", "memory kind of the destination"),
        ),
    ),
    Table(
        "memory",
        "Allocation and free events. level=reserved: what the framework's allocator took from "
        "the device (CUPTI MEMORY2, cudaMalloc); level=allocated: tensor-level events inside "
        "the framework's allocator (profiler memory events, caching-allocator history).",
        (
            _c("ts_ns", I64, "ns", "time of the event", nullable=False, encoding=DELTA),
            _c("action", STR, "enum:MEMORY_ACTIONS", "alloc or free", nullable=False),
            _c("level", STR, "enum:MEMORY_LEVELS", "reserved or allocated", nullable=False),
            _c(
                "bytes",
                I64,
                "bytes",
                "size of the block (positive for alloc and free)",
                nullable=False,
            ),
            _c("address", U64, "address", "address of the block"),
            _DEVICE,
            _DEVICE_TYPE,
            _c("memory_kind", STR, "enum:MEMORY_KINDS", "memory kind"),
            _STREAM,
            _CORR,
            _PID,
            _TID,
            _RANK,
            _c("category", STR, "enum:MEMORY_CATEGORIES", "what the block holds, when known"),
            _c("total_allocated_bytes", I64, "bytes", "allocator's allocated total after it"),
            _c("total_reserved_bytes", I64, "bytes", "allocator's reserved total after it"),
        ),
    ),
    Table(
        "runtime",
        "Host-side CUDA runtime and driver API calls (and HIP calls in ROCm traces).",
        (
            *_span("API call"),
            _PID,
            _TID,
            _RANK,
            _CORR,
            _EXT,
            _c("name", STR, "text", "API function name, e.g. cudaLaunchKernel"),
            _c("api", STR, "enum:API_KINDS", "runtime or driver"),
            _c("cbid", I32, "id", "CUPTI callback id"),
        ),
    ),
    Table(
        "ops",
        "Framework operators and other host-side ranges that launch device work (Kineto "
        "cpu_op, torch.profiler, TensorFlow/MXNet ops). Nested ranges nest by time on a thread.",
        (
            *_span("operator"),
            _PID,
            _TID,
            _RANK,
            _EXT,
            _c("name", STR, "text", "operator name, e.g. aten::conv2d"),
            _c("category", STR, "text", "source category (cpu_op, python_function, ...)"),
            _c("sequence_number", I64, "id", "autograd sequence number (forward/backward link)"),
            _c("input_shapes", STR, "text", "input shapes as the source wrote them"),
            _c("input_dtypes", STR, "text", "input dtypes as the source wrote them"),
            _c(
                "concrete_inputs",
                STR,
                "text",
                "scalar and list argument values as the source wrote them (Kineto "
                "'Concrete Inputs': stride, padding, ...), JSON list aligned with input_shapes",
            ),
            _c("flops", I64, "count", "operator FLOPs when the source counts them"),
            _c(
                "call_from",
                STR,
                "text",
                'python_function rows: "file:line" in the caller where this function was '
                "called (Kineto 'CallFrom'; null when the trace does not record it)",
            ),
        ),
    ),
    Table(
        "markers",
        "Annotations: NVTX ranges and marks, record_function / user annotations, "
        "ProfilerStep ranges. Marks have end_ns == start_ns.",
        (
            *_span("range"),
            _PID,
            _TID,
            _RANK,
            _DEVICE,
            _c("name", STR, "text", "range or mark text", nullable=False),
            _c("domain", STR, "text", "NVTX domain, or the source's category"),
            _c("kind", STR, "enum:MARKER_KINDS", "range or mark", nullable=False),
            _c("marker_id", I64, "id", "source id of the range"),
        ),
    ),
    Table(
        "steps",
        "Training iterations: from ProfilerStep#N ranges, NVTX 'step N' ranges or the "
        "workload harness's steps file.",
        (
            _c("step", I64, "count", "iteration number", nullable=False),
            *_span("step"),
            _PID,
            _RANK,
            _c("samples", I64, "count", "samples processed in the step (null when unknown)"),
            _c("warmup", BOOL, "flag", "true for warm-up steps excluded from measurements"),
            _c("loss", F64, "value", "training loss reported by the workload"),
            _c(
                "source",
                STR,
                "text",
                "where the step came from: profiler_step, nvtx, harness; api, lightning, "
                "transformers (a capture window's controller)",
            ),
        ),
    ),
    Table(
        "devices",
        "Devices seen in the trace and their properties.",
        (
            _DEVICE,
            _DEVICE_TYPE,
            _PID,
            _RANK,
            _c("name", STR, "text", "device name", nullable=False),
            _c("sm_count", I32, "count", "streaming multiprocessors (GPU) / cores (CPU)"),
            _c("compute_capability_major", I32, "count", "compute capability (major)"),
            _c("compute_capability_minor", I32, "count", "compute capability (minor)"),
            _c("core_clock_khz", I64, "kHz", "core (SM) clock"),
            _c("memory_clock_khz", I64, "kHz", "memory clock"),
            _c("memory_bus_width_bits", I32, "bits", "memory bus width"),
            _c("memory_bytes", I64, "bytes", "device memory size"),
            _c("memory_bandwidth_bytes_per_s", I64, "bytes/s", "peak memory bandwidth"),
            _c("max_threads_per_block", I32, "count", "max threads per block"),
            _c("shared_memory_per_block_bytes", I64, "bytes", "shared memory per block"),
            _c("registers_per_block", I32, "count", "registers per block"),
            _c("warp_size", I32, "count", "warp size"),
        ),
    ),
    Table(
        "sync",
        "Synchronization waits (CUPTI SYNCHRONIZATION, Kineto cuda_sync).",
        (
            *_span("wait"),
            _DEVICE,
            _STREAM,
            _CTX,
            _CORR,
            _PID,
            _TID,
            _RANK,
            _c("sync_kind", STR, "enum:SYNC_KINDS", "event, stream, context, stream_wait_event"),
        ),
    ),
    Table(
        "collectives",
        "Communication collectives (NCCL/RCCL kernels): one row per collective kernel, with "
        "what the source says of the call (Kineto kernel args `Collective name`, "
        "`In msg nelems`, ...; op from the kernel name when the args are absent) and the "
        "host-side op that issued it (record_param_comms, nccl:*, c10d::*) when joined by "
        "external id.",
        (
            *_span("collective kernel execution on the device"),
            _DEVICE,
            _STREAM,
            _CORR,
            _EXT,
            _RANK,
            _c("op", STR, "enum:COLLECTIVE_OPS", "normalized collective", nullable=False),
            _c("collective_name", STR, "text", "collective name as the source wrote it"),
            _c("process_group", STR, "text", "process group name (Process Group Name)"),
            _c("sequence_number", I64, "id", "collective sequence number in its group (Seq)"),
            _c("dtype", STR, "text", "element type as the source wrote it (Float, BFloat16...)"),
            _c("in_elements", I64, "count", "input message elements (In msg nelems)"),
            _c("out_elements", I64, "count", "output message elements (Out msg nelems)"),
            _c("in_bytes", I64, "bytes", "input message bytes (elements x dtype size)"),
            _c("out_bytes", I64, "bytes", "output message bytes (elements x dtype size)"),
            _c("group_size", I32, "count", "ranks in the process group (Group size)"),
            _c("host_start_ns", I64, "ns", "start of the host op that issued it"),
            _c("host_end_ns", I64, "ns", "end of the host op that issued it"),
        ),
    ),
    Table(
        "overhead",
        "Time the profiler itself spent (CUPTI OVERHEAD: buffer flush, instrumentation).",
        (
            *_span("overhead"),
            _PID,
            _TID,
            _c("name", STR, "enum:OVERHEAD_KINDS", "overhead kind", nullable=False),
        ),
    ),
    Table(
        "host_samples",
        "Periodic host measurements, one row per metric per sample: cpu_util (index = core, "
        "-1 = all cores), proc_cpu_cores and rss_bytes (index = -1, process tree); per NVML "
        "device (index = device): gpu_util, gpu_memory_util, gpu_power_watts, "
        "gpu_sm_clock_hz, gpu_memory_used_bytes and, on Hopper or newer (GPM), gpu_sm_util, "
        "gpu_sm_occupancy, gpu_fp32_util, gpu_fp16_util, gpu_tensor_util "
        "(tbdtrace/collector/gpu_sampler.py).",
        (
            _c("ts_ns", I64, "ns", "sample time", nullable=False, encoding=DELTA),
            _c("metric", STR, "text", "metric name", nullable=False),
            _c("index", I32, "id", "core or device the value is for; -1 = total", nullable=False),
            _c(
                "value",
                F64,
                "value",
                "value (ratio 0..1 for *_util and gpu_sm_occupancy, bytes for *_bytes, W for "
                "*_watts, Hz for *_hz, cores for proc_cpu_cores)",
                nullable=False,
            ),
        ),
    ),
)

TABLES_BY_NAME: dict[str, Table] = {t.name: t for t in TABLES}

# meta.json keys and what they hold; validated by tbdtrace.trace.
META_KEYS: dict[str, str] = {
    "schema_version": "int: SCHEMA_VERSION of the writer",
    "source": "str: what produced the trace: cupti, torch, kineto, tensorflow, mxnet, nsys",
    "backend": "str|null: capture backend (cupti, torch) for captured traces",
    "host": "str|null: host name",
    "framework": "str|null: pytorch, tensorflow, mxnet",
    "workload": "str|null: workload name",
    "command": "list[str]|null: command line that was captured",
    "start_time_ns": "int|null: trace start on the trace clock",
    "clock": "str: the time base, e.g. CLOCK_REALTIME",
    "clock_offset_ns": "int: added to source times to reach the trace clock",
    "devices": "list[object]: device properties as the source gave them",
    "source_files": "list[str]: files an importer read",
    "ranks": "list[int]: distributed ranks present",
    "dropped_records": "object: records the collector dropped, per context",
    "partial": "bool|null: captures: true when the capture was stopped or a process's "
    "profile is missing (extra.partial says why; docs/RELIABILITY.md)",
    "windows": "list[object]|null: capture windows (capture --steps/--schedule/--on-demand): "
    "reason, first_step, last_step, trigger, start_ns, end_ns, complete, pids",
    "extra": "object: source-specific fields",
}


def table(name: str) -> Table:
    try:
        return TABLES_BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown table {name!r}; known: {', '.join(TABLES_BY_NAME)}") from None


def render_markdown() -> str:
    """docs/TRACE_FORMAT.md, generated from the declarations above."""
    out = [
        "# tbdtrace trace format",
        "",
        "<!-- Generated by `python -m tbdtrace.schema`; do not edit by hand. -->",
        "",
        f"Schema version: **{SCHEMA_VERSION}**.",
        "",
        "A trace is a directory holding `meta.json` and one file per table. A table with",
        "no rows may be absent; readers see it as empty. Times are",
        "int64 nanoseconds since the Unix epoch on the trace clock; strings are",
        "dictionary-encoded; missing values are nulls.",
        "",
        "Storage: one Parquet file (`<table>.parquet`) per table, holding the true value of",
        "every column: DuckDB, Polars (`read_parquet`), pandas, Spark or `pyarrow.parquet`",
        "read the same rows as `tbdtrace.open`. Rows of tables with a `start_ns` column are",
        "written by `start_ns`, then `end_ns` descending (an enclosing range before the",
        "ranges it contains); rows of tables with a `ts_ns` column by `ts_ns`; both stable.",
        "The `stored as` column gives each column's Parquet encoding: `DELTA_BINARY_PACKED`",
        "for times and ids (in time order their differences are small), `RLE_DICTIONARY`",
        "for the rest (booleans are bit-packed); pages are zstd-compressed and the Arrow",
        "schema is kept in the file, so strings read back as dictionaries.",
        "",
        "Versions 1 and 2 (`<table>.arrow`, Arrow IPC) are still read, and",
        "`tbdtrace upgrade TRACE` rewrites them as version 3. Version 2 kept the columns",
        "marked `DELTA_BINARY_PACKED` here under the field name `<column>.delta` (the",
        "difference from the previous row; the first row holds the value, nulls hold 0),",
        "except `end_ns`, kept as `end_ns.minus_start_ns` (`end_ns - start_ns`); version 1",
        "had plain fields.",
        "",
        "## meta.json",
        "",
        "| key | content |",
        "|---|---|",
    ]
    out += [f"| `{k}` | {v} |" for k, v in META_KEYS.items()]
    for t in TABLES:
        out += [
            "",
            f"## `{t.name}`",
            "",
            t.doc,
            "",
            "| column | type | unit | null | stored as | doc |",
            "|---|---|---|---|---|---|",
        ]
        for c in t.columns:
            typ = "string (dict)" if c.type == STR else str(c.type)
            enc = "bit-packed" if c.type == BOOL else f"`{c.parquet_encoding}`"
            out.append(
                f"| `{c.name}` | {typ} | {c.unit} | {'yes' if c.nullable else 'no'} "
                f"| {enc} | {c.doc} |"
            )
    enums = {
        "DEVICE_TYPES": DEVICE_TYPES,
        "MEMCPY_KINDS": MEMCPY_KINDS,
        "MEMORY_KINDS": MEMORY_KINDS,
        "MEMORY_ACTIONS": MEMORY_ACTIONS,
        "MEMORY_LEVELS": MEMORY_LEVELS,
        "MEMORY_CATEGORIES": MEMORY_CATEGORIES,
        "API_KINDS": API_KINDS,
        "MARKER_KINDS": MARKER_KINDS,
        "SYNC_KINDS": SYNC_KINDS,
        "OVERHEAD_KINDS": OVERHEAD_KINDS,
        "COLLECTIVE_OPS": COLLECTIVE_OPS,
    }
    out += ["", "## Enumerations", ""]
    out += [f"- `{k}`: {', '.join(f'`{x}`' for x in v)}" for k, v in enums.items()]
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    print(render_markdown(), end="")
