"""The critical path per step (tbdtrace) beside HTA 0.5.0's critical-path analysis, on
the same Kineto files and windows.

``.venv/bin/python bench/critical_path_vs_hta.py [NAME ...]``

For each fixture (by default all four below): HTA's ``critical_path_analysis`` runs in
its own process in ``.venv-bench`` (``make bench-venv``; ``bench/hta_critical_path.py``),
ours in this one (``tbdtrace.analysis.passes.critical_path``) over the same window: one
``ProfilerStep`` instance, or the whole trace where the file has no steps. Printed: each
path's total and its time by resource, in HTA's classes (``bound_by``) with ours mapped
onto them, how much of each path's time lies on events the other path also goes through
(events matched by name and start, in us), and the seconds each took (HTA: its load and
its analysis, one run; ours: the pass on an imported trace, fastest of 3). A tool that
fails says so with its error.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(
    os.environ.get("TBDTRACE_FIXTURES")
    or Path(__file__).resolve().parents[2] / "shared" / "fixtures"
)
HTA_PY = ROOT / ".venv-bench" / "bin" / "python"
REPEAT = 3  # our pass: the fastest of 3 runs counts (HTA: one run, its load and analysis)
# name -> (file under fixtures/kineto, HTA annotation, instance; our step index or None)
CASES: dict[str, tuple[str, str, int]] = {
    "simple_add": ("hta/benchmark_result_493459_1694039959_trace.json.gz", "", 0),
    "event_sync": ("hta/event_sync_trace.json.gz", "", 0),
    "resnet50": ("kineto_tb_plugin/worker0.1623143089861.pt.trace.json.gz", "ProfilerStep", 0),
    "ddp": ("hta/df_index_resolver.json.gz", "ProfilerStep", 0),
}
CLASSES = (
    "cpu_bound",
    "gpu_compute_bound",
    "gpu_communication_bound",
    "gpu_kernel_kernel_overhead",
    "gpu_kernel_launch_overhead",
    "unweighted",
)


def hta_class(resource: str, category: str | None) -> str:
    """Our resource as HTA's bound_by class (its zero-weight edges: 'unweighted')."""
    if resource in ("cpu_op", "cpu_runtime"):
        return "cpu_bound"
    if resource == "gpu_kernel" and category == "communication":
        return "gpu_communication_bound"
    if resource in ("gpu_kernel", "copy", "memset"):
        return "gpu_compute_bound"
    if resource == "gpu_gap":
        return "gpu_kernel_kernel_overhead"
    if resource == "launch_delay":
        return "gpu_kernel_launch_overhead"
    return "unweighted"  # cpu_idle, sync_wait: HTA's dependency and sync edges weigh 0


def ours(path: Path, step_index: int | None) -> dict[str, Any]:
    from tbdtrace.analysis.passes import critical_path
    from tbdtrace.importers import kineto
    from tbdtrace.trace import from_tables

    took = []
    for _ in range(REPEAT):  # a fresh import each time: the pass keeps its result in it
        tr = from_tables(*kineto.import_files([path]))
        t0 = time.perf_counter()
        table = critical_path.run(tr)
        took.append(time.perf_counter() - t0)
    seg = table.to_pylist()
    starts = sorted({r["step_start_ns"] for r in seg})
    if step_index is not None:
        seg = [r for r in seg if r["step_start_ns"] == starts[step_index]]
    rows: dict[str, Any] = {}
    for table in ("ops", "runtime", "kernels", "memcpy", "memset"):
        if tr.num_rows(table):
            rows[table] = tr.table(table, ["start_ns"]).column("start_ns").to_pylist()
    by_class: dict[str, int] = defaultdict(int)
    by_res: dict[str, int] = defaultdict(int)
    events: list[tuple[str | None, int | None, int]] = []
    for r in seg:
        by_class[hta_class(r["resource"], r["category"])] += r["duration_ns"]
        key = r["resource"] + (f":{r['category']}" if r["category"] else "")
        by_res[key] += r["duration_ns"]
        start_us = None
        if r["source"] is not None:
            start_us = rows[r["source"]][r["source_row"]] // 1000
        events.append((r["name"], start_us, r["duration_ns"]))
    return {
        "step": seg[0]["step"] if seg else None,
        "window_ns": (seg[0]["start_ns"], seg[-1]["end_ns"]) if seg else None,
        "path_ns": sum(r["duration_ns"] for r in seg),
        "by_class_ns": dict(by_class),
        "by_resource_ns": dict(by_res),
        "events": events,
        "pass_s": min(took),
    }


