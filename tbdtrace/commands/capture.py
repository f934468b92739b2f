"""``tbdtrace capture [--backend B] --out DIR -- COMMAND...``: profile a command."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from tbdtrace import output_policy
from tbdtrace.collector import BACKENDS, choose_backend
from tbdtrace.collector.host_sampler import SamplerConfig
from tbdtrace.collector.torch_backend import TorchConfig
from tbdtrace.commands import _args


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "capture",
        help="run a command and capture its trace (CUPTI on a GPU, the framework's own "
        "profiler on CPU)",
        description="Run COMMAND and write its trace directory. --backend auto picks the "
        "native CUPTI collector when a GPU is usable, else the profiler of the framework "
        "the program imports first inside the child: torch.profiler for PyTorch, "
        "TensorFlow's profiler (tf), MXNet's (mxnet); no change to the program needed. "
        "A host sampler "
        "records CPU utilization, memory and (through NVML) GPU utilization. Exit code: "
        "the command's; 3 when it succeeded but the trace lost records (spool write errors, "
        "e.g. a full disk).",
    )
    _args.mark_output(
        p.add_argument(
            "--out", "-o", required=True, metavar="DIR", help="trace directory to write"
        ),
        "trace",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing trace at --out (only tbdtrace's own files in it; other "
        "files there are kept)",
    )
    p.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="capture backend: auto, cupti (GPU), torch, tf, mxnet (default auto)",
    )
    p.add_argument(
        "--sample-hz",
        type=_args.positive_float,
        default=10.0,
        metavar="HZ",
        help="host sampler rate (default 10)",
    )
    p.add_argument(
        "--cuda",
        action="store_true",
        help="torch backend: also record CUDA activities when a GPU is usable",
    )
    p.add_argument(
        "--activities",
        metavar="KINDS",
        default="",
        help="cupti backend: comma-separated CUPTI kinds (default: kernel, memcpy, "
        "memcpy2, memset, memory, runtime, driver, marker, sync, overhead, device, "
        "context; also marker_data)",
    )
    p.add_argument(
        "--api",
        choices=("lite", "full"),
        default="lite",
        help="cupti backend: runtime/driver calls to record: lite (default) = the calls the "
        "analysis reads (kernel and graph launches, copies, sets, synchronizations and waits, "
        "allocations), the rest switched off in CUPTI; full = every call (costs ~10%% of "
        "throughput in PyTorch training)",
    )
    p.add_argument(
        "--buffer-size",
        type=_args.positive_int,
        default=4 << 20,
        metavar="BYTES",
        help="cupti backend: bytes per CUPTI activity buffer (default 4 MiB)",
    )
    p.add_argument(
        "--buffer-count",
        type=_args.positive_int,
        default=8,
        metavar="N",
        help="cupti backend: buffers zeroed and faulted in at start (default 8)",
    )
    p.add_argument(
        "--buffer-max",
        type=_args.positive_int,
        default=64,
        metavar="N",
        help="cupti backend: the pool grows with the producing threads up to N buffers "
        "(default 64: 256 MiB at the default size)",
    )
    p.add_argument(
        "--flush-interval-ms",
        type=_args.positive_int,
        default=1000,
        metavar="MS",
        help="cupti backend: flush and spill period (default 1000)",
    )
    p.add_argument(
        "--no-torch-memory",
        dest="torch_memory",
        action="store_false",
        help="cupti backend: do not record PyTorch tensor allocations (the caching "
        "allocator's history, labelled weights, gradients, ...) beside CUPTI's",
    )
    p.add_argument(
        "--torch-flops",
        dest="torch_flops",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="cupti backend: record PyTorch matmul, convolution and attention ops with their "
        "shapes and FLOPs (a dispatch-level recorder) beside CUPTI's: the only FLOP source "
        "of a GPU capture besides --counters. Off by default: every PyTorch op then costs "
        "about 5-10 us more host time, which slows host-bound training (ResNet-50 on an "
        "H200: 1,901 -> 985 img/s)",
    )
    p.add_argument(
        "--counters",
        choices=("flops",),
        default=None,
        help="cupti backend: per-kernel FP32 FLOPs (adds + muls + 2 FMAs) from hardware "
        "counters into kernels.flops, FP64 and FP16 totals in meta. A separate run mode, "
        "off by default: "
        "kernel replay serializes kernels and runs each once per counter pass, so times "
        "and throughput of this run are perturbed. Not yet verified on a GPU",
    )
    p.add_argument(
        "--keep-spools",
        metavar="DIR",
        default=None,
        help="cupti backend: also copy the raw per-process spools into DIR",
    )
    p.add_argument(
        "command",
        nargs=argparse.REMAINDER,
        metavar="-- COMMAND",
        help="the command to run, after --",
    )
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        print("tbdtrace capture: no command given; put it after --", file=sys.stderr)
        return 2
    backend, reason = choose_backend(args.backend)
    child_backend = backend
    if args.backend == "auto" and backend == "torch":
        # No CUPTI: the framework the program imports decides (torch, tf or mxnet).
        child_backend, reason = "auto", f"{reason}; the framework the program imports"
    if args.counters and backend != "cupti":
        print(
            f"tbdtrace capture: --counters needs the cupti backend (this run: {backend}); "
            "add --backend cupti on a machine with a GPU",
            file=sys.stderr,
        )
        return 2
    # The output is checked (and locked) before the workload runs, not after.
    with output_policy.trace_target(args.out, args.force) as out:
        if backend == "cupti":
            return _run_cupti(args, cmd, reason, out)
        from tbdtrace.collector.torch_child import run_capture

        res = run_capture(
            cmd,
            out,
            TorchConfig(cuda=args.cuda),
            SamplerConfig(rate_hz=args.sample_hz),
            reason,
            child_backend,
        )
    if res.path is not None and child_backend == "auto":
        from tbdtrace import trace

        backend = str(trace.open(res.path).meta.get("backend") or backend)
    _say(res, backend)
    if res.path is not None:
        _nvml_info(res.path)
    return res.outcome.exit_code


def _say(res: Any, backend: str) -> None:
    """The capture's summary line, and a line for each note."""
    rc = res.outcome.exit_code
    if res.partial:
        print(
            f"tbdtrace: partial trace: {res.partial}; wrote {res.path} with what was captured "
            f"({res.steps} steps; backend {backend}; command exit code {rc})",
            file=sys.stderr,
        )
    else:
        print(f"wrote {res.path} (backend {backend}; command exit code {rc})", file=sys.stderr)
    for note in res.notes:
        print(f"tbdtrace: {note}", file=sys.stderr)


