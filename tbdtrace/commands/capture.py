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

from tbdtrace import outdir, output_policy
from tbdtrace.collector import BACKENDS, choose_backend
from tbdtrace.commands import _args
from tbdtrace.errors import TraceError


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
        "--with-stack",
        action="store_true",
        help="torch backend: also record the Python stack (torch.profiler with_stack=True), "
        "so each kernel gets the user source line that launched it (`hotspots --by "
        "source`); adds host time per Python call and grows the trace",
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
        "--torch-memory",
        choices=("posthoc", "exact", "off"),
        default="posthoc",
        help="PyTorch tensor allocations (cupti: the caching allocator's history; torch: "
        "the profiler's memory events), labelled weights, gradients, optimizer state, "
        "inputs, activations, other. posthoc (default): labelled after the run from "
        "step-boundary snapshots and the trace's phases, no per-call hook; exact: hook "
        "tracker, 10-20 ms of Python per ResNet-50 step; off: not recorded "
        "(docs/MEMORY.md)",
    )
    p.add_argument(
        "--no-torch-memory",
        dest="torch_memory",
        action="store_const",
        const="off",
        help="same as --torch-memory off",
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
    w = p.add_argument_group(
        "capture windows",
        "record only some steps; steps are marked by the workload harness, NVTX 'step N' "
        "ranges (torch.cuda.nvtx) or tbdtrace.step() calls in the program; every backend "
        '(docs/COLLECTOR.md "Capture windows")',
    )
    w.add_argument(
        "--steps",
        metavar="A:B",
        default=None,
        help="record steps A to B only (inclusive): collection starts at step A's begin and "
        "stops, flushed, at step B's end",
    )
    w.add_argument(
        "--schedule",
        metavar="KEY=N,...",
        default=None,
        help="repeating windows as torch.profiler.schedule: wait, warmup, active, repeat, "
        "skip_first (e.g. wait=5,warmup=1,active=3,repeat=2); each active span is its own "
        "step range in the trace",
    )
    w.add_argument(
        "--on-demand",
        action="store_true",
        help="record nothing until tbdtrace (or a process of the command) receives SIGUSR2 "
        "or the trigger file appears; then one window of --window-steps steps or "
        "--window-seconds seconds; the job keeps running and may open more",
    )
    w.add_argument(
        "--window-steps",
        type=_args.positive_int,
        default=None,
        metavar="N",
        help="--on-demand: a window lasts N steps (default 10)",
    )
    w.add_argument(
        "--window-seconds",
        type=_args.positive_float,
        default=None,
        metavar="S",
        help="--on-demand: a window lasts S seconds (for programs without step marks)",
    )
    w.add_argument(
        "--trigger-file",
        metavar="PATH",
        default=None,
        help="--on-demand: creating or touching PATH opens a window (default: "
        "<out>/trigger; the file is never removed)",
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
    try:
        plan = _window_plan(args)
    except TraceError as e:
        print(f"tbdtrace capture: {e}", file=sys.stderr)
        return 2
    choice = choose_backend(args.backend)
    backend = choice[0]
    if args.counters and backend != "cupti":
        print(
            f"tbdtrace capture: --counters needs the cupti backend (this run: {backend}); "
            "add --backend cupti on a machine with a GPU",
            file=sys.stderr,
        )
        return 2
    if args.with_stack and backend in ("cupti", "tf", "mxnet"):
        print(
            f"tbdtrace capture: --with-stack needs the torch backend (this run: {backend}); "
            "add --backend torch (its --cuda records the GPU too)",
            file=sys.stderr,
        )
        return 2
    if args.counters and plan is not None:
        print(
            "tbdtrace capture: --counters replays kernels for the whole run; it cannot be "
            "combined with --steps, --schedule or --on-demand",
            file=sys.stderr,
        )
        return 2
    if args.counters:
        print(
            "tbdtrace capture: warning: --counters flops replays every kernel (times in this "
            "trace are perturbed) and has not been verified on a GPU yet",
            file=sys.stderr,
        )
    from tbdtrace.collector.run import run_capture

    # The output is checked (and locked) before the workload runs, not after.
    with output_policy.trace_target(args.out, args.force) as out, StepWatch(out.path):
        config = _config(args, plan, out.path)
        if plan is not None and plan.on_demand is not None:
            _say_on_demand(plan, config.trigger_file)
        res = run_capture(cmd, out, config, choice)
    _say(res)
    assert res.outcome is not None
    rc = int(res.outcome.exit_code)
    if res.path is None:
        return rc
    _nvml_info(res.meta)
    return _incomplete_status(res.meta, rc) if res.backend == "cupti" else rc


def _window_plan(args: argparse.Namespace) -> Any:
    """The capture windows the options ask for (None: the whole run)."""
    from tbdtrace.collector import windows

    given = [n for n, v in (("--steps", args.steps), ("--schedule", args.schedule)) if v]
    if args.on_demand:
        given.append("--on-demand")
    if len(given) > 1:
        raise TraceError(f"{' and '.join(given)} exclude each other; choose one")
    if (args.window_steps or args.window_seconds or args.trigger_file) and not args.on_demand:
        raise TraceError("--window-steps, --window-seconds and --trigger-file need --on-demand")
    if args.steps:
        return windows.WindowPlan(steps=windows.parse_steps(args.steps))
    if args.schedule:
        return windows.WindowPlan(schedule=windows.parse_schedule(args.schedule))
    if args.on_demand:
        if args.window_steps is not None and args.window_seconds is not None:
            raise TraceError("--window-steps and --window-seconds exclude each other")
        if args.window_seconds is not None:
            od = windows.OnDemand(seconds=args.window_seconds)
        else:
            od = windows.OnDemand(steps=10 if args.window_steps is None else args.window_steps)
        return windows.WindowPlan(on_demand=od)
    return None


def _config(args: argparse.Namespace, plan: Any, out: Path) -> Any:
    from tbdtrace.collector.cupti_backend import CuptiConfig
    from tbdtrace.collector.host_sampler import SamplerConfig
    from tbdtrace.collector.run import CaptureConfig
    from tbdtrace.collector.torch_backend import TorchConfig

    acts = tuple(a.strip() for a in args.activities.split(",") if a.strip())
    cupti = CuptiConfig(
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
    trigger = None
    if plan is not None and plan.on_demand is not None:
        trigger = Path(os.path.abspath(args.trigger_file)) if args.trigger_file else out / "trigger"
    return CaptureConfig(
        backend=args.backend,
        sampler=SamplerConfig(rate_hz=args.sample_hz),
        torch=TorchConfig(
            cuda=args.cuda,
            profile_memory=args.torch_memory != "off",
            with_stack=args.with_stack,
            torch_memory=args.torch_memory,
        ),
        cupti=cupti,
        windows=plan,
        keep_spools=Path(os.path.abspath(args.keep_spools)) if args.keep_spools else None,
        trigger_file=trigger,
    )


def _say_on_demand(plan: Any, trigger: Path | None) -> None:
    od = plan.on_demand
    size = f"{od.steps} steps" if od.steps else f"{od.seconds:g} s"
    print(
        f"tbdtrace capture: on demand: `kill -USR2 {os.getpid()}` or `touch {trigger}` "
        f"records the next {size}",
        file=sys.stderr,
    )


def _say(res: Any) -> None:
    """The capture's summary line, and a line for each note."""
    rc = res.outcome.exit_code
    backend = res.backend
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


def _nvml_info(meta: dict[str, Any]) -> None:
    """One info line when the trace has no GPU samples because NVML did not answer."""
    nvml = str(((meta.get("extra") or {}).get("host_sampler") or {}).get("nvml"))
    if nvml.startswith("unavailable"):
        print(f"tbdtrace capture: info: no GPU samples (NVML {nvml})", file=sys.stderr)


# `capture` exits with this when the command succeeded but the trace lost records it saw.
INCOMPLETE_EXIT = 3


def _incomplete_status(meta: dict[str, Any], rc: int) -> int:
    from tbdtrace.collector.merge import incomplete_reason

    why = incomplete_reason(meta)
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
