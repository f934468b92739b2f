"""The capture's parent/child protocol: every environment variable and file name that
crosses the boundary between ``tbdtrace capture`` (the parent), the captured command's
processes (the children) and the in-process capture's helper process.

Nothing else in the package spells a ``TBDTRACE_`` name: the parent sets the variables
through these constants, the bootstrap (``sitecustomize/``, which may not import the
package before it knows a capture runs) loads this file by its path, the injection
library (``csrc/inject.cpp``) and the extension (``csrc/bindings.cpp``) read the names
declared here with ``reader`` ``inject.cpp`` / ``bindings.cpp``, and the workload
harness (``workloads/harness.py``, standard library only by design) keeps its own copy of
the two names it reads. ``tests/collector/test_child_protocol.py`` reads those three
files against :data:`VARIABLES`.

Standard library only, no imports from the package: this module is loaded by path in
every captured Python process.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Var:
    """One environment variable of the protocol."""

    name: str
    reader: str  # who reads it: a module, inject.cpp, bindings.cpp, harness, bootstrap
    doc: str


# --- CUPTI injection (``capture --backend cupti``): read by csrc/inject.cpp ------------------
SPOOL_DIR = "TBDTRACE_SPOOL_DIR"
ACTIVITIES = "TBDTRACE_ACTIVITIES"
BUFFER_BYTES = "TBDTRACE_BUFFER_BYTES"
BUFFER_COUNT = "TBDTRACE_BUFFER_COUNT"
BUFFER_MAX = "TBDTRACE_BUFFER_MAX"
API = "TBDTRACE_API"
FLUSH_INTERVAL_MS = "TBDTRACE_FLUSH_INTERVAL_MS"
COUNTER_METRICS = "TBDTRACE_COUNTER_METRICS"
START_PAUSED = "TBDTRACE_START_PAUSED"
# --- profiler children (``--backend torch|tf|mxnet|auto``) ---------------------------------
TORCH_SPOOL = "TBDTRACE_TORCH_SPOOL"
TORCH_CONFIG = "TBDTRACE_TORCH_CONFIG"
FRAMEWORK_SPOOL = "TBDTRACE_FRAMEWORK_SPOOL"
FRAMEWORK = "TBDTRACE_FRAMEWORK"
# --- PyTorch recorders beside CUPTI (``--backend cupti``) ----------------------------------
TORCH_MEMORY_SPOOL = "TBDTRACE_TORCH_MEMORY_SPOOL"
TORCH_MEMORY_MODE = "TBDTRACE_TORCH_MEMORY_MODE"
TORCH_MEMORY_MAX_ENTRIES = "TBDTRACE_TORCH_MEMORY_MAX_ENTRIES"
TORCH_FLOPS_SPOOL = "TBDTRACE_TORCH_FLOPS_SPOOL"
# --- every backend ----------------------------------------------------------------------
STEPS_FILE = "TBDTRACE_STEPS_FILE"
PACKAGE_ROOT = "TBDTRACE_PACKAGE_ROOT"
WINDOWS = "TBDTRACE_WINDOWS"
# --- outside capture ----------------------------------------------------------------------
MEMORY_TRACE = "TBDTRACE_MEMORY_TRACE"
TEST_CLOCK_SHIFT_NS = "TBDTRACE_TEST_CLOCK_SHIFT_NS"
NATIVE_BACKTRACE = "TBDTRACE_NATIVE_BACKTRACE"

VARIABLES: tuple[Var, ...] = (
    Var(SPOOL_DIR, "inject.cpp", "directory for the <pid>.tbds spool files (required)"),
    Var(ACTIVITIES, "inject.cpp", "comma-separated CUPTI kinds (default: the collector's)"),
    Var(BUFFER_BYTES, "inject.cpp", "bytes per CUPTI activity buffer"),
    Var(BUFFER_COUNT, "inject.cpp", "buffers zeroed and faulted in at start"),
    Var(BUFFER_MAX, "inject.cpp", "the pool grows with the producing threads up to this many"),
    Var(API, "inject.cpp", "lite or full: the runtime/driver calls recorded (capture --api)"),
    Var(FLUSH_INTERVAL_MS, "inject.cpp", "periodic flush and spill, milliseconds"),
    Var(COUNTER_METRICS, "inject.cpp", "hardware counter metrics per kernel (--counters)"),
    Var(
        START_PAUSED,
        "inject.cpp",
        "1: the collector starts paused (capture windows); the window controller resumes "
        "it at a window's first step through tbdtrace_collector_resume()",
    ),
    Var(TORCH_SPOOL, "bootstrap", "--backend torch: spool of the part-<pid> directories"),
    Var(TORCH_CONFIG, "profiler_child", "--backend torch: TorchConfig fields as JSON"),
    Var(FRAMEWORK_SPOOL, "bootstrap", "--backend tf|mxnet|auto: spool of the parts"),
    Var(FRAMEWORK, "bootstrap", "--backend tf|mxnet|auto: which framework's import starts it"),
    Var(TORCH_MEMORY_SPOOL, "bootstrap", "cupti: spool for torchmem-<pid> (allocator history)"),
    Var(
        TORCH_MEMORY_MODE,
        "memory.torch_cuda",
        "cupti: posthoc (default) or exact, how the allocator history is labelled "
        "(capture --torch-memory)",
    ),
    Var(TORCH_MEMORY_MAX_ENTRIES, "memory.torch_cuda", "allocator history entries kept"),
    Var(TORCH_FLOPS_SPOOL, "bootstrap", "cupti: spool for torchops-<pid> (FLOP recorder)"),
    Var(STEPS_FILE, "harness", "the harness appends one JSON steps record per step here"),
    Var(PACKAGE_ROOT, "bootstrap", "directory to append to sys.path to import tbdtrace"),
    Var(WINDOWS, "bootstrap", "the capture windows (windows.WindowPlan as JSON)"),
    Var(MEMORY_TRACE, "harness", "MXNet workloads record their memory there (tbdtrace bench)"),
    Var(TEST_CLOCK_SHIFT_NS, "clock", "test only: this node's clock reads that far ahead"),
    Var(NATIVE_BACKTRACE, "bindings.cpp", "1: a crash in the extension prints native frames"),
)

# Variables of other tools that the capture sets for the command.
CUDA_INJECTION = "CUDA_INJECTION64_PATH"  # the CUDA driver loads the collector from here
NVTX_INJECTION = "NVTX_INJECTION64_PATH"  # NVTX hands its calls to the same library
PYTHONPATH = "PYTHONPATH"  # the bootstrap directory goes first
TF_BFC = "TF_CPU_ALLOCATOR_USE_BFC"  # complete CPU allocator totals (tf_backend)

# The injection library: CUDA_INJECTION64_PATH for commands, NVTX_INJECTION64_PATH
# everywhere; its exported tbdtrace_collector_pause/resume drive capture windows.
INJECT_LIB = Path(__file__).resolve().parent.parent / "libtbdtrace_inject.so"
BOOTSTRAP_DIR = Path(__file__).resolve().with_name("sitecustomize")

# --- files in a capture's spool directory (<out>/.tbdtrace-spool-<pid>-*) -----------------
SPOOL_INFO = "capture.json"  # what was captured, by whom (tbdtrace recover)
STEPS_NAME = "steps.jsonl"  # the harness's steps records (STEPS_FILE points here)
HOST_SPILL = "host_samples.jsonl"  # host sampler rows as they are taken
PART_PREFIX = "part-"  # part-<pid>: a profiler child's trace directory
PROFILER_LOG_PREFIX = "profiler-"  # profiler-<pid>.log: what the profiler printed
CUPTI_SPOOL_SUFFIX = ".tbds"  # <pid>.tbds: the injected collector's spool
TORCHMEM_PREFIX = "torchmem-"  # torchmem-<pid>: PyTorch allocator history (cupti)
TORCH_SNAPSHOTS_NAME = "torch_snapshots.json"  # in torchmem-<pid>: step-boundary snapshots
TORCHOPS_PREFIX = "torchops-"  # torchops-<pid>: PyTorch FLOP recorder (cupti)
WINDOWS_PREFIX = "windows-"  # windows-<pid>.jsonl: the windows a process opened
ON_DEMAND_PREFIX = "ondemand-"  # ondemand-<pid>: a process that opens windows on SIGUSR2
# --- in the trace directory ---------------------------------------------------------------
CAPTURE_LOG = "capture.log"  # what the profilers printed


def part_name(pid: int) -> str:
    return f"{PART_PREFIX}{pid}"


def profiler_log_name(pid: int) -> str:
    return f"{PROFILER_LOG_PREFIX}{pid}.log"


def windows_name(pid: int) -> str:
    return f"{WINDOWS_PREFIX}{pid}.jsonl"


def on_demand_name(pid: int) -> str:
    return f"{ON_DEMAND_PREFIX}{pid}"


def pid_of(name: str) -> int:
    """The pid in a spool file name (``part-12``, ``profiler-12.log``, ``12.tbds``)."""
    stem = name.split(".", 1)[0]
    return int(stem.rsplit("-", 1)[-1])


def names() -> set[str]:
    """Every ``TBDTRACE_`` variable of the protocol."""
    return {v.name for v in VARIABLES}