def hta(path: Path, annotation: str, instance: int) -> dict[str, Any]:
    if not HTA_PY.exists():
        return {"error": "HTA is not installed: make bench-venv"}
    p = subprocess.run(
        [
            str(HTA_PY),
            str(ROOT / "bench" / "hta_critical_path.py"),
            str(path),
            annotation,
            str(instance),
        ],
        capture_output=True,
        text=True,
    )
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if not lines:
        return {"error": f"exit {p.returncode}: {p.stderr.strip().splitlines()[-1:]}"}
    return json.loads(lines[-1])


def ms(ns: float) -> str:
    return f"{ns / 1e6:10.3f}"


def compare(name: str) -> None:
    rel, annotation, instance = CASES[name]
    path = FIXTURES / "kineto" / rel
    if not path.is_file():
        print(f"{name}: {path} is absent; skipped")
        return
    o = ours(path, instance if annotation else None)
    h = hta(path, annotation, instance)
    where = f"{annotation} #{instance}, our step {o['step']}" if annotation else "whole trace"
    print(f"== {name}: {rel} ({where})")
    print(f"  ours: path {ms(o['path_ns'])} ms (= the step), pass {o['pass_s']:.3f} s")
    if "error" in h:
        print(f"  HTA : failed: {h['error']}")
        print(
            "  ours by resource (ms): "
            + ", ".join(
                f"{k} {v / 1e6:.3f}"
                for k, v in sorted(o["by_resource_ns"].items(), key=lambda kv: -kv[1])
            )
        )
        return
    print(
        f"  HTA : path {ms(h['path_us'] * 1000)} ms (weighted edges; nodes span "
        f"{(h['last_us'] - h['first_us']) / 1e3:.3f} ms), load {h['load_s']:.2f} s, "
        f"analysis {h['analysis_s']:.2f} s, {h['graph_nodes']} graph nodes"
    )
    print(f"  {'class':28} {'ours ms':>10} {'HTA ms':>10}")
    for c in CLASSES:
        hv = h["by_bound_us"].get(c if c != "unweighted" else "", 0) * 1000
        print(f"  {c:28} {ms(o['by_class_ns'].get(c, 0))} {ms(hv)}")
    print(
        "  ours by resource (ms): "
        + ", ".join(
            f"{k} {v / 1e6:.3f}"
            for k, v in sorted(o["by_resource_ns"].items(), key=lambda kv: -kv[1])
        )
    )
    base = h["min_ts_us"]
    theirs = {(n, ts + base) for n, ts, _d, w, _t, _b in h["events"] if ts is not None and w > 0}
    mine = {(n, ts) for n, ts, _ in o["events"] if ts is not None}
    on_both = sum(d for n, ts, d in o["events"] if (n, ts) in theirs)
    h_total = sum(w for *_x, w, _t, _b in h["events"]) or 1
    h_both = sum(
        w for n, ts, _d, w, _t, _b in h["events"] if ts is not None and (n, ts + base) in mine
    )
    print(
        f"  ours on events of HTA's path: {100 * on_both / max(o['path_ns'], 1):5.1f}% of our "
        "path; "
        f"HTA's on events of ours: {100 * h_both / h_total:5.1f}% of its weight"
    )


def main(argv: list[str]) -> int:
    for name in argv or list(CASES):
        if name not in CASES:
            print(f"unknown fixture {name!r}; one of {', '.join(CASES)}", file=sys.stderr)
            return 2
        compare(name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
