"""What every pass returns, declared once: columns with Arrow type, unit and doc.

As ``tbdtrace/schema.py`` declares the trace's tables, this module declares the passes'
output tables. Each pass builds its table from its :class:`Output` here
(``outputs.KERNELS.arrow_schema()``), a test checks that every pass returns exactly the
declared schema, and the column tables of docs/METRICS.md are generated from these
declarations (``make docs``; ``python -m tbdtrace.analysis.engine.outputs
docs/METRICS.md``), a test checking that the committed file is what they generate. This
module imports no pass: it sits in the engine, below the passes, as ``schema.py`` sits
below the trace (DECISIONS 177).

The contract every pass keeps (checked over :data:`PASSES` by
tests/analysis/engine/test_outputs.py): ``tbdtrace.analysis.passes.<module>.run(ctx,
config=None) -> pyarrow.Table`` with the columns of its output, in order and of the
declared types, whatever the trace (an empty one too); ``ctx`` is an analysis context
(``engine/context.py``) or a trace. A config that picks another table
(``HotspotsConfig.by``) returns another declared output. ``config`` is the pass's frozen
config dataclass, or None for its defaults. ``tbdtrace/analysis/passes/`` holds exactly
the modules of :data:`PASSES`; ``analysis/compare.py`` (``run(a, b, config)``: two traces)
and ``analysis/sql.py`` (whatever the query selects) are not passes of one trace.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from tbdtrace.schema import MEMORY_CATEGORIES

STR = pa.string()
DICT = pa.dictionary(pa.int32(), pa.string())
I32, I64, F64, BOOL = pa.int32(), pa.int64(), pa.float64(), pa.bool_()


@dataclass(frozen=True)
class Column:
    name: str
    type: pa.DataType
    unit: str  # ns, bytes, count, ratio (0..1), FLOP, FLOP/s, bytes/s, text, id, ...
    doc: str


@dataclass(frozen=True)
class Output:
    """The table a pass returns: ``name`` (the pass, "<module>" or "<module>.<function>"),
    what one row is, and its columns in order."""

    name: str
    doc: str
    columns: tuple[Column, ...]

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def arrow_schema(self) -> pa.Schema:
        return pa.schema([(c.name, c.type) for c in self.columns])

    def empty_table(self) -> pa.Table:
        return self.arrow_schema().empty_table()


def _device(
    rank_doc: str = "rank of the device's process (null: the trace has no ranks)",
) -> tuple[Column, ...]:
    return (
        Column("rank", I32, "id", rank_doc),
        Column("device_type", STR, "text", "cuda, cpu, ... (schema DEVICE_TYPES)"),
        Column("device_id", I32, "id", "device index within its type"),
    )


_RANK = Column("rank", I32, "id", "rank (null: the trace has no ranks)")

SUMMARY = Output(
    "summary",
    "one row per device",
    (
        *_device(),
        Column("kernel_count", I64, "count", "kernels run on the device"),
        Column("kernel_time_ns", I64, "ns", "summed kernel durations"),
        Column("memcpy_count", I64, "count", "memory copies"),
        Column("memcpy_bytes", I64, "bytes", "bytes copied"),
        Column("memset_count", I64, "count", "memory sets"),
        Column("span_ns", I64, "ns", "first start to last end of the device's work"),
        Column("busy_ns", I64, "ns", "union of kernel, memcpy and memset intervals"),
        Column("compute_busy_ns", I64, "ns", "union of kernel intervals"),
        Column("utilization", F64, "ratio", "busy_ns / span_ns; null for a zero span"),
        Column("compute_utilization", F64, "ratio", "compute_busy_ns / span_ns"),
    ),
)

KERNELS = Output(
    "kernels",
    "one row per kernel name, largest total_ns first (ties by name)",
    (
        Column("name", STR, "text", "kernel name"),
        Column("count", I64, "count", "instances"),
        Column("total_ns", I64, "ns", "summed durations"),
        Column("mean_ns", F64, "ns", "mean duration"),
        Column("median_ns", F64, "ns", "median duration"),
        Column("min_ns", I64, "ns", "shortest instance"),
        Column("max_ns", I64, "ns", "longest instance"),
        Column("std_ns", F64, "ns", "sample standard deviation (n-1; 0 for one instance)"),
        Column("share", F64, "ratio", "total_ns / sum of all kernel durations"),
    ),
)

STEPS = Output(
    "steps",
    "one row per step, by (rank, start)",
    (
        _RANK,
        Column("step", I64, "count", "step number"),
        Column("start_ns", I64, "ns", "start of the step"),
        Column("end_ns", I64, "ns", "end of the step"),
        Column("duration_ns", I64, "ns", "end_ns - start_ns"),
        Column("samples", I64, "count", "samples in the step; null when unknown"),
        Column("throughput_per_s", F64, "samples/s", "samples / duration; null without samples"),
        Column("warmup", BOOL, "bool", "warm-up step (the effective flag after the config)"),
        Column("source", STR, "text", "where the step came from (steps table, nvtx, ...)"),
        Column(
            "data_wait_ns",
            I64,
            "ns",
            "time the training thread waited for its next batch in the step (harness and "
            "DataLoader ranges, engine/data_wait.py); null when the trace records no data wait",
        ),
    ),
)

UTILIZATION = Output(
    "utilization",
    "per device, one row per measured step, then a total row (step null)",
    (
        *_device(),
        Column("step", I64, "count", "step number; null on the total row"),
        Column("start_ns", I64, "ns", "window start"),
        Column("end_ns", I64, "ns", "window end"),
        Column("window_ns", I64, "ns", "window length (union of step windows on the total row)"),
        Column("compute_busy_ns", I64, "ns", "union of kernel intervals in the window"),
        Column("memory_busy_ns", I64, "ns", "union of memcpy and memset intervals"),
        Column("busy_ns", I64, "ns", "union of all three"),
        Column("compute_utilization", F64, "ratio", "compute_busy_ns / window_ns"),
        Column("memory_utilization", F64, "ratio", "memory_busy_ns / window_ns"),
        Column("utilization", F64, "ratio", "busy_ns / window_ns; null for an empty window"),
    ),
)

CATEGORIES = Output(
    "categories",
    "device time by category, one row per category with any time, largest first",
    (
        Column("category", STR, "text", "gemm, conv, ..., memcpy, memset, other"),
        Column("count", I64, "count", "rows (kernels, copies, sets)"),
        Column("total_ns", I64, "ns", "summed durations"),
        Column("share", F64, "ratio", "total_ns / sum over all categories"),
        Column("by_op_ns", I64, "ns", "part of total_ns whose category came from the launching op"),
        Column("by_name_ns", I64, "ns", "part of total_ns whose category came from the name"),
    ),
)

HOTSPOTS_KERNEL = Output(
    "hotspots",
    'the kernels table with what each kernel ran for (`HotspotsConfig(by="kernel")`, the '
    'default; `by="op"` gives `hotspots.by_op`, `by="source"` `hotspots.by_source`, '
    '`by="category"` the categories table)',
    (
        *KERNELS.columns,
        Column("category", STR, "text", "the kernel's category (categories pass)"),
        Column(
            "launch", STR, "text", 'most common "grid=(x,y,z) block=(x,y,z)"; null when unknown'
        ),
        Column("op", STR, "text", "the op holding most of this kernel's time; null when none"),
        Column("op_share", F64, "ratio", "that op's share of the kernel's time"),
        Column("module", STR, "text", "the module holding most of its time"),
        Column("marker", STR, "text", "the marker (NVTX/user range) holding most of its time"),
        Column(
            "source",
            STR,
            "text",
            'the user source line ("file:line") holding most of its time; null without '
            'Python stacks (docs/METRICS.md, "Source lines")',
        ),
        Column("source_share", F64, "ratio", "that line's share of the kernel's time"),
    ),
)

HOTSPOTS_OP = Output(
    "hotspots.by_op",
    "device time per launching op, largest first",
    (
        Column("op", STR, "text", 'op name ("<unattributed>" for kernels no op claims)'),
        Column("kernel_count", I64, "count", "kernels it launched"),
        Column("distinct_kernels", I64, "count", "distinct kernel names among them"),
        Column("total_ns", I64, "ns", "their summed durations"),
        Column("mean_ns", F64, "ns", "total_ns / kernel_count"),
        Column("share", F64, "ratio", "total_ns / all kernel time"),
        Column("top_kernel", STR, "text", "the kernel with most of the op's time"),
    ),
)

HOTSPOTS_SOURCE = Output(
    "hotspots.by_source",
    "device time per user source line that launched it, largest first "
    '(`HotspotsConfig(by="source")`; empty when the trace has no Python stacks)',
    (
        Column(
            "source",
            STR,
            "text",
            '"file:line" as the profiler names the file ("<unattributed>": kernels with no '
            "user frame on their launch thread, e.g. backward kernels)",
        ),
        Column("function", STR, "text", "the user function the line is in"),
        Column(
            "line_kind",
            STR,
            "text",
            '"call": the line that made the call leading to the kernel; "frame": the '
            "line the profiler names the function with (its first line), where no call "
            "from it was recorded (operator syntax such as `a @ b`)",
        ),
        Column("kernel_count", I64, "count", "kernels launched under it"),
        Column("distinct_kernels", I64, "count", "distinct kernel names among them"),
        Column("total_ns", I64, "ns", "their summed durations"),
        Column("mean_ns", F64, "ns", "total_ns / kernel_count"),
        Column("share", F64, "ratio", "total_ns / all kernel time"),
        Column("top_kernel", STR, "text", "the kernel with most of the line's time"),
    ),
)

IDLE = Output(
    "idle",
    "one row per device",
    (
        *_device(),
        Column("span_ns", I64, "ns", "first start to last end of the device's work"),
        Column("busy_ns", I64, "ns", "union of its work"),
        Column("idle_ns", I64, "ns", "span_ns - busy_ns"),
        Column(
            "host_bound_ns", I64, "ns", "idle with nothing queued: the device waited for the host"
        ),
        Column(
            "host_bound_data_ns",
            I64,
            "ns",
            "the part of host_bound_ns while its rank's training thread waited for data; "
            "null when the trace records no data wait",
        ),
        Column(
            "host_bound_other_ns",
            I64,
            "ns",
            "host_bound_ns - host_bound_data_ns: other host work (null as above)",
        ),
        Column("queued_ns", I64, "ns", "work queued: idle with the next work already issued"),
        Column(
            "sync_wait_ns",
            I64,
            "ns",
            "idle while the host was in a synchronization wait or a blocking copy call",
        ),
        Column("gap_count", I64, "count", "gaps between busy intervals"),
        Column("queued_gap_max_ns", I64, "ns", "longest queued part of one gap (0 without gaps)"),
        Column("launch_count", I64, "count", "kernels with a matched runtime call"),
        Column(
            "queue_delay_mean_ns",
            F64,
            "ns",
            "queue delay: launch call start to kernel start (the work queued ahead), mean",
        ),
        Column("queue_delay_p50_ns", F64, "ns", "its median"),
        Column("queue_delay_p90_ns", F64, "ns", "its 90th percentile"),
        Column("queue_delay_p99_ns", F64, "ns", "its 99th percentile"),
        Column("queue_delay_max_ns", F64, "ns", "its maximum (null without launches)"),
        Column("launch_call_mean_ns", F64, "ns", "the launch call's own duration, mean"),
        Column("launch_call_p50_ns", F64, "ns", "its median"),
        Column("launch_call_p90_ns", F64, "ns", "its 90th percentile"),
        Column("launch_call_p99_ns", F64, "ns", "its 99th percentile"),
        Column("launch_call_max_ns", F64, "ns", "its maximum (null without launches)"),
        Column("short_kernel_count", I64, "count", "kernels shorter than their launch call"),
        Column("short_kernel_ns", I64, "ns", "their summed durations"),
    ),
)

MEMCPY = Output(
    "memcpy",
    "one row per (device, copy kind), by device then bytes descending",
    (
        *_device(),
        Column("copy_kind", STR, "text", 'HtoD, DtoH, DtoD, ... ("unknown" when not said)'),
        Column("count", I64, "count", "copies"),
        Column("bytes", I64, "bytes", "bytes copied"),
        Column("total_ns", I64, "ns", "summed durations"),
        Column("bandwidth_bytes_per_s", F64, "bytes/s", "bytes / total time; null for zero time"),
        Column("peak_bytes_per_s", F64, "bytes/s", "the link's peak; null when unknown"),
        Column("peak_fraction", F64, "ratio", "achieved / peak"),
        Column("peak_source", STR, "text", "where the peak came from, or why there is none"),
    ),
)

FP32 = Output(
    "fp32",
    "one row per rank that ran kernels",
    (
        _RANK,
        Column("devices", STR, "text", "names of the rank's devices"),
        Column("window_ns", I64, "ns", "the measured window"),
        Column("busy_ns", I64, "ns", "device compute-busy time in it"),
        Column("flops", I64, "FLOP", "FP32 FLOPs; null when unknown"),
        Column("flops_source", STR, "text", "where the FLOPs came from, or why there are none"),
        Column("achieved_flops_per_s_wall", F64, "FLOP/s", "flops / window_ns"),
        Column("achieved_flops_per_s_busy", F64, "FLOP/s", "flops / busy_ns"),
        Column("peak_flops_per_s", F64, "FLOP/s", "FP32 peak; null when unknown"),
        Column("peak_source", STR, "text", "every factor's source, or the reason"),
        Column("efficiency_wall", F64, "ratio", "achieved (wall) / peak"),
        Column("efficiency_busy", F64, "ratio", "achieved (busy) / peak"),
    ),
)

PHASES = Output(
    "phases",
    "one row per (rank, phase), ranks ascending (null first), phases in time order",
    (
        _RANK,
        Column(
            "phase",
            STR,
            "text",
            (
                "pre-trace (device work launched before the trace began), init, warmup, "
                "measured, after; all for a rank without steps"
            ),
        ),
        Column("start_ns", I64, "ns", "phase start; null when the rank has no activity"),
        Column("end_ns", I64, "ns", "phase end"),
        Column("wall_ns", I64, "ns", "end_ns - start_ns (0 when empty)"),
        Column("step_count", I64, "count", "steps starting in it"),
        Column("kernel_count", I64, "count", "kernels placed in it"),
        Column("kernel_time_ns", I64, "ns", "their summed durations"),
    ),
)

_CATEGORY_BYTES = tuple(
    Column(f"{c}_bytes", I64, "bytes", f"live {c} bytes after the event") for c in MEMORY_CATEGORIES
)

MEMORY = Output(
    "memory",
    "one row per effective alloc or free, in time order within each level",
    (
        Column("ts_ns", I64, "ns", "time of the event"),
        Column("level", DICT, "text", "allocated or reserved"),
        Column("device_type", DICT, "text", "where the memory is"),
        Column("device_id", I32, "id", "device index"),
        Column("rank", I32, "id", "rank of the process"),
        Column("pid", I32, "id", "process"),
        Column("action", DICT, "text", "alloc or free"),
        Column("category", DICT, "text", "weights, gradients, ... (schema MEMORY_CATEGORIES)"),
        Column("bytes", I64, "bytes", "size of the block"),
        *(Column(c.name, c.type, c.unit, c.doc + ", summed over devices") for c in _CATEGORY_BYTES),
        Column("total_bytes", I64, "bytes", "live bytes of the level, summed over devices"),
        Column("device_total_bytes", I64, "bytes", "live bytes of the level on this device"),
    ),
)

MEMORY_ADVICE = Output(
    "memory_advice",
    "one row per op (or module) with blocks live at the headline device's memory peak, "
    "largest first (docs/METRICS.md, Memory advice)",
    (
        Column("by", STR, "text", "op or module: what name is"),
        Column("name", STR, "text", "the op or nn.Module that allocated; null: not attributed"),
        Column("blocks", I64, "count", "blocks live at the peak"),
        Column("bytes", I64, "bytes", "their bytes"),
        Column("share", F64, "ratio", "bytes / the peak"),
        Column(
            "pre_existing",
            BOOL,
            "flag",
            "true for the row of peak bytes no block explains (allocated before the trace)",
        ),
        Column("peak_ts_ns", I64, "ns", "time of the peak"),
    ),
)

MEMORY_SERIES = Output(
    "memory_series",
    "memory over time per device, thinned: one row per kept point",
    (
        Column("level", STR, "text", "allocated or reserved"),
        Column(
            "source",
            STR,
            "text",
            "events (paired alloc/free) or allocator_total (the allocator's own totals)",
        ),
        Column("device_type", STR, "text", "where the memory is"),
        Column("device_id", I32, "id", "device index"),
        _RANK,
        Column("ts_ns", I64, "ns", "time of the point"),
        *(
            Column(c.name, c.type, c.unit, c.doc + " (null for allocator totals)")
            for c in _CATEGORY_BYTES
        ),
        Column(
            "pre_existing_bytes",
            I64,
            "bytes",
            "allocated before the trace began and still live (allocator totals of PyTorch-"
            "profiler imports; null where the source is a replay or a reserved total)",
        ),
        Column("total_bytes", I64, "bytes", "live bytes of the level on the device"),
    ),
)

STEP_TIMELINE = Output(
    "step_timeline",
    "device events of one step, per rank and stream",
    (
        *_device(),
        Column("stream_id", I64, "id", "stream it ran on"),
        Column("kind", STR, "text", "kernel, memcpy or memset"),
        Column("category", STR, "text", "its category (categories pass)"),
        Column("offset_ns", I64, "ns", "start minus the window's start on its rank, clipped at 0"),
        Column("duration_ns", I64, "ns", "the part inside the window"),
    ),
)

COLLECTIVE_SKEW = Output(
    "collective_skew",
    "one row per collective instance seen on at least two ranks, by first start",
    (
        Column("name", STR, "text", "kernel name"),
        Column("step", I64, "count", "step; null when the trace has no steps"),
        Column("occurrence", I64, "count", "0-based, within the step on each rank"),
        Column("ranks", I64, "count", "ranks that ran it"),
        Column("first_start_ns", I64, "ns", "earliest start over the ranks"),
        Column("last_start_ns", I64, "ns", "latest start over the ranks"),
        Column("skew_ns", I64, "ns", "last_start_ns - first_start_ns"),
        Column("last_rank", I32, "id", "the rank that started it last"),
    ),
)

CPU_ACTIVITY = Output(
    "cpu_activity",
    "one row per host thread, busiest first",
    (
        _RANK,
        Column("pid", I32, "id", "process"),
        Column("tid", I64, "id", "thread"),
        Column("op_count", I64, "count", "ops recorded on the thread"),
        Column("span_ns", I64, "ns", "first op start to last op end"),
        Column("busy_ns", I64, "ns", "union of its ops' intervals (nested ops count once)"),
        Column("busy_ratio", F64, "ratio", "busy_ns / span_ns; null for a zero span"),
    ),
)

FLOPS = Output(
    "flops",
    "one row per (rank, precision with FLOPs); a rank without FLOPs gets one row, precision null",
    (
        _RANK,
        Column("devices", STR, "text", "names of the rank's devices"),
        Column("precision", STR, "text", "fp64, fp32, tf32, fp16, bf16, ..."),
        Column("window_ns", I64, "ns", "the window the figures cover"),
        Column("window_source", STR, "text", "how the window was chosen"),
        Column("busy_ns", I64, "ns", "device compute-busy time in the window"),
        Column("flops", I64, "FLOP", "FLOPs of this precision"),
        Column("hardware_flops", I64, "FLOP", "the part counted by hardware counters"),
        Column("framework_flops", I64, "FLOP", "the part the framework recorded"),
        Column("analytic_flops", I64, "FLOP", "the part from formulas on op shapes"),
        Column("flops_source", STR, "text", "sources used, or why there are none"),
        Column("achieved_flops_per_s_wall", F64, "FLOP/s", "flops / window_ns"),
        Column("achieved_flops_per_s_busy", F64, "FLOP/s", "flops / busy_ns"),
        Column("peak_flops_per_s", F64, "FLOP/s", "peak, summed over the rank's devices"),
        Column("peak_source", STR, "text", "where the peak came from"),
        Column("efficiency_wall", F64, "ratio", "achieved (wall) / peak"),
        Column("efficiency_busy", F64, "ratio", "achieved (busy) / peak"),
        Column("flop_kernel_ns", I64, "ns", "time of kernels that could carry counted FLOPs"),
        Column("counted_kernel_ns", I64, "ns", "the part of it with FLOPs counted"),
        Column("coverage", F64, "ratio", "counted_kernel_ns / flop_kernel_ns (per rank)"),
        Column("samples", I64, "count", "samples of the measured steps"),
        Column("model_flops_per_sample", F64, "FLOP", "model FLOPs per sample"),
        Column("model_flops_source", STR, "text", "where model_flops_per_sample came from"),
        Column("mfu", F64, "ratio", "model FLOP/s over the window / this precision's peak"),
    ),
)

KERNEL_FLOPS = Output(
    "kernel_flops",
    "one row per (rank, kernel name, precision) with known FLOPs, longest first per rank",
    (
        _RANK,
        Column("name", STR, "text", "kernel name"),
        Column("precision", STR, "text", "precision of its FLOPs"),
        Column("kernels", I64, "count", "instances"),
        Column("flops", I64, "FLOP", "their FLOPs"),
        Column("total_ns", I64, "ns", "their summed durations"),
        Column("achieved_flops_per_s", F64, "FLOP/s", "flops / total_ns"),
        Column("peak_flops_per_s", F64, "FLOP/s", "the rank's devices' peak"),
        Column("efficiency", F64, "ratio", "achieved / peak"),
        Column("source", STR, "text", "where the FLOPs came from"),
    ),
)

RANKS = Output(
    "ranks",
    "one row per rank with kernels or steps",
    (
        Column("rank", I64, "id", "rank"),
        Column("steps", I64, "count", "steps of the rank"),
        Column("step_time_median_ns", I64, "ns", "median step duration; null without steps"),
        Column("compute_ns", I64, "ns", "union of non-communication kernels"),
        Column("communication_ns", I64, "ns", "union of communication kernels"),
        Column("overlap", F64, "ratio", "share of communication time under compute"),
        Column("start_ns", I64, "ns", "first start of its device work"),
        Column("end_ns", I64, "ns", "last end of its device work"),
        Column("span_ns", I64, "ns", "end_ns - start_ns"),
        Column("busy_ns", I64, "ns", "union of all its device work"),
        Column("idle_ns", I64, "ns", "span_ns - busy_ns"),
        Column("utilization", F64, "ratio", "busy_ns / span_ns"),
        Column("memory_peak_bytes", I64, "bytes", "allocator total's peak; null when unknown"),
    ),
)

_ROOF = (
    Column("kernel_count", I64, "count", "kernels they launched"),
    Column("kernel_ns", I64, "ns", "those kernels' summed durations"),
    Column("flops", I64, "FLOP", "FLOPs (flops pass counts); null when not counted"),
    Column("bytes", I64, "bytes", "bytes moved (byte_formulas); null when not modelled"),
    Column("intensity_flop_per_byte", F64, "FLOP/byte", "flops / bytes"),
    Column("achieved_flops_per_s", F64, "FLOP/s", "flops / kernel_ns"),
    Column("achieved_bytes_per_s", F64, "bytes/s", "bytes / kernel_ns"),
    Column("peak_flops_per_s", F64, "FLOP/s", "the precision's peak on the rank's device"),
    Column("peak_bytes_per_s", F64, "bytes/s", "the device's DRAM/HBM bandwidth"),
    Column("ridge_flop_per_byte", F64, "FLOP/byte", "peak_flops_per_s / peak_bytes_per_s"),
    Column("bound", STR, "text", "compute or memory; null when unknown"),
    Column(
        "roof_share",
        F64,
        "ratio",
        "achieved / the bound's roof (FLOP/s when compute-bound, bytes/s when memory-bound)",
    ),
)

ROOFLINE = Output(
    "roofline",
    "one row per (rank, op, input shapes, input dtypes) with kernels, longest kernel_ns first",
    (
        _RANK,
        Column("op", STR, "text", "op name"),
        Column("family", STR, "text", "gemm, conv, attention, elementwise, normalization, ..."),
        Column("input_shapes", STR, "text", "input shapes as recorded"),
        Column("input_dtypes", STR, "text", "input dtypes as recorded"),
        Column("precision", STR, "text", "precision of the first tensor input"),
        Column("count", I64, "count", "op instances that launched kernels"),
        *_ROOF,
        Column("peak_source", STR, "text", "where both peaks came from, or why none"),
    ),
)

ROOFLINE_FAMILY = Output(
    "roofline.by_family",
    "one row per (rank, op family, precision), longest kernel_ns first",
    (
        _RANK,
        Column("family", STR, "text", "gemm, conv, attention, elementwise, ..."),
        Column("precision", STR, "text", "precision"),
        Column("ops", I64, "count", "distinct (op, shapes, dtypes) rows"),
        *_ROOF,
    ),
)

# The values of critical_path.resource (docs/METRICS.md, critical_path), in the order of
# the report's per-step columns.
PATH_RESOURCES = (
    "cpu_op",
    "cpu_runtime",
    "cpu_idle",
    "launch_delay",
    "gpu_kernel",
    "copy",
    "memset",
    "gpu_gap",
    "sync_wait",
)

_STEP_OF_PATH = (
    _RANK,
    Column("step", I64, "count", "step number (null: no steps, the rank's whole span)"),
    Column("step_start_ns", I64, "ns", "start of the step (or span)"),
    Column("step_ns", I64, "ns", "length of the step: what its path adds up to"),
)

CRITICAL_PATH = Output(
    "critical_path",
    "one row per segment of each step's critical path, per (rank, step) in time order; "
    "a step's segments are contiguous and add up to its length",
    (
        *_STEP_OF_PATH,
        Column("seq", I64, "count", "position on the step's path, 0 = first in time"),
        Column("start_ns", I64, "ns", "segment start"),
        Column("end_ns", I64, "ns", "segment end"),
        Column("duration_ns", I64, "ns", "end_ns - start_ns"),
        Column(
            "resource",
            STR,
            "text",
            ", ".join(PATH_RESOURCES) + " (docs/METRICS.md, critical_path)",
        ),
        Column(
            "category",
            STR,
            "text",
            "gpu_kernel: the kernel's category (categories pass); copy: copy kind; "
            "memset: memory kind; else null",
        ),
        Column("name", STR, "text", "the op, runtime call, kernel or copy; null for gaps and idle"),
        Column("source", STR, "text", "table of the event: ops, runtime, kernels, memcpy, memset"),
        Column("source_row", I64, "id", "row of that table in the whole trace"),
        Column("pid", I32, "id", "host process (host segments)"),
        Column("tid", I64, "id", "host thread (host segments)"),
        Column("device_id", I32, "id", "device (device segments)"),
        Column("stream_id", I64, "id", "stream (device segments)"),
    ),
)

CRITICAL_PATH_RESOURCE = Output(
    "critical_path.by_resource",
    "one row per (rank, step, resource, category) on the step's path, per step longest first",
    (
        *_STEP_OF_PATH,
        Column("resource", STR, "text", "as critical_path.resource"),
        Column("category", STR, "text", "as critical_path.category"),
        Column("segments", I64, "count", "segments of the path"),
        Column("path_ns", I64, "ns", "time of the path on this resource"),
        Column("share", F64, "ratio", "path_ns / step_ns"),
    ),
)

CRITICAL_PATH_OP = Output(
    "critical_path.by_op",
    "one row per (rank, resource, category, name) over every step's path, longest path_ns first",
    (
        _RANK,
        Column("resource", STR, "text", "as critical_path.resource"),
        Column("category", STR, "text", "as critical_path.category"),
        Column("name", STR, "text", "the op, runtime call, kernel or copy; null: gaps, idle"),
        Column("segments", I64, "count", "segments of the paths"),
        Column("steps", I64, "count", "steps whose path holds it"),
        Column("path_ns", I64, "ns", "time on the paths"),
        Column("share", F64, "ratio", "path_ns / the rank's paths' total (its steps' length)"),
    ),
)

_DIFF_SIDES = (
    Column("a_total_ns", I64, "ns", "summed durations in trace A (over its window)"),
    Column("b_total_ns", I64, "ns", "summed durations in trace B"),
    Column("delta_ns", I64, "ns", "b_total_ns - a_total_ns"),
    Column("a_per_step_ns", F64, "ns", "a_total_ns / A's measured steps; null without steps"),
    Column("b_per_step_ns", F64, "ns", "b_total_ns / B's measured steps; null without steps"),
    Column("delta_per_step_ns", F64, "ns", "b_per_step_ns - a_per_step_ns"),
    Column(
        "ratio",
        F64,
        "ratio",
        "b_per_step_ns / a_per_step_ns (of the totals when a side has no measured step)",
    ),
)
_DIFF_SHARES = (
    Column("a_share", F64, "ratio", "share of A's kernel time"),
    Column("b_share", F64, "ratio", "share of B's kernel time"),
)

DIFF_KERNELS = Output(
    "diff",
    "per kernel name in either trace, largest |delta_per_step_ns| first (tbdtrace diff A B)",
    (
        Column("name", STR, "text", "kernel name"),
        Column("category", STR, "text", "its category"),
        Column("a_count", I64, "count", "instances in A"),
        Column("b_count", I64, "count", "instances in B"),
        *_DIFF_SIDES,
        *_DIFF_SHARES,
    ),
)

DIFF_CATEGORIES = Output(
    "diff.by_category",
    "per category in either trace, in category order",
    (Column("category", STR, "text", "category"), *_DIFF_SIDES, *_DIFF_SHARES),
)

DIFF_OPS = Output(
    "diff.by_op",
    "per launching op in either trace (hotspots.by_op aligned by op name), largest "
    "|delta_per_step_ns| first",
    (
        Column("op", STR, "text", 'op name ("<unattributed>" for kernels no op claims)'),
        Column("a_kernel_count", I64, "count", "kernels it launched in A"),
        Column("b_kernel_count", I64, "count", "kernels it launched in B"),
        *_DIFF_SIDES,
        *_DIFF_SHARES,
    ),
)

DIFF_GATE = Output(
    "gate.judge",
    "one row per --fail-above threshold, in the order given (JSON `gate.results`)",
    (
        Column("metric", STR, "text", "metric name (gate.METRICS), e.g. kernel:gemm"),
        Column("unit", STR, "text", "unit of a and b"),
        Column("worse", STR, "text", "higher or lower: the direction that is a regression"),
        Column("a", F64, "(unit)", "the metric in A; null when not measured"),
        Column("b", F64, "(unit)", "the metric in B; null when not measured"),
        Column("change", F64, "ratio", "b / a - 1; null when unknown or A is 0"),
        Column("limit", F64, "ratio", "the threshold: largest change allowed the worse way"),
        Column("status", STR, "text", "pass, regression, or missing (not measured on a side)"),
    ),
)

# The passes of one trace, each ``tbdtrace.analysis.passes.<name>.run`` (module name =
# output name).
PASSES: tuple[Output, ...] = (
    SUMMARY,
    KERNELS,
    STEPS,
    UTILIZATION,
    CATEGORIES,
    IDLE,
    MEMCPY,
    FP32,
    PHASES,
    MEMORY,
    MEMORY_ADVICE,
    MEMORY_SERIES,
    STEP_TIMELINE,
    COLLECTIVE_SKEW,
    CPU_ACTIVITY,
    FLOPS,
    KERNEL_FLOPS,
    RANKS,
    HOTSPOTS_KERNEL,
    ROOFLINE,
    CRITICAL_PATH,
)

# Every declared output, in the order docs/METRICS.md lists them.
OUTPUTS: tuple[Output, ...] = (
    *PASSES,
    HOTSPOTS_OP,
    HOTSPOTS_SOURCE,
    ROOFLINE_FAMILY,
    CRITICAL_PATH_RESOURCE,
    CRITICAL_PATH_OP,
    DIFF_KERNELS,
    DIFF_CATEGORIES,
    DIFF_OPS,
    DIFF_GATE,
)

BEGIN = (
    "<!-- BEGIN pass outputs: generated from tbdtrace/analysis/engine/outputs.py by `make docs` -->"
)
END = "<!-- END pass outputs -->"


def render_markdown() -> str:
    """The generated part of docs/METRICS.md: one column table per output."""
    out = [
        BEGIN,
        "## Pass output tables",
        "",
        "Every pass returns one Arrow table, `tbdtrace.analysis.passes.<pass>.run(ctx,",
        "config=None)` (or through `tbdtrace.analyze(trace)`); these are their columns,",
        "declared in `tbdtrace/analysis/engine/outputs.py`. The sections above define the",
        "figures.",
    ]
    for o in OUTPUTS:
        out += ["", f"### `{o.name}`", "", o.doc[0].upper() + o.doc[1:] + ".", ""]
        out += ["| column | type | unit | doc |", "|---|---|---|---|"]
        for c in o.columns:
            typ = "string (dict)" if c.type == DICT else str(c.type)
            out.append(f"| `{c.name}` | {typ} | {c.unit} | {c.doc} |")
    out.append(END)
    return "\n".join(out) + "\n"


def update_metrics(text: str) -> str:
    """docs/METRICS.md ``text`` with its generated part replaced (appended when absent)."""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        return head + render_markdown() + (("\n" + tail) if tail else "")
    return text.rstrip("\n") + "\n\n" + render_markdown()


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tbdtrace.analysis.engine.outputs docs/METRICS.md", file=sys.stderr)
        return 2
    path = Path(argv[0])
    path.write_text(update_metrics(path.read_text()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