def _run_cupti(args: argparse.Namespace, cmd: list[str], reason: str, out: Any) -> int:
    from tbdtrace.collector.cupti_backend import CuptiConfig
    from tbdtrace.collector.cupti_command import run_capture as cupti_capture

    acts = tuple(a.strip() for a in args.activities.split(",") if a.strip())
    cfg = CuptiConfig(
        activities=acts,
        api=args.api,
        buffer_bytes=args.buffer_size,
        buffer_count=args.buffer_count,
        buffer_max=args.buffer_max,
        flush_interval_ms=args.flush_interval_ms,
        torch_memory=args.torch_memory,
        torch_flops=args.torch_flops,
        counters=args.counters or "",
    )
    if cfg.counters:
        print(
            "tbdtrace capture: warning: --counters flops replays every kernel (times in this "
            "trace are perturbed) and has not been verified on a GPU yet",
            file=sys.stderr,
        )
    keep = os.path.abspath(args.keep_spools) if args.keep_spools else None
    res = cupti_capture(cmd, out, cfg, SamplerConfig(rate_hz=args.sample_hz), reason, keep)
    _say(res, "cupti")
    if res.path is None:
        return int(res.outcome.exit_code)
    _nvml_info(res.path)
    return _incomplete_status(res.path, int(res.outcome.exit_code))


def _nvml_info(out: Path) -> None:
    """One info line when the trace has no GPU samples because NVML did not answer."""
    from tbdtrace import trace

    nvml = str(((trace.open(out).meta.get("extra") or {}).get("host_sampler") or {}).get("nvml"))
    if nvml.startswith("unavailable"):
        print(f"tbdtrace capture: info: no GPU samples (NVML {nvml})", file=sys.stderr)


# `capture` exits with this when the command succeeded but the trace lost records it saw.
INCOMPLETE_EXIT = 3


def _incomplete_status(out: Path, rc: int) -> int:
    from tbdtrace import trace
    from tbdtrace.collector.merge import incomplete_reason

    why = incomplete_reason(trace.open(out).meta)
    if why is None:
        return rc
    print(f"tbdtrace capture: warning: {why}", file=sys.stderr)
    return rc or INCOMPLETE_EXIT
