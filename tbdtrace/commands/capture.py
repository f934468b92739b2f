"""``tbdtrace capture [--backend B] --out DIR -- COMMAND...``: profile a command."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from tbdtrace import outdir
from tbdtrace.collector import BACKENDS, choose_backend
from tbdtrace.collector.host_sampler import SamplerConfig
from tbdtrace.collector.torch_backend import TorchConfig


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
    p.add_argument("--out", "-o", required=True, metavar="DIR", help="trace directory to write")
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
        "--sample-hz", type=float, default=10.0, metavar="HZ", help="host sampler rate (default 10)"
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
        "--buffer-size",
        type=int,
        default=8 << 20,
        metavar="BYTES",
        help="cupti backend: bytes per CUPTI activity buffer (default 8 MiB)",
    )
    p.add_argument(
        "--buffer-count",
        type=int,
        default=8,
        metavar="N",
        help="cupti backend: buffers in the fixed pool (default 8: 64 MiB in all)",
    )
    p.add_argument(
        "--flush-interval-ms",
        type=int,
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
    if args.sample_hz <= 0:
        print("tbdtrace capture: --sample-hz must be > 0", file=sys.stderr)
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
    with outdir.claim(args.out, force=args.force) as out, StepWatch(out.path):
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
        buffer_bytes=args.buffer_size,
        buffer_count=args.buffer_count,
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


class StepWatch:
    """The capture's progress line (on a terminal, tbdtrace.progress): the step the
    program is in and the seconds its last steps took, read from the harness steps file
    (``steps.jsonl``, workloads/harness.py) in the capture's spool under ``out`` every
    half second, on a thread of its own."""

    POLL_S = 0.5

    def __init__(self, out: Path):
        self.out = out
        self.stop = threading.Event()
        self.thread: threading.Thread | None = None
        self.task: Any = None

    def __enter__(self) -> StepWatch:
        from tbdtrace import progress

        self.task = progress.task("capture: starting the program", None, "steps")
        if self.task.shown:
            self.thread = threading.Thread(target=self._watch, name="tbdtrace-steps", daemon=True)
            self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        if self.thread is not None:
            self.thread.join()
        self.task.close()

    def _watch(self) -> None:
        t0 = time.monotonic()
        seen: list[dict[str, Any]] = []
        offset, path = 0, None
        while not self.stop.wait(self.POLL_S):
            if path is None:
                found = sorted(self.out.glob(f"{outdir.SPOOL_PREFIX}*/steps.jsonl"))
                path = found[0] if found else None
            if path is not None:
                offset = self._read(path, offset, seen)
            self.task.update(len(seen), label=self._label(seen, time.monotonic() - t0))

    @staticmethod
    def _read(path: Path, offset: int, seen: list[dict[str, Any]]) -> int:
        """New complete records of the steps file; the offset after them."""
        try:
            with path.open("rb") as f:
                f.seek(offset)
                data = f.read()
        except OSError:
            return offset
        end = data.rfind(b"\n") + 1
        for line in data[:end].splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if isinstance(rec, dict):
                seen.append(rec)
        return offset + end

    @staticmethod
    def _label(seen: list[dict[str, Any]], elapsed: float) -> str:
        if not seen:
            return f"capture: program running, no step yet ({elapsed:.0f} s)"
        last = seen[-1]
        durs = [
            (r["end_ns"] - r["start_ns"]) / 1e9
            for r in seen[-5:]
            if isinstance(r.get("end_ns"), int) and isinstance(r.get("start_ns"), int)
        ]
        per = f", {sum(durs) / len(durs):.2f} s/step" if durs else ""
        kind = "warm-up step" if last.get("warmup") else "step"
        return f"capture: {kind} {last.get('step')} done{per}"
