"""``tbdtrace recover SPOOL_DIR --out DIR``: a trace from a capture's leftover spool.

A capture keeps its spool (``<out>/.tbdtrace-spool-<pid>-*``) when tbdtrace itself was
killed, when writing the trace failed (a full disk) or when processes of the command
still ran. This command reads it as the capture would have (torch-backend parts, CUPTI
spools, the steps file, the spilled host samples) and writes a trace marked partial. It
never changes or removes the spool, and refuses one that a running process may still
write.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from tbdtrace import outdir, trace
from tbdtrace.collector.child_protocol import CAPTURE_LOG
from tbdtrace.errors import TraceError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "recover",
        help="turn a capture's leftover spool directory into a trace",
        description="Write a trace from the spool a capture left behind "
        "(<out>/.tbdtrace-spool-<pid>-*): profiler parts, CUPTI spools, steps and host "
        "samples. The spool is read only; remove it yourself once the trace is written.",
    )
    p.add_argument("spool", metavar="SPOOL_DIR", help="the spool directory")
    p.add_argument("--out", "-o", required=True, metavar="DIR", help="trace directory to write")
    p.add_argument(
        "--force", action="store_true", help="replace an existing trace at --out (its own files)"
    )
    p.set_defaults(func=_run)


def _kind(spool: Path, info: dict[str, Any]) -> str:
    from tbdtrace.collector import child_protocol as proto

    if info.get("backend") in ("torch", "cupti"):
        return str(info["backend"])
    if info.get("backend") in ("tf", "mxnet", "auto"):  # parts as the torch backend's
        return "torch"
    if any(spool.glob(f"*{proto.CUPTI_SPOOL_SUFFIX}")):
        return "cupti"
    if any(spool.glob(f"{proto.PART_PREFIX}*")) or any(
        spool.glob(f"{proto.PROFILER_LOG_PREFIX}*.log")
    ):
        return "torch"
    raise TraceError(
        f"{spool}: not a capture spool (no capture.json, part-*, profiler-*.log or *.tbds); "
        "pass the .tbdtrace-spool-<pid>-* directory a capture left"
    )


def read(spool: Path) -> tuple[dict[str, Any], dict[str, Any], list[str], bytes]:
    """(tables, meta, notes, profiler log) from the spool directory ``spool``."""
    from tbdtrace.collector import child_protocol as proto
    from tbdtrace.collector import steps, supervise, window_trace
    from tbdtrace.collector.host_sampler import read_spill

    if not spool.is_dir():
        raise TraceError(f"{spool}: not a directory; pass a capture's spool directory")
    writers = supervise.spool_writers(spool.resolve())
    if writers:
        raise TraceError(
            f"{spool}: process(es) {', '.join(map(str, writers[:5]))} may still write this "
            "spool; wait for them to end (or stop them), then run recover again"
        )
    info: dict[str, Any] = {}
    if (spool / proto.SPOOL_INFO).exists():
        try:
            info = json.loads((spool / proto.SPOOL_INFO).read_text())
        except ValueError:
            info = {}
    kind = _kind(spool, info)
    notes: list[str] = []
    log = b""
    step_cols = steps.read(spool / proto.STEPS_NAME)
    if kind == "torch":
        from tbdtrace.collector import parts

        tables, meta, notes = parts.read(spool)
        parts.add_steps(tables, meta, step_cols)
        log = parts.profiler_log(spool)[0]
    else:
        from tbdtrace.collector import injection

        tables, meta = injection.assemble(spool)
        if step_cols["step"]:
            tables["steps"] = step_cols
    if (spool / proto.HOST_SPILL).exists():
        tables["host_samples"] = read_spill(spool / proto.HOST_SPILL)
    records = window_trace.read_windows(spool)
    if records:  # a capture with windows: its windows, and only what is inside them
        meta["windows"] = window_trace.summarize(records)
        window_trace.keep(tables, window_trace.spans_of(records))
    if not any(_rows(t) for t in tables.values()):
        raise TraceError(f"{spool}: the spool holds no data (no profile, steps or samples)")
    meta.update(backend=kind, command=info.get("command"), partial=True)
    meta["extra"]["partial"] = "; ".join([f"recovered from the spool {spool}", *notes])
    meta["extra"]["backend_choice"] = info.get("backend_choice")
    return tables, meta, notes, log


def _rows(t: Any) -> int:
    if hasattr(t, "num_rows"):
        return int(t.num_rows)
    return max((len(v) for v in t.values()), default=0)


def _run(args: argparse.Namespace) -> int:
    spool = Path(args.spool).absolute()
    with outdir.claim(args.out, force=args.force) as claimed:
        tables, meta, notes, log = read(spool)
        path = trace.write(claimed.path, tables, meta, files={CAPTURE_LOG: log} if log else None)
    steps = _rows(tables["steps"]) if "steps" in tables else 0
    print(f"wrote {path} from {spool} (partial; {steps} steps)", file=sys.stderr)
    for n in notes:
        print(f"tbdtrace: {n}", file=sys.stderr)
    return 0
